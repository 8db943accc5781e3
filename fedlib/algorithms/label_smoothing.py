"""Label smoothing (Szegedy et al., "Rethinking the Inception Architecture", CVPR 2016).

A calibration baseline of the PKD and FedLMD comparison tables: the one-hot target is mixed with
the uniform distribution, ``q = (1 - eps) * onehot(y) + eps / C``, and the local loss is the
cross-entropy to q, ``(1 - eps) * CE(z, y) + eps * mean_c(-log p_c)``; eps = 0.1.
Aggregation is FedAvg.
"""

from __future__ import annotations


import torch.nn.functional as F
from torch import Tensor

from fedlib.algorithms.base import UNIT_INTERVAL, Algorithm, ClientContext, Outputs
from fedlib.core.registry import register


@register
class LabelSmoothing(Algorithm):
    """FedAvg with a label-smoothed cross-entropy."""

    name = "label_smoothing"
    paper = "Szegedy et al., CVPR 2016"
    defaults = {"smoothing": 0.1}
    ranges = {"smoothing": UNIT_INTERVAL}

    def loss(self, out: Outputs, labels: Tensor, ctx: ClientContext,
             teacher_out: dict[str, Outputs]) -> Tensor:
        return F.cross_entropy(out.logits, labels, label_smoothing=self.hp["smoothing"])
