"""Backends: how a round's clients are trained.

:mod:`.sequential` trains them one after another (the reference path), :mod:`.threaded` on CPU
worker threads, :mod:`.stacked` as one vmapped computation, :mod:`.graphed` one after another with
each client's steps replayed from a CUDA graph; the fast three fall back to the
sequential path of :mod:`fedlib.algorithms.client_training` with one warning. Each is a
:class:`Backend`, and :data:`BACKENDS` names them for the engine, which dispatches through
:func:`backend_named`. A backend may import local training, the method contract, the run state
and what lies below them, never the store or the engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence, runtime_checkable

from fedlib.engine.backends import graphed, sequential, stacked, threaded

if TYPE_CHECKING:
    from fedlib.algorithms.base import Algorithm, ClientUpdate, Observer
    from fedlib.core.state import ServerState


@runtime_checkable
class Backend(Protocol):
    """What the engine calls on a backend: one round's local training, updates in ``clients`` order."""

    def train_round(self, server: ServerState, algorithm: Algorithm, clients: list[int], lr: float,
                    hooks: Sequence[Observer] = ()) -> list[ClientUpdate]: ...


# backend name (RunConfig.backend, less "auto") -> the backend
BACKENDS: dict[str, Backend] = {"sequential": sequential, "threads": threaded, "stacked": stacked,
                                "graphed": graphed}
REFERENCE = "sequential"


def backend_named(name: str) -> Backend:
    """The backend called ``name``; any other name is the sequential reference path (as the engine
    always did: ``RunConfig`` refuses unknown names, and ``auto`` picks only verified ones)."""
    return BACKENDS.get(name, BACKENDS[REFERENCE])
