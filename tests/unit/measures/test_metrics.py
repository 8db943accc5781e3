"""Analysis helpers, grids/tables and plots on values computed by hand."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from fedlib.core.config import RunConfig
from fedlib.measures import metrics
from fedlib.orchestration import experiments
from fedlib.reporting import plots, report


def hand_predictions() -> metrics.Predictions:
    # 4 samples, 3 classes: labels 0,0,1,2; predictions 0,1,1,1
    logits = np.array([[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 3.0, 0.0], [0.0, 2.0, 1.0]])
    features = np.array([[0.0, 0.0], [2.0, 0.0], [3.0, 4.0], [6.0, 8.0]])
    return metrics.Predictions(features, logits, np.array([0, 0, 1, 2]))


def test_class_accuracy_and_confusion():
    pred = hand_predictions()
    assert np.allclose(metrics.class_accuracy(pred, 3), [0.5, 1.0, 0.0])
    counts = metrics.confusion_matrix(pred, 3, normalise=False)
    assert counts.tolist() == [[1, 1, 0], [0, 1, 0], [0, 1, 0]]
    mis = metrics.misclassification_probabilities(pred, 3)
    assert mis[0, 1] == 0.5 and mis[2, 1] == 1.0 and np.all(np.diag(mis) == 0)


def test_class_accuracy_of_an_absent_class_is_nan():
    pred = hand_predictions()
    assert math.isnan(metrics.class_accuracy(pred, 4)[3])


def test_mean_softmax_per_class_rows_sum_to_one():
    pred = hand_predictions()
    table = metrics.mean_softmax_per_class(pred, 3)
    assert np.allclose(table.sum(1), 1.0)
    # class 1 has one sample with logits (0,3,0): softmax = e^3/(e^3+2)
    assert table[1, 1] == pytest.approx(math.exp(3) / (math.exp(3) + 2))


def test_class_feature_distances():
    pred = hand_predictions()
    distances = metrics.class_feature_distances(pred, 3)
    # class means: (1,0), (3,4), (6,8) -> |(1,0)-(3,4)| = sqrt(4+16)
    assert distances[0, 1] == pytest.approx(math.sqrt(20))
    assert distances[1, 2] == pytest.approx(5.0)
    assert np.allclose(distances, distances.T) and np.all(np.diag(distances) == 0)


def test_logit_kl_and_feature_l2():
    ref = torch.tensor([[0.0, 0.0]])
    other = torch.tensor([[math.log(3.0), 0.0]])  # softmax (3/4, 1/4) vs reference (1/2, 1/2)
    expected = 0.5 * math.log(0.5 / 0.75) + 0.5 * math.log(0.5 / 0.25)
    assert metrics.logit_kl(ref, other) == pytest.approx(expected)
    assert metrics.logit_kl(ref, ref) == pytest.approx(0.0)
    assert metrics.feature_l2(np.array([[0.0, 0.0], [1.0, 1.0]]), np.array([[3.0, 4.0], [1.0, 1.0]])) == 2.5


def test_accuracy_spread_names_the_worst_class():
    spread = metrics.accuracy_spread([0.9, 0.5, 0.7])
    assert spread["spread"] == pytest.approx(0.4) and spread["worst_class"] == 1
    assert spread["mean"] == pytest.approx(0.7)


def test_predict_collects_features_logits_labels():
    class Tiny(nn.Module):
        def forward(self, x, return_features=False):
            logits = torch.stack([x.sum(1), -x.sum(1)], 1)
            return (x, logits) if return_features else logits

    batches = [(torch.ones(2, 3), torch.tensor([0, 1])), (-torch.ones(1, 3), torch.tensor([1]))]
    pred = metrics.predict(Tiny(), batches)
    assert pred.features.shape == (3, 3) and pred.logits.shape == (3, 2)
    assert pred.predicted.tolist() == [0, 0, 1] and pred.labels.tolist() == [0, 1, 1]


def test_tsne_embedding_subsamples_with_the_seed():
    features = np.random.default_rng(0).normal(size=(80, 5))
    a, idx_a = metrics.tsne_embedding(features, seed=1, max_samples=40)
    b, idx_b = metrics.tsne_embedding(features, seed=1, max_samples=40)
    assert a.shape == (40, 2) and np.array_equal(idx_a, idx_b) and np.allclose(a, b)


def test_grid_and_mean_std_tables(tmp_path):
    base = RunConfig(dataset="synthetic", model="mlp", method="fedprox", method_args={"mu": 0.1})
    configs = experiments.grid(base, seed=[0, 1], method_args=[{"mu": 0.2}])
    assert [c.seed for c in configs] == [0, 1] and all(c.method_args == {"mu": 0.2} for c in configs)
    frame = pd.DataFrame({"method": ["a", "a", "b", "b"], "beta": [0.1] * 4, "acc": [70.0, 72.0, 60.0, 60.0]})
    mean, std = experiments.mean_std(frame, "method", "beta", "acc")
    assert mean.loc["a", 0.1] == 71.0 and std.loc["a", 0.1] == 1.0 and std.loc["b", 0.1] == 0.0
    text = experiments.format_mean_std(mean, std)
    assert text.loc["a", 0.1] == "**71.00 ± 1.00**" and text.loc["b", 0.1] == "60.00 ± 0.00"
    csv, md = report.save_tables({"demo": text}, tmp_path, digits=None)
    assert "71.00 ± 1.00" in md.read_text() and csv.exists()


def test_save_figure_writes_png_and_pdf(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    plots.use_style()
    ax = plots.accuracy_curves({"fedavg": [0.1, 0.5, 0.6]})
    paths = plots.save_figure(ax.figure, "curve", tmp_path)
    assert [p.suffix for p in paths] == [".png", ".pdf"] and all(p.stat().st_size > 0 for p in paths)
    assert ax.get_lines()[0].get_ydata().tolist() == [10.0, 50.0, 60.0]  # shown in percent
