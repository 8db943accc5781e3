"""Every loss of the loss-based methods (FedNTD, FedVLS in both variants, FedLMD, FedLMD-Tf, FedLC,
FedRS, FedAvg+KD) on the same inputs: finite at extreme logits, and no gradient into the teacher."""

import torch

from fedlib.algorithms import fedavg_kd, fedlc, fedlmd, fedlmd_tf, fedntd, fedrs, fedvls
from tests.unit.algorithms.helpers import t


def _all_losses(z, zg, y, counts):
    """Every seed loss (and variant) on the same inputs."""
    return {
        "fedntd": fedntd.local_loss(z, zg, y, tau=2.0),
        "fedvls": fedvls.local_loss(z, zg, y, counts, lam=0.5),
        "fedvls_official": fedvls.local_loss(z, zg, y, counts, variant="official"),
        "fedlmd": fedlmd.local_loss(z, zg, y, counts, tau=2.0),
        "fedlmd_tf": fedlmd_tf.local_loss(z, y, counts, tau=2.0),
        "fedlc": fedlc.local_loss(z, y, counts),
        "fedrs": fedrs.local_loss(z, y, counts),
        "fedavg_kd": fedavg_kd.local_loss(z, zg, y, tau=2.0),
    }


def test_losses_finite_at_extreme_logits():
    counts = t([5.0, 3.0, 1.0, 0.0, 0.0])
    y = torch.tensor([0, 1, 2, 0, 1, 0])
    signs = torch.tensor([[1, -1, 1, -1, 1]] * 6, dtype=torch.float32)
    z = (1e4 * signs * torch.tensor([[1.0], [-1.0]]).repeat(3, 1)).requires_grad_()
    zg = -1e4 * signs
    for name, value in _all_losses(z, zg, y, counts).items():
        assert torch.isfinite(value), name
        (grad,) = torch.autograd.grad(value, z)
        assert torch.isfinite(grad).all(), name


def test_gradients_flow_into_student_logits_only():
    torch.manual_seed(4)
    counts = t([5.0, 3.0, 1.0, 0.0, 0.0])
    y = torch.tensor([0, 1, 2, 0])
    for name in ("fedntd", "fedvls", "fedvls_official", "fedlmd", "fedlmd_tf", "fedavg_kd"):
        z = torch.randn(4, 5, requires_grad=True)
        zg = torch.randn(4, 5, requires_grad=True)
        _all_losses(z, zg, y, counts)[name].backward()
        assert zg.grad is None, name
        assert z.grad is not None and z.grad.abs().sum() > 0, name
