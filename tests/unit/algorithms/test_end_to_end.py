"""Every method through the engine: whole rounds without NaN, and a run stopped and resumed from
the store ends where an uninterrupted one does (a method's state in ``server.extras`` survives)."""

import math

import pytest
import torch

from fedlib.engine import engine
from tests.unit.algorithms.helpers import method_config


# ====================================================================== the loss methods
@pytest.mark.parametrize("method,args", [
    ("fedvls", {}), ("fedvls", {"variant": "official"}), ("fedntd", {}), ("fedlmd", {}),
    ("fedlmd_tf", {"switch_round": 1}), ("fedlc", {}), ("fedrs", {}), ("fedavg_kd", {}),
])
def test_methods_run_two_rounds_without_nan(method, args):
    from fedlib.core.config import RunConfig
    from fedlib.engine import engine

    cfg = RunConfig(dataset="synthetic", model="mlp", clients=3, rounds=2, local_epochs=1, batch_size=16,
                    max_train_samples=96, max_test_samples=50, method=method, method_args=args)
    result = engine.run(cfg, use_store=False, progress=False)
    assert len(result.rounds) == 2
    assert all(math.isfinite(r["loss"]) for r in result.rounds)
    assert 0.0 <= result.final_accuracy <= 1.0


# ====================================================================== optimiser and server-rule methods
@pytest.mark.parametrize("method, args", [
    ("fedsam", {}), ("fedexp", {}), ("fedavgm", {}), ("fednova", {}), ("scaffold", {}),
    ("scaffold", {"control_divisor": "momentum"}), ("fedcurv", {}), ("moon", {}),
    ("moon", {"projection_head": True}), ("fedvls+fedsam", {}), ("fedvls+fedexp", {}),
    ("fedlmd+fedavgm", {}), ("scaffold+fedexp", {}),
    ("fedmr", {}), ("fedgf", {}), ("fedconcat", {"encoder_rounds": 1}),
    ("fedconcat", {"encoder_rounds": 1, "head_init": "clusters", "classifier_steps": 0}),
])
def test_two_rounds_without_nan(method, args):
    result = engine.run(method_config(method, method_args=args), use_store=False, progress=False)
    assert len(result.rounds) == 2
    for row in result.rounds:
        assert math.isfinite(row["loss"]) and 0.0 <= row["accuracy"] <= 1.0
    prefixes = ("fedexp", "fednova", "fedgf")  # the round metrics these methods add
    numbers = [v for row in result.rounds for k, v in row.items() if k.startswith(prefixes)]
    assert all(math.isfinite(v) for v in numbers)


@pytest.mark.parametrize("method, args", [("scaffold", {}), ("fedcurv", {}), ("fedexp", {}),
                                          ("fedavgm", {}), ("moon", {"projection_head": True}),
                                          ("fedconcat", {"encoder_rounds": 1}), ("fedgf", {})])
def test_resume_matches_an_uninterrupted_run(tmp_path, method, args):
    cfg = method_config(method, method_args=args, rounds=3)
    whole = engine.run(cfg, use_store=False, progress=False)
    engine.run(cfg, results_dir=tmp_path, progress=False, stop_after=2)
    resumed = engine.run(cfg, results_dir=tmp_path, progress=False)
    assert resumed.final_accuracy == whole.final_accuracy
    assert resumed.summary["final_loss"] == pytest.approx(whole.summary["final_loss"], rel=1e-6)


# ====================================================================== FedCSD, FedGKD, FedProto and the CE variants
def distillation_config(method: str, **args):
    """Runs of the distillation methods: 120 training samples, plain SGD, seed 3."""
    return method_config(method, method_args=args, max_train_samples=120, max_test_samples=30, momentum=0.0,
                         seed=3)


@pytest.mark.parametrize("method,args", [
    ("fedcsd", {}),
    ("fedcsd", {"variant": "official", "mu": 0.5, "tau": 4.0, "mask_type": "hard"}),
    ("fedcsd", {"use_tma": False, "use_similarity": False}),
    ("fedgkd", {"buffer_size": 2}),
    ("fedproto", {}),
    ("focal", {}),
    ("label_smoothing", {}),
])
def test_two_rounds_end_to_end(method, args):
    result = engine.run(distillation_config(method, **args), use_store=False, progress=False)
    assert len(result.rounds) == 2
    assert all(math.isfinite(r["loss"]) for r in result.rounds)
    if method == "fedcsd":
        assert all(0.0 <= r["mask_filtered"] <= 1.0 for r in result.rounds)


def test_server_state_after_two_rounds():
    server, method = engine.prepare(distillation_config("fedcsd"))
    initial = server.model.state_dict()["classifier.weight"].clone()
    engine.run_round(server, method)
    teacher = server.extras["fedcsd_teacher"]["classifier.weight"]
    global_ = server.model.state_dict()["classifier.weight"]
    assert torch.allclose(teacher, 0.9 * initial + 0.1 * global_, atol=1e-6)
    server, method = engine.prepare(distillation_config("fedproto"))
    engine.run_round(server, method)
    assert server.extras["fedproto_available"].sum().item() > 0
    server, method = engine.prepare(distillation_config("fedgkd", buffer_size=2))
    for round_index in range(3):
        server.round = round_index
        engine.run_round(server, method)
    assert len(server.extras["fedgkd_history"]) == 2


@pytest.mark.parametrize("method", ["fedcsd", "fedgkd", "fedproto"])
def test_resumed_run_matches_uninterrupted(method, tmp_path):
    # the teacher, the model history and the prototypes live in server.extras, so they survive
    cfg = distillation_config(method)
    uninterrupted = engine.run(cfg, use_store=False, progress=False)
    engine.run(cfg, results_dir=tmp_path, progress=False, stop_after=1)
    resumed = engine.run(cfg, results_dir=tmp_path, progress=False)
    assert [r["loss"] for r in resumed.rounds] == [r["loss"] for r in uninterrupted.rounds]
