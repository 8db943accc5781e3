"""FedGKD (fedlib.algorithms.fedgkd): the loss and the model history by hand, and no gradient into
the teacher."""

import pytest
import torch

from fedlib.algorithms import fedgkd
from tests.unit.algorithms.helpers import log_softmax, t, tempered_kl


def test_fedgkd_loss_by_hand_and_history():
    logits, teacher, labels = t([[1.0, 0.0]]), t([[0.0, 2.0]]), torch.tensor([0])
    expected = -log_softmax([1.0, 0.0])[0] + 0.1 * 4.0 * tempered_kl([0.0, 2.0], [1.0, 0.0], 2.0)
    value = fedgkd.local_loss(logits, teacher, labels, gamma=0.1, tau=2.0)
    assert value.item() == pytest.approx(expected, rel=1e-6)
    history = []
    for step in range(4):
        history = fedgkd.push_history(history, {"w": t([float(step)]), "n": torch.tensor(step)}, size=3)
    assert [h["w"].item() for h in history] == [1.0, 2.0, 3.0]
    averaged = fedgkd.average_states(history)
    assert averaged["w"].item() == pytest.approx(2.0) and averaged["n"].item() == 3


def test_fedgkd_teacher_gets_no_gradient():
    teacher = torch.randn(3, 4, requires_grad=True)
    logits = (torch.randn(3, 4) * 1e4).requires_grad_(True)
    value = fedgkd.local_loss(logits, teacher * 1e4, torch.tensor([0, 1, 2]))
    value.backward()
    assert teacher.grad is None and torch.isfinite(value) and torch.isfinite(logits.grad).all()
