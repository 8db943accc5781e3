"""FedAvg+KD / FedCoDL (fedlib.algorithms.fedavg_kd): CE plus tempered KD, by hand."""

import pytest
import torch

from fedlib.algorithms import fedavg_kd
from tests.unit.algorithms.helpers import ce, kl, softmax, t


def test_fedavg_kd_hand_computed():
    z, zg = [[1.0, 0.0, -1.0]], [[0.0, 2.0, 0.0]]
    tau, beta = 2.0, 0.3
    expected = ce(z[0], 0) + beta * tau ** 2 * kl(softmax([0.0, 1.0, 0.0]), softmax([0.5, 0.0, -0.5]))
    got = fedavg_kd.local_loss(t(z), t(zg), torch.tensor([0]), tau=tau, beta=beta)
    assert got.item() == pytest.approx(expected, rel=1e-5)
