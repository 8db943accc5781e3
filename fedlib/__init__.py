"""fedlib: reproducible label-skewed federated learning with knowledge distillation.

The package is deliberately thin: one module per concept, in layers that import one way, ground
floor first (docs/ARCHITECTURE.md has the picture; tests/test_architecture.py enforces it):

- :mod:`fedlib.data`, :mod:`fedlib.augment`, :mod:`fedlib.partition`, :mod:`fedlib.models`
                              -- datasets as uint8 tensors, device-side augmentation, client
                                 partitions, the model zoo (every model gives features and logits)
- :mod:`fedlib.algorithms`    -- the registry: methods by name, ``+`` compositions
- :mod:`fedlib.config`        -- RunConfig, every knob of one run, validated and hashable
- :mod:`fedlib.state`         -- keyed seeds, client sampling, the data on the device, ServerState
- :mod:`fedlib.algorithms.base` -- the method contract: every hook and its rules
- :mod:`fedlib.client_training` -- one client's local training, the sequential reference path
- ``fedlib.algorithms.<name>`` -- one file per method
- :mod:`fedlib.threaded`, :mod:`fedlib.stacked` -- a round's clients on threads, or vmapped
- :mod:`fedlib.store`         -- the results store (one folder per config hash)
- :mod:`fedlib.engine`        -- the federated loop: rounds, evaluation, checkpoint and resume

Above the engine: :mod:`fedlib.experiments` and :mod:`fedlib.executor` (a grid's runs),
:mod:`fedlib.grids` (one grid function per notebook that trains), :mod:`fedlib.notebook`,
:mod:`fedlib.report`, :mod:`fedlib.tables`, :mod:`fedlib.plots` (what notebooks call),
:mod:`fedlib.plan` and :mod:`fedlib.reproduce` (reproduce.sh), :mod:`fedlib.cli` (``python -m fedlib``).
"""

__version__ = "0.1.0"

from fedlib.errors import FedlibError  # noqa: E402

__all__ = ["FedlibError", "__version__"]
