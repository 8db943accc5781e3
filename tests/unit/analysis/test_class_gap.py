"""fedlib.analysis.class_gap: the PKD notebooks' helpers (class gaps per round, tracked statistics)."""

import numpy as np
import pytest

from fedlib.analysis import class_gap
from fedlib.core.config import RunConfig
from fedlib.engine.engine import RunResult
from fedlib.errors import FedlibError

NAMES = ["a", "b", "c"]


def fake_result(rounds: list[dict]) -> RunResult:
    cfg = RunConfig(dataset="digits", model="mlp", rounds=len(rounds))
    return RunResult(cfg, rounds, {"class_names": NAMES})


def test_mean_subtracted_centres_and_ignores_nan():
    gaps = class_gap.mean_subtracted([0.9, 0.5, np.nan, 0.7])
    np.testing.assert_allclose(gaps[[0, 1, 3]], [0.2, -0.2, 0.0], atol=1e-12)
    assert np.isnan(gaps[2])
    with pytest.raises(FedlibError):
        class_gap.mean_subtracted([np.nan, np.nan])


def test_rounds_tables_follow_the_logged_class_accuracy():
    rounds = [{"round": 0, "class_accuracy": [0.5, 0.2, 0.9]},
              {"round": 1},  # not evaluated: skipped
              {"round": 2, "class_accuracy": [0.6, 0.8, 0.4]}]
    per_class = class_gap.class_accuracy_rounds(fake_result(rounds))
    assert list(per_class.index) == [1, 3] and list(per_class.columns) == NAMES
    spread = class_gap.spread_rounds(fake_result(rounds))
    assert list(spread["worst_class"]) == ["b", "c"]
    np.testing.assert_allclose(spread["spread"], [0.7, 0.4])
    np.testing.assert_allclose(spread["mean"], [1.6 / 3, 0.6])
    with pytest.raises(FedlibError):
        class_gap.class_accuracy_rounds(fake_result([{"round": 0}]))
    nan_round = rounds[:1] + [{"round": 1, "class_accuracy": [np.nan, np.nan, np.nan]}]  # a diverged run's last round
    worst = class_gap.spread_rounds(fake_result(nan_round))["worst_class"]
    assert worst.iloc[0] == "b" and worst.isna().iloc[1]  # no class is worst in a round with no number


def test_expert_activation_names_groups_and_skips_warmup():
    rounds = [{"round": 0},
              {"round": 1, "pkd_groups": [[0, 2], [1, 2]], "expert_fired_0": 0.1, "expert_fired_1": 0.05},
              {"round": 2, "pkd_groups": [[0, 2], [1, 2]], "expert_fired_0": 0.02, "expert_fired_1": 0.0}]
    frame = class_gap.expert_activation(fake_result(rounds))
    assert list(frame.columns) == ["a/c", "b/c"] and list(frame.index) == [2, 3]
    np.testing.assert_allclose(frame.to_numpy(), [[0.1, 0.05], [0.02, 0.0]])
    with pytest.raises(FedlibError):
        class_gap.expert_activation(fake_result([{"round": 0}]))


def test_pair_curves_lists_every_off_diagonal_pair_per_round():
    confusion = np.arange(2 * 9, dtype=float).reshape(2, 3, 3)
    frame = class_gap.pair_curves(confusion, [4, 5], NAMES)
    assert len(frame) == 2 * 3 * 2
    row = frame[(frame["round"] == 5) & (frame["true"] == "c") & (frame["predicted"] == "a")]
    assert float(row["probability"].iloc[0]) == confusion[1, 2, 0]
    with pytest.raises(FedlibError):
        class_gap.pair_curves(confusion, [4], NAMES)


def test_track_class_statistics_per_round_and_cached(tmp_path, monkeypatch):
    cfg = RunConfig(dataset="digits", model="mlp", partition="balanced", clients=3, rounds=2,
                    batch_size=64, lr=0.1, max_train_samples=600, max_test_samples=200, device="cpu")
    stats = class_gap.track_class_statistics(cfg, results_dir=tmp_path)
    assert list(stats["round"]) == [1, 2]
    assert stats["confusion"].shape == (2, 10, 10) and stats["feature_distance"].shape == (2, 10, 10)
    np.testing.assert_allclose(stats["confusion"].sum(2), 1.0, atol=1e-6)
    np.testing.assert_allclose(stats["prediction"].diagonal(axis1=1, axis2=2), stats["class_accuracy"])
    assert not np.allclose(stats["confusion"][0], stats["confusion"][1])  # the model moved
    from fedlib import store

    assert store.RunRecord(store.run_dir(cfg, tmp_path)).complete  # a fresh tracked run is stored
    import fedlib.engine.engine

    monkeypatch.setattr(fedlib.engine.engine, "run", lambda *a, **k: pytest.fail("cache not used"))
    again = class_gap.track_class_statistics(cfg, results_dir=tmp_path)
    np.testing.assert_allclose(again["confusion"], stats["confusion"])
