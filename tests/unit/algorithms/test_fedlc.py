"""FedLC (fedlib.algorithms.fedlc): the calibrated cross-entropy by hand."""

import pytest
import torch

from fedlib.algorithms import fedlc
from tests.unit.algorithms.helpers import ce, t


def test_fedlc_hand_computed():
    counts = t([16.0, 1.0, 0.0])
    z = [[1.0, 2.0, 5.0], [0.0, 0.5, -1.0]]
    tau = 0.5
    margins = [tau * 16 ** -0.25, tau * 1.0]  # 0.25 and 0.5; class 2 (n=0) leaves the softmax
    calibrated = [[zi[0] - margins[0], zi[1] - margins[1]] for zi in z]
    expected = (ce(calibrated[0], 0) + ce(calibrated[1], 1)) / 2
    got = fedlc.local_loss(t(z), torch.tensor([0, 1]), counts, tau=tau)
    assert got.item() == pytest.approx(expected, rel=1e-5)


def test_a_tau_float32_rounds_to_zero_still_drops_unseen_classes_instead_of_nan():
    import torch

    from fedlib.algorithms.fedlc import calibrated_logits

    logits = torch.zeros(1, 3)
    shifted = calibrated_logits(logits, torch.tensor([4, 0, 1]), tau=1e-300)  # 0.0 in float32
    assert not torch.isnan(shifted).any()
    assert shifted[0, 1] == float("-inf") and torch.isfinite(shifted[0, [0, 2]]).all()
