"""Client drift from a trained global model (FedCSD Fig. 1) and single local updates (Fig. 7).

FedCSD's exploratory study broadcasts a well-trained global model to 10 non-IID clients, lets
every client train for many local epochs, and after each epoch measures on the test set

(a) the logit distance KL(softmax(z_local) || softmax(z_global)) to the initial global model,
(b) the feature distance ||h_local - h_global||_2 between penultimate features,
(c) the test accuracy of each local model and of their (sample-weighted) average,
(d) each local model's accuracy on its own training data,

for three local objectives: cross-entropy only, + logit distillation (mu = 0.001, tau = 10) and
+ feature distillation (MSE, mu = 0.01). :func:`drift_study` runs it with the engine's own
pieces (``prepare``, the method's ``train_step``, ``weighted_average``) and returns a long
table; all clients advance one epoch at a time in lockstep so their average can be evaluated
after every epoch. Each client keeps its optimiser (momentum) across epochs, as one long local
update would.

:func:`local_update` is one ordinary local update (``client_training.train_client``) from a stored run's
final global model, under any method, e.g. to compare the features a client learns with CE only
and with FedCSD's full loss (Fig. 7).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
import torch
from torch import nn

from fedlib import store
from fedlib.algorithms.base import Algorithm, ClientContext, weighted_average
from fedlib.algorithms.client_training import train_client
from fedlib.core.config import RunConfig
from fedlib.core.state import ServerState, keyed_seed
from fedlib.engine import model_source
from fedlib.engine.engine import RunResult, prepare, render_only, retrain
from fedlib.errors import FedlibError
from fedlib.measures import metrics

# FedCSD Sec. III: the three local objectives of Fig. 1 as (method, method_args).
# fedavg_kd's loss is CE + beta * tau^2 * KL, the same tau^2 convention as FedCSD's own L_CSD.
FIG1_VARIANTS: dict[str, tuple[str, dict]] = {
    "CE": ("fedavg", {}),
    "CE + logit KD": ("fedavg_kd", {"beta": 0.001, "tau": 10.0}),
    "CE + feature KD": ("feature_kd", {"mu": 0.01}),
}
METRICS = ("logit_kl", "feature_l2", "test_accuracy", "train_accuracy")


@dataclass
class _Client:
    """One client's local model, optimiser, context and data-order generator during the study."""

    client_id: int
    model: nn.Module
    optimizer: torch.optim.Optimizer
    ctx: ClientContext
    generator: torch.Generator


# ====================================================================== the study
def drift_study(pretrained: RunResult, epochs: int, variants: dict[str, tuple[str, dict]] | None = None,
                clients: Sequence[int] | None = None, results_dir: str | os.PathLike | None = None,
                progress: bool = True) -> pd.DataFrame:
    """Local training from ``pretrained``'s final global model, measured after every epoch.

    The clients, partition, batch size, lr, momentum and weight decay are those of
    ``pretrained.config``; ``variants`` maps a label to (method, method_args) of the local
    objective (default :data:`FIG1_VARIANTS`). Returns one row per (variant, epoch, model):
    model "local" rows (one per client) and one "average" row (the weighted average of the local
    models), with the columns of :data:`METRICS`; epoch 0 is the global model itself.
    With ``results_dir`` the table is cached as CSV under ``<results_dir>/drift/``. With
    ``progress`` (the default, as for ``engine.run``) a bar per variant counts its local epochs;
    ``progress=False`` is silent.
    """
    variants = dict(FIG1_VARIANTS if variants is None else variants)
    if epochs < 1:
        raise FedlibError(f"epochs must be >= 1, got {epochs}")
    clients = list(range(pretrained.config.clients) if clients is None else clients)
    _check_clients(clients, pretrained.config.clients)
    cache = cache_path(pretrained, epochs, variants, clients, results_dir)
    if cache is not None and cache.exists():
        return pd.read_csv(cache)
    global_state = pretrained.global_state()
    frames = []
    for label, (method, method_args) in variants.items():
        cfg = pretrained.config.replace(method=method, method_args=method_args)
        frames.append(pd.DataFrame(variant_drift(cfg, global_state, epochs, clients, label, progress)))
    frame = pd.concat(frames, ignore_index=True)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(cache, index=False)
    return frame


def variant_drift(cfg: RunConfig, global_state: dict, epochs: int, clients: Sequence[int],
                  label: str = "", progress: bool = False) -> list[dict[str, Any]]:
    """The rows of :func:`drift_study` for one local objective (``cfg.method``); with
    ``progress`` a bar counts the local epochs (every client trained and measured)."""
    server, algorithm = prepare(cfg)
    server.model.load_state_dict(global_state)
    algorithm.begin_round(server)  # as the engine's round starts: the method's server-side work first
    server.round_clients = list(clients)
    test_reference = metrics.predict(server.model, server.data.test_batches())
    local_clients = [_start_client(server, algorithm, k) for k in clients]
    scratch = server.new_model()
    rows = []
    with _progress_bar(label or cfg.method, epochs, len(clients), progress) as bar:
        for epoch in range(epochs + 1):
            if epoch > 0:
                for client in local_clients:
                    _train_one_epoch(algorithm, client, cfg.batch_size)
            for client in local_clients:
                row = _measure(client.model, server, test_reference, client.ctx)
                rows.append({"variant": label, "epoch": epoch, "model": "local", "client": client.client_id, **row})
            scratch.load_state_dict(weighted_average([c.model.state_dict() for c in local_clients],
                                                     [c.ctx.num_samples for c in local_clients]))
            row = _measure(scratch, server, test_reference, None)
            rows.append({"variant": label, "epoch": epoch, "model": "average", "client": -1, **row})
            if epoch > 0:
                bar.update(1)
    return rows


def drift_curves(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (variant, epoch): the mean over clients of every metric for the local models, and the
    average model's metrics, as columns ``local_<metric>`` and ``average_<metric>``."""
    local = frame[frame["model"] == "local"].groupby(["variant", "epoch"], sort=False)[list(METRICS)].mean()
    average = frame[frame["model"] == "average"].set_index(["variant", "epoch"])[list(METRICS)]
    return pd.concat([local.add_prefix("local_"), average.add_prefix("average_")], axis=1)


# ====================================================================== one local update
def local_update(pretrained: RunResult, client_id: int, method: str | None = None,
                 method_args: dict | None = None, local_epochs: int | None = None) -> nn.Module:
    """The model client ``client_id`` trains in one more round from ``pretrained``'s final state.

    ``method``/``method_args`` choose the local objective (default: the run's own). The run's
    server-side state (e.g. FedCSD's moving-average teacher) is restored when the method is the
    run's own, so the update is exactly what round ``rounds + 1`` would give that client, save
    for per-client state (MOON's previous model, SCAFFOLD's c_i): a finished run keeps none, and
    a warning says the client then starts as one that never trained.
    """
    cfg = pretrained.config
    changes = {"local_epochs": local_epochs or cfg.local_epochs}
    if method is not None:
        changes.update(method=method, method_args=method_args or {})
    local_cfg = cfg.replace(**changes)
    _check_clients([client_id], cfg.clients)
    server, algorithm = prepare(local_cfg)
    record = model_source.model_record(pretrained, retrain, render_only())  # one committed without it: trained again
    state = record.read_latest() if record else None
    if state is None:
        raise FedlibError(f"no checkpoint or final model stored for run {cfg.hash()} in {pretrained.folder}")
    own_method = local_cfg.method == cfg.method and local_cfg.method_args == cfg.method_args
    store.restore_server(server, state, extras=own_method)
    if own_method:
        _warn_dropped_client_state(cfg, state.get("dropped_client_state", []))
    server.round = cfg.rounds
    algorithm.begin_round(server)  # as the engine's round starts: the method's server-side work first
    server.round_clients = list(range(cfg.clients))
    update = train_client(server, algorithm, client_id, cfg.lr * cfg.lr_decay ** cfg.rounds)
    model = server.new_model()
    model.load_state_dict(update.state)
    return model.eval()


# ====================================================================== helpers
def _progress_bar(label: str, epochs: int, num_clients: int, enabled: bool):
    """The bar of one variant: local epochs done of ``epochs`` (the engine's bar style)."""
    from tqdm.auto import tqdm

    desc = f"drift: {label} ({num_clients} client{'s' if num_clients != 1 else ''})"
    return tqdm(total=epochs, desc=desc, unit="epoch", disable=not enabled, leave=False)


def _warn_dropped_client_state(cfg: RunConfig, dropped: list[str]) -> None:
    """A finished run keeps no per-client state: the update starts the client as a newcomer."""
    if dropped:
        import warnings

        warnings.warn(f"run {cfg.hash()} ({cfg.method}) is finished and kept no per-client state "
                      f"({', '.join(dropped)}): the client starts as one that never trained, not exactly "
                      f"as in round {cfg.rounds + 1}", RuntimeWarning, stacklevel=3)


def _check_clients(clients: Sequence[int], num_clients: int) -> None:
    bad = [k for k in clients if not 0 <= int(k) < num_clients]
    if bad or not clients:
        raise FedlibError(f"clients must be a non-empty list of ids in [0, {num_clients}), got {list(clients)}")


def _start_client(server: ServerState, algorithm: Algorithm, client_id: int) -> _Client:
    """A fresh local model loaded with the global state, its optimiser and context."""
    cfg = server.cfg
    data = server.data.client(client_id)
    model = server.new_model()
    model.load_state_dict(server.model.state_dict())
    ctx = ClientContext(client_id=client_id, round=server.round, class_counts=data.class_counts,
                        num_samples=data.num_samples, data=data, lr=cfg.lr)
    algorithm.client_context(server, ctx)
    optimizer = algorithm.make_optimizer(model, cfg.lr, cfg.momentum, cfg.weight_decay, ctx)
    seed = keyed_seed(cfg.seed, server.round, client_id)
    generator = torch.Generator(device=server.device).manual_seed(seed)
    return _Client(client_id, model, optimizer, ctx, generator)


def _train_one_epoch(algorithm: Algorithm, client: _Client, batch_size: int) -> None:
    client.model.train()
    for x, y in client.ctx.data.train_batches(batch_size, 1, client.generator):
        algorithm.train_step(client.model, client.optimizer, x, y, client.ctx)


def _measure(model: nn.Module, server: ServerState, reference: metrics.Predictions,
             ctx: ClientContext | None) -> dict[str, float]:
    """Drift of ``model`` from the global model on the test set, and its accuracies."""
    test = metrics.predict(model, server.data.test_batches())
    train_accuracy = float("nan")
    if ctx is not None:
        local = metrics.predict(model, ctx.data.eval_batches())
        train_accuracy = float((local.predicted == local.labels).mean())
    return {
        "logit_kl": metrics.logit_kl(test.logits, reference.logits),  # KL(local || global)
        "feature_l2": metrics.feature_l2(reference.features, test.features),
        "test_accuracy": float((test.predicted == test.labels).mean()),
        "train_accuracy": train_accuracy,
    }


def cache_path(pretrained: RunResult, epochs: int, variants: dict, clients: list[int],
               results_dir: str | os.PathLike | None) -> Path | None:
    """Where :func:`drift_study` caches its table for these inputs (None: no results store named): the working
    store's file when it exists, else the committed reference store's, else the working store's path to write."""
    if results_dir is None:
        return None
    key = json.dumps({"run": pretrained.config.hash(), "epochs": epochs, "clients": clients,
                      "variants": {k: [m, dict(sorted(a.items()))] for k, (m, a) in variants.items()}},
                     sort_keys=True)
    return store.analysis_cache(results_dir, "drift", f"{hashlib.sha256(key.encode()).hexdigest()[:12]}.csv")
