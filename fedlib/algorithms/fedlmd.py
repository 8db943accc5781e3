"""FedLMD (Lu et al., ACM MM 2023): label-masking distillation.

A client learns its *majority* labels M_k = {c : n_{k,c} > n_k / C} well from its own data and
forgets the rest. FedLMD therefore distils from the received global model only what the client
lacks: the teacher's prediction with the majority labels masked out (Eq. 3), and the student's
prediction with the true label masked out, so the distillation does not fight the cross-entropy
over the label (Eq. 4):

    p'_g(i) = softmax(z_g / tau) over i not in M_k and i != y,  0 elsewhere
    p'_k(i) = softmax(z / tau) over i != y,                     0 at y
    L = CE(z, y) + beta * KL(p'_g || p'_k)                       (Eqs. 5-6, batch mean)

The teacher also drops y, as the authors' code does (Eq. 3 keeps it, which would make the KL
infinite); a sample whose teacher support is empty contributes 0. tau = 1 and beta = 1 as in the
code; the FedVLS appendix ran FedLMD with beta = 0.1. ``variant="official"`` applies the code's
additive -1000 masks and its tau^2 factor (they differ from exclusion where the offsets cancel);
``teacher_mode`` ("eval" by default, the mode of the code's teacher; "train": BatchNorm on batch
statistics). Details: docs/facts.md#fedlmd-and-fedlmd-tf, docs/facts.md#teachers-batchnorm-mode.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from fedlib.algorithms._common import (GLOBAL_TEACHER, TEACHER_MODES, global_teacher, majority_classes,
                                       masked_kl, masked_log_softmax, true_class_mask)
from fedlib.algorithms.base import NON_NEGATIVE, POSITIVE, Algorithm, ClientContext, Outputs
from fedlib.core.registry import register
from fedlib.errors import one_of

VARIANTS = ("paper", "official")
OFFICIAL_MASK_OFFSET = 1000.0  # what the authors' code subtracts from a masked tempered logit


def distillation_support(labels: Tensor, class_counts: Tensor) -> tuple[Tensor, Tensor]:
    """(teacher_mask, student_mask), both (B, C) bool: non-majority and not-true / not-true."""
    not_true = ~true_class_mask(labels, class_counts.numel())
    return not_true & ~majority_classes(class_counts), not_true


def teacher_distribution(global_logits: Tensor, labels: Tensor, class_counts: Tensor,
                         tau: float = 1.0) -> Tensor:
    """p'_g (Eq. 3), shape (B, C): no mass on majority labels nor on the true label."""
    teacher_mask, _ = distillation_support(labels, class_counts)
    log_p = masked_log_softmax(global_logits.detach() / tau, teacher_mask)
    return log_p.exp() * teacher_mask


def distillation_scale(tau: float, variant: str) -> float:
    """1 for the paper's Eq. 5; tau^2 for the authors' code."""
    if variant not in VARIANTS:
        raise one_of("fedlmd variant", variant, VARIANTS)
    return tau ** 2 if variant == "official" else 1.0


def official_kl(logits: Tensor, global_logits: Tensor, labels: Tensor, class_counts: Tensor,
                tau: float = 1.0) -> Tensor:
    """Per-sample KL of the authors' code, shape (B,): additive -1000 masks, not exclusion.

    Teacher: softmax(z_g/tau - 1000 [majority] - 1000 [true]); student: log_softmax(z/tau -
    1000 [true]); both over all C classes, without the tau^2 factor.
    """
    true = true_class_mask(labels, logits.shape[-1]).to(logits.dtype)
    majority = majority_classes(class_counts).to(logits.dtype)
    # two subtractions in the code's order, so a majority true label gets -1000 twice
    masked = global_logits.detach() / tau - OFFICIAL_MASK_OFFSET * majority - OFFICIAL_MASK_OFFSET * true
    teacher = F.softmax(masked, dim=-1)
    log_student = F.log_softmax(logits / tau - OFFICIAL_MASK_OFFSET * true, dim=-1)
    # nn.KLDivLoss's pointwise rule, t log t - t log q (0 where t = 0), written out: it has a vmap rule
    return (torch.xlogy(teacher, teacher) - teacher * log_student).sum(dim=-1)


def distillation_kl(logits: Tensor, global_logits: Tensor, labels: Tensor, class_counts: Tensor,
                    tau: float = 1.0, variant: str = "paper") -> Tensor:
    """Per-sample KL(p'_g || p'_k), shape (B,): exact exclusion (paper) or the code's masks."""
    if variant == "official":
        return official_kl(logits, global_logits, labels, class_counts, tau)
    teacher_mask, student_mask = distillation_support(labels, class_counts)
    return masked_kl(global_logits, logits, teacher_mask, student_mask, tau=tau)


def local_loss(logits: Tensor, global_logits: Tensor, labels: Tensor, class_counts: Tensor,
               tau: float = 1.0, beta: float = 1.0, variant: str = "paper") -> Tensor:
    """CE + beta * KL(p'_g || p'_k) (FedLMD Eq. 5), batch mean; tau^2 and the code's masks
    under ``variant="official"``."""
    scale = distillation_scale(tau, variant)  # also rejects an unknown variant
    kl = distillation_kl(logits, global_logits, labels, class_counts, tau, variant).mean()
    return F.cross_entropy(logits, labels) + beta * scale * kl


@register
class FedLMD(Algorithm):
    """Cross-entropy plus distillation of the global model's non-majority predictions."""

    name = "fedlmd"
    paper = "Lu et al., ACM MM 2023"
    defaults = {"tau": 1.0, "beta": 1.0, "variant": "paper", "teacher_mode": "eval"}
    choices = {"variant": VARIANTS, "teacher_mode": TEACHER_MODES}
    ranges = {"tau": POSITIVE, "beta": NON_NEGATIVE}
    later_defaults = {"teacher_mode": "eval"}

    @classmethod
    def result_revision(cls, hparams: dict) -> int:
        """1: the official variant applies the code's additive -1000 masks literally (before: exact
        exclusion, which differs where the masks cancel on the teacher)."""
        return int(hparams["variant"] == "official")

    def client_context(self, server, ctx: ClientContext) -> None:
        super().client_context(server, ctx)
        ctx.metrics["majority_classes"] = float(majority_classes(ctx.class_counts).sum())
        ctx.teachers[GLOBAL_TEACHER] = global_teacher(server, train_mode=self.hp["teacher_mode"] == "train")

    def loss(self, out: Outputs, labels: Tensor, ctx: ClientContext,
             teacher_out: dict[str, Outputs]) -> Tensor:
        return local_loss(out.logits, teacher_out[GLOBAL_TEACHER].logits, labels, ctx.class_counts,
                          tau=self.hp["tau"], beta=self.hp["beta"], variant=self.hp["variant"])
