"""FedConcat (fedlib.algorithms.fedconcat): clustering by label distribution, the concatenated
model, per-cluster aggregation and unweighted heads by hand, config errors, and what each stage
trains."""

import numpy as np
import pytest
import torch
from torch import nn

from fedlib.algorithms.base import ClientUpdate
from fedlib.algorithms.client_training import train_client
from fedlib.algorithms.fedconcat import (ConcatenatedModel, cluster_clients, clusters_head_state,
                                         label_distributions, random_linear_state)
from fedlib.core.registry import build_algorithm
from fedlib.engine import engine
from fedlib.errors import FedlibError
from tests.unit.algorithms.helpers import linear_model, method_config, model_server


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
    server = model_server(linear_model([[0.0, 0.0]], [0.0]))
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


@pytest.mark.parametrize("changes, match", [
    ({"method_args": {"encoder_rounds": 2}}, "encoder_rounds"),
    ({"method_args": {"encoder_rounds": 1, "clusters": 4}}, "clusters"),
    ({"method": "fedconcat+fedprox", "method_args": {"encoder_rounds": 1}}, "combined"),
])
def test_fedconcat_bad_settings_are_one_line_errors(changes, match):
    with pytest.raises(FedlibError, match=match):  # when the config is made, before any data load
        method_config(**{"method": "fedconcat", **changes})


def test_fedconcat_stages_train_what_they_should():
    cfg = method_config("fedconcat", method_args={"encoder_rounds": 1, "classifier_steps": 2})
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
