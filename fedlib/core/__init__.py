"""The core: one federated run, from its config to its stored result.

Models and deterministic kernels (:mod:`.models`, :mod:`.determinism`), every knob of a run
(:mod:`.config`), the run's state and keyed seeds (:mod:`.state`), one client's local training
(:mod:`.client_training`), a round's clients on threads or vmapped (:mod:`.backends`, chosen by
:mod:`.backend_choice`), the results store (:mod:`.store`) and the round loop (:mod:`.engine`, with
the data a run reads in :mod:`.run_data` and its evaluation in :mod:`.evaluation`).
The core and ``fedlib.algorithms`` are one layer, the run, in two packages: the methods sit
between the core's own floors (the registry under the config, the contract over the run state,
the methods under the backends), so tests/unit/test_architecture.py checks that layer floor by floor.
The run may import the data layer, the measures and the ground floor, never a layer above it.
"""
