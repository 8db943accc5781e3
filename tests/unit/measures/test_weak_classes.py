"""fedlib.measures.weak_classes: PKD's weak-class discovery on a planted confusion matrix, the distance
filter, the class statistics by hand, and the check of explicit groups."""

import math

import pytest
import torch
from torch import nn

from fedlib.errors import FedlibError
from fedlib.measures.weak_classes import (check_groups, class_statistics, discover_groups, feature_distances,
                                 misclassification_probabilities, weak_pairs)
from tests.helpers import planted_confusion


def test_discovery_finds_the_planted_overlapping_groups():
    confusion = planted_confusion()
    # mean accuracies: {0, 6} = 0.70 < {2, 4, 6} = 0.733..., so {0, 6} is ranked first
    assert discover_groups(confusion, confusion_ratio=0.5) == [[0, 6], [2, 4, 6]]
    assert discover_groups(confusion, max_groups=1) == [[0, 6]]
    assert discover_groups(confusion, grouping="components") == [[0, 2, 4, 6]]
    # class 6 with all its partners; 0's star {0, 6} and 2's star {2, 4, 6} are inside it
    assert discover_groups(confusion, grouping="stars") == [[0, 2, 4, 6]]
    # a lower ratio lets 7 <-> 9 (0.025 >= 0.2 * 0.11) in as a third, best-accuracy group
    assert discover_groups(confusion, confusion_ratio=0.2) == [[0, 6], [2, 4, 6], [7, 9]]


def test_distance_filter_drops_confused_but_distant_pairs():
    confusion = planted_confusion()
    distances = torch.full((10, 10), 5.0).fill_diagonal_(0.0)
    for a, b in [(0, 6), (2, 4), (2, 6)]:  # (4, 6) is confused but far away
        distances[a, b] = distances[b, a] = 1.0
    edges = weak_pairs(confusion, distances, confusion_ratio=0.5, distance_quantile=0.05)
    assert {(a, b) for a, b in torch.nonzero(edges).tolist() if a < b} == {(0, 6), (2, 4), (2, 6)}
    assert discover_groups(confusion, distances, distance_quantile=0.05) == [[0, 6], [2, 6], [2, 4]]


class FixedModel(nn.Module):
    """features = x, logits = x @ W (a linear 'network' with known outputs)."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.weight = nn.Parameter(weight)

    def forward(self, x, return_features=False):
        logits = x @ self.weight
        return (x, logits) if return_features else logits


def test_class_statistics_matrices_by_hand():
    model = FixedModel(torch.eye(3))  # logits = features
    x = torch.tensor([[2.0, 0, 0], [0, 2.0, 0], [0, 0, 2.0], [0, 0, 0]])
    labels = torch.tensor([0, 0, 1, 2])
    stats = class_statistics(model, [(x[:2], labels[:2]), (x[2:], labels[2:])], num_classes=3)
    big, small = math.exp(2) / (math.exp(2) + 2), 1 / (math.exp(2) + 2)
    soft = misclassification_probabilities(stats, "soft")
    # class 0: one sample with softmax (big, small, small), one with (small, big, small)
    assert soft[0].tolist() == pytest.approx([(big + small) / 2, (big + small) / 2, small])
    assert soft[1].tolist() == pytest.approx([small, small, big])
    assert soft[2].tolist() == pytest.approx([1 / 3] * 3)
    hard = misclassification_probabilities(stats, "hard")
    assert hard.tolist() == [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]  # argmax ties -> 0
    assert stats.class_accuracy.tolist() == [0.5, 0.0, 0.0]
    # class means: (1, 1, 0), (0, 0, 2), (0, 0, 0)
    distances = feature_distances(stats)
    assert distances[0, 1].item() == pytest.approx(math.sqrt(1 + 1 + 4))
    assert distances[0, 2].item() == pytest.approx(math.sqrt(2))
    assert distances[1, 2].item() == pytest.approx(2.0)


def test_explicit_groups_are_validated():
    assert check_groups([[6, 0], [2, 4, 6]], 10) == [[0, 6], [2, 4, 6]]
    for bad in ([[0]], [[0, 0]], [[0, 10]], [0, 1], "0,6", [[0, 1.5]]):
        with pytest.raises(FedlibError):
            check_groups(bad, 10)
