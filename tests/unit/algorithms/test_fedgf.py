"""FedGF (fedlib.algorithms.fedgf): the ascent point and the global perturbed model by hand, the
server's state over rounds, and the local step against one written out with plain autograd."""

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from fedlib.algorithms.base import ClientContext, ClientUpdate
from fedlib.algorithms.fedgf import client_divergence, global_perturbed_model, move_to_ascent_point
from fedlib.core.registry import build_algorithm
from fedlib.errors import FedlibError
from tests.unit.algorithms.helpers import linear_model, model_server


def context(client_id=0, lr=0.1) -> ClientContext:
    return ClientContext(client_id, 0, torch.ones(2), 4, None, lr=lr)


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


def test_fedgf_server_state_over_three_rounds():
    # window 2, threshold c_cos 1.0; one client per round at distance 3, 0.5, 0.2 from w_t:
    # indicators [1] -> c 1; [1, 0] -> c 0.5; [0, 0] (the first one left the window) -> c 0
    algo = build_algorithm("fedgf", {"c_cos": 1.0, "window": 2, "g_rho": 1.0})
    server = model_server(linear_model([[0.0, 0.0]], [0.0]))
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
        build_algorithm("fedgf", {"window": 0}).setup(model_server(linear_model([[0.0]], [0.0])))
