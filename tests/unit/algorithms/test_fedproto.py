"""FedProto (fedlib.algorithms.fedproto): the loss with missing prototypes and the prototype
aggregation, by hand."""

import pytest
import torch

from fedlib.algorithms import fedproto
from tests.unit.algorithms.helpers import log_softmax, t


def test_fedproto_loss_by_hand_and_missing_prototypes():
    logits, labels = t([[1.0, 0.0], [0.0, 0.0]]), torch.tensor([0, 1])
    features = t([[1.0, 3.0], [10.0, 10.0]])
    prototypes, available = t([[0.0, 1.0], [0.0, 0.0]]), t([1.0, 0.0])
    # sample 1: ((1-0)^2 + (3-1)^2) / 2 = 2.5; sample 2: class 1 has no prototype -> 0
    ce = (-log_softmax([1.0, 0.0])[0] - log_softmax([0.0, 0.0])[1]) / 2
    value = fedproto.local_loss(logits, features, labels, prototypes, available, lam=0.5)
    assert value.item() == pytest.approx(ce + 0.5 * (2.5 + 0.0) / 2, rel=1e-6)


def test_fedproto_aggregation_by_hand():
    # client A: class 0 features sum [2, 2] over 2 samples -> mean [1, 1]; client B: class 0 mean
    # [3, 5], class 1 mean [4, 4]; class 2 held by nobody
    sums = [t([[2.0, 2.0], [0.0, 0.0], [0.0, 0.0]]), t([[3.0, 5.0], [8.0, 8.0], [0.0, 0.0]])]
    counts = [t([2.0, 0.0, 0.0]), t([1.0, 2.0, 0.0])]
    prototypes, available = fedproto.aggregate_prototypes(sums, counts)
    assert prototypes.tolist() == [[2.0, 3.0], [4.0, 4.0], [0.0, 0.0]]
    assert available.tolist() == [1.0, 1.0, 0.0]
