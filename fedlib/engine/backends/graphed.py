"""The round's clients one after another, each client's local steps replayed from a CUDA graph
(``backend="graphed"``).

Each client trains exactly as on the sequential path (the same seeded context, batches, optimiser
and hooks), except that its steps go through :class:`fedlib.engine.backends.step_graph.GraphedSteps`:
a few eager warm-up steps, then one captured step replayed for every full-size batch. A graph is
captured per client, so what a step reads from its context (teachers, learning rate, per-client
tensors) is that client's. The round falls back to the sequential path, with one warning, where
nothing can be captured: off CUDA, under bf16 autocast (whose weight cache a capture may not
keep), and for a method that declares it must train one client at a time (rule 4 of
:mod:`fedlib.algorithms.base`: own training step, gradient edits, impure penalties). A client
whose warm-up steps show a host sync or a replaced ``ctx.extras`` value trains eagerly, with the
same warning. ``backend="auto"`` takes this path only on a device kind where
``fedlib/engine/verified_paths.json`` lists it as verified and fastest.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from fedlib.algorithms.base import Algorithm, ClientUpdate, Observer
from fedlib.algorithms.client_training import train_client
from fedlib.engine.backends.step_graph import Capture, CudaGraphCapture, GraphedSteps, graphed_steps
from fedlib.core.state import ServerState
from fedlib.engine.backends.stacked import unsupported_reason, warn_fallback

# device type -> how a step is captured there (the tests add "cpu": EagerCapture)
CAPTURES: dict[str, Callable[[torch.device], Capture]] = {"cuda": CudaGraphCapture}


def fallback_reason(server: ServerState, algorithm: Algorithm) -> str | None:
    """Why this round's steps cannot be captured (None when they can)."""
    if server.device.type not in CAPTURES:
        return f"CUDA graphs need a CUDA device (this run is on {server.device.type})"
    if server.autocast_dtype is not None:
        return "bf16 autocast keeps a weight cache that a CUDA graph capture may not"
    return unsupported_reason(algorithm)


def train_round(server: ServerState, algorithm: Algorithm, clients: list[int], lr: float,
                hooks: Sequence[Observer] = ()) -> list[ClientUpdate]:
    """Local training of the round's clients, one after another, their steps replayed from a
    graph captured per client (updates in ``clients`` order)."""
    reason = fallback_reason(server, algorithm)
    if reason is not None:
        warn_fallback(server.cfg.method, reason)
        return [train_client(server, algorithm, k, lr, hooks) for k in clients]
    capture = CAPTURES[server.device.type](server.device)
    return [_train_graphed(server, algorithm, k, lr, hooks, capture) for k in clients]


def _train_graphed(server: ServerState, algorithm: Algorithm, client_id: int, lr: float,
                   hooks: Sequence[Observer], capture: Capture) -> ClientUpdate:
    made: list[GraphedSteps] = []

    def steps(model, optimizer, ctx) -> GraphedSteps:
        made.append(graphed_steps(algorithm, model, optimizer, ctx, capture, server.cfg.batch_size))
        return made[-1]

    update = train_client(server, algorithm, client_id, lr, hooks, steps)
    if made and made[0].refusal is not None:
        warn_fallback(server.cfg.method, made[0].refusal)
    return update
