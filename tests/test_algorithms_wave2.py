"""Second-wave FedVLS baselines: FedMR, FedGF, FedConcat.

Losses and server rules are checked against numbers computed by hand (the arithmetic is written
next to each expectation) or step by step with numpy / plain autograd, never by calling the
function under test.
"""

import copy
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedlib import engine
from fedlib.algorithms import build_algorithm
from fedlib.algorithms.base import ClientContext, ClientUpdate
from fedlib.algorithms.fedconcat import (ConcatenatedModel, cluster_clients, clusters_head_state,
                                         label_distributions, random_linear_state)
from fedlib.algorithms.fedgf import client_divergence, global_perturbed_model, move_to_ascent_point
from fedlib.algorithms.fedmr import intra_class_decorrelation, local_loss
from fedlib.client_training import train_client
from fedlib.config import RunConfig
from fedlib.errors import FedlibError
from fedlib.models import FedModel


def linear_model(weight, bias) -> FedModel:
    """features = x (identity body), logits = W x + b."""
    classifier = nn.Linear(len(weight[0]), len(weight))
    with torch.no_grad():
        classifier.weight.copy_(torch.tensor(weight, dtype=torch.float32))
        classifier.bias.copy_(torch.tensor(bias, dtype=torch.float32))
    return FedModel(nn.Identity(), classifier)


def context(client_id=0, lr=0.1) -> ClientContext:
    return ClientContext(client_id, 0, torch.ones(2), 4, None, lr=lr)


# ====================================================================== FedMR
def test_intra_class_loss_by_hand():
    # class 0: rows (1,0), (2,1), (3,5); class 1 has one sample and is skipped.
    # dim 0: mean 2, centred (-1,0,1), unbiased var 2/2 = 1      -> z0 = (-1, 0, 1)
    # dim 1: mean 2, centred (-2,-1,3), unbiased var 14/2 = 7    -> z1 = (-2, -1, 3)/sqrt(7)
    # K01 = (2 + 0 + 3)/sqrt(7) = 5/sqrt(7); mean of the 2 squared off-diagonals = 25/7
    # divided by the 3 counted samples -> 25/21
    features = torch.tensor([[1.0, 0.0], [2.0, 1.0], [3.0, 5.0], [9.0, -4.0]])
    labels = torch.tensor([0, 0, 0, 1])
    assert float(intra_class_decorrelation(features, labels, 3)) == pytest.approx(25 / 21, rel=1e-5)
    # add class 1's second sample (0,0) next to (9,-4): both dims centred +-(4.5, 2) -> z = (+-1/sqrt2)
    # per dim, K01 = 2 * 1/2 = 1; total (25/7 + 1) / (3 + 2) = 32/35
    features = torch.cat([features, torch.tensor([[0.0, 0.0]])])
    labels = torch.tensor([0, 0, 0, 1, 1])
    assert float(intra_class_decorrelation(features, labels, 3)) == pytest.approx(32 / 35, rel=1e-5)


def test_fedmr_local_loss_is_ce_plus_deco_times_intra():
    features = torch.tensor([[1.0, 0.0], [2.0, 1.0], [3.0, 5.0], [9.0, -4.0]])
    labels = torch.tensor([0, 0, 0, 1])
    logits = torch.zeros(4, 2)  # CE of uniform logits over 2 classes = ln 2
    value = local_loss(logits, features, labels, deco=4.0)
    assert float(value) == pytest.approx(math.log(2) + 4.0 * 25 / 21, rel=1e-5)


def test_intra_class_loss_matches_direct_numpy_computation():
    rng = np.random.default_rng(0)
    features, labels = rng.normal(size=(12, 5)), np.array([0, 1, 2, 0, 1, 0, 3, 1, 0, 2, 2, 1])
    total, counted = 0.0, 0
    for c in range(4):
        rows = features[labels == c]
        if len(rows) < 2:
            continue
        z = (rows - rows.mean(0)) / np.sqrt(1e-8 + rows.var(0, ddof=1))
        corr = z.T @ z
        off = corr[~np.eye(5, dtype=bool)]
        total += (off ** 2).mean()
        counted += len(rows)
    value = intra_class_decorrelation(torch.tensor(features, dtype=torch.float32), torch.tensor(labels), 4)
    assert float(value) == pytest.approx(total / counted, rel=1e-4)


def test_intra_class_loss_invariants():
    torch.manual_seed(0)
    features, labels = torch.randn(10, 4), torch.tensor([0, 1, 0, 1, 2, 0, 1, 0, 2, 1])
    reference = float(intra_class_decorrelation(features, labels, 3))
    order = torch.randperm(10)
    assert float(intra_class_decorrelation(features[order], labels[order], 3)) == pytest.approx(reference, rel=1e-5)
    # per-dimension standardisation: scaling and shifting the features changes nothing
    assert float(intra_class_decorrelation(3 * features + 7, labels, 3)) == pytest.approx(reference, rel=1e-4)
    # every class a singleton: nothing is counted
    assert float(intra_class_decorrelation(features[:3], torch.tensor([0, 1, 2]), 3)) == 0.0
    # orthogonal centred columns (+-1 patterns) are already decorrelated
    decorrelated = torch.tensor([[1.0, 1.0], [-1.0, 1.0], [1.0, -1.0], [-1.0, -1.0]])
    same_class = torch.zeros(4, dtype=torch.long)
    assert float(intra_class_decorrelation(decorrelated, same_class, 2)) == pytest.approx(0.0, abs=1e-6)


def test_fedmr_finite_at_extreme_values_and_gradients():
    logits = torch.tensor([[1e4, -1e4, 0.0], [-1e4, 1e4, 5.0], [0.0, 1e4, -1e4], [1e4, 0.0, 0.0]], requires_grad=True)
    features = (torch.tensor([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5], [2.0, 2.0]]) * 1e4).requires_grad_(True)
    labels = torch.tensor([0, 0, 1, 2])  # classes 1 and 2 are singletons
    value = local_loss(logits, features, labels, deco=4.0)
    value.backward()
    assert torch.isfinite(value)
    assert torch.isfinite(logits.grad).all() and torch.isfinite(features.grad).all()
    # the decorrelation term only pulls on samples of counted classes (n_c >= 2)
    assert features.grad[2:].abs().sum() == 0 and features.grad[:2].abs().sum() > 0


# ====================================================================== FedGF
def test_ascent_point_by_hand():
    # g = (3, 4), ||g|| = 5, rho = 0.5 -> e = (0.3, 0.4), w_l = (1.3, 2.4)
    p = torch.tensor([1.0, 2.0])
    p.grad = torch.tensor([3.0, 4.0])
    move_to_ascent_point([p], 0.5, None, 0.0)
    assert torch.allclose(p, torch.tensor([1.3, 2.4]))
    # c = 0.25, w~ = (0, 10): w_mix = 0.25 (0, 10) + 0.75 (1.3, 2.4) = (0.975, 4.3)
    p = torch.tensor([1.0, 2.0])
    p.grad = torch.tensor([3.0, 4.0])
    move_to_ascent_point([p], 0.5, [torch.tensor([0.0, 10.0])], 0.25)
    assert torch.allclose(p, torch.tensor([0.975, 4.3]))


def test_global_perturbed_model_and_divergence_by_hand():
    # w_t = (1, 1), w_{t+1} = (4, 5): w_t - w_{t+1} = (-3, -4), norm 5, g_rho 0.5 -> (4, 5) + (-0.3, -0.4)
    point = global_perturbed_model([torch.tensor([1.0, 1.0])], [torch.tensor([4.0, 5.0])], 0.5)
    assert torch.allclose(point[0], torch.tensor([3.7, 4.6]))
    same = global_perturbed_model([torch.tensor([2.0])], [torch.tensor([2.0])], 0.5)
    assert torch.equal(same[0], torch.tensor([2.0]))  # no global step: no perturbation, no NaN
    # ||0 - (3, 4)|| = 5 and ||0 - (6, 8)|| = 10 -> mean 7.5
    assert client_divergence([torch.zeros(2)], [[torch.tensor([3.0, 4.0])], [torch.tensor([6.0, 8.0])]]) == 7.5


def toy_server(model: nn.Module, **cfg) -> SimpleNamespace:
    settings = dict(momentum=0.0, weight_decay=0.0, clients=3, rounds=10, seed=0)
    settings.update(cfg)
    return SimpleNamespace(model=model, extras={}, cache={}, round=0, device=torch.device("cpu"),
                           cfg=SimpleNamespace(**settings), new_model=lambda: copy.deepcopy(model),
                           num_classes=2)


def test_fedgf_server_state_over_three_rounds():
    # window 2, threshold c_cos 1.0; one client per round at distance 3, 0.5, 0.2 from w_t:
    # indicators [1] -> c 1; [1, 0] -> c 0.5; [0, 0] (the first one left the window) -> c 0
    algo = build_algorithm("fedgf", {"c_cos": 1.0, "window": 2, "g_rho": 1.0})
    server = toy_server(linear_model([[0.0, 0.0]], [0.0]))
    algo.setup(server)
    expected_c = []
    for round_index, distance in enumerate([3.0, 0.5, 0.2]):
        server.round = round_index
        algo.client_context(server, context())
        start = {k: v.clone() for k, v in server.model.state_dict().items()}
        client = {"classifier.weight": start["classifier.weight"] + torch.tensor([[distance, 0.0]]),
                  "classifier.bias": start["classifier.bias"].clone()}
        server.model.load_state_dict(client)  # the aggregate of this single client
        algo.end_round(server, [ClientUpdate(0, client, 4, 1)])
        expected_c.append(server.extras["fedgf"]["c"])
        assert server.extras["fedgf"]["divergence"] == pytest.approx(distance)
        # w~ = w_{t+1} + 1.0 * (w_t - w_{t+1}) / ||.||: one unit back along -x
        perturbed = server.extras["fedgf"]["perturbed"]
        assert torch.allclose(perturbed[0], client["classifier.weight"] - torch.tensor([[1.0, 0.0]]))
        assert torch.allclose(perturbed[1], client["classifier.bias"])
    assert expected_c == [1.0, 0.5, 0.0]


def manual_gf_step(model, x, y, rho, point, c, lr):
    """One FedGF step written out with plain autograd: the expected result."""
    w = [p.detach().clone() for p in model.parameters()]
    grads = torch.autograd.grad(F.cross_entropy(model(x), y), list(model.parameters()))
    norm = math.sqrt(sum(float((g ** 2).sum()) for g in grads))
    local = [wi + rho * g / norm for wi, g in zip(w, grads)]
    mixed = [c * pi + (1 - c) * li for pi, li in zip(point, local)]
    with torch.no_grad():
        for p, m in zip(model.parameters(), mixed):
            p.copy_(m)
    grads_mixed = torch.autograd.grad(F.cross_entropy(model(x), y), list(model.parameters()))
    return [wi - lr * g for wi, g in zip(w, grads_mixed)]


def test_fedgf_train_step_matches_the_written_out_update():
    algo = build_algorithm("fedgf", {"rho": 0.5})
    model = linear_model([[1.0, -1.0], [0.5, 2.0]], [0.1, -0.2])
    x, y = torch.tensor([[1.0, 2.0], [-1.0, 0.5]]), torch.tensor([0, 1])
    point = [torch.tensor([[0.0, 1.0], [1.0, 0.0]]), torch.tensor([0.3, 0.3])]
    expected = manual_gf_step(copy.deepcopy(model), x, y, 0.5, point, 0.4, 0.1)
    ctx = context()
    ctx.extras.update(fedgf_c=0.4, fedgf_point=point)
    algo.train_step(model, torch.optim.SGD(model.parameters(), lr=0.1), x, y, ctx)
    for p, e in zip(model.parameters(), expected):
        assert torch.allclose(p, e, atol=1e-6)


def test_fedgf_without_global_point_is_fedsam():
    model = linear_model([[1.0, -1.0], [0.5, 2.0]], [0.1, -0.2])
    twin = copy.deepcopy(model)
    x, y = torch.tensor([[1.0, 2.0], [-1.0, 0.5]]), torch.tensor([0, 1])
    ctx = context()
    ctx.extras.update(fedgf_c=0.0, fedgf_point=None)
    build_algorithm("fedgf", {"rho": 0.3}).train_step(model, torch.optim.SGD(model.parameters(), lr=0.1), x, y, ctx)
    fedsam = build_algorithm("fedsam", {"rho": 0.3})
    fedsam.train_step(twin, torch.optim.SGD(twin.parameters(), lr=0.1), x, y, context())
    for a, b in zip(model.parameters(), twin.parameters()):
        assert torch.allclose(a, b, atol=1e-7)


def test_fedgf_rejects_a_bad_window():
    with pytest.raises(FedlibError, match="window"):
        build_algorithm("fedgf", {"window": 0}).setup(toy_server(linear_model([[0.0]], [0.0])))


# ====================================================================== FedConcat
def test_clients_cluster_by_label_distribution():
    counts = np.array([[10, 0], [9, 1], [0, 10], [1, 9], [0, 0]], dtype=float)
    distributions = label_distributions(counts)
    assert np.allclose(distributions[1], [0.9, 0.1]) and np.allclose(distributions[4], [0.0, 0.0])
    assignment = cluster_clients(distributions[:4], 2, seed=0)
    assert assignment[0] == assignment[1] != assignment[2] == assignment[3]
    assert cluster_clients(distributions, 1, seed=0) == [0] * 5


def test_concatenated_model_with_cluster_head_sums_the_cluster_logits():
    # encoder 1: W = [[1, 0], [0, 1]], b = (1, 0); encoder 2: W = [[2, 1], [0, -1]], b = (0, 3)
    # x = (1, 2): logits 1 = (1 + 1, 2 + 0) = (2, 2); logits 2 = (2 + 2 + 0, -2 + 3) = (4, 1)
    encoders = [linear_model([[1.0, 0.0], [0.0, 1.0]], [1.0, 0.0]),
                linear_model([[2.0, 1.0], [0.0, -1.0]], [0.0, 3.0])]
    head_state = clusters_head_state(encoders)
    assert torch.equal(head_state["weight"], torch.tensor([[1.0, 0.0, 2.0, 1.0], [0.0, 1.0, 0.0, -1.0]]))
    assert torch.equal(head_state["bias"], torch.tensor([1.0, 3.0]))
    head = nn.Linear(4, 2)
    head.load_state_dict(head_state)
    features, logits = ConcatenatedModel(encoders, head)(torch.tensor([[1.0, 2.0]]), return_features=True)
    assert torch.equal(features, torch.tensor([[1.0, 2.0, 1.0, 2.0]]))
    assert torch.allclose(logits, torch.tensor([[6.0, 3.0]]))  # (2 + 4, 2 + 1)


def test_random_head_is_deterministic_and_bounded():
    first = random_linear_state(16, 3, torch.Generator().manual_seed(5))
    second = random_linear_state(16, 3, torch.Generator().manual_seed(5))
    assert torch.equal(first["weight"], second["weight"]) and torch.equal(first["bias"], second["bias"])
    assert first["weight"].abs().max() <= 0.25 and first["weight"].shape == (3, 16)  # 1/sqrt(16)


def state(weight, bias):
    return {"classifier.weight": torch.tensor([weight]), "classifier.bias": torch.tensor([bias])}


def test_fedconcat_aggregates_per_cluster_then_heads_unweighted():
    algo = build_algorithm("fedconcat", {"clusters": 3, "encoder_rounds": 1})
    server = toy_server(linear_model([[0.0, 0.0]], [0.0]))
    server.extras["fedconcat"] = {"assignment": [0, 1, 0], "head": None,
                                  "cluster_states": [state([0.0, 0.0], 0.0)] * 2 + [state([7.0, 7.0], 7.0)]}
    updates = [ClientUpdate(0, state([0.0, 4.0], 1.0), 1, 1), ClientUpdate(1, state([2.0, 2.0], 2.0), 2, 1),
               ClientUpdate(2, state([4.0, 0.0], 5.0), 3, 1)]
    new_global = algo.aggregate(server, updates)
    clusters = server.extras["fedconcat"]["cluster_states"]
    # cluster 0 = clients 0 and 2 weighted 1:3 -> (0*1 + 4*3)/4 = 3, (4*1 + 0*3)/4 = 1, (1 + 15)/4 = 4
    assert torch.allclose(clusters[0]["classifier.weight"], torch.tensor([[3.0, 1.0]]))
    assert torch.allclose(clusters[0]["classifier.bias"], torch.tensor([4.0]))
    assert torch.allclose(clusters[1]["classifier.weight"], torch.tensor([[2.0, 2.0]]))
    assert torch.allclose(clusters[2]["classifier.weight"], torch.tensor([[7.0, 7.0]]))  # no member: kept
    # server.model: all clients weighted 1:2:3 -> (0 + 4 + 12)/6, (4 + 4 + 0)/6
    assert torch.allclose(new_global["classifier.weight"], torch.tensor([[16 / 6, 8 / 6]]))
    server.round = 1  # classifier stage: heads averaged without weights
    heads = [{"weight": torch.tensor([[1.0]]), "bias": torch.tensor([0.0])},
             {"weight": torch.tensor([[4.0]]), "bias": torch.tensor([3.0])}]
    updates = [ClientUpdate(k, server.model.state_dict(), n, 3, extras={"fedconcat_head": h})
               for k, (n, h) in enumerate(zip([1, 9], heads))]
    algo.aggregate(server, updates)
    assert torch.allclose(server.extras["fedconcat"]["head"]["weight"], torch.tensor([[2.5]]))  # (1 + 4)/2
    assert torch.allclose(server.extras["fedconcat"]["head"]["bias"], torch.tensor([1.5]))


def tiny(method: str, **changes) -> RunConfig:
    base = dict(dataset="synthetic", model="mlp", clients=3, rounds=2, local_epochs=1, batch_size=16,
                max_train_samples=150, max_test_samples=60, lr=0.05, momentum=0.5, seed=0,
                device="cpu", method=method)
    base.update(changes)
    return RunConfig(**base)


@pytest.mark.parametrize("changes, match", [
    ({"method_args": {"encoder_rounds": 2}}, "encoder_rounds"),
    ({"method_args": {"encoder_rounds": 1, "clusters": 4}}, "clusters"),
    ({"method": "fedconcat+fedprox", "method_args": {"encoder_rounds": 1}}, "combined"),
])
def test_fedconcat_bad_settings_are_one_line_errors(changes, match):
    with pytest.raises(FedlibError, match=match):  # when the config is made, before any data load
        tiny(**{"method": "fedconcat", **changes})


def test_fedconcat_stages_train_what_they_should():
    cfg = tiny("fedconcat", method_args={"encoder_rounds": 1, "classifier_steps": 2})
    server, algo = engine.prepare(cfg)
    initial = {k: v.clone() for k, v in server.model.state_dict().items()}
    engine.run_round(server, algo)
    state = server.extras["fedconcat"]
    assert sorted(set(state["assignment"])) == [0, 1]
    changed = [not torch.equal(s["classifier.weight"], initial["classifier.weight"]) for s in state["cluster_states"]]
    assert all(changed)  # every cluster has members and trained
    server.round = 1
    global_before = {k: v.clone() for k, v in server.model.state_dict().items()}
    clusters_before = [{k: v.clone() for k, v in s.items()} for s in state["cluster_states"]]
    update = train_client(server, algo, 0, cfg.lr)
    assert update.num_steps > 2  # the engine walked every batch ...
    head = update.extras["fedconcat_head"]  # ... but the classifier moved only classifier_steps times
    assert head["weight"].shape == (10, 2 * 200)
    for key, value in update.state.items():
        assert torch.equal(value, global_before[key])  # the engine's local model was left alone
    for before, after in zip(clusters_before, state["cluster_states"]):
        assert all(torch.equal(before[k], after[k]) for k in before)  # encoders frozen


@pytest.mark.parametrize("method, args", [
    ("fedmr", {}), ("fedgf", {}), ("fedconcat", {"encoder_rounds": 1}),
    ("fedconcat", {"encoder_rounds": 1, "head_init": "clusters", "classifier_steps": 0}),
])
def test_two_rounds_without_nan(method, args):
    result = engine.run(tiny(method, method_args=args), use_store=False, progress=False)
    assert len(result.rounds) == 2
    for row in result.rounds:
        assert math.isfinite(row["loss"]) and 0.0 <= row["accuracy"] <= 1.0
    numbers = [v for row in result.rounds for k, v in row.items() if k.startswith("fedgf")]
    assert all(math.isfinite(v) for v in numbers)


@pytest.mark.parametrize("method, args", [("fedconcat", {"encoder_rounds": 1}), ("fedgf", {})])
def test_resume_matches_an_uninterrupted_run(tmp_path, method, args):
    cfg = tiny(method, method_args=args, rounds=3)
    whole = engine.run(cfg, use_store=False, progress=False)
    engine.run(cfg, results_dir=tmp_path, progress=False, stop_after=2)
    resumed = engine.run(cfg, results_dir=tmp_path, progress=False)
    assert resumed.final_accuracy == whole.final_accuracy
    assert resumed.summary["final_loss"] == pytest.approx(whole.summary["final_loss"], rel=1e-6)
