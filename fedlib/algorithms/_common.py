"""Small tensor helpers shared by the distillation and logit-adjustment losses.

Every helper is a pure function of tensors (no ``.item()``, no branching on values) and stays
finite for logits as large as |z| = 1e4: class restrictions are done by masking inside
log-softmax rather than by taking the log of probabilities, and a row whose mask is empty
contributes exactly zero instead of NaN.

The module also builds the frozen "teacher" copy of the received global model that FedNTD,
FedLMD, FedVLS and FedAvg+KD distil from, one per round, cached on the server.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from fedlib.core.state import ServerState

GLOBAL_TEACHER = "global"  # the key under which teachers of the received global model live
# ``teacher_mode`` of the methods that distil from the received global model: "eval" uses
# BatchNorm's running statistics, "train" each batch's own (a copy of a train-mode model)
TEACHER_MODES = ("eval", "train")


# ---------------------------------------------------------------------- masks
def true_class_mask(labels: Tensor, num_classes: int) -> Tensor:
    """(B, C) bool, True at each sample's own label (compared with the class indices: one_hot
    would check the labels' range, reading two values back to the host every step)."""
    return labels.unsqueeze(-1) == torch.arange(num_classes, device=labels.device)


def vacant_classes(class_counts: Tensor) -> Tensor:
    """(C,) bool, True for classes the client holds no sample of (FedVLS's set O)."""
    return class_counts <= 0


def majority_classes(class_counts: Tensor) -> Tensor:
    """(C,) bool, FedLMD's majority labels M_k = {c : n_{k,c} > n_k / C} (strict)."""
    return class_counts > class_counts.sum() / class_counts.numel()


def log_prior(class_counts: Tensor) -> Tensor:
    """(C,) log p(c) = log(n_c / n); -inf for vacant classes (they drop out of a softmax)."""
    prior = class_counts / class_counts.sum().clamp_min(1)
    return torch.log(prior)  # log(0) = -inf on purpose, never added to the label's own logit


# ---------------------------------------------------------------------- masked softmax / KL
def masked_log_softmax(logits: Tensor, mask: Tensor) -> Tensor:
    """log-softmax over the classes where ``mask`` is True; 0 outside the mask.

    ``mask`` broadcasts to ``logits`` ((C,) or (B, C)). A row with an empty mask gives all zeros.
    """
    mask = mask.expand_as(logits)
    # the most negative finite value keeps logsumexp finite even when the whole row is masked
    lowest = torch.finfo(logits.dtype).min
    filled = logits.masked_fill(~mask, lowest)
    log_probs = filled - torch.logsumexp(filled, dim=-1, keepdim=True)
    return log_probs.masked_fill(~mask, 0.0)


def masked_kl(teacher_logits: Tensor, student_logits: Tensor, teacher_mask: Tensor,
              student_mask: Tensor | None = None, tau: float = 1.0) -> Tensor:
    """Per-sample KL(p_t || p_s), shape (B,), with both softmaxes taken at temperature ``tau``.

    p_t is the softmax of the teacher over ``teacher_mask``; p_s the softmax of the student over
    ``student_mask`` (defaults to ``teacher_mask``; it must contain the teacher's support). The
    teacher is detached: gradients flow into ``student_logits`` only. Rows whose teacher mask is
    empty contribute 0.
    """
    student_mask = teacher_mask if student_mask is None else student_mask
    teacher_mask = teacher_mask.expand_as(student_logits)
    log_p_t = masked_log_softmax(teacher_logits.detach() / tau, teacher_mask)
    log_p_s = masked_log_softmax(student_logits / tau, student_mask)
    p_t = log_p_t.exp() * teacher_mask  # exp(0) outside the mask must not count
    return (p_t * (log_p_t - log_p_s)).sum(dim=-1)


def full_kl(teacher_logits: Tensor, student_logits: Tensor, tau: float = 1.0) -> Tensor:
    """Per-sample KL(softmax(t/tau) || softmax(s/tau)) over all classes, shape (B,)."""
    everything = torch.ones_like(student_logits, dtype=torch.bool)
    return masked_kl(teacher_logits, student_logits, everything, tau=tau)


# ---------------------------------------------------------------------- teachers
def global_teacher(server: ServerState, train_mode: bool = False, key: str = GLOBAL_TEACHER) -> nn.Module:
    """A frozen copy of the global model the clients of this round received.

    One module per ``key`` is kept in ``server.cache`` (not in ``server.extras``: it is rebuilt
    from the global model, so it need not be checkpointed) and reloaded once per round.
    ``train_mode`` keeps BatchNorm on batch statistics (FedVLS's official code does that).
    """
    cache = server.cache.setdefault("global_teachers", {})
    entry = cache.get(key)
    if entry is None:
        entry = cache[key] = {"round": None, "model": server.new_model()}
    teacher = entry["model"]
    if entry["round"] != server.round:
        teacher.load_state_dict(server.model.state_dict())
        teacher.requires_grad_(False)
        entry["round"] = server.round
    teacher.train(train_mode)
    return teacher


def round_cache(server: ServerState, key: str) -> dict:
    """A dict in ``server.cache`` that starts empty in every round (objects built for this
    round's clients: per-client teachers, per-round totals)."""
    entry = server.cache.get(key)
    if entry is None or entry[0] != server.round:
        entry = server.cache[key] = (server.round, {})
    return entry[1]
