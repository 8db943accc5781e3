"""FedExP (fedlib.algorithms.fedexp): the extrapolated server step on a tiny nn.Linear(2, 1)
"global model", against numbers computed by hand (the arithmetic is written next to each
expectation)."""

import pytest
import torch

from fedlib.algorithms.fedexp import extrapolation_step
from fedlib.core.registry import build_algorithm
from tests.unit.algorithms.helpers import assert_state, toy_server, update


def test_fedexp_step_by_hand():
    algo, server = build_algorithm("fedexp", {"eps": 0.01}), toy_server(weight=(0.0, 0.0))
    updates = [update(0, (2.0, 0.0), 1.0, 1), update(1, (0.0, -1.0), -1.0, 3)]
    # D_0 = (2, 0, 1), D_1 = (0, -1, -1); p = (0.25, 0.75)
    # sum p ||D_i||^2 = 0.25*5 + 0.75*2 = 2.75
    # D = (0.5, -0.75, 0.25 - 0.75) = (0.5, -0.75, -0.5); ||D||^2 = 0.25 + 0.5625 + 0.25 = 1.0625
    # eta = 2.75 / (2 (1.0625 + 2 * 0.01)) = 2.75 / 2.165
    eta = 2.75 / 2.165
    new = algo.aggregate(server, updates)
    assert_state(new, [0.5 * eta, -0.75 * eta], -0.5 * eta)
    assert algo.round_metrics(server, updates)["fedexp_eta_g"] == pytest.approx(eta)
    assert "fedexp_previous_params" not in server.extras  # round 0: no earlier iterate


def test_fedexp_step_is_at_least_one_and_eps_decays():
    same = [{"w": torch.tensor([1.0, 1.0])}, {"w": torch.tensor([1.0, 1.0])}]
    # identical updates: 2 / (2 (2 + 2 eps)) < 1 -> 1 (plain FedAvg)
    assert extrapolation_step(same, [1, 1], 0.01) == 1.0
    opposite = [{"w": torch.tensor([1.0])}, {"w": torch.tensor([-1.0])}]
    # D = 0: 1 / (2 (0 + 2 * 0.01)) = 25
    assert extrapolation_step(opposite, [1, 1], 0.01) == pytest.approx(25.0)
    algo = build_algorithm("fedexp", {"eps": 0.01})
    server = toy_server(weight=(0.0, 0.0), bias=0.0, lr_decay=0.5)
    server.round = 1
    algo.aggregate(server, [update(0, (1.0, 0.0), 0.0, 1), update(1, (-1.0, 0.0), 0.0, 1)])
    # eps_1 = 0.01 * 0.5^2 = 0.0025: eta = 1 / (2 * 2 * 0.0025) = 100
    assert server.extras["fedexp_eta_g"] == pytest.approx(100.0)


def test_fedexp_evaluates_the_average_of_the_last_two_iterates():
    algo, server = build_algorithm("fedexp"), toy_server(weight=(1.0, 2.0), bias=0.0)
    assert algo.eval_model(server) is server.model
    server.round = 1
    new = algo.aggregate(server, [update(0, (3.0, 2.0), 2.0, 1), update(1, (3.0, 2.0), 2.0, 1)])
    # identical clients: eta = 1, new = (3, 2), b = 2; previous = (1, 2), b = 0
    server.model.load_state_dict(new)
    evaluated = algo.eval_model(server)
    assert torch.allclose(evaluated.weight, torch.tensor([[2.0, 2.0]]))
    assert torch.allclose(evaluated.bias, torch.tensor([1.0]))
    assert torch.allclose(server.model.weight, torch.tensor([[3.0, 2.0]]))  # global untouched
