"""feature_kd (fedlib.algorithms.feature_kd): CE plus mu times the feature MSE, by hand."""

import pytest
import torch
import torch.nn.functional as F

from fedlib.algorithms import feature_kd
from fedlib.core.registry import build_algorithm
from fedlib.errors import FedlibError


def test_feature_kd_loss_is_ce_plus_mu_times_mse_by_hand():
    logits, labels = torch.tensor([[2.0, 0.0]]), torch.tensor([0])
    features, global_features = torch.tensor([[1.0, 3.0]]), torch.tensor([[0.0, 1.0]])
    ce = F.cross_entropy(logits, labels).item()
    mse = ((1 - 0) ** 2 + (3 - 1) ** 2) / 2  # mean over the feature dimensions
    value = feature_kd.local_loss(logits, features, global_features, labels, mu=0.1)
    assert value.item() == pytest.approx(ce + 0.1 * mse, rel=1e-6)


def test_feature_kd_gradient_reaches_the_student_only():
    features = torch.tensor([[1.0, 3.0]], requires_grad=True)
    global_features = torch.tensor([[0.0, 1.0]], requires_grad=True)
    logits = torch.zeros(1, 2, requires_grad=True)
    feature_kd.local_loss(logits, features, global_features, torch.tensor([1]), mu=1.0).backward()
    assert torch.allclose(features.grad, torch.tensor([[1.0, 2.0]]))  # d/dh mean((h - g)^2)
    assert global_features.grad is None


def test_feature_kd_is_registered_and_rejects_negative_mu():
    assert build_algorithm("feature_kd").hp["mu"] == pytest.approx(0.01)
    with pytest.raises(FedlibError, match="mu"):
        build_algorithm("feature_kd", {"mu": -1.0})
