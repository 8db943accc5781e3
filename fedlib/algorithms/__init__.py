"""The methods: what a paper changes, one file per method, beside the contract they share.

:mod:`.base` is the contract (``Algorithm`` and its hooks, ``ClientContext``, ``ClientUpdate``,
the ``Observer`` protocol), :mod:`._common` the loss masks and teacher the methods share, and
:mod:`.client_training` one client's local training, the sequential reference path every backend
falls back to. Every other module is a method, registered by name with
:func:`fedlib.core.registry.register`; the registry (:mod:`fedlib.core.registry`) loads them by
name, so this package holds no names of its own. A method may import the core, the models, the
datasets and the measures, never the store or the engine.
"""
