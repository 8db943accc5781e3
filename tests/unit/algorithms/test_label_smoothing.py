"""Label smoothing (fedlib.algorithms.label_smoothing): the loss by hand."""

from types import SimpleNamespace

import pytest
import torch

from fedlib.core.registry import build_algorithm
from tests.unit.algorithms.helpers import log_softmax, t


def test_label_smoothing_by_hand():
    method = build_algorithm("label_smoothing", {"smoothing": 0.2})
    logits, labels = t([[1.0, 0.0, -1.0]]), torch.tensor([0])
    log_p = log_softmax([1.0, 0.0, -1.0])
    expected = 0.8 * -log_p[0] + 0.2 * -sum(log_p) / 3
    out = SimpleNamespace(logits=logits, features=None)
    assert method.loss(out, labels, None, {}).item() == pytest.approx(expected, rel=1e-6)
