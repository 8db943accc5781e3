"""The federated loop: aggregation, the results store, resume, evaluation."""

import json

import pytest
import torch
from torch import nn

from fedlib import store
from fedlib.algorithms.client_training import train_client
from fedlib.engine import engine
from tests.helpers import tiny_config


def test_aggregation_equals_manual_fedavg_of_local_updates():
    cfg = tiny_config(rounds=1)
    server, algorithm = engine.prepare(cfg)
    updates = [train_client(server, algorithm, k, cfg.lr) for k in range(cfg.clients)]
    sizes = [u.num_samples for u in updates]
    expected = {k: sum(u.state[k].double() * n for u, n in zip(updates, sizes)) / sum(sizes)
                for k in updates[0].state}
    server2, algorithm2 = engine.prepare(cfg)
    engine.run_round(server2, algorithm2)
    for key, value in server2.model.state_dict().items():
        assert torch.allclose(value.double(), expected[key], atol=1e-6), key


def test_same_config_same_numbers(tmp_path):
    cfg = tiny_config()
    a = engine.run(cfg, use_store=False, progress=False)
    b = engine.run(cfg, use_store=False, progress=False)
    assert [r["accuracy"] for r in a.rounds] == [r["accuracy"] for r in b.rounds]
    assert a.summary["class_accuracy"] == b.summary["class_accuracy"]


def test_the_model_learns_something():
    result = engine.run(tiny_config(rounds=4, partition="iid"), use_store=False, progress=False)
    assert result.best_accuracy > 0.3  # ten classes: chance is 0.1


def test_store_hit_returns_without_recomputation(tmp_path, monkeypatch):
    cfg = tiny_config()
    first = engine.run(cfg, results_dir=tmp_path, progress=False)
    record = store.RunRecord(tmp_path / cfg.hash())
    assert record.complete and len(record.read_rounds()) == cfg.rounds
    assert record.read_meta()["fedlib_version"]
    monkeypatch.setattr(engine, "prepare", lambda cfg, *source: pytest.fail("recomputed a stored run"))
    again = engine.run(cfg, results_dir=tmp_path, progress=False)
    assert again.summary == json.loads(json.dumps(first.summary))


def test_killed_run_resumes_to_identical_metrics(tmp_path):
    cfg = tiny_config(rounds=4, method="fedprox")
    uninterrupted = engine.run(cfg, results_dir=tmp_path / "a", progress=False)
    partial = engine.run(cfg, results_dir=tmp_path / "b", progress=False, stop_after=2)
    assert partial.summary == {} and len(partial.rounds) == 2
    assert not store.RunRecord(tmp_path / "b" / cfg.hash()).complete
    resumed = engine.run(cfg, results_dir=tmp_path / "b", progress=False)
    strip = lambda rounds: [{k: v for k, v in r.items() if k != "seconds"} for r in rounds]
    assert strip(resumed.rounds) == strip(uninterrupted.rounds)
    assert resumed.final_accuracy == uninterrupted.final_accuracy
    a, b = uninterrupted.global_state(), resumed.global_state()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_evaluate_counts_classes():
    cfg = tiny_config(rounds=1)
    server, _ = engine.prepare(cfg)

    class AlwaysZero(nn.Module):
        def forward(self, x, return_features=False):
            logits = torch.zeros(len(x), server.num_classes)
            logits[:, 0] = 1.0
            return (logits, logits) if return_features else logits

    metrics = engine.evaluate(AlwaysZero(), server.data)
    labels = server.data.test_y
    assert metrics["class_accuracy"][0] == 1.0 and metrics["class_accuracy"][1] == 0.0
    assert metrics["accuracy"] == pytest.approx(float((labels == 0).float().mean()))


def test_a_diverging_run_stops_and_is_stored_as_diverged(tmp_path, monkeypatch):
    from fedlib.algorithms.fedavg import FedAvg

    def exploding_loss(self, out, labels, ctx, teacher_out):
        return out.logits.sum() * 1e38  # overflows: the first step leaves non-finite weights

    monkeypatch.setattr(FedAvg, "loss", exploding_loss)
    cfg = tiny_config(rounds=3)
    with pytest.warns(RuntimeWarning, match="diverged in round 1:"):
        result = engine.run(cfg, results_dir=tmp_path, progress=False)
    assert result.summary["diverged"] is True and len(result.rounds) == 1
    assert store.RunRecord(tmp_path / cfg.hash()).read_summary()["diverged"] is True


def test_hooks_see_every_round_even_for_a_stored_run(tmp_path):
    class RoundCounter:
        def __init__(self):
            self.rounds = []

        def on_round_end(self, server, updates, metrics):
            self.rounds.append(metrics["round"])

    cfg = tiny_config(rounds=2)
    first = RoundCounter()
    engine.run(cfg, results_dir=tmp_path, progress=False, hooks=[first])
    assert first.rounds == [0, 1] and store.RunRecord(tmp_path / cfg.hash()).complete
    again = RoundCounter()
    result = engine.run(cfg, results_dir=tmp_path, progress=False, hooks=[again])
    assert again.rounds == [0, 1] and len(result.rounds) == 2


def test_rounds_log_the_local_work_the_clients_did():
    from fedlib.algorithms.fedavg import FedAvg

    class Counting(FedAvg):  # counts every local batch the engine feeds it
        def __init__(self):
            super().__init__()
            self.samples = self.steps = 0

        def loss(self, out, labels, ctx, teacher_out):
            self.samples += labels.shape[0]
            self.steps += 1
            return super().loss(out, labels, ctx, teacher_out)

    cfg = tiny_config(rounds=1, local_epochs=2, batch_size=24, participation=0.5)
    server, _ = engine.prepare(cfg)
    counting = Counting()
    metrics = engine.run_round(server, counting)
    assert len(metrics["clients"]) == 2
    assert metrics["local_samples"] == counting.samples > 0
    assert metrics["local_steps"] == counting.steps > 0
    # adding the metric leaves the config, and so the stored runs' hashes, as they were
    assert "local_samples" not in cfg.hashed_fields()


@pytest.mark.parametrize("method, args", [("fedavg", {}), ("fedconcat", {"clusters": 2, "encoder_rounds": 1})])
def test_load_model_is_the_predictor_the_run_evaluated(tmp_path, method, args):
    cfg = tiny_config(method=method, method_args=args, rounds=2)
    result = engine.run(cfg, results_dir=tmp_path, progress=False)
    stored = engine.run(cfg, results_dir=tmp_path, progress=False)  # from the store, no training
    model = stored.load_model("cpu")
    server, _ = engine.prepare(cfg)
    assert engine.evaluate(model, server.data)["accuracy"] == pytest.approx(result.final_accuracy, abs=1e-6)


def test_evaluate_reports_each_domain_when_the_data_have_few():
    import dataclasses

    server, _ = engine.prepare(tiny_config())
    dataset = server.data.dataset
    assert "group_accuracy" not in engine.evaluate(server.model, server.data), "no groups, no entry"
    domains = torch.arange(len(dataset.test_y)) % 3  # three interleaved "domains"
    server.data.dataset = dataclasses.replace(dataset, test_groups=domains.numpy(), group_names=["a", "b", "c"])
    metrics = engine.evaluate(server.model, server.data)
    with torch.no_grad():
        hits = (server.model(server.data.normalise(server.data.test_x)).argmax(1) == server.data.test_y).float()
    expected = [float(hits[domains == d].mean()) for d in range(3)]
    assert metrics["group_accuracy"] == pytest.approx(expected)
    assert len(set(round(v, 6) for v in expected)) > 1 or expected[0] not in (0.0, 1.0), "a test that can tell groups apart"


def test_the_cpus_small_evaluation_batches_predict_as_the_batches_of_1000_do(monkeypatch):
    """On a CPU the test set goes through the model 100 images at a time (faster: the activations
    stay in cache); the predictions are those of batches of 1,000 and the loss equal to rounding."""
    from fedlib.core.state import EVAL_BATCH, FederatedData

    server, _ = engine.prepare(tiny_config(model="lenet5"))
    assert EVAL_BATCH["cpu"] < len(server.data.test_y) <= 1000, "several small batches against one large"
    small = engine.evaluate(server.model, server.data)
    original = FederatedData.test_batches
    monkeypatch.setattr(FederatedData, "test_batches", lambda self, batch_size=None: original(self, 1000))
    large = engine.evaluate(server.model, server.data)
    assert small["class_accuracy"] == large["class_accuracy"] and small["accuracy"] == large["accuracy"]
    assert small["loss"] == pytest.approx(large["loss"], rel=1e-6)


def test_a_result_says_whether_it_was_trained_resumed_or_served(tmp_path):
    cfg = tiny_config(rounds=3)
    assert engine.run(cfg, results_dir=tmp_path / "a", progress=False, stop_after=1).origin == "trained"
    assert engine.run(cfg, results_dir=tmp_path / "a", progress=False).origin == "resumed"
    assert engine.run(cfg, results_dir=tmp_path / "a", progress=False).origin == "served"
    assert engine.run(cfg, results_dir=tmp_path / "b", progress=False).origin == "trained"
    assert engine.run(cfg, use_store=False, progress=False).origin == "trained"
    assert engine.RunResult.not_run(cfg).origin == "not run"
