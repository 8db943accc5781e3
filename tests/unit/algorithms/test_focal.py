"""Focal loss (fedlib.algorithms.focal): by hand, CE at gamma 0, finite at extreme logits."""

import math

import pytest
import torch
import torch.nn.functional as F

from fedlib.algorithms.focal import focal_loss
from tests.unit.algorithms.helpers import t

E = math.e


def test_focal_loss_by_hand_and_limits():
    # p = softmax([2, 0]) = [e^2, 1] / (e^2 + 1); FL = -(1 - p_0)^2 log p_0
    p0 = E ** 2 / (E ** 2 + 1)
    value = focal_loss(t([[2.0, 0.0]]), torch.tensor([0]), gamma=2.0)
    assert value.item() == pytest.approx(-((1 - p0) ** 2) * math.log(p0), rel=1e-5)
    logits, labels = torch.randn(5, 4), torch.randint(0, 4, (5,))
    plain_ce = F.cross_entropy(logits, labels).item()
    assert focal_loss(logits, labels, 0.0).item() == pytest.approx(plain_ce, rel=1e-6)
    extreme = (torch.randn(5, 4) * 1e4).requires_grad_(True)
    focal_loss(extreme, labels).backward()
    assert torch.isfinite(extreme.grad).all()
