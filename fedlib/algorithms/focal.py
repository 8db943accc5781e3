"""Focal loss (Lin et al., "Focal Loss for Dense Object Detection", ICCV 2017) as a local objective.

A class-imbalance baseline of the PKD and FedLMD comparison tables: cross-entropy down-weights
samples the model already classifies well,

    FL(z, y) = -(1 - p_y)^gamma * log p_y,   p = softmax(z),

averaged over the batch; gamma = 2 (the original paper's default), gamma = 0 is plain CE. No
per-class alpha weighting is used. Aggregation is FedAvg.
"""

from __future__ import annotations


import torch
from torch import Tensor

from fedlib.algorithms.base import NON_NEGATIVE, Algorithm, ClientContext, Outputs
from fedlib.core.registry import register


def focal_loss(logits: Tensor, labels: Tensor, gamma: float = 2.0) -> Tensor:
    """Batch mean of -(1 - p_y)^gamma * log p_y, computed from log-probabilities for stability."""
    log_p_true = torch.log_softmax(logits, dim=1).gather(1, labels[:, None])[:, 0]
    # 1 - p_y via expm1 keeps precision when p_y is close to 1
    not_true = (-torch.expm1(log_p_true)).clamp_min(0.0)
    return -(not_true ** gamma * log_p_true).mean()


@register(aliases=("focal_loss",))
class Focal(Algorithm):
    """FedAvg with the focal loss in place of cross-entropy."""

    name = "focal"
    paper = "Lin et al., ICCV 2017"
    defaults = {"gamma": 2.0}
    ranges = {"gamma": NON_NEGATIVE}

    def loss(self, out: Outputs, labels: Tensor, ctx: ClientContext,
             teacher_out: dict[str, Outputs]) -> Tensor:
        return focal_loss(out.logits, labels, self.hp["gamma"])
