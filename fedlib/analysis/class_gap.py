"""Inter-class accuracy gaps over training, for the PKD notebooks (Gan et al., Sec. 2.2).

PKD's figures look at *which classes lag* and *how the lag evolves* (the centralised counterpart
of a federated run, Fig. 2, is a config: ``fedlib.paper.grids.pkd.centralised``):

- :func:`mean_subtracted` — class-wise accuracy minus its mean (Fig. 2's bars).
- :func:`class_accuracy_rounds`, :func:`spread_rounds` — every class's test accuracy per round
  (Fig. 6) and its max / mean / min and worst class per round (Fig. 3, 9), from a run's metrics.
- :func:`expert_activation` — PKD's logged expert firing rate per round (Fig. 11).
- :func:`track_class_statistics` — the global model's per-class statistics on the clients'
  training data after *every* round (Fig. 7: misclassification curves and feature distances over
  the warm-up), computed by an engine hook and cached next to the results store, since the store
  keeps only the final model.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterator, Sequence

import numpy as np
import pandas as pd
from torch import Tensor

from fedlib import store
from fedlib.core.config import RunConfig
from fedlib.errors import FedlibError
from fedlib.measures.metrics import accuracy_spread
from fedlib.measures.weak_classes import class_statistics, feature_distances, misclassification_probabilities

ANALYSIS_FOLDER = "analysis"  # under the results root; holds cached per-round statistics


# ====================================================================== Fig. 2
def mean_subtracted(class_accuracy: Sequence[float]) -> np.ndarray:
    """Class-wise accuracy minus its mean over classes (NaN classes ignored in the mean)."""
    accuracy = np.asarray(class_accuracy, dtype=float)
    if accuracy.ndim != 1 or not np.isfinite(accuracy).any():
        raise FedlibError("mean_subtracted needs a 1-D list of class accuracies with at least one number")
    return accuracy - np.nanmean(accuracy)


# ====================================================================== Fig. 3, 6, 9, 11
def class_accuracy_rounds(result: Any) -> pd.DataFrame:
    """Test accuracy of every class (columns, by name) per evaluated round (index, 1-based)."""
    rows = [r for r in result.rounds if "class_accuracy" in r]
    if not rows:
        raise FedlibError(f"run {result.config.hash()} logged no class_accuracy; set eval_every=1")
    frame = pd.DataFrame([r["class_accuracy"] for r in rows], columns=result.class_names,
                         index=pd.Index([r["round"] + 1 for r in rows], name="round"))
    return frame


def spread_rounds(result: Any) -> pd.DataFrame:
    """Per evaluated round: max, mean, min class accuracy, spread and the worst class's name."""
    per_class = class_accuracy_rounds(result)
    rows = [accuracy_spread(values) for values in per_class.to_numpy()]
    frame = pd.DataFrame(rows, index=per_class.index)
    frame["worst_class"] = [None if pd.isna(i) else per_class.columns[int(i)]  # empty: a round with no number
                            for i in frame["worst_class"]]
    return frame


def expert_activation(result: Any) -> pd.DataFrame:
    """PKD runs: fraction of local samples for which each expert fired, per round (1-based).

    Columns are named after the experts' groups (class names joined by '/'); rounds before the
    PKD stage (warm-up) are absent.
    """
    rows = [r for r in result.rounds if "pkd_groups" in r]
    if not rows:
        raise FedlibError(f"run {result.config.hash()} has no PKD rounds; is it a 'pkd' run past its warm-up?")
    names = result.class_names
    groups = rows[0]["pkd_groups"]
    columns = ["/".join(names[c] for c in group) for group in groups]
    values = [[r[f"expert_fired_{g}"] for g in range(len(groups))] for r in rows]
    return pd.DataFrame(values, columns=columns, index=pd.Index([r["round"] + 1 for r in rows], name="round"))


# ====================================================================== Fig. 7
class ClassStatisticsTracker:
    """Engine hook: after each round, the global model's per-class statistics on all clients' data.

    Records, per round, the soft misclassification matrix P[a, b] (mean softmax), the hard one
    (argmax counts), class-mean feature distances and class accuracy: what PKD's discovery step
    would see if it ran after that round.
    """

    def __init__(self) -> None:
        self.records: list[dict[str, list]] = []

    def on_round_end(self, server: Any, updates: list, metrics: dict) -> None:
        stats = class_statistics(server.model, _client_batches(server), server.num_classes)
        self.records.append({
            "round": server.round + 1,
            "confusion": misclassification_probabilities(stats, "soft").tolist(),
            "prediction": misclassification_probabilities(stats, "hard").tolist(),
            "feature_distance": feature_distances(stats).tolist(),
            "class_accuracy": stats.class_accuracy.tolist(),
        })


def _client_batches(server: Any) -> Iterator[tuple[Tensor, Tensor]]:
    for k in range(server.cfg.clients):
        client = server.data.client(k)
        if client.num_samples:
            yield from client.eval_batches()


def track_class_statistics(cfg: RunConfig, results_dir: str | os.PathLike | None = None,
                           progress: bool = False) -> dict[str, Any]:
    """Run ``cfg`` with a :class:`ClassStatisticsTracker`; arrays stacked over rounds.

    Returns ``round`` (R,), ``confusion`` and ``prediction`` (R, C, C), ``feature_distance``
    (R, C, C), ``class_accuracy`` (R, C). Cached as JSON in ``<results>/analysis/<hash>-class-
    statistics.json``: a second call with the same config reads the file instead of training.
    When the store has no run of ``cfg`` yet, the tracked run is stored too.
    """
    from fedlib.engine.engine import run

    path = store.analysis_cache(results_dir, ANALYSIS_FOLDER, f"{cfg.hash()}-class-statistics.json")
    if path.exists():
        records = store.read_json(path)
    else:
        tracker = ClassStatisticsTracker()
        # a new config also fills the store; a stored one is recomputed beside it (engine.run)
        run(cfg, hooks=[tracker], results_dir=results_dir, progress=progress)
        records = tracker.records
        path.parent.mkdir(parents=True, exist_ok=True)
        store.write_atomic(path, json.dumps(records).encode())
    return {key: np.asarray([r[key] for r in records], dtype=float) for key in records[0]}


def pair_curves(confusion_rounds: np.ndarray, rounds: Sequence[int], class_names: Sequence[str]) -> pd.DataFrame:
    """Long table of every off-diagonal P[a, b] per round: round, true, predicted, probability."""
    confusion_rounds = np.asarray(confusion_rounds, dtype=float)
    if confusion_rounds.ndim != 3 or len(confusion_rounds) != len(rounds):
        raise FedlibError("pair_curves needs an (R, C, C) array and R round numbers")
    rows = []
    for round_number, matrix in zip(rounds, confusion_rounds):
        for a, b in zip(*np.nonzero(~np.eye(len(matrix), dtype=bool))):
            rows.append({"round": int(round_number), "true": class_names[a], "predicted": class_names[b],
                         "probability": float(matrix[a, b])})
    return pd.DataFrame(rows)
