"""FedRS (Li & Zhan, KDD 2021): restricted softmax for clients with missing classes.

A client that lacks some classes pushes their logits down on every sample it trains on, which
drags the shared classifier rows of those classes. FedRS softens that push: the logits of the
classes the client holds no sample of are scaled by alpha in (0, 1] before the softmax,

    z'_c = alpha * z_c  if n_{k,c} = 0,   z'_c = z_c otherwise;      L = CE(z', y)

alpha = 1 is FedAvg. alpha = 0.7 is the FedVLS appendix value (its code ran 0.5). Scaling the
logits (as the FedVLS code does) rather than the classifier weights differs from the original
FedRS only in the bias term of the missing classes' outputs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from fedlib.algorithms._common import vacant_classes
from fedlib.algorithms.base import Algorithm, ClientContext, Outputs, Range
from fedlib.core.registry import register


def restricted_logits(logits: Tensor, class_counts: Tensor, alpha: float = 0.7) -> Tensor:
    """Logits with the missing classes' entries multiplied by alpha."""
    missing = vacant_classes(class_counts)
    scale = torch.where(missing, torch.full_like(class_counts, alpha), torch.ones_like(class_counts))
    return logits * scale.to(logits.dtype)


def local_loss(logits: Tensor, labels: Tensor, class_counts: Tensor, alpha: float = 0.7) -> Tensor:
    """Cross-entropy on the restricted logits (batch mean)."""
    return F.cross_entropy(restricted_logits(logits, class_counts, alpha), labels)


@register
class FedRS(Algorithm):
    """Cross-entropy with the missing classes' logits scaled by alpha."""

    name = "fedrs"
    paper = "Li & Zhan, KDD 2021"
    defaults = {"alpha": 0.7}
    ranges = {"alpha": Range(0, 1, low_open=True)}

    def loss(self, out: Outputs, labels: Tensor, ctx: ClientContext,
             teacher_out: dict[str, Outputs]) -> Tensor:
        return local_loss(out.logits, labels, ctx.class_counts, alpha=self.hp["alpha"])
