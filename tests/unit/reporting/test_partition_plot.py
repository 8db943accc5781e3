"""Tests for fedlib.reporting.partition_plot: a partition drawn as bubbles or a heat map."""

import matplotlib
import numpy as np
import pytest

from fedlib.datasets.partition import make_partition
from fedlib.errors import FedlibError
from fedlib.reporting.partition_plot import plot_partition

matplotlib.use("Agg")


def balanced_labels(num_classes=10, per_class=600, seed=0):
    """Shuffled labels with exactly per_class samples of each class."""
    labels = np.repeat(np.arange(num_classes), per_class)
    return np.random.default_rng(seed).permutation(labels)


@pytest.mark.parametrize("kind", ["bubble", "heatmap"])
def test_plot_returns_axes_with_class_names(kind):
    import matplotlib.pyplot as plt

    partition = make_partition("quantity", balanced_labels(per_class=50), 10, 10, seed=0)
    names = [f"class{c}" for c in range(10)]
    ax = plot_partition(partition, class_names=names, kind=kind, title="s=2", annotate=True)
    assert isinstance(ax, matplotlib.axes.Axes)
    assert [t.get_text() for t in ax.get_yticklabels()] == names
    assert ax.get_title() == "s=2"
    plt.close(ax.figure)


def test_plot_bubble_areas_follow_counts():
    import matplotlib.pyplot as plt

    counts = np.array([[10, 0], [0, 40]])
    ax = plot_partition(counts)
    areas = ax.collections[0].get_sizes()
    assert len(areas) == 2 and areas[1] == pytest.approx(4 * areas[0])
    plt.close(ax.figure)


def test_plot_rejects_bad_input():
    with pytest.raises(FedlibError):
        plot_partition(np.ones(3))
    with pytest.raises(FedlibError):
        plot_partition(np.ones((2, 3)), kind="pie")
    with pytest.raises(FedlibError):
        plot_partition(np.ones((2, 3)), class_names=["a"])
