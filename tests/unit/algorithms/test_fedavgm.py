"""FedAvgM (fedlib.algorithms.fedavgm): server momentum on a tiny nn.Linear(2, 1) "global model",
against numbers computed by hand (the arithmetic is written next to each expectation)."""

from types import SimpleNamespace

import torch
from torch import nn

from fedlib.algorithms.base import ClientUpdate
from fedlib.core.registry import build_algorithm
from tests.unit.algorithms.helpers import assert_state, toy_server, two_clients


def test_fedavgm_two_rounds_by_hand():
    algo, server = build_algorithm("fedavgm", {"server_momentum": 0.9}), toy_server()
    algo.setup(server)
    # weighted mean: w = ((0,1)*1 + (2,2)*3)/4 = (1.5, 1.75), b = (1 - 3)/4 = -0.5
    # Delta = w_g - mean = (1-1.5, 2-1.75) = (-0.5, 0.25), b: 0.5; m = Delta; w = w_g - m = mean
    first = algo.aggregate(server, two_clients())
    assert_state(first, [1.5, 1.75], -0.5)
    server.model.load_state_dict(first)
    # same clients again: Delta = 0, m = 0.9 * (-0.5, 0.25, 0.5) = (-0.45, 0.225, 0.45)
    # w = (1.5 + 0.45, 1.75 - 0.225) = (1.95, 1.525), b = -0.5 - 0.45 = -0.95
    second = algo.aggregate(server, two_clients())
    assert_state(second, [1.95, 1.525], -0.95)
    assert torch.allclose(server.extras["fedavgm_momentum"]["bias"], torch.tensor([0.45]))


def test_fedavgm_zero_momentum_is_fedavg_and_buffers_are_averaged():
    bn = nn.BatchNorm1d(2)
    states = []
    for shift, n in ((1.0, 1), (5.0, 3)):
        state = {k: v.clone() for k, v in bn.state_dict().items()}
        state["running_mean"] += shift
        state["weight"] += shift
        states.append(state)
    server = SimpleNamespace(model=bn, extras={}, cache={}, round=0)
    algo = build_algorithm("fedavgm", {"server_momentum": 0.0})
    algo.setup(server)
    new = algo.aggregate(server, [ClientUpdate(0, states[0], 1, 1), ClientUpdate(1, states[1], 3, 1)])
    # (1*1 + 5*3)/4 = 4 for both the parameter (beta = 0) and the running-mean buffer
    assert torch.allclose(new["weight"], torch.full((2,), 5.0))  # 1 + 4
    assert torch.allclose(new["running_mean"], torch.full((2,), 4.0))
    assert set(server.extras["fedavgm_momentum"]) == {"weight", "bias"}  # buffers get no momentum
