"""FedNTD (fedlib.algorithms.fedntd): not-true distillation, by hand. Every expected number is
computed here with ``math`` step by step, not with the code under test."""

import pytest
import torch

from fedlib.algorithms import fedntd
from tests.unit.algorithms.helpers import ce, kl, softmax, t


def test_fedntd_hand_computed():
    z = [[1.0, 2.0, 0.5], [0.0, -1.0, 2.0]]
    zg = [[0.5, 0.0, 1.5], [1.0, 1.0, 3.0]]
    y = [1, 2]
    tau, beta = 2.0, 0.5
    # sample 0: not-true classes {0, 2}; sample 1: {0, 1}
    kl0 = kl(softmax([0.5 / tau, 1.5 / tau]), softmax([1.0 / tau, 0.5 / tau]))
    kl1 = kl(softmax([1.0 / tau, 1.0 / tau]), softmax([0.0 / tau, -1.0 / tau]))
    ce_mean = (ce(z[0], 1) + ce(z[1], 2)) / 2
    expected = ce_mean + beta * tau ** 2 * (kl0 + kl1) / 2
    got = fedntd.local_loss(t(z), t(zg), torch.tensor(y), tau=tau, beta=beta)
    assert got.item() == pytest.approx(expected, rel=1e-5)


def test_fedntd_ignores_true_class_logit():
    torch.manual_seed(0)
    z, zg = torch.randn(6, 5), torch.randn(6, 5)
    y = torch.tensor([0, 1, 2, 3, 4, 0])
    before = fedntd.not_true_kl(z, zg, y, tau=1.5)
    z2, zg2 = z.clone(), zg.clone()
    z2[torch.arange(6), y] += 7.0
    zg2[torch.arange(6), y] -= 5.0
    assert fedntd.not_true_kl(z2, zg2, y, tau=1.5).item() == pytest.approx(before.item(), abs=1e-6)
    assert before.item() > 0.0
