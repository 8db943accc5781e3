"""FedLC (fedlib.algorithms.fedlc): the calibrated cross-entropy by hand."""

import pytest
import torch

from fedlib.algorithms import fedlc
from tests.algorithms.helpers import ce, t


def test_fedlc_hand_computed():
    counts = t([16.0, 1.0, 0.0])
    z = [[1.0, 2.0, 5.0], [0.0, 0.5, -1.0]]
    tau = 0.5
    margins = [tau * 16 ** -0.25, tau * 1.0]  # 0.25 and 0.5; class 2 (n=0) leaves the softmax
    calibrated = [[zi[0] - margins[0], zi[1] - margins[1]] for zi in z]
    expected = (ce(calibrated[0], 0) + ce(calibrated[1], 1)) / 2
    got = fedlc.local_loss(t(z), torch.tensor([0, 1]), counts, tau=tau)
    assert got.item() == pytest.approx(expected, rel=1e-5)
