"""FedSAM (fedlib.algorithms.fedsam): the ascent perturbation by hand, the SAM step against plain
autograd, BatchNorm statistics left alone by the second pass, and composition with a loss method."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedlib.algorithms.base import ClientContext
from fedlib.algorithms.fedsam import FedSAM, ascent_perturbation, frozen_batchnorm_stats
from fedlib.core.registry import build_algorithm, method_class


def test_sam_perturbation_by_hand():
    # g = (3, 4): ||g|| = 5, e = 0.1 * g / 5 = (0.06, 0.08)
    e = ascent_perturbation([torch.tensor([3.0]), torch.tensor([4.0])], 0.1)
    assert torch.allclose(torch.cat(e), torch.tensor([0.06, 0.08]))
    assert torch.all(ascent_perturbation([torch.zeros(3)], 0.1)[0] == 0)


class LinearNet(nn.Module):
    """features = x, logits = Linear(x); with an optional BatchNorm in front."""

    def __init__(self, bn: bool = False):
        super().__init__()
        self.bn = nn.BatchNorm1d(2) if bn else nn.Identity()
        self.fc = nn.Linear(2, 3)

    def forward(self, x, return_features=False):
        features = self.bn(x)
        logits = self.fc(features)
        return (features, logits) if return_features else logits


def test_sam_step_uses_gradient_at_perturbed_point():
    torch.manual_seed(0)
    model, x, y = LinearNet(), torch.randn(5, 2), torch.tensor([0, 1, 2, 0, 1])
    start = [p.detach().clone() for p in model.parameters()]
    # reference, step by step: g at w, e = rho g/||g||, g2 at w + e, w <- w - lr g2
    w = [p.clone().requires_grad_(True) for p in start]
    g = torch.autograd.grad(F.cross_entropy(F.linear(x, w[0], w[1]), y), w)
    norm = math.sqrt(sum(float((t ** 2).sum()) for t in g))
    shifted = [(p + 0.5 * t / norm).detach().requires_grad_(True) for p, t in zip(start, g)]
    g2 = torch.autograd.grad(F.cross_entropy(F.linear(x, shifted[0], shifted[1]), y), shifted)
    expected = [p - 0.1 * t for p, t in zip(start, g2)]
    algo = build_algorithm("fedsam", {"rho": 0.5})
    ctx = ClientContext(0, 0, torch.ones(3), 5, None)
    loss = algo.train_step(model, torch.optim.SGD(model.parameters(), lr=0.1), x, y, ctx)
    for p, e in zip(model.parameters(), expected):
        assert torch.allclose(p, e, atol=1e-6)
    assert loss == pytest.approx(float(F.cross_entropy(F.linear(x, start[0], start[1]), y)))


def test_sam_second_pass_leaves_batchnorm_statistics_alone():
    torch.manual_seed(0)
    model, x, y = LinearNet(bn=True), torch.randn(8, 2) + 3.0, torch.zeros(8, dtype=torch.long)
    algo = build_algorithm("fedsam")
    algo.train_step(model, torch.optim.SGD(model.parameters(), lr=0.1), x, y, ClientContext(0, 0, torch.ones(3), 8, None))
    # one update with momentum 0.1 from 0: running_mean = 0.1 * batch mean
    assert torch.allclose(model.bn.running_mean, 0.1 * x.mean(0), atol=1e-6)
    assert int(model.bn.num_batches_tracked) == 1
    assert model.bn.momentum == 0.1
    with frozen_batchnorm_stats(model):
        model(x)
    assert int(model.bn.num_batches_tracked) == 1


def test_fedsam_composes_with_a_loss_method():
    klass = method_class("fedvls+fedsam")
    assert klass.train_step is FedSAM.train_step
    assert klass.loss is method_class("fedvls").loss
