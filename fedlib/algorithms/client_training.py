"""Local training of one client: the sequential reference path every backend reproduces.

A client starts from the global model, walks its own data for ``local_epochs`` with the
method's optimiser and ``train_step``, and uploads its state (:class:`ClientUpdate`). Its
randomness is keyed by (seed, round, client): data order and augmentation through a generator,
dropout through the global RNG, both seeded before the method's ``client_context`` runs.
The backends (:mod:`fedlib.engine.backends.threaded`, :mod:`fedlib.engine.backends.stacked`) run these same steps for many
clients at once; PKD trains its experts with them too.
"""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

import torch
from torch import Tensor, nn

from fedlib.algorithms.base import Algorithm, ClientContext, ClientUpdate, Observer, notify
from fedlib.core.state import ClientData, ServerState, keyed_seed

Batches = Iterator[tuple[Tensor, Tensor]]
# (model, optimiser, context) -> the client's step function step(x, labels); None: the method's
# train_step called on every batch (the graphed backend passes one that replays a CUDA graph)
StepFactory = Callable[[nn.Module, torch.optim.Optimizer, ClientContext], Callable[[Tensor, Tensor], object]]


def train_client(server: ServerState, algorithm: Algorithm, client_id: int, lr: float,
                 hooks: Sequence[Observer] = (), steps: StepFactory | None = None) -> ClientUpdate:
    """Train one client from the current global model; the sequential reference path (``steps``:
    see :func:`fit_client`)."""
    ctx, batches = client_setup(server, algorithm, client_id, lr)
    model = server.local_model()
    update = fit_client(server, algorithm, ctx, batches, model, steps)
    notify(hooks, "on_client_end", server, ctx, model, update)
    return update


def client_setup(server: ServerState, algorithm: Algorithm, client_id: int, lr: float
                 ) -> tuple[ClientContext, Batches]:
    """A client's context (the method's ``client_context`` applied) and its batches, seeded by
    (seed, round, client); the global RNG too, for dropout."""
    cfg = server.cfg
    client = server.data.client(client_id)
    batches = seeded_batches(client, cfg.batch_size, cfg.local_epochs, keyed_seed(cfg.seed, server.round, client_id))
    ctx = ClientContext(client_id=client_id, round=server.round, class_counts=client.class_counts,
                        num_samples=client.num_samples, data=client, lr=lr, autocast_dtype=server.autocast_dtype)
    algorithm.client_context(server, ctx)
    return ctx, batches


def seeded_batches(client: ClientData, batch_size: int, epochs: int, seed: int) -> Batches:
    """The client's shuffled, augmented training batches drawn from ``seed``; seeds the global
    RNG (dropout, and anything the caller draws next) with it too, at once."""
    torch.manual_seed(seed)
    generator = torch.Generator(device=client.data.device).manual_seed(seed)
    return client.train_batches(batch_size, epochs, generator)


def fit_client(server: ServerState, algorithm: Algorithm, ctx: ClientContext, batches: Batches,
               model: nn.Module, steps: StepFactory | None = None) -> ClientUpdate:
    """Local training of one client on ``model`` (holding the starting state) and its upload;
    ``steps`` builds the function that takes each local step (default: ``algorithm.train_step``)."""
    cfg = server.cfg
    optimizer = algorithm.make_optimizer(model, ctx.lr, cfg.momentum, cfg.weight_decay, ctx)
    model.train()
    if steps is None:
        step = lambda x, y: algorithm.train_step(model, optimizer, x, y, ctx)  # noqa: E731
    else:
        step = steps(model, optimizer, ctx)
    count = 0
    for x, y in batches:
        step(x, y)
        count += 1
    update = ClientUpdate(ctx.client_id, {k: v.detach().clone() for k, v in model.state_dict().items()},
                          ctx.num_samples, count, metrics=dict(ctx.metrics))
    algorithm.client_upload(model, ctx, update)
    return update
