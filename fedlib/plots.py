"""One figure style for every notebook, and the plot types the papers use.

Every function draws on a given (or new) matplotlib Axes and returns it; :func:`save_figure`
writes PNG and PDF side by side into ``figures/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

PALETTE = "colorblind"


def use_style() -> None:
    """The project's figure style (seaborn whitegrid, colour-blind palette, compact fonts)."""
    import matplotlib as mpl
    import seaborn as sns

    sns.set_theme(style="whitegrid", palette=PALETTE, font_scale=0.9)
    mpl.rcParams.update({"figure.dpi": 110, "savefig.dpi": 160, "savefig.bbox": "tight",
                         "axes.spines.top": False, "axes.spines.right": False})


def _axes(ax=None, figsize=(5.0, 3.4)):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def save_figure(fig, name: str, figures_dir: str | Path = "figures") -> list[Path]:
    """Save ``fig`` as ``<figures_dir>/<name>.png`` and ``.pdf``; returns both paths."""
    folder = Path(figures_dir)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{name}.png", folder / f"{name}.pdf"]
    for path in paths:
        fig.savefig(path)
    return paths


def accuracy_curves(curves: dict[str, Sequence[float]], ax=None, rounds: Sequence[int] | None = None,
                    ylabel: str = "test accuracy (%)", title: str | None = None, std: dict | None = None):
    """One line per method: accuracy (fractions, shown in %) against the round."""
    ax = _axes(ax)
    for label, values in curves.items():
        values = np.asarray(values, dtype=float) * 100
        x = np.asarray(rounds if rounds is not None else np.arange(1, len(values) + 1))[: len(values)]
        line, = ax.plot(x, values, label=label, lw=1.6)
        if std and label in std:
            spread = np.asarray(std[label], dtype=float) * 100
            ax.fill_between(x, values - spread, values + spread, color=line.get_color(), alpha=0.2)
    ax.set_xlabel("communication round")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend(frameon=False, fontsize="small")
    return ax


def curve_panels(results, key: str = "accuracy", ylabel: str = "test accuracy (%)", columns: int = 3):
    """One panel per (dataset, partition setting) of ``results`` that holds stored rounds, one
    line per method: ``key`` against the round (runs without rounds, e.g. not run, are left out).
    Returns the figure, or None when no run has rounds."""
    import matplotlib.pyplot as plt

    panels: dict[str, dict[str, list]] = {}
    for result in results:
        rows = [r for r in result.rounds if key in r]
        if not rows:
            continue
        cfg = result.config
        title = f"{cfg.dataset}, {cfg.partition}" + (f" β={cfg.beta:g}" if cfg.partition == "dirichlet" else "")
        label = cfg.method if cfg.seed == 0 else f"{cfg.method} (seed {cfg.seed})"
        panels.setdefault(title, {})[label] = ([r["round"] + 1 for r in rows], [r[key] for r in rows])
    if not panels:
        return None
    count = len(panels)
    width = min(columns, count)
    height = -(-count // width)
    fig, axes = plt.subplots(height, width, figsize=(4.6 * width, 3.4 * height), squeeze=False)
    for ax, (title, lines) in zip(axes.flat, panels.items()):
        for label, (rounds, values) in lines.items():
            ax.plot(rounds, 100 * np.asarray(values, dtype=float), label=label, lw=1.4)
        ax.set_title(title)
        ax.set_xlabel("communication round")
        ax.set_ylabel(ylabel)
        ax.legend(frameon=False, fontsize="small")
    for ax in list(axes.flat)[count:]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def class_accuracy_bars(series: dict[str, Sequence[float]], class_names: Sequence[str], ax=None,
                        marks: dict[str, Sequence[int]] | None = None, title: str | None = None):
    """Grouped bars of class-wise accuracy (%), one group per class, one bar per series.

    ``marks`` maps a label ("vacant", "minority") to class indices shaded behind the bars.
    """
    ax = _axes(ax, figsize=(6.4, 3.2))
    names = list(series)
    width = 0.8 / max(1, len(names))
    x = np.arange(len(class_names))
    shades = {"vacant": "#d62728", "minority": "#ff7f0e", "majority": "#2ca02c"}
    for label, classes in (marks or {}).items():
        for i, c in enumerate(classes):
            ax.axvspan(c - 0.45, c + 0.45, color=shades.get(label, "grey"), alpha=0.12,
                       label=label if i == 0 else None, lw=0)
    for i, name in enumerate(names):
        ax.bar(x + (i - (len(names) - 1) / 2) * width, np.asarray(series[name]) * 100, width, label=name)
    ax.set_xticks(x, class_names, rotation=45, ha="right")
    ax.set_ylabel("class accuracy (%)")
    ax.set_ylim(0, 100)
    if title:
        ax.set_title(title)
    ax.legend(frameon=False, fontsize="x-small", ncol=2)
    return ax


def matrix_heatmap(matrix: np.ndarray, class_names: Sequence[str], ax=None, title: str | None = None,
                   fmt: str = ".2f", cmap: str = "Blues", annotate: bool = True, xlabel: str = "predicted",
                   ylabel: str = "true"):
    """A labelled heat map (confusion matrices, distance matrices, mean softmax outputs)."""
    import seaborn as sns

    ax = _axes(ax, figsize=(5.2, 4.4))
    sns.heatmap(matrix, annot=annotate, fmt=fmt, cmap=cmap, ax=ax, xticklabels=class_names,
                yticklabels=class_names, cbar=True, annot_kws={"fontsize": 6})
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return ax


def embedding_scatter(embedding: np.ndarray, labels: np.ndarray, class_names: Sequence[str], ax=None,
                      title: str | None = None):
    """2-D scatter of a t-SNE embedding coloured by class."""
    import seaborn as sns

    ax = _axes(ax, figsize=(4.6, 4.2))
    colours = sns.color_palette("tab10", n_colors=max(10, len(class_names)))
    for c, name in enumerate(class_names):
        mask = labels == c
        if mask.any():
            ax.scatter(embedding[mask, 0], embedding[mask, 1], s=4, color=colours[c], label=name, alpha=0.7)
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title)
    ax.legend(frameon=False, fontsize="xx-small", markerscale=3, loc="best")
    return ax
