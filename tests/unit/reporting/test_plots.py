"""fedlib.reporting.plots: the provenance stamp under every saved figure, names in words, legends that
cover no data, and class shadings told apart."""

from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402
from PIL import Image  # noqa: E402

from fedlib import models  # noqa: E402
from fedlib.core import registry  # noqa: E402
from fedlib.core.config import RunConfig  # noqa: E402
from fedlib.datasets import data, partition  # noqa: E402
from fedlib.errors import FedlibError  # noqa: E402
from fedlib.reporting import plots  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    plots.use_style()
    yield
    plt.close("all")


def subset_config(**changes) -> RunConfig:
    return RunConfig(dataset="fashion_mnist", model="lenet5", max_train_samples=2000, **changes)


# ------------------------------------------------------------------ stamp
def test_provenance_names_profile_data_scale_and_seeds():
    configs = [subset_config(seed=s) for s in (0, 1, 2)]
    assert plots.provenance("quick", configs) == "profile quick · Fashion-MNIST, 2,000 train images · seeds 0, 1, 2"
    full = RunConfig(dataset="cifar10", seed=0)
    assert plots.provenance("paper", [full]) == "profile paper · CIFAR-10, full data · seed 0"


def test_provenance_reads_results_and_mixed_scales():
    results = [SimpleNamespace(config=subset_config(seed=s, max_test_samples=1000)) for s in range(5)]
    text = plots.provenance("smoke", results + [RunConfig(dataset="digits", seed=0)])
    assert text == ("profile smoke · Fashion-MNIST, 2,000 train / 1,000 test images; "
                    "scikit-learn digits, full data · seeds 0-4 (1 to 5 per cell)")
    assert plots.data_scale(RunConfig(dataset="mnist", max_test_samples=500)) == "full train set, 500 test images"


def test_save_figure_stamps_below_everything_and_keeps_the_stamp_in_the_file(tmp_path):
    ax = plots.accuracy_curves({"fedavg": [0.1, 0.5, 0.6]})
    fig = ax.figure
    [plain_png, _] = plots.save_figure(fig, "plain", tmp_path)
    assert not [t for t in fig.texts if t.get_text().startswith("profile")], "no stamp without provenance"
    [stamped_png, pdf] = plots.save_figure(fig, "stamped", tmp_path, profile="quick", runs=[subset_config(seed=0)])
    stamps = [t.get_text() for t in fig.texts]
    assert stamps == ["profile quick · Fashion-MNIST, 2,000 train images · seed 0"]
    renderer = fig.canvas.get_renderer()
    stamp_box = fig.texts[0].get_window_extent(renderer)
    assert stamp_box.y1 <= ax.get_tightbbox(renderer).y0, "the stamp sits under the axes and their labels"
    height = {path.name: plt.imread(path).shape[0] for path in (plain_png, stamped_png)}
    assert height["stamped.png"] > height["plain.png"], "the saved file includes the stamp"
    assert pdf.stat().st_size > 0
    shown = repr(plots.save_figure(fig, "again", tmp_path))  # what a cell ending in the save displays
    assert shown == f"saved {tmp_path / 'again.png'}, {tmp_path / 'again.pdf'}" and "PosixPath" not in shown


def test_a_second_save_replaces_the_stamp():
    fig, _ = plt.subplots()
    plots.stamp_figure(fig, "first")
    plots.stamp_figure(fig, "second")
    assert [t.get_text() for t in fig.texts] == ["second"]


# ------------------------------------------------------------------ names in words
def test_display_names_in_words():
    assert plots.display_names("fashion_mnist", "lenet5") == "Fashion-MNIST, LeNet-5"
    assert plots.display_name("cifar10") == "CIFAR-10"
    assert plots.display_name("fedlmd+fedprox") == "FedLMD + FedProx"
    assert plots.display_name("CE + logit KD") == "CE + logit KD", "free text is left alone"
    assert plots.display_name("(a) global, FedAvg") == "(a) global, FedAvg"
    cfg = RunConfig(dataset="mnist", partition="dirichlet", beta=0.05)
    assert plots.partition_label(cfg) == "Dir(β=0.05)"
    assert plots.partition_label(cfg.replace(partition="quantity", classes_per_client=2)) == \
        "quantity skew, 2 classes per client"


def test_every_dataset_model_method_and_partition_has_a_display_name():
    identifiers = [*data.DATASETS, *models.MODELS, *registry.method_names(), *partition.PARTITIONS]
    missing = [name for name in identifiers if name not in plots.DISPLAY_NAMES]
    assert not missing, f"add {missing} to fedlib.reporting.plots.DISPLAY_NAMES"


def test_curves_show_method_names_in_words():
    ax = plots.accuracy_curves({"fedavg": [0.1, 0.2], "fedlmd_tf": [0.2, 0.3]})
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["FedAvg", "FedLMD-Tf"]


def test_curve_panels_titles_in_words():
    rounds = [{"round": r, "accuracy": 0.1 * r} for r in range(3)]
    results = [SimpleNamespace(config=RunConfig(dataset="fashion_mnist", method=m, partition="dirichlet", beta=0.5),
                               rounds=rounds) for m in ("fedavg", "fedvls")]
    fig = plots.curve_panels(results)
    assert [ax.get_title() for ax in fig.axes] == ["Fashion-MNIST, Dir(β=0.5)\n1 seed each"]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["FedAvg", "FedVLS"]



def test_curve_panels_draw_one_line_per_method_over_its_seeds_in_one_colour_per_method():
    def run(method, seed, beta, values):
        cfg = RunConfig(dataset="mnist", method=method, partition="dirichlet", beta=beta, seed=seed)
        return SimpleNamespace(config=cfg, rounds=[{"round": r, "accuracy": v} for r, v in enumerate(values)])

    results = [run("fedavg", 0, 0.5, [0.2, 0.4]), run("fedavg", 1, 0.5, [0.4, 0.6]), run("fedvls", 0, 0.5, [0.1, 0.2]),
               run("fedvls", 0, 0.1, [0.3, 0.3])]
    fig = plots.curve_panels(results)
    left, right = fig.axes[:2]
    assert [line.get_label() for line in left.get_lines()] == ["FedAvg", "FedVLS"]  # one legend entry per method
    assert left.get_title().splitlines()[1] == "2 seeds; 1: FedVLS" and right.get_title().endswith("\n1 seed")
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["FedAvg", "FedVLS"]
    assert list(left.get_lines()[0].get_ydata()) == pytest.approx([30.0, 50.0])  # the mean over the seeds
    assert len(left.collections) == 1  # the band of the method with two seeds
    assert right.get_lines()[0].get_color() == left.get_lines()[1].get_color()  # FedVLS in both panels


def test_the_seed_note_names_the_exceptions_and_colours_are_distinct_and_never_grey():
    assert plots.seed_note({"fedavg": 3, "fedprox": 1, "fedlc": 1, "fedvls": 3}) == "3 seeds; 1: FedProx, FedLC"
    assert plots.seed_note({"fedavg": 3, "fedvls": 3}) == "3 seeds each"
    colours = [plots.method_colour(m, "abcdef") for m in "abcdef"]
    assert len(set(colours)) == 6 and not {"#949494", "0.5", "grey", "gray"} & set(colours)


def test_thirteen_methods_get_thirteen_different_lines_once_the_colours_run_out():
    methods = [f"method{i}" for i in range(13)]  # FedVLS Table 1 compares 13
    lines = [(plots.method_colour(m, methods), plots.method_line_style(m, methods)) for m in methods]
    assert len(set(lines)) == 13
    assert lines[10] == (lines[0][0], "--") and lines[0][1] == "-"  # the 11th: the first colour, dashed


def test_a_stamp_says_when_cells_have_different_seed_counts():
    configs = [RunConfig(dataset="mnist", method="fedavg", seed=s) for s in (0, 1, 2)] + \
              [RunConfig(dataset="mnist", method="fedprox", seed=0)]
    assert plots.provenance("paper", configs).endswith("seeds 0, 1, 2 (1 to 3 per cell)")
    assert plots.provenance("paper", configs[:3]).endswith("seeds 0, 1, 2")


def test_a_stamp_names_only_the_runs_behind_the_figure():
    drawn = SimpleNamespace(config=RunConfig(dataset="mnist"), summary={})
    placeholder = SimpleNamespace(config=RunConfig(dataset="cifar10"), summary={"not_run": True})
    assert "CIFAR-10" not in plots.provenance("paper", [drawn, placeholder])

# ------------------------------------------------------------------ legends and shadings
def test_default_legends_sit_outside_the_axes():
    ax = plots.accuracy_curves({"fedavg": [0.1, 0.9], "fedprox": [0.9, 0.1]})
    renderer = ax.figure.canvas.get_renderer()
    assert ax.get_legend().get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1


def test_a_legend_below_its_panel_sits_under_the_axis_label_in_a_figure_of_any_size():
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    for ax in axes:
        ax.plot([1, 2, 3], [0.1, 0.3, 0.2], label="expert {T-shirt/top/Pullover/Dress/Coat/Shirt/Bag}")
        ax.set_xlabel("round")
        plots.place_legend(ax, "below", fontsize="x-small")
    fig.tight_layout()
    for size in ((10, 3.4), (10, 6.0)):
        fig.set_size_inches(*size)
        fig.tight_layout()
        renderer = fig.canvas.get_renderer()
        for ax in axes:
            legend, label = ax.get_legend().get_window_extent(renderer), ax.xaxis.label.get_window_extent(renderer)
            assert legend.y1 <= label.y0, f"{size}: the legend reaches into the axis label"
            assert not legend.overlaps(ax.get_window_extent(renderer)), f"{size}: the legend covers the panel"

def test_shared_legend_replaces_panel_legends_and_sits_below_them():
    fig, axes = plt.subplots(1, 2)
    plots.accuracy_curves({"fedavg": [0.1, 0.9]}, ax=axes[0])
    plots.class_accuracy_bars({"fedavg": [0.5, 0.6]}, ["a", "b"], ax=axes[1], marks={"vacant": [0]})
    legend = plots.shared_legend(fig)
    assert all(ax.get_legend() is None for ax in axes)
    assert [t.get_text() for t in legend.get_texts()] == ["FedAvg", "vacant class"]
    renderer = fig.canvas.get_renderer()
    lowest = min(ax.get_tightbbox(renderer).y0 for ax in axes)
    assert legend.get_window_extent(renderer).y1 <= lowest + 1


def test_vacant_and_minority_shadings_are_distinct():
    ax = plots.class_accuracy_bars({"fedavg": [0.5, 0.6, 0.7]}, ["a", "b", "c"],
                                   marks={"vacant": [0], "minority": [1]})
    spans = {p.get_label(): p for p in ax.patches if p.get_label() in ("vacant class", "minority class")}
    vacant, minority = (np.array(to_rgb(spans[k].get_facecolor()[:3])) for k in ("vacant class", "minority class"))
    assert np.abs(vacant - minority).sum() > 0.3, "the two shadings must not look alike"
    assert spans["vacant class"].get_hatch(), "vacant is hatched, so it reads in grey-scale print too"


def test_a_re_split_dataset_says_how_it_was_split():
    holdout = RunConfig(dataset="fashion_mnist", dataset_options={"split": "holdout_10"})
    assert plots.data_scale(holdout) == "90 % of the train set, tested on the held-out 10 %"
    pooled = RunConfig(dataset="mnist", dataset_options={"split": "pooled_75_25"}, max_train_samples=2000)
    assert plots.data_scale(pooled) == "train + test pooled, 75/25 split, 2,000 train images"
    assert plots.data_scale(RunConfig(dataset="mnist")) == "full data"


def _stored(method, seed, values, **fields):
    cfg = RunConfig(dataset="mnist", method=method, seed=seed, partition="dirichlet", beta=0.5, **fields)
    rounds = [{"round": r, "accuracy": v, "class_accuracy": [v, v / 2]} for r, v in enumerate(values)]
    return SimpleNamespace(config=cfg, rounds=rounds)


def test_table_curves_average_only_over_seeds_and_name_the_arguments_rows_differ_in():
    results = [_stored("fedavg", 0, [0.2, 0.4]), _stored("fedavg", 1, [0.4, 0.6]),
               _stored("fedvls", 0, [0.1, 0.2], method_args={"lam": 0.1}),
               _stored("fedvls", 0, [0.3, 0.3], method_args={"lam": 0.5}),
               _stored("fedavg", 0, [0.5, 0.5], model="mlp"), _stored("fedavg", 1, [0.7, 0.7], model="mlp"),
               SimpleNamespace(config=RunConfig(dataset="mnist", method="fedprox"), rounds=[])]  # not run: left out
    fig = plots.table_curves(results)
    left, right = fig.axes[:2]
    assert left.get_title() == "MNIST, Dir(β=0.5), LeNet-5\n1 seed; 2: FedAvg"  # two lam values are two rows
    assert [line.get_label() for line in left.get_lines()] == ["FedAvg", "FedVLS (lam 0.1)", "FedVLS (lam 0.5)"]
    assert list(left.get_lines()[0].get_ydata()) == pytest.approx([30.0, 50.0])
    assert right.get_title() == "MNIST, Dir(β=0.5), MLP\n2 seeds"
    assert right.get_lines()[0].get_color() == left.get_lines()[0].get_color()  # FedAvg's colour in both
    worst = plots.table_curves(results[:2], metric="worst_class")
    assert list(worst.axes[0].get_lines()[0].get_ydata()) == pytest.approx([15.0, 25.0])  # min(class accuracy)
    assert worst.axes[0].get_ylabel() == "worst class accuracy (%)"
    assert plots.table_curves(results[-1:]) is None
    with pytest.raises(FedlibError, match="metric 'loss' is not one of accuracy, worst_class"):
        plots.table_curves(results, metric="loss")


def test_table_curves_give_a_method_one_entry_when_its_arguments_change_only_between_panels():
    results = [_stored("pkd", 0, [0.2, 0.4], method_args={"groups": [[0, 1]]}),
               _stored("pkd", 0, [0.3, 0.5], method_args={"groups": [[2, 3]]}, model="mlp")]
    fig = plots.table_curves(results)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["PKD"]
    assert fig.axes[0].get_lines()[0].get_color() == fig.axes[1].get_lines()[0].get_color()


# ------------------------------------------------------------------ figures that work on a slide
def test_accuracy_bars_are_zoomed_to_the_values_each_written_and_the_cut_axis_says_so():
    ax = plots.value_bars({"fedavg": 92.5, "fedlmd": 94.1})
    bottom, top = ax.get_ylim()
    assert 0 < bottom <= 92.5 - 1 and 94.1 < top < 100, "92.5 and 94.1 must not look equal"
    assert bottom == round(bottom), "the axis starts at a round number"
    assert [t.get_text() for t in ax.texts] == ["92.5", "94.1"], "each bar has its value written on it"
    assert ax.get_ylabel() == f"best test accuracy (%)\n(axis starts at {bottom:g}, not 0)"
    assert len(ax.lines) == 2, "a break mark on the spine"
    far_apart = plots.value_bars({"fedavg": 10.0, "fedlmd": 90.0})
    assert far_apart.get_ylim()[0] == 0 and "not 0" not in far_apart.get_ylabel() and not far_apart.lines


def test_class_bars_zoom_too_and_panels_sharing_an_axis_fit_all_their_bars():
    fig, (left, right) = plt.subplots(1, 2, sharey=True)
    plots.class_accuracy_bars({"fedavg": [0.9, 0.95], "fedprox": [0.85, 0.97]}, ["a", "b"], ax=left)
    assert left.get_ylim()[0] > 50 and "not 0" in left.get_ylabel()
    assert [t.get_text() for t in left.texts] == ["90.0", "95.0", "85.0", "97.0"]
    plots.class_accuracy_bars({"fedavg": [0.0, 0.95]}, ["a", "b"], ax=right)  # a vacant class at 0
    assert left.get_ylim()[0] == 0, "the shared axis shows the 0 of the right panel"
    assert "not 0" not in left.get_ylabel() and not left.lines, "so the left panel no longer says it is cut"
    crowded = plots.class_accuracy_bars({"a": [0.5] * 10, "b": [0.6] * 10, "c": [0.7] * 10}, list("abcdefghij"))
    assert not crowded.texts, "30 bars: no room for their values"


def _round_ticks(ax):
    ax.figure.canvas.draw()
    low, high = ax.get_xlim()
    return [tick for tick in ax.get_xticks() if low <= tick <= high]


@pytest.mark.parametrize("rounds", [3, 7, 20])
def test_every_round_axis_has_whole_number_ticks(rounds):
    values = np.linspace(0.2, 0.8, rounds)
    _, wide = plt.subplots(figsize=(12, 3))
    stored = [{"round": r, "accuracy": v, "class_accuracy": [v, v]} for r, v in enumerate(values)]
    results = [SimpleNamespace(config=RunConfig(dataset="mnist", method=m, partition="dirichlet", beta=0.5),
                               rounds=stored) for m in ("fedavg", "fedvls")]
    for ax in (plots.accuracy_curves({"fedavg": values}, ax=wide), plots.curve_panels(results).axes[0],
               plots.table_curves(results).axes[0]):
        ticks = _round_ticks(ax)
        assert ticks and all(float(t).is_integer() for t in ticks), f"{ax.get_title()!r}: round ticks {ticks}"


def test_panels_wrap_and_grow_to_fit_a_slide():
    assert plots.panel_grid(4)[:2] == (2, 2), "four panels: two rows of two, not a 4:1 strip"
    for count in range(1, 7):
        rows, columns, (width, height) = plots.panel_grid(count)
        assert rows * columns >= count and 1.0 <= width / height <= 2.8, (count, width / height)
    rows = [{"round": r, "accuracy": 0.1 * r} for r in range(3)]
    results = [SimpleNamespace(config=RunConfig(dataset="mnist", method="fedavg", partition="dirichlet", beta=b),
                               rounds=rows) for b in (0.1, 0.5)]
    width, height = plots.curve_panels(results).get_size_inches()
    assert 4 / 3 <= width / height <= 2.0, "two panels side by side, about 16:9"
    assert plots.slide_figsize(1, 4, 4.0, 3.0) == (16.0, 3.0 * 1.4), "a strip's panels grow taller, up to 1.4 times"



# ------------------------------------------------------------------ shapes a slide shows whole
LESSON_FIGURES = Path(__file__).resolve().parents[3] / "figures" / "lesson"


def _saved_png_aspect(fig, tmp_path, name: str = "shape", **options) -> float:
    """Width : height of the PNG :func:`plots.save_figure` writes for ``fig`` (bbox tight included)."""
    [png, _] = plots.save_figure(fig, name, tmp_path, stamp="profile lesson · CIFAR-10, full data · seed 0",
                                 **options)
    width, height = Image.open(tmp_path / f"{name}.png").size
    return width / height


def _panels_results(count: int):
    rows = [{"round": r, "accuracy": 0.1 * r, "class_accuracy": [0.1 * r, 0.05 * r]} for r in range(4)]
    return [SimpleNamespace(config=RunConfig(dataset="mnist", method=m, partition="dirichlet", beta=0.1 * (i + 1)),
                            rounds=rows) for i in range(count) for m in ("fedavg", "fedvls", "fedlmd")]


@pytest.mark.parametrize("count", range(1, 9))
def test_panel_figures_are_saved_between_4_3_and_2_1(count, tmp_path):
    for draw in (plots.curve_panels, plots.table_curves):
        fig = draw(_panels_results(count))
        assert len([ax for ax in fig.axes if ax.get_visible()]) == count
        ratio = _saved_png_aspect(fig, tmp_path, draw.__name__)
        assert plots.NARROWEST <= ratio <= plots.WIDEST, f"{draw.__name__}, {count} panels: saved at {ratio:.2f}:1"


@pytest.mark.parametrize("columns, figsize", [(4, (16, 3)), (2, (10, 3.4)), (3, (17, 4.8)), (1, (3, 5))])
def test_a_strip_of_panels_or_a_tall_one_is_saved_between_4_3_and_2_1(columns, figsize, tmp_path):
    fig, axes = plt.subplots(1, columns, figsize=figsize, squeeze=False)
    for ax in axes[0]:
        ax.plot([1, 2, 3], [0.2, 0.5, 0.4], label="FedAvg")
        ax.set_title("a panel")
    fig.suptitle("a strip of panels")
    legend = plots.shared_legend(fig)
    assert not plots.NARROWEST <= plots.saved_aspect(fig) <= plots.WIDEST, "the case is one that needs fitting"
    ratio = _saved_png_aspect(fig, tmp_path)
    assert plots.NARROWEST <= ratio <= plots.WIDEST, f"saved at {ratio:.2f}:1"
    renderer = fig.canvas.get_renderer()
    lowest = min(ax.get_tightbbox(renderer).y0 for ax in axes[0])
    assert legend.get_window_extent(renderer).y1 <= lowest + 1, "the legend moved back under the panels"


def test_a_figure_already_in_shape_is_saved_as_it_was_and_fit_can_be_declined(tmp_path):
    fig, ax = plt.subplots(figsize=(5.0, 3.4))
    ax.plot([1, 2], [1, 2])
    assert plots.fit_to_slide(fig) == pytest.approx(plots.saved_aspect(fig))
    assert tuple(fig.get_size_inches()) == (5.0, 3.4), "a figure in the range keeps its size"
    strip, axes = plt.subplots(1, 4, figsize=(16, 3))
    assert _saved_png_aspect(strip, tmp_path, fit=False) > plots.WIDEST, "fit=False saves the strip as drawn"


def test_every_lesson_figure_is_between_4_3_and_2_1():
    sizes = {png.name: Image.open(png).size for png in sorted(LESSON_FIGURES.glob("*.png"))}
    assert sizes, f"no PNG in {LESSON_FIGURES}"
    # the saved PNG is rounded to whole pixels: a hundredth of slack either way
    outside = {name: round(w / h, 2) for name, (w, h) in sizes.items()
               if not plots.NARROWEST - 0.01 <= w / h <= plots.WIDEST + 0.01}
    assert not outside, f"lesson figures outside 4:3 to 2:1 (width : height): {outside}"

def test_the_stamp_of_an_edited_run_names_its_edits():
    from fedlib.reporting.edited_runs import EditedProfile

    edited = EditedProfile("lesson", {"beta": 0.5, "method_args": {"fedlmd": {"tau": 1.0, "beta": 0.3, "x": [1, 2]}}})
    assert edited == "lesson" and {"lesson": 1}[edited] == 1, "still the profile's name for every lookup"
    assert plots.provenance(edited, [subset_config(seed=0)]) == \
        "profile lesson, edited: beta=0.5, method_args · Fashion-MNIST, 2,000 train images · seed 0"
    assert plots.provenance("lesson", [subset_config(seed=0)]).startswith("profile lesson · ")
