"""FedLC (Zhang et al., ICML 2022): federated learning with logit calibration.

Under label skew a client's softmax cross-entropy pushes its rare classes down. FedLC subtracts
from every logit a margin that grows as the class gets rarer on the client, then applies the
ordinary cross-entropy to the calibrated logits:

    z'_c = z_c - tau * n_{k,c}^(-1/4)          L = CE(z', y)

A class the client never sees has an infinite margin, so it leaves the softmax altogether
(z'_c = -inf); the label's own class always has n_{k,y} >= 1. tau = 0.5 is the FedVLS appendix
value (the FedVLS code ran 0.1).

tau must be > 0. At tau = 0 the unseen classes' margin is 0 * inf, NaN in floating point (the
run diverges), and no reading of it is FedLC: plain cross-entropy (every margin 0) is FedAvg, and
the limit tau -> 0+ keeps the infinite margins, i.e. the softmax restricted to the client's classes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from fedlib.algorithms.base import POSITIVE, Algorithm, ClientContext, Outputs
from fedlib.core.registry import register


def calibrated_logits(logits: Tensor, class_counts: Tensor, tau: float = 0.5) -> Tensor:
    """z_c - tau * n_c^(-1/4); -inf for classes with n_c = 0 (for any tau > 0, also one that
    float32 rounds to 0, where tau * inf would be NaN)."""
    counts = class_counts.to(logits.dtype)
    margin = torch.where(counts > 0, tau * counts.pow(-0.25), torch.full_like(counts, float("inf")))
    return logits - margin


def local_loss(logits: Tensor, labels: Tensor, class_counts: Tensor, tau: float = 0.5) -> Tensor:
    """Cross-entropy on the calibrated logits (batch mean)."""
    return F.cross_entropy(calibrated_logits(logits, class_counts, tau), labels)


@register
class FedLC(Algorithm):
    """Cross-entropy on logits shifted by -tau * n_c^(-1/4)."""

    name = "fedlc"
    paper = "Zhang et al., ICML 2022"
    defaults = {"tau": 0.5}
    ranges = {"tau": POSITIVE}  # tau = 0 is 0 * inf for unseen classes (module docstring)

    def loss(self, out: Outputs, labels: Tensor, ctx: ClientContext,
             teacher_out: dict[str, Outputs]) -> Tensor:
        return local_loss(out.logits, labels, ctx.class_counts, tau=self.hp["tau"])
