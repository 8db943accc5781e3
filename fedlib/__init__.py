"""fedlib: reproducible label-skewed federated learning with knowledge distillation.

The package is a house of layers, one folder each, ground floor first; a module imports only
its own layer and the layers below it (docs/ARCHITECTURE.md has the picture and a glossary;
tests/unit/test_architecture.py enforces it):

- ``fedlib.errors``, ``fedlib.yaml_input``, ``fedlib.folders`` -- the ground floor: one-line errors, strict
  YAML, the folders a user names
- :mod:`fedlib.datasets`      -- datasets as uint8 tensors, checks, client partitions, augmentation
- :mod:`fedlib.measures`      -- plain tensor functions: per-class accuracies, PKD's weak classes
- :mod:`fedlib.models`        -- the model zoo, one file per model family
- :mod:`fedlib.core`          -- the run's vocabulary: deterministic kernels, the method registry,
  RunConfig, the run state and keyed seeds
- :mod:`fedlib.algorithms`    -- the method contract, local training, one file per method
- :mod:`fedlib.store`         -- the results store: one folder per config hash
- :mod:`fedlib.engine`        -- the round loop, evaluation, checkpoint and resume; the backends
- :mod:`fedlib.analysis`      -- the analyses behind the figure notebooks
- :mod:`fedlib.orchestration` -- a grid's runs, the executor, resources, timing and the dry run
- :mod:`fedlib.reporting`     -- what notebooks call: parameters, tables, report, plots
- :mod:`fedlib.paper`         -- the grid per notebook, the declared runs' plan, reproduce.sh
- :mod:`fedlib.commands`      -- ``python -m fedlib``

Each module has one name, its path in its layer (``fedlib.engine.engine``).
"""

from __future__ import annotations

import os

__version__ = "0.1.0"

# cuBLAS reads its workspace setting once, at the process's first matmul on a GPU: set it on the
# first fedlib import, before any of a notebook's own CUDA work, so deterministic runs stay possible
# (fedlib.core.determinism.CUBLAS_SETTING is the same pair; a user's own value wins).
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

from fedlib.errors import FedlibError  # noqa: E402

__all__ = ["FedlibError", "__version__"]
