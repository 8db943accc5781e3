"""FedCurv (fedlib.algorithms.fedcurv): the Fisher penalty by hand and as the double sum, the
client's own Fisher left out, and the diagonal Fisher as the mean squared batch gradient."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedlib.algorithms.base import ClientUpdate
from fedlib.algorithms.fedcurv import diagonal_fisher, fisher_penalty
from fedlib.core.registry import build_algorithm
from tests.unit.algorithms.helpers import engine_context, toy_server


def test_fisher_penalty_by_hand_and_equal_to_the_double_sum():
    # one other client: u = (1, 2), w_j = (1, -1), w = (0, 1): 1*(0-1)^2 + 2*(1+1)^2 = 9; lambda 0.5 -> 4.5
    u, wj, w = torch.tensor([1.0, 2.0]), torch.tensor([1.0, -1.0]), torch.tensor([0.0, 1.0])
    assert float(fisher_penalty(w, u, u * wj, (u * wj * wj).sum(), 0.5)) == pytest.approx(4.5)
    torch.manual_seed(0)
    us, ws, w = torch.rand(3, 5), torch.randn(3, 5), torch.randn(5, requires_grad=True)
    direct = sum((us[j] * (w - ws[j]) ** 2).sum() for j in range(3))
    value = fisher_penalty(w, us.sum(0), (us * ws).sum(0), (us * ws * ws).sum(), 1.0)
    assert float(value.detach()) == pytest.approx(float(direct.detach()), rel=1e-5)
    (grad,) = torch.autograd.grad(value, w)
    # d/dw = 2 (P w - Q)
    assert torch.allclose(grad, 2 * (us.sum(0) * w - (us * ws).sum(0)).detach(), atol=1e-5)


def test_fedcurv_excludes_the_clients_own_fisher():
    algo, server = build_algorithm("fedcurv"), toy_server()
    algo.setup(server)
    ctx = engine_context(algo, server, 0)
    assert "fedcurv_P" not in ctx.tensors and algo.penalty(server.model, ctx) is None  # round 0
    uploads = {0: torch.tensor([1.0, 1.0, 1.0]), 1: torch.tensor([2.0, 0.0, 3.0])}
    ups = [ClientUpdate(k, {}, 1, 1, extras={"fedcurv": {"u": u, "v": 2 * u, "r": u.sum()}}) for k, u in uploads.items()]
    algo.end_round(server, ups)
    server.round = 1
    ctx = engine_context(algo, server, 0)
    assert torch.equal(ctx.tensors["fedcurv_P"], uploads[1])
    assert torch.equal(ctx.tensors["fedcurv_Q"], 2 * uploads[1])
    ctx_new = engine_context(algo, server, 3)  # a client with no Fisher of its own sees both
    assert torch.equal(ctx_new.tensors["fedcurv_P"], uploads[0] + uploads[1])


def test_diagonal_fisher_is_mean_squared_batch_gradient():
    torch.manual_seed(0)
    model = nn.Linear(2, 3)
    batches = [(torch.randn(4, 2), torch.tensor([0, 1, 2, 0])) for _ in range(3)]
    fisher = diagonal_fisher(model, iter(batches), min_samples=8)  # stops after 2 batches (8 samples)
    squares = []
    for x, y in batches[:2]:
        grads = torch.autograd.grad(F.cross_entropy(model(x), y), list(model.parameters()))
        squares.append(torch.cat([g.reshape(-1) for g in grads]) ** 2)
    assert torch.allclose(fisher, (squares[0] + squares[1]) / 2)
