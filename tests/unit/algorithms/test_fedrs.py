"""FedRS (fedlib.algorithms.fedrs): the restricted softmax by hand."""

import pytest
import torch

from fedlib.algorithms import fedrs
from fedlib.core.registry import build_algorithm
from fedlib.errors import FedlibError
from tests.unit.algorithms.helpers import ce, t


def test_fedrs_hand_computed():
    counts = t([2.0, 0.0, 1.0])
    z = [[1.0, 3.0, 0.0], [0.5, -2.0, 1.0]]
    alpha = 0.7
    restricted = [[zi[0], alpha * zi[1], zi[2]] for zi in z]  # class 1 is missing locally
    expected = (ce(restricted[0], 0) + ce(restricted[1], 2)) / 2
    got = fedrs.local_loss(t(z), torch.tensor([0, 2]), counts, alpha=alpha)
    assert got.item() == pytest.approx(expected, rel=1e-5)
    with pytest.raises(FedlibError):
        build_algorithm("fedrs", {"alpha": 1.5})
