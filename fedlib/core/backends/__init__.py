"""Backends: how a round's clients are trained, other than one after another.

:mod:`.threaded` runs them on CPU worker threads, :mod:`.stacked` as one vmapped computation;
each falls back to the sequential path of ``fedlib.core.client_training`` with one warning. A
backend may import local training, the method contract, the run state and what lies below them,
never the store or the engine.
"""
