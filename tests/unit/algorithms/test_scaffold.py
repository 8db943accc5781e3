"""SCAFFOLD (fedlib.algorithms.scaffold): control variates on a tiny nn.Linear(2, 1) "global
model", against numbers computed by hand (the arithmetic is written next to each expectation)."""

import torch

from fedlib.algorithms.base import ClientUpdate
from fedlib.algorithms.scaffold import option_two_update
from fedlib.core.registry import build_algorithm
from tests.unit.algorithms.helpers import assert_state, engine_context, linear, toy_server, two_clients


def test_scaffold_option_two_by_hand():
    # c_i+ = c_i - c + (x - y)/(K lr) = 1 - 3 + (2 - 0.5)/(3 * 0.1) = -2 + 5 = 3
    new = option_two_update([torch.tensor([1.0])], [torch.tensor([3.0])], [torch.tensor([2.0])],
                            [torch.tensor([0.5])], steps=3, lr=0.1)
    assert torch.allclose(new[0], torch.tensor([3.0]))


def test_scaffold_corrected_sgd_step_and_control_update_by_hand():
    algo, server = build_algorithm("scaffold"), toy_server(weight=(1.0, 2.0), bias=0.0, lr=0.1, clients=4)
    algo.setup(server)
    server.extras["scaffold_c"] = {"weight": torch.tensor([[1.0, 1.0]]), "bias": torch.tensor([2.0])}
    server.extras["scaffold_c_clients"][0] = {"weight": torch.tensor([[0.5, -1.0]]), "bias": torch.tensor([0.0])}
    model = linear((1.0, 2.0), 0.0)
    ctx = engine_context(algo, server, 0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.weight.grad, model.bias.grad = torch.tensor([[1.0, 0.0]]), torch.tensor([1.0])
    algo.before_step(model, ctx)
    # g - c_i + c = (1 - 0.5 + 1, 0 + 1 + 1) = (1.5, 2), b: 1 - 0 + 2 = 3
    assert torch.allclose(model.weight.grad, torch.tensor([[1.5, 2.0]]))
    optimizer.step()  # w = (1 - 0.15, 2 - 0.2) = (0.85, 1.8), b = -0.3
    up = ClientUpdate(0, model.state_dict(), 4, 1)
    algo.client_upload(model, ctx, up)
    # c_0+ = c_0 - c + (x - y)/(1 * 0.1) = (0.5 - 1 + 1.5, -1 - 1 + 2) = (1, 0), b: 0 - 2 + 3 = 1
    assert torch.allclose(up.extras["scaffold_c_i"]["weight"], torch.tensor([[1.0, 0.0]]), atol=1e-5)
    assert torch.allclose(up.extras["scaffold_c_i"]["bias"], torch.tensor([1.0]), atol=1e-5)
    algo.end_round(server, [up])
    # c = c + (c_0+ - c_0)/N = (1 + 0.5/4, 1 + 1/4) = (1.125, 1.25), b: 2 + 1/4 = 2.25
    assert torch.allclose(server.extras["scaffold_c"]["weight"], torch.tensor([[1.125, 1.25]]), atol=1e-5)
    assert torch.allclose(server.extras["scaffold_c"]["bias"], torch.tensor([2.25]), atol=1e-5)


def test_scaffold_new_client_starts_from_zero_and_model_rule_is_fedavg():
    algo, server = build_algorithm("scaffold"), toy_server(clients=4)
    algo.setup(server)
    ups = two_clients()
    for up, value in zip(ups, (4.0, 8.0)):
        up.extras["scaffold_c_i"] = {"weight": torch.full((1, 2), value), "bias": torch.tensor([value])}
    assert_state(algo.aggregate(server, ups), [1.5, 1.75], -0.5)
    algo.end_round(server, ups)
    # c = 0 + (4 - 0)/4 + (8 - 0)/4 = 3
    assert torch.allclose(server.extras["scaffold_c"]["bias"], torch.tensor([3.0]))
    assert sorted(server.extras["scaffold_c_clients"]) == [0, 1]
