"""FedNTD (Lee et al., NeurIPS 2022): not-true distillation from the received global model.

Local training forgets what the global model knew about classes the client rarely sees. FedNTD
keeps that knowledge by distilling the global model's prediction over the *not-true* classes
only: the true class's column is removed from both the teacher's and the student's softmax,
so the distillation never argues with the cross-entropy about the label itself.

    q^g_c = softmax(z_g / tau) over c != y,      q_c = softmax(z / tau) over c != y
    L = CE(z, y) + beta * tau^2 * KL(q^g || q)           (batch mean)

The teacher is a frozen copy of the global model received this round (no gradient). tau = 1
and beta = 1 are the official configuration; the FedVLS appendix ran it with beta = 0.1 (pass
``beta=0.1`` to reproduce those tables).

``teacher_mode`` (BatchNorm only; "eval" by default): "train" normalises the teacher's batch with
its own statistics instead of the running ones. The FedVLS repository's FedNTD client copies the
server's global model, which is in train mode, and calls it as it is (``clientntd.py``), so the
FedVLS tables take "train". The FedNTD code copies its one shared client model after the previous
client's evaluation left it in eval mode, so there the teacher is in eval mode (the run's very
first client aside).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from fedlib.algorithms._common import GLOBAL_TEACHER, TEACHER_MODES, global_teacher, masked_kl, true_class_mask
from fedlib.algorithms.base import NON_NEGATIVE, POSITIVE, Algorithm, ClientContext, Outputs
from fedlib.core.registry import register


def not_true_kl(logits: Tensor, global_logits: Tensor, labels: Tensor, tau: float = 1.0) -> Tensor:
    """Batch mean of KL(q^g || q) over the not-true classes, without the tau^2 factor."""
    not_true = ~true_class_mask(labels, logits.shape[-1])
    return masked_kl(global_logits, logits, not_true, tau=tau).mean()


def local_loss(logits: Tensor, global_logits: Tensor, labels: Tensor, tau: float = 1.0,
               beta: float = 1.0) -> Tensor:
    """CE + beta * tau^2 * KL over the not-true classes (FedNTD's local objective)."""
    distill = not_true_kl(logits, global_logits, labels, tau)
    return F.cross_entropy(logits, labels) + beta * tau ** 2 * distill


@register
class FedNTD(Algorithm):
    """Cross-entropy plus not-true distillation from the received global model."""

    name = "fedntd"
    paper = "Lee et al., NeurIPS 2022"
    defaults = {"tau": 1.0, "beta": 1.0, "teacher_mode": "eval"}
    choices = {"teacher_mode": TEACHER_MODES}
    ranges = {"tau": POSITIVE, "beta": NON_NEGATIVE}
    later_defaults = {"teacher_mode": "eval"}

    def client_context(self, server, ctx: ClientContext) -> None:
        super().client_context(server, ctx)
        ctx.teachers[GLOBAL_TEACHER] = global_teacher(server, train_mode=self.hp["teacher_mode"] == "train")

    def loss(self, out: Outputs, labels: Tensor, ctx: ClientContext,
             teacher_out: dict[str, Outputs]) -> Tensor:
        return local_loss(out.logits, teacher_out[GLOBAL_TEACHER].logits, labels,
                          tau=self.hp["tau"], beta=self.hp["beta"])
