"""One figure style for every notebook, and the plot types the papers use.

Every function draws on a given (or new) matplotlib Axes and returns it; :func:`save_figure`
writes PNG and PDF side by side into ``figures/``, with a provenance stamp under the figure
(profile, data scale, seeds: :func:`provenance`). Titles and legends show names in words
(:func:`display_name`: "Fashion-MNIST, LeNet-5", not "fashion_mnist, lenet5"); legends sit
outside the axes (or below a row of panels: :func:`shared_legend`) so they never cover data.
Figures are made to be shown on a slide: bars fitted to their values with each value written
(:func:`value_bars`, :func:`zoom_to_values`, which says when an axis does not start at 0), whole
numbers on round axes (:func:`round_ticks`), panels laid out near 16:9 (:func:`panel_grid`,
:func:`slide_figsize`) and every saved figure between 4:3 and 2:1 (:func:`fit_to_slide`).

At about 700 lines it stays one module: the house style and every shared plot helper are one
concept, the figures' look, and a notebook imports one name for it.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from fedlib.errors import FedlibError
from fedlib.reporting.notebook import shown_path
from fedlib.reporting.settings import PARTITION_NAMES, partition_words

PALETTE = "colorblind"
# One colour per method in a figure of several methods: hues told apart at a glance (no two
# oranges) and never the grey that backgrounds and shadings use.
DISTINCT_COLOURS = ("#0173b2", "#d55e00", "#029e73", "#cc78bc", "#56b4e9", "#000000", "#e6ab02", "#8c564b",
                    "#7570b3", "#999933")

# Identifiers (datasets, models, methods, partitions) as a reader writes them; one flat table,
# since the four namespaces share no key. Unknown identifiers are shown unchanged.
DISPLAY_NAMES: dict[str, str] = {
    # datasets
    "mnist": "MNIST", "fashion_mnist": "Fashion-MNIST", "cifar10": "CIFAR-10", "cifar100": "CIFAR-100",
    "tinyimagenet": "Tiny-ImageNet", "cinic10": "CINIC-10", "femnist": "FEMNIST",
    "office_caltech10": "Office-Caltech-10", "digits": "scikit-learn digits", "synthetic": "synthetic data",
    # models
    "mlp": "MLP", "lenet5": "LeNet-5", "lenet5_classic": "LeNet-5 (tanh, avg-pool)", "simple_cnn": "simple CNN", "cnn2": "2-conv CNN",
    "convnet_s": "ConvNet-S", "vgg9": "VGG-9", "resnet8": "ResNet-8", "resnet32": "ResNet-32",
    "resnet56": "ResNet-56", "resnet18": "ResNet-18", "resnet18_imagenet": "ResNet-18 (ImageNet stem)",
    "resnet50": "ResNet-50", "mobilenetv2": "MobileNetV2", "alexnet": "AlexNet",
    # methods
    "fedavg": "FedAvg", "fedprox": "FedProx", "fedavgm": "FedAvgM", "scaffold": "SCAFFOLD",
    "moon": "MOON", "fednova": "FedNova", "fedntd": "FedNTD", "fedrs": "FedRS", "fedlc": "FedLC",
    "fedvls": "FedVLS", "feded": "FedED", "fedlmd": "FedLMD", "fedlmd_tf": "FedLMD-Tf",
    "fedcsd": "FedCSD", "pkd": "PKD", "fedkd": "FedKD", "fedgkd": "FedGKD", "fedproto": "FedProto",
    "fedsam": "FedSAM", "fedexp": "FedExP", "fedcurv": "FedCurv", "fedmr": "FedMR", "fedgf": "FedGF",
    "fedconcat": "FedConcat", "fedcodl": "FedCoDL", "fedavg_kd": "FedAvg + KD",
    "feature_kd": "feature KD", "fedavg_feature_kd": "FedAvg + feature KD", "focal": "focal loss",
    "focal_loss": "focal loss", "label_smoothing": "label smoothing",
    **PARTITION_NAMES,
    # augmentation presets
    "crop_flip": "crop + flip", "crop_flip_cutout": "crop + flip + Cutout", "reflect_crop_flip": "reflect crop + flip",
    "crop_flip_autoaugment": "crop + flip + AutoAugment", "autoaugment": "AutoAugment",
}


def display_name(identifier) -> str:
    """``identifier`` in words (``"fashion_mnist"`` -> ``"Fashion-MNIST"``); composed methods
    (``"fedlmd+fedprox"``) name each part; anything unknown comes back unchanged."""
    text = str(identifier)
    if re.fullmatch(r"\w+(\+\w+)+", text):
        return " + ".join(display_name(part) for part in text.split("+"))
    return DISPLAY_NAMES.get(text, text)


def display_names(*identifiers, sep: str = ", ") -> str:
    """Several identifiers in words, joined: ``display_names("cifar10", "cnn2")`` ->
    ``"CIFAR-10, 2-conv CNN"`` (the usual figure title)."""
    return sep.join(display_name(i) for i in identifiers)


def partition_label(cfg) -> str:
    """A run's label partition in words: ``Dir(β=0.5)``, ``quantity skew, 2 classes per client``, ``IID``
    (:func:`fedlib.reporting.settings.partition_words`)."""
    return partition_words(cfg.partition, beta=cfg.beta, shards_per_client=cfg.shards_per_client,
                           classes_per_client=cfg.classes_per_client)


# ---------------------------------------------------------------- provenance stamp
SPLIT_WORDS = {"holdout_10": "90 % of the train set, tested on the held-out 10 %",
               "pooled_75_25": "train + test pooled, 75/25 split",
               "pooled_75_25_train_eval": "train + test pooled, 75 % trained and tested on"}


def data_scale(cfg) -> str:
    """How much of its dataset a run used: ``"2,000 train images"``, ``"3,000 train / 1,000 test
    images"`` or ``"full data"``; a re-split dataset (``dataset_options["split"]``) says how."""
    split = (getattr(cfg, "dataset_options", None) or {}).get("split", "standard")
    scale = _subset_scale(cfg)
    if split == "standard":
        return scale
    words = SPLIT_WORDS.get(split, f"split {split}")
    return words if scale == "full data" else f"{words}, {scale}"


def _subset_scale(cfg) -> str:
    train, test = cfg.max_train_samples, cfg.max_test_samples
    if train and test:
        return f"{train:,} train / {test:,} test images"
    if train:
        return f"{train:,} train images"
    if test:
        return f"full train set, {test:,} test images"
    return "full data"


def _seeds_text(seeds: Sequence[int]) -> str:
    seeds = sorted(set(seeds))
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    if len(seeds) > 3 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"seeds {seeds[0]}-{seeds[-1]}"
    return "seeds " + ", ".join(str(s) for s in seeds)


def provenance(profile: str | None, runs: Sequence = ()) -> str:
    """The stamp :func:`save_figure` puts under a figure: profile, dataset and data scale, seeds.

    ``runs``: the RunConfigs (or RunResults, anything with ``.config``) behind the figure, e.g.
    ``"profile quick · CIFAR-10, 3,000 train / 1,000 test images · seed 0"``. A run edited away
    from its profile (``profile`` an :class:`~fedlib.reporting.edited_runs.EditedProfile`, as
    ``apply_profile`` gives it) names the edits: ``"profile lesson, edited: beta=0.5 · ..."``.
    """
    configs = [getattr(run, "config", run) for run in runs  # a not-run placeholder is behind no figure
               if not getattr(run, "summary", {}).get("not_run")]
    scales = dict.fromkeys(f"{display_name(c.dataset)}, {data_scale(c)}" for c in configs)
    per_cell = Counter(c.replace(seed=0).hash() for c in configs)
    seeds = _seeds_text([c.seed for c in configs]) if configs else ""
    if len(set(per_cell.values())) > 1:
        seeds += f" ({min(per_cell.values())} to {max(per_cell.values())} per cell)"
    named = profile.label() if getattr(profile, "edits", None) else profile
    parts = [f"profile {named}" if profile else "", "; ".join(scales), seeds]
    return " · ".join(part for part in parts if part)


def _renderer(fig):
    """A renderer to measure ``fig``'s artists with (the Agg canvas every backend here uses)."""
    canvas = fig.canvas
    if not hasattr(canvas, "get_renderer"):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        canvas = FigureCanvasAgg(fig)
    return canvas.get_renderer()


def stamp_figure(fig, text: str):
    """Write ``text`` small and grey under the bottom-right corner of everything ``fig`` draws
    (axes, tick labels, figure legends), replacing an earlier stamp; returns the Text artist."""
    from matplotlib.transforms import offset_copy

    earlier = getattr(fig, "_fedlib_stamp", None)
    if earlier is not None and earlier.figure is fig:
        earlier.remove()
    box = fig.get_tightbbox(_renderer(fig))  # inches
    width, height = fig.get_size_inches()
    below = offset_copy(fig.transFigure, fig=fig, y=-4, units="points")
    fig._fedlib_stamp = fig.text(box.x1 / width, box.y0 / height, text, transform=below,
                                 ha="right", va="top", fontsize=6.5, color="0.4")
    return fig._fedlib_stamp


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


# ---------------------------------------------------------------- shapes and axes that work on a slide
SLIDE_RATIO = 16 / 9  # a slide's width : height; a figure aims at about 4:3 to 2:1
WIDEST = 2.0  # a figure wider than this (width : height) leaves most of a slide empty


def slide_figsize(rows: int, columns: int, width: float, height: float, grow: float = 1.4) -> tuple[float, float]:
    """The figsize of ``rows`` x ``columns`` panels of ``width`` x ``height`` inches, each panel made
    taller (up to ``grow`` times) where the figure would otherwise be wider than :data:`WIDEST`:1
    (a strip of panels that a slide shows as a thin band)."""
    wanted = width * columns / (WIDEST * rows)
    return width * columns, rows * min(max(height, wanted), height * grow)


def panel_grid(count: int, columns: int = 3, width: float = 4.6, height: float = 3.6) -> tuple[int, int, tuple]:
    """``(rows, columns, figsize)`` for ``count`` panels, at most ``columns`` a row: the layout whose
    figure (:func:`slide_figsize`) comes nearest a 16:9 slide, an empty slot counting against it
    (four panels: two rows of two, not a 4:1 strip, nor 3 + 1); on a tie the one with fewer rows."""
    best = None
    for across in range(min(columns, count), 0, -1):
        down = -(-count // across)
        size = slide_figsize(down, across, width, height)
        distance = abs(np.log(size[0] / size[1] / SLIDE_RATIO)) + 0.15 * (down * across - count)
        if best is None or distance < best[0] - 1e-9:
            best = (distance, down, across, size)
    return best[1], best[2], best[3]


NARROWEST = 4 / 3  # a figure narrower than this (width : height) leaves a slide's sides empty
SAVE_PAD = 0.1  # inches savefig's tight bbox adds around the drawing (matplotlib's savefig.pad_inches)


def saved_aspect(fig) -> float:
    """``fig``'s width : height as :func:`save_figure` writes it: its tight bounding box (axes,
    titles, legends outside the axes, the stamp) with savefig's padding, not its figsize."""
    box = fig.get_tightbbox(_renderer(fig))
    return (box.width + 2 * SAVE_PAD) / (box.height + 2 * SAVE_PAD)


def fit_to_slide(fig, tries: int = 6) -> float:
    """Make ``fig`` as saved (:func:`saved_aspect`) no wider than :data:`WIDEST`:1 and no narrower
    than :data:`NARROWEST`:1, by growing the figure: taller where it is too wide (its panels get
    the room, a strip of panels stops being a thin band), wider where it is too narrow. After each
    step the panels are laid out again (``tight_layout``), a legend :func:`shared_legend` put below
    them moves back under them and the stamp back under the corner. A figure already in the range
    is left as it is. Returns the saved aspect it ends at."""
    ratio = saved_aspect(fig)
    for _ in range(tries):
        if NARROWEST <= ratio <= WIDEST:
            break
        width, height = fig.get_size_inches()
        if ratio > WIDEST:  # aim a little inside the range: text does not grow with the figure
            fig.set_size_inches(width, height * ratio / (0.96 * WIDEST))
        else:
            fig.set_size_inches(width * 1.04 * NARROWEST / ratio, height)
        _lay_out_again(fig)
        ratio = saved_aspect(fig)
    return ratio


def _lay_out_again(fig) -> None:
    """Lay ``fig``'s panels out for its new size: ``tight_layout``, then the shared legend back
    under the panels and the stamp back under the corner (both placed for the old size)."""
    import warnings

    stamp = getattr(fig, "_fedlib_stamp", None)
    stamp = stamp if stamp is not None and stamp.figure is fig else None
    if stamp is not None:  # measured without it: it is placed again below
        stamp.set_visible(False)
    with warnings.catch_warnings():  # e.g. a colour bar's axes, which tight_layout leaves in place
        warnings.simplefilter("ignore", UserWarning)
        fig.tight_layout()
    shared = getattr(fig, "_fedlib_shared_legend", None)
    if shared is not None and shared[0].figure is fig:
        legend, axes = shared
        renderer = _renderer(fig)
        bottom = min(ax.get_tightbbox(renderer).y0 for ax in axes) / fig.bbox.height
        legend.set_bbox_to_anchor((0.5, bottom), transform=fig.transFigure)
    if stamp is not None:
        stamp_figure(fig, stamp.get_text())


def round_ticks(ax, axis: str = "x"):
    """Whole-number ticks on ``ax``'s round (or epoch) axis: never a round 2.5. Returns ``ax``."""
    from matplotlib.ticker import MaxNLocator

    getattr(ax, f"{axis}axis").set_major_locator(MaxNLocator(integer=True))
    return ax


CUT_NOTE = "axis starts at {bottom:g}, not 0"
KEEP_ZERO = 0.5  # the value axis keeps 0 unless the bars would fill less than half of it


def zoom_to_values(ax, values, label_room: float = 0.12) -> bool:
    """Fit ``ax``'s value (y) axis to the bars' ``values`` (in the axis's units), so that 92.5 and
    94.1 look different; returns whether the axis no longer starts at 0.

    The axis starts a margin (a quarter of the spread, at least 2 % of the largest value) under the
    lowest value, at a round number, and ends ``label_room`` of its span above the highest, room
    for the values written on the bars (:func:`label_bars`). It keeps 0 when zooming would gain
    little (:data:`KEEP_ZERO`) or a value is negative. A cut axis says so: its label gains "axis starts at 90, not 0" and its spine a
    break mark. Axes sharing y (``sharey``) are fitted to the values of all of them together.
    """
    ax._fedlib_bar_values = np.concatenate([getattr(ax, "_fedlib_bar_values", np.empty(0)),
                                            np.asarray(values, dtype=float).ravel()])
    siblings = [a for a in ax.get_shared_y_axes().get_siblings(ax) if hasattr(a, "_fedlib_bar_values")]
    every = np.concatenate([a._fedlib_bar_values for a in siblings])
    every = every[np.isfinite(every)]
    if not every.size:
        return False
    low, high = float(every.min()), float(every.max())
    margin = max(0.25 * (high - low), 0.02 * abs(high)) or 1.0  # all bars at 0: one unit of air
    bottom = low - margin if low < 0 else 0.0
    cut = low > 0 and low - margin > KEEP_ZERO * high
    if cut:
        from matplotlib.ticker import MaxNLocator

        ticks = MaxNLocator(nbins=4, steps=[1, 2, 5, 10]).tick_values(low - margin, high)
        bottom = float(max(t for t in ticks if t <= low - margin))  # a round number under the lowest bar
    span = (high - bottom) or margin
    ax.set_ylim(bottom, high + (0.04 + label_room) * span)
    for each in siblings:
        _show_cut(each, bottom if cut else None)
    return cut


def _show_cut(ax, bottom: float | None) -> None:
    """Say on ``ax`` that its value axis starts at ``bottom``, not 0 (None: it starts at 0): a line
    under the axis label and a break mark on the spine; replaces what an earlier call said."""
    base = ax.__dict__.setdefault("_fedlib_ylabel", ax.get_ylabel())
    for mark in getattr(ax, "_fedlib_cut_marks", []):
        mark.remove()
    ax._fedlib_cut_marks = []
    if bottom is None:
        ax.set_ylabel(base)
        return
    note = CUT_NOTE.format(bottom=bottom)
    ax.set_ylabel(f"{base}\n({note})" if base else f"({note})")
    for y in (0.025, 0.055):  # two slanted strokes across the spine: //
        ax._fedlib_cut_marks += ax.plot([0], [y], transform=ax.transAxes, marker=[(-1, -0.5), (1, 0.5)],
                                        markersize=7, linestyle="none", color="0.2", mew=1, clip_on=False)


def label_bars(ax, bars, fmt: str = "{:.1f}", rotation: float = 0, fontsize="x-small"):
    """Write each bar's value at its end (``bars``: what ``ax.bar`` returned); a bar without a
    value (NaN) gets none. Returns the labels."""
    labels = ["" if not np.isfinite(value) else fmt.format(value) for value in bars.datavalues]
    return ax.bar_label(bars, labels=labels, padding=2, rotation=rotation, fontsize=fontsize)


def value_bars(values: dict, ax=None, ylabel: str = "best test accuracy (%)", title: str | None = None,
               colours: Sequence | None = None, errors: Sequence[float] | None = None, fmt: str = "{:.1f}"):
    """One bar per entry of ``values`` (label -> value as shown, e.g. a best accuracy in %), each
    value written on its bar, the value axis fitted to the values (:func:`zoom_to_values`: it says
    when it does not start at 0). ``errors``: a ± bar each (e.g. one standard deviation)."""
    ax = _axes(ax, figsize=(5.0, 3.4))
    heights = np.asarray(list(values.values()), dtype=float)
    colours = colours or [DISTINCT_COLOURS[i % len(DISTINCT_COLOURS)] for i in range(len(heights))]
    spread = np.zeros_like(heights) if errors is None else np.nan_to_num(np.asarray(errors, dtype=float))
    bars = ax.bar([display_name(label) for label in values], heights, color=colours, zorder=2,
                  yerr=None if errors is None else spread, capsize=3)
    ax.set_ylabel(ylabel)
    zoom_to_values(ax, np.concatenate([heights - spread, heights + spread]))
    label_bars(ax, bars, fmt)
    if title:
        ax.set_title(title)
    return ax


class SavedFiles(list):
    """The paths a save wrote; a notebook cell ending in a save shows them as one plain line."""

    def __repr__(self) -> str:
        return "saved " + ", ".join(str(path) for path in self)


def save_figure(fig, name: str, figures_dir: str | Path = "figures", *, profile: str | None = None,
                runs: Sequence = (), stamp: str | None = None, fit: bool = True) -> SavedFiles:
    """Save ``fig`` as ``<figures_dir>/<name>.png`` and ``.pdf``; returns both paths (relative to
    the working folder inside the repository: :func:`fedlib.reporting.notebook.shown_path`).

    ``profile`` and ``runs`` (the RunConfigs or RunResults behind the figure) stamp it with its
    provenance (:func:`provenance`); ``stamp`` gives the stamp's text directly. ``fit``: first
    bring the figure as saved within 4:3 to 2:1 (:func:`fit_to_slide`), a shape a slide shows whole.
    """
    text = stamp or (provenance(profile, runs) if profile or runs else None)
    if text:
        stamp_figure(fig, text)
    if fit:
        fit_to_slide(fig)
    folder = Path(figures_dir)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{name}.png", folder / f"{name}.pdf"]
    for path in paths:
        fig.savefig(path, bbox_inches="tight")  # tight: the stamp and outside legends are kept
    return SavedFiles(shown_path(path) for path in paths)


# ---------------------------------------------------------------- legends that cover no data
BELOW_AXIS_POINTS = 38  # a legend "below" its axes starts this far under them: past the tick labels and axis label


def place_legend(ax, where: str | None = "outside", **kwargs):
    """Put ``ax``'s legend ``"outside"`` (right of the axes, top-aligned: never over data),
    ``"below"`` (centred under the axes' tick labels and axis label, one line of each: a panel
    whose long labels beside it would squeeze a row of panels), ``"best"`` (matplotlib's
    least-covering spot inside) or nowhere (None); returns it."""
    if where is None or not ax.get_legend_handles_labels()[0]:
        return None
    options = {"frameon": False, "fontsize": "small", **kwargs}
    if where == "outside":
        options = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0, **options}
    elif where == "below":  # placed in points under the axes: it stays clear of them as the figure grows
        from matplotlib.transforms import offset_copy

        under = offset_copy(ax.transAxes, fig=ax.figure, y=-BELOW_AXIS_POINTS, units="points")
        options = {"loc": "upper center", "bbox_to_anchor": (0.5, 0.0), "bbox_transform": under,
                   "borderaxespad": 0.0, **options}
    else:
        options = {"loc": where, **options}
    return ax.legend(**options)


def shared_legend(fig, axes=None, ncol: int | None = None, tight_layout: bool = True, **kwargs):
    """One legend for a figure of panels, centred below all of them, in place of the panels' own.

    Collects every labelled artist of ``axes`` (default: all of ``fig``'s), once per label,
    removes the panels' legends and (``tight_layout``) lays the panels out again without them.
    Call it last, after any ``fig.tight_layout()``, which ignores figure legends. Returns the
    legend (None when nothing is labelled).
    """
    axes = [ax for ax in np.ravel(fig.axes if axes is None else axes) if ax.get_visible()]
    handles: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if not label.startswith("_"):
                handles.setdefault(label, handle)
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    if not handles:
        return None
    if tight_layout:
        fig.tight_layout()
    renderer = _renderer(fig)
    bottom = min(ax.get_tightbbox(renderer).y0 for ax in axes) / fig.bbox.height
    options = {"loc": "upper center", "bbox_to_anchor": (0.5, bottom), "frameon": False,
               "fontsize": "small", "ncol": ncol or min(len(handles), 6), **kwargs}
    legend = fig.legend(list(handles.values()), list(handles), **options)
    if "bbox_to_anchor" not in kwargs:  # under the panels: fit_to_slide moves it along with them
        fig._fedlib_shared_legend = (legend, axes)
    return legend


def accuracy_curves(curves: dict[str, Sequence[float]], ax=None, rounds: Sequence[int] | None = None,
                    ylabel: str = "test accuracy (%)", title: str | None = None, std: dict | None = None,
                    legend: str | None = "outside"):
    """One line per method: accuracy (fractions, shown in %) against the round.

    Labels are shown in words (method ids through :func:`display_name`); ``legend`` is
    :func:`place_legend`'s ``where``; the round axis has whole-number ticks (:func:`round_ticks`).
    """
    ax = _axes(ax)
    for label, values in curves.items():
        values = np.asarray(values, dtype=float) * 100
        x = np.asarray(rounds if rounds is not None else np.arange(1, len(values) + 1))[: len(values)]
        line, = ax.plot(x, values, label=display_name(label), lw=1.6)
        if std and label in std:
            spread = np.asarray(std[label], dtype=float) * 100
            ax.fill_between(x, values - spread, values + spread, color=line.get_color(), alpha=0.2)
    ax.set_xlabel("communication round")
    round_ticks(ax)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    place_legend(ax, legend)
    return ax


def curve_panels(results, key: str = "accuracy", ylabel: str = "test accuracy (%)", columns: int = 3):
    """One panel per (dataset, partition setting) of ``results`` that holds stored rounds, one
    line per method: ``key`` against the round, the mean over its seeds with a band of one
    standard deviation where it has several (a seed that stopped early, e.g. diverged, counts in
    the rounds it has); runs without rounds (not run) are left out. Each method keeps its colour in
    every panel and has one legend entry; each panel's title says how many seeds each line
    averages. Titles and labels are in words; one legend below the panels. Returns the figure,
    or None when no run has rounds."""
    import matplotlib.pyplot as plt

    panels: dict[str, dict[str, list]] = {}
    for result in results:
        rows = [r for r in result.rounds if key in r]
        if rows:
            title = f"{display_name(result.config.dataset)}, {partition_label(result.config)}"
            curve = pd.Series([r[key] for r in rows], index=[r["round"] + 1 for r in rows])
            panels.setdefault(title, {}).setdefault(result.config.method, []).append(curve)
    if not panels:
        return None
    methods = list(dict.fromkeys(m for lines in panels.values() for m in lines))
    count = len(panels)
    height, width, figsize = panel_grid(count, columns)
    fig, axes = plt.subplots(height, width, figsize=figsize, squeeze=False)
    for ax, (title, lines) in zip(axes.flat, panels.items()):
        for method, curves in lines.items():
            seeds = pd.concat(curves, axis=1) * 100
            mean, colour = seeds.mean(axis=1), method_colour(method, methods)
            ax.plot(mean.index, mean.values, label=display_name(method), color=colour, lw=1.4,
                    linestyle=method_line_style(method, methods))
            if len(curves) > 1:
                spread = seeds.std(axis=1, ddof=0)
                ax.fill_between(mean.index, mean - spread, mean + spread, color=colour, alpha=0.15, lw=0)
        ax.set_title(f"{title}\n{seed_note({m: len(c) for m, c in lines.items()})}")
        ax.set_xlabel("communication round")
        round_ticks(ax)
        ax.set_ylabel(ylabel)
    for ax in list(axes.flat)[count:]:
        ax.set_visible(False)
    shared_legend(fig)
    return fig


# What tells a table's rows apart (the rest of a config that varies tells its columns apart);
# what never does (where a run happened, and its seed, which the lines average over).
ROW_FIELDS = ("method", "method_args", "augmentation")
UNCOMPARED_FIELDS = ("seed", "device", "data_dir", "results_dir", "download", "backend", "channels_last")
TABLE_METRICS = {"accuracy": "test accuracy (%)", "worst_class": "worst class accuracy (%)"}


def table_curves(results, metric: str = "accuracy", columns: int = 3):
    """The runs behind a table, per round: one panel per column setting (every config field that
    varies over ``results`` other than the row's method, its arguments and augmentation), one line
    per row (mean over its seeds, band of one std), one colour per row in every panel; each panel's
    title says how many seeds each line averages. ``metric``: ``"accuracy"`` or ``"worst_class"``
    (the lowest class accuracy of each round). Runs without stored rounds are left out; returns
    None when none has any."""
    import matplotlib.pyplot as plt

    if metric not in TABLE_METRICS:
        raise FedlibError(f"metric {metric!r} is not one of {', '.join(TABLE_METRICS)}")
    curves = [(r.config, _metric_curve(r, metric)) for r in results]
    curves = [(cfg, curve) for cfg, curve in curves if curve is not None]
    if not curves:
        return None
    varying = _varying_fields([cfg for cfg, _ in curves])
    titled = [(_column_title(cfg, [f for f in varying if f not in ROW_FIELDS]), cfg, curve) for cfg, curve in curves]
    arguments = _varying_arguments(titled)
    panels: dict[str, dict[str, list]] = {}
    for title, cfg, curve in titled:
        label = _row_label(cfg, "augmentation" in varying, arguments.get(cfg.method, ()))
        panels.setdefault(title, {}).setdefault(label, []).append((cfg.seed, curve))
    rows = list(dict.fromkeys(label for lines in panels.values() for label in lines))
    height, width, figsize = panel_grid(len(panels), columns)
    fig, axes = plt.subplots(height, width, figsize=figsize, squeeze=False)
    for ax, (title, lines) in zip(axes.flat, panels.items()):
        for label, seeds in lines.items():
            frame = pd.concat([curve for _, curve in seeds], axis=1) * 100
            mean, colour = frame.mean(axis=1), method_colour(label, rows)
            ax.plot(mean.index, mean.values, label=label, color=colour, lw=1.4,
                    linestyle=method_line_style(label, rows))
            if len(seeds) > 1:
                spread = frame.std(axis=1, ddof=0)
                ax.fill_between(mean.index, mean - spread, mean + spread, color=colour, alpha=0.15, lw=0)
        counts = {label: len({seed for seed, _ in seeds}) for label, seeds in lines.items()}
        ax.set_title(f"{title}\n{seed_note(counts)}")
        ax.set_xlabel("communication round")
        round_ticks(ax)
        ax.set_ylabel(TABLE_METRICS[metric])
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    shared_legend(fig, ncol=max(1, min(len(rows), 6, 120 // max(len(label) for label in rows))))  # long labels: fewer columns
    return fig


def _metric_curve(result, metric: str) -> pd.Series | None:
    """``metric`` of ``result`` per round (rounds counted from 1), or None without stored rounds."""
    rows = [r for r in getattr(result, "rounds", None) or []
            if ("accuracy" in r if metric == "accuracy" else r.get("class_accuracy"))]
    if not rows:
        return None
    values = [r["accuracy"] if metric == "accuracy" else min(r["class_accuracy"]) for r in rows]
    return pd.Series(values, index=[r["round"] + 1 for r in rows])


def _varying_fields(configs) -> list[str]:
    """The config fields whose value differs between ``configs`` (seed and location fields aside)."""
    records = [cfg.to_dict() for cfg in configs]
    return [name for name in records[0] if name not in UNCOMPARED_FIELDS
            and len({repr(record[name]) for record in records}) > 1]


PARTITION_FIELDS = ("partition", "beta", "shards_per_client", "classes_per_client", "quantity_split")


def _column_title(cfg, fields: Sequence[str]) -> str:
    """A table column in words: the dataset and partition, then any other field that varies."""
    parts = [display_name(cfg.dataset), partition_label(cfg)]
    if "model" in fields:
        parts.append(display_name(cfg.model))
    parts += [f"{name.replace('_', ' ')} {getattr(cfg, name)}" for name in fields
              if name not in ("dataset", "model", *PARTITION_FIELDS)]
    return ", ".join(parts)


def _varying_arguments(titled) -> dict[str, list[str]]:
    """Method -> the arguments that tell two of its rows apart in one panel (``titled``: (panel
    title, config, curve) triples); an argument that changes only from panel to panel, such as a
    per-dataset default, names no row, so a method keeps one legend entry."""
    by_panel: dict[tuple[str, str], list[dict]] = {}
    for title, cfg, _ in titled:
        by_panel.setdefault((title, cfg.method), []).append(cfg.resolved_method_args())
    arguments: dict[str, set[str]] = {}
    for (_, method), args in by_panel.items():
        keys = {k for a in args for k in a if len({repr(b.get(k)) for b in args}) > 1}
        arguments.setdefault(method, set()).update(keys)
    return {method: sorted(keys) for method, keys in arguments.items()}


def _row_label(cfg, augmentation: bool, arguments: Sequence[str]) -> str:
    """A table row in words: the method, with the arguments (and augmentation) its rows differ in."""
    label = display_name(cfg.method)
    if arguments:
        resolved = cfg.resolved_method_args()
        label += " (" + ", ".join(f"{k} {resolved.get(k)}" for k in arguments) + ")"
    if augmentation and cfg.augmentation != "auto":  # the dataset's default preset goes unnamed
        label += f", {display_name(cfg.augmentation)}"
    return label


LINE_STYLES = ("-", "--", ":")  # once the colours run out: the 11th method is dashed, the 21st dotted


def method_colour(method: str, methods: Sequence[str]) -> str:
    """``method``'s colour among ``methods`` (the figure's, in order): one of :data:`DISTINCT_COLOURS`."""
    return DISTINCT_COLOURS[list(methods).index(method) % len(DISTINCT_COLOURS)]


def method_line_style(method: str, methods: Sequence[str]) -> str:
    """``method``'s line style among ``methods``: solid for the first :data:`DISTINCT_COLOURS`,
    then dashed, so that two methods that share a colour never share a line."""
    return LINE_STYLES[list(methods).index(method) // len(DISTINCT_COLOURS) % len(LINE_STYLES)]


def seed_note(counts: dict[str, int]) -> str:
    """How many seeds each method's line averages, in few words: ``"3 seeds each"``, or the most
    common count and the exceptions, ``"3 seeds; 1: FedProx, FedLC"``."""
    common = Counter(counts.values()).most_common(1)[0][0]
    plural = lambda n: f"{n} seed{'s' if n != 1 else ''}"  # noqa: E731
    others = {}
    for method, n in counts.items():
        if n != common:
            others.setdefault(n, []).append(display_name(method))
    if not others:
        return f"{plural(common)} each" if len(counts) > 1 else plural(common)
    return "; ".join([plural(common), *(f"{n}: {', '.join(names)}" for n, names in sorted(others.items()))])


# Shadings behind class-wise bars: a hatched grey and a pale yellow, told apart in colour, in
# grey-scale print and from the bars' own palette colours (blue, orange, green).
CLASS_SHADES = {"vacant": {"facecolor": "0.82", "hatch": "///", "edgecolor": "0.55"},
                "minority": {"facecolor": "#f3e38a"}, "majority": {"facecolor": "#cfe8cf"}}


VALUES_WRITTEN_UP_TO = 24  # bars in one panel that still have room for their values written on them


def class_accuracy_bars(series: dict[str, Sequence[float]], class_names: Sequence[str], ax=None,
                        marks: dict[str, Sequence[int]] | None = None, title: str | None = None,
                        legend: str | None = "outside", values: bool | None = None):
    """Grouped bars of class-wise accuracy (%), one group per class, one bar per series.

    ``marks`` maps a label ("vacant", "minority", "majority") to class indices shaded behind the
    bars (:data:`CLASS_SHADES`); ``legend`` is :func:`place_legend`'s ``where``. The value axis is
    fitted to the accuracies (:func:`zoom_to_values`, which says when it does not start at 0);
    ``values``: write each bar's value on it (None: when the panel has at most
    :data:`VALUES_WRITTEN_UP_TO` bars).
    """
    ax = _axes(ax, figsize=(6.4, 3.2))
    names = list(series)
    width = 0.8 / max(1, len(names))
    x = np.arange(len(class_names))
    for label, classes in (marks or {}).items():
        shade = CLASS_SHADES.get(label, {"facecolor": "0.9"})
        for i, c in enumerate(classes):
            ax.axvspan(c - 0.45, c + 0.45, lw=0, zorder=0, label=f"{label} class" if i == 0 else None, **shade)
    drawn = [ax.bar(x + (i - (len(names) - 1) / 2) * width, np.asarray(series[name], dtype=float) * 100, width,
                    label=display_name(name), zorder=2) for i, name in enumerate(names)]
    ax.set_xticks(x, class_names, rotation=45, ha="right")
    ax.set_ylabel("class accuracy (%)")
    count = len(names) * len(class_names)
    write = count <= VALUES_WRITTEN_UP_TO if values is None else values
    zoom_to_values(ax, np.concatenate([bars.datavalues for bars in drawn]) if drawn else [],
                   label_room=0.16 if write else 0.02)
    for bars in drawn if write else ():
        label_bars(ax, bars, rotation=90 if count > 8 else 0, fontsize=5.5 if count > 8 else "x-small")
    if title:
        ax.set_title(title)
    place_legend(ax, legend, fontsize="x-small")
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
                      title: str | None = None, legend: str | None = "outside"):
    """2-D scatter of a t-SNE embedding coloured by class; ``legend`` is :func:`place_legend`'s
    ``where`` (several panels: pass None and call :func:`shared_legend`)."""
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
    place_legend(ax, legend, fontsize="x-small", markerscale=3)
    return ax
