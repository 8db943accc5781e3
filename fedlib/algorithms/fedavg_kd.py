"""FedAvg + KD (the FedCodl-style baseline): full-class distillation from the global model.

The plain way to keep the global model's knowledge during local training: the student matches
the received global model's softened prediction over *all* classes,

    L = CE(z, y) + beta * tau^2 * KL(softmax(z_g / tau) || softmax(z / tau))   (batch mean)

with the usual tau^2 of Hinton et al. so the gradient scale does not depend on tau. It is the
"FedKD" row FedNTD, FedLMD and FedVLS compare against and the FedCodl entry of PKD's Table 7;
no paper of ours fixes its hyperparameters, so beta = 1 and tau = 1.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from fedlib.algorithms._common import GLOBAL_TEACHER, full_kl, global_teacher
from fedlib.algorithms.base import NON_NEGATIVE, POSITIVE, Algorithm, ClientContext, Outputs
from fedlib.core.registry import register


def local_loss(logits: Tensor, global_logits: Tensor, labels: Tensor, tau: float = 1.0,
               beta: float = 1.0) -> Tensor:
    """CE + beta * tau^2 * KL over all classes."""
    distill = full_kl(global_logits, logits, tau).mean()
    return F.cross_entropy(logits, labels) + beta * tau ** 2 * distill


@register(aliases=("fedkd", "fedcodl"))
class FedAvgKD(Algorithm):
    """Cross-entropy plus full-class distillation from the received global model."""

    name = "fedavg_kd"
    paper = "Hinton et al. 2015 KD applied locally (FedCodl-style baseline)"
    defaults = {"tau": 1.0, "beta": 1.0}
    ranges = {"tau": POSITIVE, "beta": NON_NEGATIVE}

    def client_context(self, server, ctx: ClientContext) -> None:
        super().client_context(server, ctx)
        ctx.teachers[GLOBAL_TEACHER] = global_teacher(server)

    def loss(self, out: Outputs, labels: Tensor, ctx: ClientContext,
             teacher_out: dict[str, Outputs]) -> Tensor:
        return local_loss(out.logits, teacher_out[GLOBAL_TEACHER].logits, labels,
                          tau=self.hp["tau"], beta=self.hp["beta"])
