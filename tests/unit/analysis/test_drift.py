"""fedlib.analysis.drift: the FedCSD Fig. 1 drift study and single local updates (the feature_kd method is
tested in tests/unit/algorithms/test_feature_kd.py)."""

from __future__ import annotations

import pytest
import torch

from fedlib.algorithms.client_training import train_client
from fedlib.analysis import drift
from fedlib.core.config import RunConfig
from fedlib.engine import engine
from fedlib.errors import FedlibError

TINY = dict(dataset="synthetic", model="mlp", clients=2, rounds=1, batch_size=25, lr=0.05,
            max_train_samples=100, max_test_samples=40, device="cpu")


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    return engine.run(RunConfig(**TINY), results_dir=results, progress=False), results


# ====================================================================== drift_study
def test_drift_study_starts_at_zero_drift_and_the_global_accuracy(pretrained):
    result, _ = pretrained
    frame = drift.drift_study(result, epochs=1, variants={"CE": ("fedavg", {})})
    assert len(frame) == 2 * (2 + 1)  # epochs 0..1 x (2 local rows + 1 average row)
    start = frame[frame["epoch"] == 0]
    assert start["logit_kl"].abs().max() < 1e-9
    assert start["feature_l2"].abs().max() < 1e-6
    assert start["test_accuracy"].tolist() == pytest.approx([result.final_accuracy] * 3)
    after = frame[(frame["epoch"] == 1) & (frame["model"] == "local")]
    assert (after["logit_kl"] > 0).all() and (after["feature_l2"] > 0).all()


def test_average_row_is_the_weighted_average_model(pretrained):
    result, _ = pretrained
    server, algorithm = engine.prepare(result.config)
    server.model.load_state_dict(result.global_state())
    rows = drift.variant_drift(result.config, result.global_state(), 1, [0, 1], "CE")
    # the same clients trained by the engine for one epoch give the same averaged model
    updates = [train_client(server, algorithm, k, result.config.lr) for k in (0, 1)]
    server.model.load_state_dict(algorithm.aggregate(server, updates))
    expected = engine.evaluate(server.model, server.data)["accuracy"]
    [average] = [r for r in rows if r["epoch"] == 1 and r["model"] == "average"]
    assert average["test_accuracy"] == pytest.approx(expected)


def test_strong_feature_distillation_keeps_features_closer(pretrained):
    result, _ = pretrained
    frame = drift.drift_study(result, epochs=2, clients=[0],
                              variants={"CE": ("fedavg", {}), "feat": ("feature_kd", {"mu": 50.0})})
    last = frame[(frame["epoch"] == 2) & (frame["model"] == "local")].set_index("variant")
    assert last.at["feat", "feature_l2"] < last.at["CE", "feature_l2"]


def test_drift_study_is_cached_under_results_dir(pretrained):
    result, results = pretrained
    variants = {"CE": ("fedavg", {})}
    first = drift.drift_study(result, epochs=1, variants=variants, clients=[1], results_dir=results)
    cached = list((results / "drift").glob("*.csv"))
    assert len(cached) == 1
    second = drift.drift_study(result, epochs=1, variants=variants, clients=[1], results_dir=results)
    assert second["logit_kl"].tolist() == pytest.approx(first["logit_kl"].tolist())


def test_drift_curves_average_the_clients(pretrained):
    result, _ = pretrained
    frame = drift.drift_study(result, epochs=1, variants={"CE": ("fedavg", {})})
    curves = drift.drift_curves(frame)
    local = frame[(frame["epoch"] == 1) & (frame["model"] == "local")]
    assert curves.loc[("CE", 1), "local_logit_kl"] == pytest.approx(local["logit_kl"].mean())
    assert curves.loc[("CE", 0), "average_test_accuracy"] == pytest.approx(result.final_accuracy)


def test_drift_study_progress_bar_counts_epochs_and_quiet_is_silent(pretrained, capsys):
    result, _ = pretrained
    variants = {"CE": ("fedavg", {})}
    quiet = drift.drift_study(result, epochs=2, variants=variants, clients=[0], progress=False)
    silent = capsys.readouterr()
    assert silent.out == "" and silent.err == ""
    shown = drift.drift_study(result, epochs=2, variants=variants, clients=[0], progress=True)
    bar = capsys.readouterr()
    assert "drift: CE (1 client)" in bar.err and "/2" in bar.err and "epoch" in bar.err
    assert bar.out == ""
    # the bar changes nothing measured
    assert shown["logit_kl"].tolist() == quiet["logit_kl"].tolist()


@pytest.mark.parametrize("kwargs", [{"epochs": 0}, {"epochs": 1, "clients": [5]}])
def test_drift_study_rejects_bad_input(pretrained, kwargs):
    result, _ = pretrained
    with pytest.raises(FedlibError):
        drift.drift_study(result, **kwargs)


# ====================================================================== local_update
def test_local_update_matches_the_engine_and_moves_away(pretrained):
    result, _ = pretrained
    model = drift.local_update(result, client_id=1)
    global_state = result.global_state()
    moved = any(not torch.equal(v, global_state[k]) for k, v in model.state_dict().items())
    assert moved
    server, algorithm = engine.prepare(result.config)
    server.model.load_state_dict(global_state)
    server.round = result.config.rounds
    update = train_client(server, algorithm, 1, result.config.lr)
    for key, value in model.state_dict().items():
        assert torch.allclose(value, update.state[key])


def test_local_update_under_fedcsd_restores_the_teacher(tmp_path):
    result = engine.run(RunConfig(**{**TINY, "method": "fedcsd"}), results_dir=tmp_path, progress=False)
    model = drift.local_update(result, client_id=0)
    assert model.training is False
    with pytest.raises(FedlibError, match="clients"):
        drift.local_update(result, client_id=7)
