"""A partition drawn: clients' class counts as bubbles (FedVLS Fig. 3) or a heat map."""

from __future__ import annotations

import numpy as np

from fedlib.datasets.partition import Partition
from fedlib.errors import FedlibError, one_of

PLOT_KINDS = ("bubble", "heatmap")


def plot_partition(partition_or_counts, class_names=None, kind: str = "bubble", ax=None,
                   title: str | None = None, *, annotate: bool = False):
    """Draw clients' class counts in the style of FedVLS Fig. 3; returns the matplotlib Axes.

    ``partition_or_counts``: a Partition or a (clients x classes) count array.
    ``kind``: "bubble" (x = client, y = class, area ~ count) or "heatmap".
    ``annotate`` writes each count on the figure.
    """
    counts = _plot_counts(partition_or_counts)
    if kind not in PLOT_KINDS:
        raise one_of("plot kind", kind, PLOT_KINDS)
    if class_names is not None and len(class_names) != counts.shape[1]:
        raise FedlibError(f"class_names has {len(class_names)} names for {counts.shape[1]} "
                          "classes; pass one name per class")
    import matplotlib.pyplot as plt  # imported here so that partitioning never loads matplotlib

    if ax is None:
        _, ax = plt.subplots(figsize=(max(4.0, 0.45 * counts.shape[0] + 2), 4.5))
    draw = _bubble if kind == "bubble" else _heatmap
    draw(ax, counts, class_names, annotate)
    ax.set_xlabel("client")
    ax.set_ylabel("class")
    if title:
        ax.set_title(title)
    return ax


def _plot_counts(partition_or_counts) -> np.ndarray:
    if isinstance(partition_or_counts, Partition):
        return partition_or_counts.counts
    counts = np.asarray(partition_or_counts)
    if counts.ndim != 2 or counts.size == 0 or (counts < 0).any():
        raise FedlibError("plot_partition needs a Partition or a non-negative "
                          f"(clients x classes) count array, got shape {counts.shape}")
    return counts


def _bubble(ax, counts, class_names, annotate) -> None:
    clients, classes = np.nonzero(counts)
    values = counts[clients, classes]
    areas = 900.0 * values / max(counts.max(), 1)  # marker size is an area in points^2
    ax.scatter(clients, classes, s=areas, alpha=0.6, color="tab:blue", edgecolors="navy")
    if annotate:
        for x, y, value in zip(clients, classes, values):
            ax.annotate(str(value), (x, y), ha="center", va="center", fontsize=7)
    num_clients, num_classes = counts.shape
    ax.set_xlim(-0.7, num_clients - 0.3)
    ax.set_ylim(num_classes - 0.3, -0.7)  # class 0 on top, as in a table
    if num_clients <= 40:
        ax.set_xticks(range(num_clients))
    if class_names is not None or num_classes <= 40:
        ax.set_yticks(range(num_classes))
    if class_names is not None:
        ax.set_yticklabels(class_names)


def _heatmap(ax, counts, class_names, annotate) -> None:
    import seaborn as sns

    fmt = "d" if np.issubdtype(counts.dtype, np.integer) else ".3g"
    sns.heatmap(counts.T, ax=ax, cmap="Blues", annot=annotate, fmt=fmt,
                yticklabels=class_names if class_names is not None else "auto",
                cbar_kws={"label": "samples"})
