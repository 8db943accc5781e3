"""The core: the run's vocabulary, which every layer above it speaks.

Deterministic kernels and their opt-out (:mod:`.determinism`), the method registry: name -> class,
compositions, hyperparameters (:mod:`.registry`), every knob of a run and its hash (:mod:`.config`),
and the run's state and keyed seeds (:mod:`.state`). The core may import the models, the datasets,
the measures and the ground floor, never the methods (the registry loads them by name), the
store or the engine.
"""
