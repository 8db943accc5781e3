"""FedLMD-Tf (Lu et al., ACM MM 2023, Sec. 4.3): label-masking distillation without a teacher.

Running the global model on every batch costs a second forward pass. FedLMD-Tf replaces the
masked teacher p'_g of FedLMD by a fixed vector that is uniform over the client's non-majority
labels (Eq. 8), which turns the distillation into a label-smoothing-like regulariser:

    mu_k(i) = 1 / |S|  for i in S = {i not in M_k, i != y},  0 elsewhere
    L = CE(z, y) + beta * KL(mu_k || p'_k)          (Eq. 7, batch mean)

with p'_k the student's softmax(z / tau) over the not-true classes, exactly as in FedLMD. Like
our FedLMD teacher, mu_k also leaves out the true label y (Eq. 8 as printed keeps it, which
would make the KL infinite since p'_k(y) = 0); the released code for this variant does not run,
so this follows the paper's intent.

``switch_round`` (FedLMD Fig. 8): from that round on the method is FedLMD (teacher = received
global model); -1 (default) never switches, 0 is FedLMD from the start. ``teacher_mode`` is
FedLMD's, for the rounds after the switch ("eval" by default, "train": BatchNorm on batch statistics).

``variant="official"`` multiplies the KL by tau^2, as the code's criterion does; the teacher
stays the exact uniform vector above (the code's own target has a wrong normaliser). The
student's softmax excludes y exactly, where the code subtracts 1000 from z_y / tau: the two agree
unless z_y / tau exceeds the other tempered logits by nearly 1000. After ``switch_round`` the
official variant is FedLMD's official loss, with the code's additive masks (see ``fedlmd``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from fedlib.algorithms import fedlmd
from fedlib.algorithms._common import GLOBAL_TEACHER, TEACHER_MODES, global_teacher, majority_classes, masked_kl
from fedlib.algorithms.base import NON_NEGATIVE, POSITIVE, Algorithm, ClientContext, Outputs, Range
from fedlib.core.registry import register
from fedlib.errors import FedlibError


def teacher_distribution(labels: Tensor, class_counts: Tensor) -> Tensor:
    """mu_k (Eq. 8), shape (B, C): uniform over non-majority, not-true labels."""
    teacher_mask, _ = fedlmd.distillation_support(labels, class_counts)
    mass = teacher_mask.float()
    return mass / mass.sum(dim=-1, keepdim=True).clamp_min(1)


def local_loss(logits: Tensor, labels: Tensor, class_counts: Tensor, tau: float = 1.0,
               beta: float = 1.0, variant: str = "paper") -> Tensor:
    """CE + beta * KL(mu_k || p'_k) (FedLMD Eq. 7), batch mean."""
    teacher_mask, student_mask = fedlmd.distillation_support(labels, class_counts)
    # constant teacher logits give the uniform distribution over the teacher mask
    uniform_logits = torch.zeros_like(logits)
    kl = masked_kl(uniform_logits, logits, teacher_mask, student_mask, tau=tau).mean()
    return F.cross_entropy(logits, labels) + beta * fedlmd.distillation_scale(tau, variant) * kl


@register
class FedLMDTf(Algorithm):
    """FedLMD with a fixed uniform-over-minority teacher; optionally FedLMD from a given round."""

    name = "fedlmd_tf"
    paper = "Lu et al., ACM MM 2023 (teacher-free variant)"
    defaults = {"tau": 1.0, "beta": 1.0, "variant": "paper", "switch_round": -1, "teacher_mode": "eval"}
    choices = {"variant": fedlmd.VARIANTS, "teacher_mode": TEACHER_MODES}
    # switch_round: -1 never switches, r >= 0 switches to FedLMD at round r
    ranges = {"tau": POSITIVE, "beta": NON_NEGATIVE, "switch_round": Range(-1, None, integer=True)}
    later_defaults = {"teacher_mode": "eval"}

    @classmethod
    def short_run(cls, method_args: dict, rounds: int) -> tuple[dict, int, str]:
        """A run that switches to the global teacher switches at round 0."""
        if method_args.get("switch_round", -1) < 0:
            return {}, rounds, ""
        return {"switch_round": 0}, rounds, "fedlmd_tf: switch_round 0, so round 0 trains with the global teacher"

    @classmethod
    def result_revision(cls, hparams: dict) -> int:
        """1: after ``switch_round`` the official variant trains with FedLMD's literal masks."""
        return int(hparams["variant"] == "official" and hparams["switch_round"] >= 0)

    @classmethod
    def check_run(cls, hparams: dict, cfg) -> None:
        """A switch round the run never reaches is ``switch_round=-1`` under another hash."""
        super().check_run(hparams, cfg)
        if hparams["switch_round"] >= cfg.rounds:
            raise FedlibError(f"fedlmd_tf switch_round={hparams['switch_round']} is never reached in {cfg.rounds} "
                              "rounds (0-based): it would be switch_round=-1 stored apart; lower it or raise rounds")

    def uses_teacher(self, round_index: int) -> bool:
        """Whether clients of this round train as FedLMD (after ``switch_round``)."""
        switch = int(self.hp["switch_round"])
        return 0 <= switch <= round_index

    def client_context(self, server, ctx: ClientContext) -> None:
        super().client_context(server, ctx)
        ctx.metrics["majority_classes"] = float(majority_classes(ctx.class_counts).sum())
        if self.uses_teacher(ctx.round):
            ctx.teachers[GLOBAL_TEACHER] = global_teacher(server, train_mode=self.hp["teacher_mode"] == "train")

    def loss(self, out: Outputs, labels: Tensor, ctx: ClientContext,
             teacher_out: dict[str, Outputs]) -> Tensor:
        hp = self.hp
        if GLOBAL_TEACHER in teacher_out:  # switched to FedLMD
            return fedlmd.local_loss(out.logits, teacher_out[GLOBAL_TEACHER].logits, labels, ctx.class_counts,
                                     tau=hp["tau"], beta=hp["beta"], variant=hp["variant"])
        return local_loss(out.logits, labels, ctx.class_counts, tau=hp["tau"], beta=hp["beta"],
                          variant=hp["variant"])
