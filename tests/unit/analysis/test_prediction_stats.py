"""Per-round label / prediction histograms (FedLMD Fig. 2): hook, store round trip, statistics."""

import numpy as np
import pytest
import torch
from torch import nn

from fedlib import store
from fedlib.analysis import prediction_stats as ps
from fedlib.core.state import sample_clients
from fedlib.engine.engine import run
from fedlib.errors import FedlibError
from tests.helpers import tiny_config


FIVE_CLIENTS = dict(beta=0.3, clients=5, participation=0.6, rounds=2, batch_size=50, momentum=0.0, seed=0,
                    method="fedavg")


# ---------------------------------------------------------------- histograms
def test_sampled_class_counts_sums_the_chosen_clients_rows():
    counts = np.array([[1, 2, 0], [0, 5, 5], [7, 0, 1]])
    assert ps.sampled_class_counts(counts, [0, 2]).tolist() == [8, 2, 1]


class ConstantModel(nn.Module):
    """Always predicts ``label`` (for checking the predicted-class histogram)."""

    def __init__(self, label: int, num_classes: int):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(num_classes))
        self.bias.data[label] = 1.0

    def forward(self, x):
        return self.bias.expand(x.shape[0], -1)


class FakeData:
    num_classes, device = 4, torch.device("cpu")

    def test_batches(self):
        yield torch.zeros(3, 2), torch.zeros(3, dtype=torch.long)
        yield torch.zeros(2, 2), torch.zeros(2, dtype=torch.long)


def test_predicted_class_counts_counts_every_test_sample():
    counts = ps.predicted_class_counts(ConstantModel(2, 4), FakeData())
    assert counts.tolist() == [0, 0, 5, 0]


# ---------------------------------------------------------------- the run and the store
def test_prediction_history_records_each_round_and_reads_back_from_the_store(tmp_path, monkeypatch):
    cfg = tiny_config(FIVE_CLIENTS)
    history = ps.prediction_history(cfg, results_dir=tmp_path, progress=False)
    assert history.rounds.tolist() == [1, 2]
    result = run(cfg, results_dir=tmp_path, progress=False)  # from the store
    partition_counts = np.array(result.summary["partition_counts"])
    for r in range(cfg.rounds):
        clients = sample_clients(cfg.seed, r, cfg.clients, cfg.participation)
        assert history.sampled_counts[r].tolist() == partition_counts[clients].sum(0).tolist()
    assert (history.predicted_counts.sum(1) == 200).all()  # synthetic: 200 test samples
    # the last round's histogram agrees with the stored test accuracy being computed on 200 samples
    assert np.allclose(history.accuracy, [r["accuracy"] for r in result.rounds])
    # the second call must come from the store: make any new run fail
    monkeypatch.setattr("fedlib.engine.engine.run", lambda *a, **k: pytest.fail("re-ran a stored run"))
    again = ps.prediction_history(cfg, results_dir=tmp_path, progress=False)
    assert np.array_equal(again.predicted_counts, history.predicted_counts)


def test_run_stored_without_histograms_is_recomputed_and_left_untouched(tmp_path):
    cfg = tiny_config(FIVE_CLIENTS, rounds=1)
    run(cfg, results_dir=tmp_path, progress=False)
    before = store.RunRecord(store.run_dir(cfg, tmp_path)).read_rounds()
    history = ps.prediction_history(cfg, results_dir=tmp_path, progress=False)
    after = store.RunRecord(store.run_dir(cfg, tmp_path)).read_rounds()
    assert before == after and ps.PREDICTED_KEY not in after[0]
    assert history.predicted_counts.shape == (1, 10)


def test_history_without_histograms_is_a_one_line_error():
    with pytest.raises(FedlibError, match="no prediction histograms"):
        ps.history_from_rounds(tiny_config(FIVE_CLIENTS), [{"round": 0, "accuracy": 0.5}], ["a"])


# ---------------------------------------------------------------- statistics
def test_row_fractions_and_total_variation_hand_values():
    fractions = ps.row_fractions(np.array([[1, 1, 2], [0, 0, 0]]))
    assert np.allclose(fractions, [[0.25, 0.25, 0.5], [0, 0, 0]])
    # one-hot vs uniform over 4 classes: 0.5 * (3/4 + 3 * 1/4) = 0.75
    assert ps.total_variation(np.array([1.0, 0, 0, 0])) == pytest.approx(0.75)
    assert ps.total_variation(np.array([0.5, 0.5]), np.array([0.5, 0.5])) == pytest.approx(0.0)
    with pytest.raises(FedlibError, match="one value per class"):
        ps.total_variation(np.ones((2, 3)) / 3, np.ones(4) / 4)


def test_top_class_share_and_correlation():
    sampled = np.array([[10, 0, 5], [0, 3, 9]])
    predicted = np.array([[6, 2, 2], [1, 1, 1]])
    assert ps.top_class_share(sampled, predicted).tolist() == pytest.approx([0.6, 1 / 3])
    corr = ps.sampled_prediction_correlation(sampled, predicted)
    assert corr[0] == pytest.approx(np.corrcoef([10, 0, 5], [6, 2, 2])[0, 1])
    assert np.isnan(corr[1])  # constant predictions: correlation undefined


def test_bias_summary_reads_the_heat_maps_as_numbers():
    history = ps.PredictionHistory(config=tiny_config(), rounds=np.array([1, 2]),
                                   sampled_counts=np.array([[10, 0], [0, 10]]),
                                   predicted_counts=np.array([[4, 0], [1, 1]]),
                                   accuracy=np.array([0.4, 0.5]), class_names=["a", "b"])
    summary = ps.bias_summary(history, np.array([0.5, 0.5]), slice(1, None))
    assert summary["TV to true labels, all rounds"] == pytest.approx(0.25)  # 0.5 in round 1, 0 in round 2
    assert summary["TV to true labels, 2nd half"] == pytest.approx(0.0)
    assert summary["share to top sampled class"] == pytest.approx(0.75)  # 1.0 then 0.5
    assert summary["corr(sampled, predicted)"] == pytest.approx(1.0)  # round 2's constant mix: NaN, left out
    assert summary["best accuracy (%)"] == pytest.approx(50.0) and summary["final accuracy (%)"] == pytest.approx(50.0)
