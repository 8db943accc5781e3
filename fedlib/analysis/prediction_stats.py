"""Per-round label and prediction distributions (FedLMD Fig. 2).

FedLMD's motivating figure puts three heat maps side by side, one column per round: how many
training samples of each class the round's sampled clients hold, and how many test samples
the aggregated global model assigns to each class, for FedAvg and for FedLMD. Under strong
label skew FedAvg's predictions follow whatever classes the round happened to sample.

:class:`PredictionRecorder` is an engine hook that writes both histograms into each round's
metrics, so they are saved in the run's ``rounds.jsonl`` like any other metric;
:func:`prediction_history` runs a config with it (or reads the stored run) and returns them as
arrays. The summary statistics below turn the heat maps into numbers a notebook can print.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from fedlib import store
from fedlib.core.config import RunConfig
from fedlib.errors import FedlibError

SAMPLED_KEY = "sampled_class_counts"  # (C,) training samples per class held by the round's clients
PREDICTED_KEY = "predicted_class_counts"  # (C,) test samples the global model assigns to each class


# ====================================================================== the hook
def sampled_class_counts(partition_counts: np.ndarray, clients: list[int]) -> np.ndarray:
    """Per-class training samples summed over the given clients; shape (C,)."""
    counts = np.asarray(partition_counts)
    return counts[list(clients)].sum(axis=0).astype(np.int64)


@torch.no_grad()
def predicted_class_counts(model: nn.Module, data) -> np.ndarray:
    """How many test samples ``model`` predicts as each class; shape (C,).

    ``data`` is a :class:`fedlib.core.state.FederatedData` (its normalised test batches are used).
    """
    was_training = model.training
    model.eval()
    counts = torch.zeros(data.num_classes, dtype=torch.long, device=data.device)
    for x, _ in data.test_batches():
        counts += torch.bincount(model(x).argmax(1), minlength=data.num_classes)
    model.train(was_training)
    return counts.cpu().numpy()


class PredictionRecorder:
    """Engine hook: after aggregation, record the round's sampled label counts and the
    global model's predicted-class counts on the test set into the round's metrics."""

    def on_round_end(self, server, updates, metrics: dict) -> None:
        metrics[SAMPLED_KEY] = sampled_class_counts(server.data.partition.counts, metrics["clients"]).tolist()
        metrics[PREDICTED_KEY] = predicted_class_counts(server.model, server.data).tolist()


# ====================================================================== the history
@dataclass
class PredictionHistory:
    """Both histograms for every round of one run (rounds numbered from 1)."""

    config: RunConfig
    rounds: np.ndarray  # (R,)
    sampled_counts: np.ndarray  # (R, C)
    predicted_counts: np.ndarray  # (R, C)
    accuracy: np.ndarray  # (R,) test accuracy after each round (NaN where not evaluated)
    class_names: list[str]

    @property
    def predicted_fractions(self) -> np.ndarray:
        """(R, C): each round's predicted-class counts as fractions of the test set."""
        return row_fractions(self.predicted_counts)


def history_from_rounds(cfg: RunConfig, rounds: list[dict], class_names: list[str]) -> PredictionHistory:
    """Collect the recorded histograms from a run's per-round metrics."""
    missing = [r["round"] for r in rounds if SAMPLED_KEY not in r or PREDICTED_KEY not in r]
    if not rounds or missing:
        raise FedlibError(f"run {cfg.hash()} has no prediction histograms for rounds {missing[:5]}; "
                          "run it through fedlib.analysis.prediction_stats.prediction_history")
    return PredictionHistory(
        config=cfg,
        rounds=np.array([r["round"] + 1 for r in rounds]),
        sampled_counts=np.array([r[SAMPLED_KEY] for r in rounds], dtype=np.int64),
        predicted_counts=np.array([r[PREDICTED_KEY] for r in rounds], dtype=np.int64),
        accuracy=np.array([r.get("accuracy", np.nan) for r in rounds], dtype=float),
        class_names=list(class_names),
    )


def _has_histograms(rounds: list[dict]) -> bool:
    return bool(rounds) and all(SAMPLED_KEY in r and PREDICTED_KEY in r for r in rounds)


def prediction_history(cfg: RunConfig, results_dir: str | os.PathLike | None = None,
                       progress: bool = True) -> PredictionHistory:
    """The per-round histograms of ``cfg``: from the store when recorded, else by running it.

    A new config is saved to the store with the histograms in its ``rounds.jsonl`` (the hook
    does not change the numbers, so the record serves every other notebook too). A run stored
    earlier without them is recomputed beside the store (``engine.run``'s rule for hooks), so
    the stored record is never mixed with rounds of another computation.
    """
    from fedlib.engine.engine import run  # imported here: engine imports many modules

    record = store.served_record(cfg, results_dir)
    if record is not None and _has_histograms(rounds := record.read_rounds()):
        return history_from_rounds(cfg, rounds, record.read_summary()["class_names"])
    result = run(cfg, hooks=[PredictionRecorder()], results_dir=results_dir, progress=progress)
    return history_from_rounds(cfg, result.rounds, result.class_names)


# ====================================================================== summary statistics
def row_fractions(counts: np.ndarray) -> np.ndarray:
    """Each row divided by its sum (a row of zeros stays zeros)."""
    counts = np.asarray(counts, dtype=float)
    totals = counts.sum(axis=-1, keepdims=True)
    return np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)


def total_variation(fractions: np.ndarray, reference: np.ndarray | None = None) -> np.ndarray:
    """Half the L1 distance of each row of ``fractions`` to ``reference`` (default uniform).

    0 means the predictions are spread exactly like the reference; 1 - 1/C means every sample
    goes to one class while the reference is uniform.
    """
    fractions = np.asarray(fractions, dtype=float)
    if reference is None:
        reference = np.full(fractions.shape[-1], 1.0 / fractions.shape[-1])
    reference = np.asarray(reference, dtype=float)
    if reference.shape[-1] != fractions.shape[-1]:
        raise FedlibError(f"reference has {reference.shape[-1]} classes but fractions have "
                          f"{fractions.shape[-1]}; pass one value per class")
    return 0.5 * np.abs(fractions - reference).sum(axis=-1)


def top_class_share(sampled_counts: np.ndarray, predicted_counts: np.ndarray) -> np.ndarray:
    """Per round: the fraction of test predictions that go to that round's most-sampled class."""
    sampled_counts, predicted = np.asarray(sampled_counts), row_fractions(predicted_counts)
    top = sampled_counts.argmax(axis=-1)
    return predicted[np.arange(len(top)), top]


def sampled_prediction_correlation(sampled_counts: np.ndarray, predicted_counts: np.ndarray) -> np.ndarray:
    """Per round: Pearson correlation across classes between the sampled label fractions and
    the predicted-class fractions (NaN for a round where either is constant)."""
    sampled, predicted = row_fractions(sampled_counts), row_fractions(predicted_counts)
    sampled = sampled - sampled.mean(axis=-1, keepdims=True)
    predicted = predicted - predicted.mean(axis=-1, keepdims=True)
    norms = np.linalg.norm(sampled, axis=-1) * np.linalg.norm(predicted, axis=-1)
    dots = (sampled * predicted).sum(axis=-1)
    return np.divide(dots, norms, out=np.full_like(dots, np.nan), where=norms > 0)


def bias_summary(history: PredictionHistory, test_fractions: np.ndarray, late: slice) -> dict[str, float]:
    """The heat maps of one run in six numbers: the total-variation distance of its predicted-class
    mix to the test set's label mix (``test_fractions``), over all rounds and over the ``late``
    ones; the share of predictions given to each round's most-sampled class and the correlation
    of the sampled with the predicted mix, averaged over the rounds; its best and final accuracy (%)."""
    gap = total_variation(history.predicted_fractions, test_fractions)
    share = top_class_share(history.sampled_counts, history.predicted_counts)
    corr = sampled_prediction_correlation(history.sampled_counts, history.predicted_counts)
    return {"TV to true labels, all rounds": gap.mean(), "TV to true labels, 2nd half": gap[late].mean(),
            "share to top sampled class": share.mean(), "corr(sampled, predicted)": np.nanmean(corr),
            "best accuracy (%)": 100 * np.nanmax(history.accuracy),
            "final accuracy (%)": 100 * history.accuracy[-1]}
