"""One local update from a trained global model: what each client forgets, class by class.

The FedVLS/FedED motivation experiment (FedED Fig. 1 and 4, FedVLS Fig. 2): take one
well-trained global model, broadcast it to every client, let every client train once with a
method's local objective, then measure on the test set

- the class-wise accuracy of the initial global model,
- the class-wise accuracy (and confusion matrix) of every updated local model,
- the class-wise accuracy of the model the server aggregates from those local models.

Any registered method name works; the local training, the aggregation rule and the evaluation
are the engine's own (:func:`fedlib.algorithms.client_training.train_client`, the method's ``aggregate``).

Given a results store, :func:`local_update` caches its result as ``<store>/local_update/<key>.npz``
(read from the committed reference store too, ``store.analysis_cache``), so a notebook that
reopens finds the updates instead of training every client again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from fedlib import store
from fedlib.algorithms.client_training import train_client
from fedlib.core.config import RunConfig
from fedlib.core.state import FederatedData
from fedlib.engine.engine import prepare
from fedlib.errors import FedlibError, one_line
from fedlib.measures import metrics

CACHE_FOLDER = "local_update"  # under the results root (and the reference store), beside drift/ and analysis/
# Bump when a change here alters what a cached key computes (or the file's layout): old caches are then missed.
CACHE_VERSION = 1


@dataclass
class LocalUpdateResult:
    """Test-set accuracies before and after one local update of every client (fractions)."""

    method: str
    class_names: list[str]
    class_counts: np.ndarray  # (K, C) training samples per class on each client
    global_accuracy: float  # the broadcast model
    global_class_accuracy: np.ndarray  # (C,)
    local_accuracy: np.ndarray  # (K,) each updated local model
    local_class_accuracy: np.ndarray  # (K, C)
    local_confusion: np.ndarray  # (K, C, C) row-normalised: true class (rows) -> predicted
    aggregated_accuracy: float  # the model aggregated from the updated local models
    aggregated_class_accuracy: np.ndarray  # (C,)

    @property
    def mean_local_class_accuracy(self) -> np.ndarray:
        """(C,) class-wise accuracy averaged over all clients' local models (FedED Fig. 4)."""
        return self.local_class_accuracy.mean(0)

    def roles(self, client: int) -> dict[str, list[int]]:
        """Majority / minority / vacant classes of ``client`` (see :func:`class_roles`)."""
        return class_roles(self.class_counts[client])


def class_roles(class_counts: np.ndarray) -> dict[str, list[int]]:
    """Split one client's classes into majority, minority and vacant.

    Vacant: no sample. Minority: some samples, but fewer than the client's uniform share
    n_k / C. Majority: at least n_k / C samples. (The papers name these by eye; the uniform
    share is the threshold that reproduces their examples, e.g. a class with 30 of 3500 samples
    is a minority, one with 1500 a majority.)
    """
    counts = np.asarray(class_counts, dtype=float)
    if counts.ndim != 1 or counts.sum() <= 0:
        raise FedlibError("class_counts must be one client's 1-D per-class counts with at least one sample")
    share = counts.sum() / len(counts)
    return {"majority": [int(c) for c in np.flatnonzero(counts >= share)],
            "minority": [int(c) for c in np.flatnonzero((counts > 0) & (counts < share))],
            "vacant": [int(c) for c in np.flatnonzero(counts == 0)]}


def accuracy_by_role(result: LocalUpdateResult) -> dict[str, dict[str, float]]:
    """Class accuracy on each client's majority / minority / vacant classes, before and after.

    For every client, the mean class accuracy over the classes of one role, of the initial global
    model ("global") and of that client's updated local model ("local"); then the mean over the
    clients that have at least one class of that role. Roles no client has are left out.
    """
    table: dict[str, dict[str, float]] = {}
    for role in ("majority", "minority", "vacant"):
        global_means, local_means = [], []
        for client in range(len(result.class_counts)):
            classes = result.roles(client)[role]
            if classes:
                global_means.append(np.nanmean(result.global_class_accuracy[classes]))
                local_means.append(np.nanmean(result.local_class_accuracy[client, classes]))
        if local_means:
            table[role] = {"global": float(np.mean(global_means)), "local": float(np.mean(local_means)),
                           "clients": len(local_means)}
    return table


def telling_client(class_counts: np.ndarray) -> int:
    """The client that shows all three roles best: most minority classes, then most vacant
    classes, then most samples (the papers pick such a client for their figures by hand)."""
    counts = np.asarray(class_counts)

    def key(k: int) -> tuple[int, int, float]:
        roles = class_roles(counts[k])
        return len(roles["minority"]), len(roles["vacant"]), float(counts[k].sum())

    return max(range(len(counts)), key=key)


def _test_predictions(model: nn.Module, data: FederatedData) -> metrics.Predictions:
    return metrics.predict(model, data.test_batches())


def _accuracy(pred: metrics.Predictions) -> float:
    return float((pred.predicted == pred.labels).mean())


def local_update(cfg: RunConfig, global_state: dict[str, torch.Tensor], round_index: int = 0,
                 results_dir: str | os.PathLike | None = None) -> LocalUpdateResult:
    """Broadcast ``global_state`` to every client of ``cfg``'s partition and train each once.

    ``cfg`` fixes the data, partition, model, method (with its arguments) and local budget
    (``local_epochs``, ``batch_size``, ``lr``...); ``cfg.rounds`` and ``participation`` are
    ignored: every client trains exactly once. ``round_index`` keys the clients' data order
    (and the learning rate decay), as round ``round_index`` of a run would.

    With ``results_dir`` (else ``cfg.results_dir``; neither: no cache) the result is cached in
    ``<results_dir>/local_update/`` under a key of ``cfg.hash()``, ``round_index`` and the bytes of
    ``global_state`` (see :func:`cache_path`); a later call with the same three reads the file.
    """
    path = cache_path(cfg, global_state, round_index, results_dir)
    if path is not None and path.exists():
        return _read_cache(path)
    result = _compute(cfg, global_state, round_index)
    if path is not None and not _in_reference_store(path):
        _write_cache(path, result)
    return result


def _compute(cfg: RunConfig, global_state: dict[str, torch.Tensor], round_index: int) -> LocalUpdateResult:
    """The local update itself (no cache): see :func:`local_update`."""
    server, algorithm = prepare(cfg)
    try:
        server.model.load_state_dict(global_state)
    except RuntimeError as error:
        raise FedlibError(f"global_state does not fit model {cfg.model!r} on {cfg.dataset}: "
                          f"{one_line(error, None, kind=False)}") from None
    server.round = round_index
    algorithm.begin_round(server)  # as the engine's round starts: the method's server-side work first
    server.round_clients = list(range(cfg.clients))
    num_classes = server.num_classes
    global_pred = _test_predictions(server.model, server.data)
    recorder = _LocalModelRecorder(num_classes)
    lr = cfg.lr * cfg.lr_decay ** round_index
    updates = [train_client(server, algorithm, k, lr, hooks=[recorder]) for k in range(cfg.clients)]
    server.model.load_state_dict(algorithm.aggregate(server, updates))
    aggregated_pred = _test_predictions(server.model, server.data)
    return LocalUpdateResult(
        method=cfg.method, class_names=list(server.data.dataset.class_names),
        class_counts=np.asarray(server.data.partition.counts),
        global_accuracy=_accuracy(global_pred),
        global_class_accuracy=metrics.class_accuracy(global_pred, num_classes),
        local_accuracy=np.array(recorder.accuracy), local_class_accuracy=np.stack(recorder.class_accuracy),
        local_confusion=np.stack(recorder.confusion),
        aggregated_accuracy=_accuracy(aggregated_pred),
        aggregated_class_accuracy=metrics.class_accuracy(aggregated_pred, num_classes))


# ====================================================================== the cache
def cache_path(cfg: RunConfig, global_state: dict[str, torch.Tensor], round_index: int = 0,
               results_dir: str | os.PathLike | None = None) -> Path | None:
    """Where :func:`local_update`'s result for these inputs is cached (None: no results store named).

    The key is ``cfg.hash()``, which leaves out where and how fast a run happens (``device``,
    ``backend``, ``deterministic``, ``data_dir``, ``results_dir``...: ``LOCATION_FIELDS``), so a
    cache filled on a GPU is read on a laptop, as the results store itself is; it keeps fields
    this analysis ignores (``rounds``, ``participation``), so changing those misses the cache.
    The working store's file is returned when it exists, else the reference store's, else the
    working store's path to write (``store.analysis_cache``).
    """
    root = results_dir if results_dir is not None else cfg.results_dir
    if root is None:
        return None
    key = json.dumps({"config": cfg.hash(), "round": int(round_index), "state": state_digest(global_state),
                      "version": CACHE_VERSION}, sort_keys=True)
    return store.analysis_cache(root, CACHE_FOLDER, f"{hashlib.sha256(key.encode()).hexdigest()[:12]}.npz")


def state_digest(state: dict[str, torch.Tensor]) -> str:
    """sha256 over a state dict: every tensor's name, dtype, shape and bytes, in sorted key order."""
    digest = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name]
        if not isinstance(tensor, torch.Tensor):
            raise FedlibError(f"global_state[{name!r}] must be a tensor, got {type(tensor).__name__}")
        flat = tensor.detach().cpu().contiguous().reshape(-1)
        digest.update(f"{name}|{flat.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(flat.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _in_reference_store(path: Path) -> bool:
    """Whether ``path`` lies in the committed, read-only reference store (never written here)."""
    references = {store.reference_root(), store.REFERENCE_RESULTS} - {None}
    return any(Path(path).resolve().is_relative_to(Path(reference).resolve()) for reference in references)


def _write_cache(path: Path, result: LocalUpdateResult) -> None:
    """The result's arrays and a JSON string of the rest (method, class names, scalars), atomically."""
    values = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    arrays = {k: np.asarray(v) for k, v in values.items() if isinstance(v, np.ndarray)}
    scalars = {k: v for k, v in values.items() if k not in arrays}
    buffer = io.BytesIO()
    np.savez(buffer, **arrays, _scalars=np.array(json.dumps(scalars)))
    store.write_atomic(path, buffer.getvalue())


def _read_cache(path: Path) -> LocalUpdateResult:
    """A :class:`LocalUpdateResult` from a file :func:`_write_cache` wrote."""
    try:
        with np.load(path, allow_pickle=False) as data:
            values = {k: data[k] for k in data.files if k != "_scalars"}
            values.update(json.loads(str(data["_scalars"])))
        return LocalUpdateResult(**values)
    except Exception as error:  # a damaged or foreign file: say which, in one line
        raise FedlibError(f"cannot read the local-update cache {path} ({type(error).__name__}); "
                          "delete it to recompute") from None


class _LocalModelRecorder:
    """Engine hook: evaluates each local model on the test set right after it trains."""

    def __init__(self, num_classes: int):
        self.num_classes = num_classes
        self.accuracy: list[float] = []
        self.class_accuracy: list[np.ndarray] = []
        self.confusion: list[np.ndarray] = []

    def on_client_end(self, server, ctx, model: nn.Module, update) -> None:
        pred = _test_predictions(model, server.data)
        self.accuracy.append(_accuracy(pred))
        self.class_accuracy.append(metrics.class_accuracy(pred, self.num_classes))
        self.confusion.append(metrics.confusion_matrix(pred, self.num_classes))
