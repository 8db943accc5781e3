"""FedMR (fedlib.algorithms.fedmr): the intra-class decorrelation loss by hand, against a direct
numpy computation, its invariants, and finite values and gradients at extremes."""

import math

import numpy as np
import pytest
import torch

from fedlib.algorithms.fedmr import intra_class_decorrelation, local_loss


def test_intra_class_loss_by_hand():
    # class 0: rows (1,0), (2,1), (3,5); class 1 has one sample and is skipped.
    # dim 0: mean 2, centred (-1,0,1), unbiased var 2/2 = 1      -> z0 = (-1, 0, 1)
    # dim 1: mean 2, centred (-2,-1,3), unbiased var 14/2 = 7    -> z1 = (-2, -1, 3)/sqrt(7)
    # K01 = (2 + 0 + 3)/sqrt(7) = 5/sqrt(7); mean of the 2 squared off-diagonals = 25/7
    # divided by the 3 counted samples -> 25/21
    features = torch.tensor([[1.0, 0.0], [2.0, 1.0], [3.0, 5.0], [9.0, -4.0]])
    labels = torch.tensor([0, 0, 0, 1])
    assert float(intra_class_decorrelation(features, labels, 3)) == pytest.approx(25 / 21, rel=1e-5)
    # add class 1's second sample (0,0) next to (9,-4): both dims centred +-(4.5, 2) -> z = (+-1/sqrt2)
    # per dim, K01 = 2 * 1/2 = 1; total (25/7 + 1) / (3 + 2) = 32/35
    features = torch.cat([features, torch.tensor([[0.0, 0.0]])])
    labels = torch.tensor([0, 0, 0, 1, 1])
    assert float(intra_class_decorrelation(features, labels, 3)) == pytest.approx(32 / 35, rel=1e-5)


def test_fedmr_local_loss_is_ce_plus_deco_times_intra():
    features = torch.tensor([[1.0, 0.0], [2.0, 1.0], [3.0, 5.0], [9.0, -4.0]])
    labels = torch.tensor([0, 0, 0, 1])
    logits = torch.zeros(4, 2)  # CE of uniform logits over 2 classes = ln 2
    value = local_loss(logits, features, labels, deco=4.0)
    assert float(value) == pytest.approx(math.log(2) + 4.0 * 25 / 21, rel=1e-5)


def test_intra_class_loss_matches_direct_numpy_computation():
    rng = np.random.default_rng(0)
    features, labels = rng.normal(size=(12, 5)), np.array([0, 1, 2, 0, 1, 0, 3, 1, 0, 2, 2, 1])
    total, counted = 0.0, 0
    for c in range(4):
        rows = features[labels == c]
        if len(rows) < 2:
            continue
        z = (rows - rows.mean(0)) / np.sqrt(1e-8 + rows.var(0, ddof=1))
        corr = z.T @ z
        off = corr[~np.eye(5, dtype=bool)]
        total += (off ** 2).mean()
        counted += len(rows)
    value = intra_class_decorrelation(torch.tensor(features, dtype=torch.float32), torch.tensor(labels), 4)
    assert float(value) == pytest.approx(total / counted, rel=1e-4)


def test_intra_class_loss_invariants():
    torch.manual_seed(0)
    features, labels = torch.randn(10, 4), torch.tensor([0, 1, 0, 1, 2, 0, 1, 0, 2, 1])
    reference = float(intra_class_decorrelation(features, labels, 3))
    order = torch.randperm(10)
    assert float(intra_class_decorrelation(features[order], labels[order], 3)) == pytest.approx(reference, rel=1e-5)
    # per-dimension standardisation: scaling and shifting the features changes nothing
    assert float(intra_class_decorrelation(3 * features + 7, labels, 3)) == pytest.approx(reference, rel=1e-4)
    # every class a singleton: nothing is counted
    assert float(intra_class_decorrelation(features[:3], torch.tensor([0, 1, 2]), 3)) == 0.0
    # orthogonal centred columns (+-1 patterns) are already decorrelated
    decorrelated = torch.tensor([[1.0, 1.0], [-1.0, 1.0], [1.0, -1.0], [-1.0, -1.0]])
    same_class = torch.zeros(4, dtype=torch.long)
    assert float(intra_class_decorrelation(decorrelated, same_class, 2)) == pytest.approx(0.0, abs=1e-6)


def test_fedmr_finite_at_extreme_values_and_gradients():
    logits = torch.tensor([[1e4, -1e4, 0.0], [-1e4, 1e4, 5.0], [0.0, 1e4, -1e4], [1e4, 0.0, 0.0]], requires_grad=True)
    features = (torch.tensor([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5], [2.0, 2.0]]) * 1e4).requires_grad_(True)
    labels = torch.tensor([0, 0, 1, 2])  # classes 1 and 2 are singletons
    value = local_loss(logits, features, labels, deco=4.0)
    value.backward()
    assert torch.isfinite(value)
    assert torch.isfinite(logits.grad).all() and torch.isfinite(features.grad).all()
    # the decorrelation term only pulls on samples of counted classes (n_c >= 2)
    assert features.grad[2:].abs().sum() == 0 and features.grad[:2].abs().sum() > 0
