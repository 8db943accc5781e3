"""fedlib: reproducible label-skewed federated learning with knowledge distillation.

The package is a house of layers, one subpackage each, ground floor first; a module imports only
its own layer and the layers below it (docs/ARCHITECTURE.md has the picture and a glossary;
tests/unit/test_architecture.py enforces it):

- ``fedlib.errors``, ``fedlib.yaml_input``, ``fedlib.folders`` -- the ground floor: one-line errors, strict
  YAML, the folders a user names
- :mod:`fedlib.datasets`      -- datasets as uint8 tensors, checks, client partitions, augmentation
- :mod:`fedlib.measures`      -- plain tensor functions: per-class accuracies, PKD's weak classes
- :mod:`fedlib.core` and :mod:`fedlib.algorithms` -- the run: models, RunConfig, run state, the
  method registry and contract, one file per method, local training, backends, the results
  store and the engine (the round loop, evaluation, checkpoint and resume)
- :mod:`fedlib.analysis`      -- the analyses behind the figure notebooks
- :mod:`fedlib.orchestration` -- a grid's runs, the executor, resources, timing and the dry run
- :mod:`fedlib.reporting`     -- what notebooks call: parameters, tables, report, plots
- :mod:`fedlib.paper`         -- the grid per notebook, the declared runs' plan, reproduce.sh
- :mod:`fedlib.commands`      -- ``python -m fedlib``

The flat paths of earlier releases (``fedlib.engine``, ``from fedlib import store, data``) still
import, for one release: each is the same module object as its new path (``fedlib.engine is
fedlib.core.engine``), so monkeypatching either patches both. New code imports the new paths.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

__version__ = "0.1.0"

# cuBLAS reads its workspace setting once, at the process's first matmul on a GPU: set it on the
# first fedlib import, before any of a notebook's own CUDA work, so deterministic runs stay possible
# (fedlib.core.determinism.CUBLAS_SETTING is the same pair; a user's own value wins).
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

# An old flat path -> the module that now holds it (deprecated; kept for one release). A package
# (grids) takes its submodules with it: fedlib.grids.pkd is fedlib.paper.grids.pkd.
MOVED = {
    "fedlib.data": "fedlib.datasets.data", "fedlib.data_check": "fedlib.datasets.data_check",
    "fedlib.partition": "fedlib.datasets.partition", "fedlib.augment": "fedlib.datasets.augment",
    "fedlib.metrics": "fedlib.measures.metrics", "fedlib.weak_classes": "fedlib.measures.weak_classes",
    "fedlib.models": "fedlib.core.models", "fedlib.determinism": "fedlib.core.determinism",
    "fedlib.config": "fedlib.core.config", "fedlib.state": "fedlib.core.state",
    "fedlib.client_training": "fedlib.core.client_training", "fedlib.backend_choice": "fedlib.core.backend_choice",
    "fedlib.threaded": "fedlib.core.backends.threaded", "fedlib.stacked": "fedlib.core.backends.stacked",
    "fedlib.store": "fedlib.core.store", "fedlib.engine": "fedlib.core.engine",
    "fedlib.class_gap": "fedlib.analysis.class_gap", "fedlib.drift": "fedlib.analysis.drift",
    "fedlib.local_update": "fedlib.analysis.local_update", "fedlib.pkd_readings": "fedlib.analysis.pkd_readings",
    "fedlib.prediction_stats": "fedlib.analysis.prediction_stats",
    "fedlib.experiments": "fedlib.orchestration.experiments", "fedlib.executor": "fedlib.orchestration.executor",
    "fedlib.resources": "fedlib.orchestration.resources", "fedlib.timing": "fedlib.orchestration.timing",
    "fedlib.dry_run": "fedlib.orchestration.dry_run", "fedlib.partition_check": "fedlib.orchestration.partition_check",
    "fedlib.notebook": "fedlib.reporting.notebook", "fedlib.parameters": "fedlib.reporting.parameters",
    "fedlib.paper_numbers": "fedlib.reporting.paper_numbers", "fedlib.plots": "fedlib.reporting.plots",
    "fedlib.tables": "fedlib.reporting.tables", "fedlib.report": "fedlib.reporting.report",
    "fedlib.grids": "fedlib.paper.grids", "fedlib.plan": "fedlib.paper.plan",
    "fedlib.reproduce": "fedlib.paper.reproduce",
    "fedlib.cli": "fedlib.commands.cli", "fedlib.listing": "fedlib.commands.listing",
    "fedlib.export": "fedlib.commands.export",
}


def new_name(old: str) -> str | None:
    """The module path that now holds the old path ``old`` (its submodules too), else None."""
    for prefix, target in MOVED.items():
        if old == prefix or old.startswith(prefix + "."):
            return target + old[len(prefix):]
    return None


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old path as the module at its new path: one module object under both names.

    Nothing is imported until an old path is: ``import fedlib`` stays light. ``python -m`` on an
    old path runs the new module's code (``get_code``), a package's ``__main__``."""

    def find_spec(self, fullname, path=None, target=None):
        target_name = new_name(fullname)
        if target_name is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec):
        return importlib.import_module(new_name(spec.name))  # keeps its own __name__ and __spec__

    def exec_module(self, module):
        pass  # the module ran once, under its new name

    def get_code(self, fullname):
        target = importlib.util.find_spec(new_name(fullname))
        if target.submodule_search_locations is not None:  # a package: python -m runs its __main__
            target = importlib.util.find_spec(target.name + ".__main__") or target
        return target.loader.get_code(target.name)


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.insert(0, _MovedModules())  # before the path finder, which would load a second copy


def __getattr__(name: str):
    """``fedlib.engine`` as an attribute without importing it first (as ``from fedlib import engine``)."""
    if f"fedlib.{name}" in MOVED:
        return importlib.import_module(f"fedlib.{name}")
    raise AttributeError(f"module 'fedlib' has no attribute {name!r}")


from fedlib.errors import FedlibError  # noqa: E402

__all__ = ["FedlibError", "__version__"]
