"""FedAvg + feature distillation: the "+ feature distillation" arm of FedCSD's Fig. 1.

FedCSD's exploratory study (Sec. III) compares plain local cross-entropy with two ways of
holding a local model near the global model it started from: logit distillation (that is
:mod:`fedlib.algorithms.fedavg_kd`) and feature distillation, which matches the penultimate
features of the received global model with a mean squared error,

    L = CE(z, y) + mu * MSE(h, h_g)      (MSE averaged over samples and feature dimensions)

with mu = 0.01 in the paper's study. The teacher is the frozen received global model.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from fedlib.algorithms._common import GLOBAL_TEACHER, global_teacher
from fedlib.algorithms.base import NON_NEGATIVE, Algorithm, ClientContext, Outputs
from fedlib.core.registry import register


def local_loss(logits: Tensor, features: Tensor, global_features: Tensor, labels: Tensor,
               mu: float = 0.01) -> Tensor:
    """CE + mu * mean squared error between the student's and the global model's features."""
    return F.cross_entropy(logits, labels) + mu * F.mse_loss(features, global_features.detach())


@register(aliases=("fedavg_feature_kd",))
class FeatureKD(Algorithm):
    """Cross-entropy plus an MSE pull of the local features towards the global model's."""

    name = "feature_kd"
    paper = "FedCSD (Yan et al.) Fig. 1 exploratory study: + feature distillation"
    defaults = {"mu": 0.01}
    ranges = {"mu": NON_NEGATIVE}

    def client_context(self, server, ctx: ClientContext) -> None:
        super().client_context(server, ctx)
        ctx.teachers[GLOBAL_TEACHER] = global_teacher(server)

    def loss(self, out: Outputs, labels: Tensor, ctx: ClientContext,
             teacher_out: dict[str, Outputs]) -> Tensor:
        return local_loss(out.logits, out.features, teacher_out[GLOBAL_TEACHER].features, labels,
                          mu=self.hp["mu"])
