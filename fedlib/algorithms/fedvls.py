"""FedVLS / FedED (Guo et al.): vacant-class distillation and logit suppression.

Under strong label skew a client holds majority classes, minority classes and *vacant* classes
O = {c : n_{k,c} = 0}. Local training forgets what the global model knew about the vacant
classes and still confuses minority samples with majority classes. With p(c) = n_{k,c} / n_k
the client's class prior, the local objective (Eq. 6) is

    L       = L_cal + lambda * L_dis + L_logit
    L_cal   = CE on z_c + log p(c)                      (Eq. 2: vacant classes leave the softmax)
    L_dis   = KL(q_g || q) over the vacant classes only  (Eq. 3: temperature 1, batch mean)
    L_logit = sum_{c not in O} p(c) log( (1/B) sum_i 1[y_i != c] e^{z_{i,c}} )      (Eqs. 4-5)

lambda = 0.1 (MNIST, CIFAR-10), 0.5 (CIFAR-100, TinyImageNet); the teacher is the frozen global
model received this round. ``distill`` and ``suppress`` switch L_dis and L_logit off for the
ablation (Table 5: L_cal alone is the first row). ``variant="official"`` is the authors' code:
log(p + 1e-9) in L_cal, 0.005 * L_sup (the not-label mask multiplied in rather than entries left
out), and through ``weight_decay_mode`` and ``teacher_mode`` at "auto" no weight decay and a
train-mode teacher. The paper's L_logit has no lower bound and diverges on MNIST Dir(0.05), so
the notebooks train the official variant. Details: docs/facts.md#fedvls-feded.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fedlib.algorithms._common import (GLOBAL_TEACHER, global_teacher, log_prior, masked_kl,
                                       true_class_mask, vacant_classes)
from fedlib.algorithms.base import NON_NEGATIVE, Algorithm, ClientContext, Outputs
from fedlib.core.registry import register
from fedlib.errors import FedlibError, one_of

VARIANTS = ("paper", "official")
OFFICIAL_SUPPRESSION_WEIGHT = 0.005  # the factor the authors' code puts on L_sup
OFFICIAL_PRIOR_EPS = 1e-9  # the authors' code takes log(p + 1e-9)


# ---------------------------------------------------------------------- the three terms
def calibrated_ce(logits: Tensor, labels: Tensor, class_counts: Tensor, variant: str = "paper") -> Tensor:
    """L_cal (Eq. 2): CE on z + log p(c), batch mean."""
    if variant == "official":
        shift = torch.log(class_counts / class_counts.sum().clamp_min(1) + OFFICIAL_PRIOR_EPS)
    else:
        shift = log_prior(class_counts)
    return F.cross_entropy(logits + shift.to(logits.dtype), labels)


def vacant_distillation(logits: Tensor, global_logits: Tensor, class_counts: Tensor) -> Tensor:
    """L_dis (Eq. 3): batch mean of KL(q_g || q) over the vacant classes (0 when |O| <= 1)."""
    vacant = vacant_classes(class_counts)
    return masked_kl(global_logits, logits, vacant).mean()


def logit_suppression(logits: Tensor, labels: Tensor, class_counts: Tensor) -> Tensor:
    """L_logit (Eqs. 4-5): sum over non-vacant c of p(c) * log mean_i 1[y_i != c] e^{z_ic}."""
    not_label = ~true_class_mask(labels, logits.shape[-1])  # (B, C)
    lowest = torch.finfo(logits.dtype).min
    per_class = torch.logsumexp(logits.masked_fill(~not_label, lowest), dim=0) - math.log(logits.shape[0])
    # a class that labels every sample of the batch has no term (log 0): leave it out
    present = not_label.any(dim=0) & ~vacant_classes(class_counts)
    prior = class_counts / class_counts.sum().clamp_min(1)
    return (prior.to(logits.dtype) * torch.where(present, per_class, torch.zeros_like(per_class))).sum()


def official_suppression(logits: Tensor, labels: Tensor, class_counts: Tensor) -> Tensor:
    """L_sup of the authors' code (without its 0.005 factor); see docs/facts.md#fedvls-in-the-authors-code."""
    num_classes = logits.shape[-1]
    prior = class_counts / class_counts.sum().clamp_min(1)
    adjusted = logits - torch.log(prior + OFFICIAL_PRIOR_EPS).to(logits.dtype) + math.log(1.0 / num_classes)
    not_label = (~true_class_mask(labels, num_classes)).to(logits.dtype)
    per_class = torch.logsumexp(adjusted * not_label, dim=0) - math.log(logits.shape[0])
    return (prior.to(logits.dtype) * per_class).sum()


# ---------------------------------------------------------------------- the local objective
def local_loss(logits: Tensor, global_logits: Tensor | None, labels: Tensor, class_counts: Tensor,
               lam: float = 0.1, variant: str = "paper", distill: bool = True,
               suppress: bool = True) -> Tensor:
    """FedVLS's local objective (Eq. 6, or the official code's form), batch mean.

    ``distill`` / ``suppress`` switch L_dis / the logit-suppression term off (ablation);
    ``global_logits`` may be None only when ``distill`` is False.
    """
    if variant not in VARIANTS:
        raise one_of("fedvls variant", variant, VARIANTS)
    total = calibrated_ce(logits, labels, class_counts, variant)
    if suppress and variant == "official":
        total = total + OFFICIAL_SUPPRESSION_WEIGHT * official_suppression(logits, labels, class_counts)
    elif suppress:
        total = total + logit_suppression(logits, labels, class_counts)
    if distill:
        if global_logits is None:
            raise FedlibError("fedvls distillation needs the global model's logits; pass global_logits or distill=False")
        total = total + lam * vacant_distillation(logits, global_logits, class_counts)
    return total


@register(aliases=("feded",))
class FedVLS(Algorithm):
    """Calibrated CE + lambda * vacant-class distillation + logit suppression."""

    name = "fedvls"
    paper = "Guo et al., AAAI 2025 (FedVLS) / FedED"
    defaults = {"lam": 0.1, "variant": "paper", "distill": True, "suppress": True,
                "weight_decay_mode": "auto", "teacher_mode": "auto"}
    ranges = {"lam": NON_NEGATIVE}
    dataset_defaults = {"mnist": {"lam": 0.1}, "cifar10": {"lam": 0.1},
                        "cifar100": {"lam": 0.5}, "tinyimagenet": {"lam": 0.5}}
    choices = {"variant": VARIANTS, "weight_decay_mode": ("auto", "run", "zero"),
               "teacher_mode": ("auto", "eval", "train")}

    def _official(self, switch: str, official_value: str) -> bool:
        """Whether an 'auto'-able switch takes the official code's behaviour."""
        value = self.hp.get(switch, "auto")
        return value == official_value or (value == "auto" and self.hp.get("variant") == "official")

    def client_context(self, server, ctx: ClientContext) -> None:
        super().client_context(server, ctx)
        vacant = vacant_classes(ctx.class_counts)
        ctx.metrics["vacant_classes"] = float(vacant.sum())
        if self.hp["distill"]:
            ctx.teachers[GLOBAL_TEACHER] = global_teacher(server, train_mode=self._official("teacher_mode", "train"))

    def make_optimizer(self, model: nn.Module, lr: float, momentum: float, weight_decay: float,
                       ctx: ClientContext | None = None) -> torch.optim.Optimizer:
        # the official code forces weight decay to 0 for FedVLS clients only
        decay = 0.0 if self._official("weight_decay_mode", "zero") else weight_decay
        return super().make_optimizer(model, lr, momentum, decay, ctx)

    def loss(self, out: Outputs, labels: Tensor, ctx: ClientContext,
             teacher_out: dict[str, Outputs]) -> Tensor:
        teacher = teacher_out.get(GLOBAL_TEACHER)
        return local_loss(out.logits, None if teacher is None else teacher.logits, labels, ctx.class_counts,
                          lam=self.hp["lam"], variant=self.hp["variant"], distill=self.hp["distill"],
                          suppress=self.hp["suppress"])
