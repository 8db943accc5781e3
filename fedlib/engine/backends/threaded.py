"""The clients of a round on several CPU threads at once (``backend="threads"``).

On a CPU, small models train in kernels too short to use more than one core each: a LeNet-5
step on 50 images spends most of its time in single-threaded convolution and pooling code.
The stacked path (``fedlib.engine.backends.stacked``) amortises kernel launches, which pays on a GPU but not
here. This path instead gives every worker thread its own model and its own clients, with one
intra-op thread per worker, so the cores train different clients side by side (PyTorch
releases the GIL inside its kernels).

Each client's computation is exactly the sequential path's: the same seeded context and
batches (set up one after another on the calling thread, as the sequential path does), the
same optimiser and steps, on a private copy of the global model. Updates come back in the
round's client order. Methods the stacked path cannot run (own training step, gradient edits,
impure penalties), models with dropout (the global RNG would be shared between threads) and
runs with per-client hooks fall back to the sequential path, with one warning.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Sequence

import torch

from fedlib.algorithms.base import Algorithm, ClientUpdate, Observer
from fedlib.algorithms.client_training import client_setup, fit_client, train_client
from fedlib.core.state import ServerState
from fedlib.engine.backends.stacked import unsupported_reason, warn_fallback
from fedlib.models import has_batchnorm, has_dropout


def workers_for(server: ServerState, clients: list[int]) -> int:
    """Worker threads for a round: one per intra-op thread torch would use, at most one per client."""
    return max(1, min(len(clients), torch.get_num_threads()))


def fallback_reason(server: ServerState, algorithm: Algorithm, hooks: Sequence[Observer]) -> str | None:
    """Why this round cannot train on threads (None when it can)."""
    if hooks:
        return "hooks watch each client's model as it finishes"
    if has_dropout(server.model):
        return "the model has dropout, which draws from the process-wide RNG"
    return unsupported_reason(algorithm)


def train_round(server: ServerState, algorithm: Algorithm, clients: list[int], lr: float,
                hooks: Sequence[Observer] = ()) -> list[ClientUpdate]:
    """Local training of the round's clients on worker threads (updates in ``clients`` order)."""
    workers = workers_for(server, clients)
    reason = fallback_reason(server, algorithm, hooks)
    if reason is not None or workers == 1:
        if reason is not None and server.cfg.backend == "threads":
            warn_fallback(server.cfg.method, reason)
        return [train_client(server, algorithm, k, lr, hooks) for k in clients]
    setups = [client_setup(server, algorithm, k, lr) for k in clients]
    shared = _train_mode_batchnorm_teacher([ctx for ctx, _ in setups])
    if shared is not None:  # its running statistics would be updated from several threads
        if server.cfg.backend == "threads":
            warn_fallback(server.cfg.method, f"the teacher {shared!r} updates BatchNorm statistics")
        return [fit_client(server, algorithm, ctx, batches, server.local_model()) for ctx, batches in setups]
    models = _ModelPerThread(server)
    # largest clients first: the pool then ends the round with small jobs, not one long one
    order = sorted(range(len(setups)), key=lambda i: -setups[i][0].num_samples)
    with _one_intra_op_thread(), ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {i: pool.submit(lambda s=setups[i]: fit_client(server, algorithm, *s, models.get())) for i in order}
        return [futures[i].result() for i in range(len(setups))]


def _train_mode_batchnorm_teacher(ctxs: list) -> str | None:
    for ctx in ctxs:
        for name, teacher in ctx.teachers.items():
            if teacher.training and has_batchnorm(teacher):
                return name
    return None


class _ModelPerThread:
    """Each worker thread's own local model, loaded with the global state for every client."""

    def __init__(self, server: ServerState):
        self.server = server
        self.local = threading.local()
        self.lock = threading.Lock()

    def get(self) -> torch.nn.Module:
        if not hasattr(self.local, "model"):
            with self.lock:  # building a model draws initial weights from the global RNG
                self.local.model = self.server.new_model()
        self.local.model.load_state_dict(self.server.model.state_dict())
        return self.local.model


@contextmanager
def _one_intra_op_thread():
    """Kernels run on the calling worker thread only, restoring torch's setting afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
