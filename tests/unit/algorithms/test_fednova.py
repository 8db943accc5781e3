"""FedNova (fedlib.algorithms.fednova): normalised averaging on a tiny nn.Linear(2, 1) "global
model", against numbers computed by hand (the arithmetic is written next to each expectation)."""

import pytest

from fedlib.algorithms.fednova import momentum_path_length
from fedlib.core.registry import build_algorithm
from fedlib.errors import FedlibError
from tests.unit.algorithms.helpers import assert_state, toy_server, two_clients, update


def test_fednova_path_length_by_hand():
    assert momentum_path_length(7, 0.0) == 7
    # (2 - 0.5 (1 - 0.25) / 0.5) / 0.5 = (2 - 0.75) / 0.5 = 2.5
    assert momentum_path_length(2, 0.5) == pytest.approx(2.5)
    with pytest.raises(FedlibError):
        momentum_path_length(2, 1.0)


def test_fednova_aggregate_by_hand():
    algo, server = build_algorithm("fednova"), toy_server(momentum=0.5)
    # a_0 = 2.5 (2 steps), a_1 = (1 - 0.5*0.5/0.5)/0.5 = 1; p = (0.25, 0.75); tau_eff = 0.625 + 0.75 = 1.375
    # d_0 = ((1,2) - (0,1))/2.5 = (0.4, 0.4), b: (0 - 1)/2.5 = -0.4; d_1 = (1,2) - (2,2) = (-1, 0), b: 1
    # sum p d = (0.1 - 0.75, 0.1) = (-0.65, 0.1), b: -0.1 + 0.75 = 0.65
    # w = (1,2) - 1.375 (-0.65, 0.1) = (1.89375, 1.8625), b = -1.375 * 0.65 = -0.89375
    new = algo.aggregate(server, two_clients())
    assert_state(new, [1.89375, 1.8625], -0.89375)
    assert algo.round_metrics(server, two_clients())["fednova_tau_eff"] == pytest.approx(1.375)


def test_fednova_equals_fedavg_for_equal_steps_without_momentum():
    server = toy_server(momentum=0.0)
    updates = [update(0, (0.0, 1.0), 1.0, 1, steps=3), update(1, (2.0, 2.0), -1.0, 3, steps=3)]
    assert_state(build_algorithm("fednova").aggregate(server, updates), [1.5, 1.75], -0.5)
