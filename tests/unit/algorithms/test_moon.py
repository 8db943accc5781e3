"""MOON (fedlib.algorithms.moon): the model-contrastive loss by hand, its invariants and extremes,
and the method's loss as CE plus mu times it."""

import math

import pytest
import torch
import torch.nn.functional as F

from fedlib.algorithms.base import ClientContext, Outputs
from fedlib.algorithms.moon import contrastive_loss
from fedlib.core.registry import build_algorithm


def test_contrastive_loss_by_hand():
    z = torch.tensor([[1.0, 0.0], [1.0, 1.0]], requires_grad=True)
    z_glob = torch.tensor([[2.0, 0.0], [1.0, 0.0]], requires_grad=True)
    z_prev = torch.tensor([[0.0, 3.0], [-1.0, 0.0]], requires_grad=True)
    # sample 0: cos = 1 and 0 -> logits (2, 0): -log(e^2 / (e^2 + 1)) = log(1 + e^-2)
    # sample 1: cos = 1/sqrt2 and -1/sqrt2 -> logits (sqrt2, -sqrt2): log(1 + e^(-2 sqrt2))
    expected = (math.log(1 + math.exp(-2)) + math.log(1 + math.exp(-2 * math.sqrt(2)))) / 2
    value = contrastive_loss(z, z_glob, z_prev, 0.5)
    assert float(value.detach()) == pytest.approx(expected, rel=1e-6)
    value.backward()
    assert z.grad is not None and z_glob.grad is None and z_prev.grad is None


def test_contrastive_loss_invariants_and_extremes():
    torch.manual_seed(0)
    z, other = torch.randn(4, 6), torch.randn(4, 6)
    # positive == negative: every sample gives -log(1/2) = log 2
    assert float(contrastive_loss(z, other, other, 0.5)) == pytest.approx(math.log(2))
    big = contrastive_loss(1e4 * z, 1e4 * z, -1e4 * z, 0.5)
    assert torch.isfinite(big) and float(big) == pytest.approx(math.log(1 + math.exp(-4)), rel=1e-5)
    zero = contrastive_loss(torch.zeros(2, 3), z[:2, :3], other[:2, :3], 0.5)
    assert torch.isfinite(zero)


def test_moon_loss_is_ce_plus_mu_contrastive():
    torch.manual_seed(0)
    algo = build_algorithm("moon", {"mu": 0.5, "tau": 0.5})
    feats, logits, labels = torch.randn(3, 4), torch.randn(3, 5), torch.tensor([0, 4, 2])
    teachers = {"moon_global": Outputs(torch.randn(3, 4), torch.randn(3, 5)),
                "moon_previous": Outputs(torch.randn(3, 4), torch.randn(3, 5))}
    value = algo.loss(Outputs(feats, logits), labels, ClientContext(0, 0, torch.ones(5), 3, None), teachers)
    expected = F.cross_entropy(logits, labels) + 0.5 * contrastive_loss(
        feats, teachers["moon_global"].features, teachers["moon_previous"].features, 0.5)
    assert float(value) == pytest.approx(float(expected))
