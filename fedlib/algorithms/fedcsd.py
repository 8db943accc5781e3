"""FedCSD (Yan et al., "Rethinking Client Drift in Federated Learning: A Logit Perspective").

Local models drift from the global model in logit space; FedCSD distils a *refined* teacher
into every local model, and filters the teacher's worst soft labels:

- teacher: a moving average of the global models, ``w_xi <- alpha * w_xi + (1 - alpha) * w_G``
  (Eq. 12), kept in ``server.extras["fedcsd_teacher"]``; ``use_tma=False`` uses the received
  global model instead (Table III);
- class prototypes: P_k[c], the mean teacher logit vector over client k's class-c samples,
  averaged by the server into P_G (Eqs. 6-7, Alg. 1 lines 3-7);
- similarity distillation: ``delta_hat = softmax_c cos(z_i, P_G[c])``, ``z_hat = delta_hat * z_xi``
  and ``L_CSD = tau^2 * KL(softmax(z_hat / tau) || softmax(z_i / tau))`` (Eqs. 8-11);
- adaptive mask: a sample is distilled only when the teacher's probability of its true class
  exceeds 1/C (Eqs. 13-14; ``mask_type="hard"`` is Table IV's 1[argmax teacher = y], Eq. 16).
  Local objective (Eq. 15): ``L = CE + mu * mean_i(M_i * L_CSD,i)``.

mu = 0.001, tau = 10 (Office-Caltech-10: 0.5, 4), alpha = 0.9. ``variant="official"`` is the
authors' code (local prototypes, mask on z_hat, gradient through delta_hat, ``(1 - mu) * CE``);
its switches ``teacher_mode`` and ``prototype_batches`` follow the variant when left at "auto".
What the code does and why fedlib reads it so: docs/facts.md#fedcsd, and for the two switches
docs/facts.md#fedcsd-teacher-mode-and-prototype-batches. Each client logs ``mask_filtered`` (Fig.
5). The round's teacher module and prototypes live in ``server.cache["fedcsd_round"]`` (rebuilt
from ``server.extras`` after a resume, never checkpointed).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Any, Iterable, Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fedlib.algorithms.base import POSITIVE, UNIT_INTERVAL, Algorithm, ClientContext, Outputs
from fedlib.core.registry import register
from fedlib.core.state import ServerState, keyed_seed
from fedlib.errors import FedlibError, one_of

VARIANTS = ("paper", "official")
MASK_TYPES = ("adaptive", "hard")
_EPS = 1e-12  # guards the cosine of a zero prototype row
TEACHER = "fedcsd_teacher"
CACHE = "fedcsd_round"  # server.cache key: this round's teacher module and prototypes
MODE_CHOICES = ("auto", "eval", "train")
PROTOTYPE_STREAM = 1  # extra key of the prototype pass's seed: (seed, round, client, 1)


# ====================================================================== the loss (pure)
def similarity_weights(logits: Tensor, prototypes: Tensor) -> Tensor:
    """delta_hat (B, C): softmax over c of cos(z_i, P[c]) (Eq. 8-9)."""
    unit_logits = F.normalize(logits, dim=1, eps=_EPS)
    unit_prototypes = F.normalize(prototypes, dim=1, eps=_EPS)
    return torch.softmax(unit_logits @ unit_prototypes.T, dim=1)


def teacher_mask(mask_logits: Tensor, labels: Tensor, mask_type: str = "adaptive") -> Tensor:
    """(B,) float: 1 where the teacher's soft label is kept (Eq. 13, or Eq. 16 for "hard")."""
    if mask_type == "adaptive":
        true_log_prob = torch.log_softmax(mask_logits, dim=1).gather(1, labels[:, None])[:, 0]
        return (true_log_prob > -math.log(mask_logits.shape[1])).float()
    if mask_type == "hard":
        return (mask_logits.argmax(dim=1) == labels).float()
    raise one_of("FedCSD mask type", mask_type, MASK_TYPES)


def csd_term(logits: Tensor, teacher_logits: Tensor, labels: Tensor, prototypes: Tensor,
             tau: float = 10.0, variant: str = "paper", use_similarity: bool = True,
             use_mask: bool = True, mask_type: str = "adaptive") -> tuple[Tensor, Tensor]:
    """The masked distillation term mean_i M_i * L_CSD,i (Eq. 14) and the mask M (B,)."""
    if variant not in VARIANTS:
        raise one_of("FedCSD variant", variant, VARIANTS)
    teacher_logits, prototypes = teacher_logits.detach(), prototypes.detach()
    refined = teacher_logits
    if use_similarity:
        # the paper treats the similarity weights as part of the (constant) teacher signal
        student = logits.detach() if variant == "paper" else logits
        refined = similarity_weights(student, prototypes) * teacher_logits
    if use_mask:
        mask_logits = teacher_logits if variant == "paper" else refined.detach()
        mask = teacher_mask(mask_logits, labels, mask_type)
    else:
        mask = torch.ones_like(labels, dtype=logits.dtype)
    log_teacher = torch.log_softmax(refined / tau, dim=1)
    log_student = torch.log_softmax(logits / tau, dim=1)
    kl = (log_teacher.exp() * (log_teacher - log_student)).sum(dim=1)
    return (tau ** 2) * (mask * kl).mean(), mask


def local_loss(logits: Tensor, teacher_logits: Tensor, labels: Tensor, prototypes: Tensor,
               mu: float = 0.001, tau: float = 10.0, variant: str = "paper", *,
               use_similarity: bool = True, use_mask: bool = True,
               mask_type: str = "adaptive") -> Tensor:
    """FedCSD's local objective for one batch (Eq. 15; see the module docstring for variants).

    ``prototypes`` is the (C, C) matrix of class prototype logits (row c = prototype of class c).
    """
    num_classes = logits.shape[1]
    if tuple(prototypes.shape) != (num_classes, num_classes):
        raise FedlibError(f"FedCSD prototypes must have shape ({num_classes}, {num_classes}) to match "
                          f"the logits; got {tuple(prototypes.shape)}")
    distill, _ = csd_term(logits, teacher_logits, labels, prototypes, tau, variant,
                          use_similarity, use_mask, mask_type)
    ce = F.cross_entropy(logits, labels)
    ce_weight = 1.0 if variant == "paper" else 1.0 - mu
    return ce_weight * ce + mu * distill


# ====================================================================== teacher and prototypes
def moving_average(teacher_state: dict[str, Tensor], global_state: dict[str, Tensor],
                   alpha: float) -> dict[str, Tensor]:
    """Eq. 12: alpha * teacher + (1 - alpha) * global for float entries; counters copy the global."""
    updated = {}
    for key, global_value in global_state.items():
        if global_value.is_floating_point():
            updated[key] = alpha * teacher_state[key] + (1.0 - alpha) * global_value
        else:
            updated[key] = global_value.clone()
    return updated


@torch.no_grad()
def class_logit_sums(model: nn.Module, batches: Iterable[tuple[Tensor, Tensor]], num_classes: int,
                     device: torch.device) -> tuple[Tensor, Tensor]:
    """Per-class sums of the model's logits (C, C) and per-class sample counts (C,) over ``batches``
    (the model is run in whatever mode it is in)."""
    sums = torch.zeros(num_classes, num_classes, device=device)
    counts = torch.zeros(num_classes, device=device)
    for x, y in batches:
        sums.index_add_(0, y, model(x).float())
        counts.index_add_(0, y, torch.ones_like(y, dtype=counts.dtype))
    return sums, counts


@contextmanager
def private_rng(seed: int, device: torch.device) -> Iterator[None]:
    """Global RNG draws (dropout) inside come from ``seed``; the caller's stream is restored after."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        yield


def client_prototypes(sums: Tensor, counts: Tensor) -> Tensor:
    """P_k (Eq. 6): mean logit vector per class; zero rows for classes the client lacks."""
    return sums / counts.clamp_min(1)[:, None]


def global_prototypes(prototypes: list[Tensor], holds: list[Tensor]) -> Tensor:
    """P_G (Eq. 7): per class, the mean of the prototypes of the clients that hold the class."""
    stacked, held = torch.stack(prototypes), torch.stack(holds).float()  # (K, C, C), (K, C)
    return (stacked * held[:, :, None]).sum(0) / held.sum(0).clamp_min(1)[:, None]


# ====================================================================== the method
@register
class FedCSD(Algorithm):
    """Class prototype similarity distillation with an adaptive mask and a moving-average teacher."""

    name = "fedcsd"
    paper = "Yan et al., Rethinking Client Drift in Federated Learning: A Logit Perspective"
    defaults = {"mu": 0.001, "tau": 10.0, "alpha": 0.9, "variant": "paper", "use_similarity": True,
                "use_mask": True, "use_tma": True, "mask_type": "adaptive", "teacher_mode": "auto",
                "prototype_batches": "auto"}
    dataset_defaults = {"office_caltech10": {"mu": 0.5, "tau": 4.0}}
    choices = {"variant": VARIANTS, "mask_type": MASK_TYPES, "teacher_mode": MODE_CHOICES,
               "prototype_batches": MODE_CHOICES}
    ranges = {"mu": UNIT_INTERVAL, "tau": POSITIVE, "alpha": UNIT_INTERVAL}
    later_defaults = {"teacher_mode": "auto", "prototype_batches": "auto"}

    @classmethod
    def result_revision(cls, hparams: dict[str, Any]) -> int:
        """1: the official variant's teacher runs in train mode and its prototypes come from
        augmented, shuffled batches (before: eval mode, fixed unaugmented pass)."""
        return int(hparams["variant"] == "official" or "train" in (hparams["teacher_mode"], hparams["prototype_batches"]))

    def __init__(self, hparams: dict[str, Any] | None = None):
        super().__init__(hparams)
        self.hp = {**self.defaults, **self.hp}

    def _official(self, switch: str) -> bool:
        """Whether an 'auto'-able switch (``teacher_mode``, ``prototype_batches``) is "train"."""
        value = self.hp[switch]
        return value == "train" or (value == "auto" and self.hp["variant"] == "official")

    # ------------------------------------------------------------------ server side
    def setup(self, server: ServerState) -> None:
        super().setup(server)
        if self.hp["use_tma"]:
            server.extras[TEACHER] = {k: v.detach().clone() for k, v in server.model.state_dict().items()}

    def end_round(self, server: ServerState, updates) -> None:
        super().end_round(server, updates)
        if self.hp["use_tma"]:
            server.extras[TEACHER] = moving_average(server.extras[TEACHER], server.model.state_dict(),
                                                    self.hp["alpha"])

    # ------------------------------------------------------------------ client side
    def client_context(self, server: ServerState, ctx: ClientContext) -> None:
        super().client_context(server, ctx)
        cache = self._round_state(server)
        ctx.teachers[TEACHER] = cache["teacher"]
        key = "global" if self.hp["variant"] == "paper" else ctx.client_id
        ctx.tensors["fedcsd_prototypes"] = cache["prototypes"][key]
        ctx.metrics["mask_filtered"] = self._filtered_fraction(server, ctx, cache)

    def loss(self, out: Outputs, labels: Tensor, ctx: ClientContext,
             teacher_out: dict[str, Outputs]) -> Tensor:
        hp = self.hp
        return local_loss(out.logits, teacher_out[TEACHER].logits, labels, ctx.tensors["fedcsd_prototypes"],
                          hp["mu"], hp["tau"], hp["variant"], use_similarity=hp["use_similarity"],
                          use_mask=hp["use_mask"], mask_type=hp["mask_type"])

    # ------------------------------------------------------------------ helpers
    def _round_state(self, server: ServerState) -> dict[str, Any]:
        """One teacher and one set of prototypes per round, built when its first client asks and
        kept in ``server.cache`` (the teacher module is reused from round to round)."""
        cache = server.cache.get(CACHE)
        if cache is not None and cache["round"] == server.round:
            return cache
        teacher = cache["teacher"] if cache is not None else server.new_model()
        state = server.extras[TEACHER] if self.hp["use_tma"] else server.model.state_dict()
        teacher.load_state_dict(state)
        teacher.train(self._official("teacher_mode")).requires_grad_(False)
        cache = server.cache[CACHE] = {"round": server.round, "teacher": teacher,
                                       "prototypes": self._prototypes(server, teacher)}
        return cache

    def _prototypes(self, server: ServerState, teacher: nn.Module) -> dict[Any, Tensor]:
        """P_k of every client of this round (Alg. 1 lines 3-5) and their average P_G (line 7)."""
        clients = server.round_clients  # set by the engine before the round's first client trains
        prototypes, holds = {}, []
        for client_id in clients:
            with private_rng(self._side_seed(server, client_id), server.device):
                batches = self._prototype_batches(server, client_id)
                sums, counts = class_logit_sums(teacher, batches, server.num_classes, server.device)
            prototypes[client_id] = client_prototypes(sums, counts)
            holds.append(counts > 0)
        prototypes["global"] = global_prototypes([prototypes[k] for k in clients], holds)
        return prototypes

    @staticmethod
    def _side_seed(server: ServerState, client_id: int) -> int:
        """The seed of a client's prototype pass, apart from its training stream."""
        return keyed_seed(server.cfg.seed, server.round, client_id, PROTOTYPE_STREAM)

    def _prototype_batches(self, server: ServerState, client_id: int) -> Iterator[tuple[Tensor, Tensor]]:
        """One pass over the client's data: augmented, shuffled training batches ("train") or the
        fixed-order unaugmented pass ("eval")."""
        data = server.data.client(client_id)
        if not self._official("prototype_batches"):
            return data.eval_batches()
        generator = torch.Generator(device=server.device).manual_seed(self._side_seed(server, client_id))
        return data.train_batches(server.cfg.batch_size, 1, generator)

    @torch.no_grad()
    def _filtered_fraction(self, server: ServerState, ctx: ClientContext, cache: dict) -> float:
        """Share of the client's samples the mask drops before local training (Fig. 5)."""
        if not self.hp["use_mask"]:
            return 0.0
        hp, teacher, kept = self.hp, cache["teacher"], 0.0
        student = server.model
        was_training = student.training
        student.eval()
        with private_rng(self._side_seed(server, ctx.client_id), server.device):  # train-mode dropout
            for x, y in ctx.data.eval_batches():
                teacher_logits = teacher(x)
                # the paper variant's mask ignores the student, so skip its forward pass
                student_logits = teacher_logits if hp["variant"] == "paper" else student(x)
                _, mask = csd_term(student_logits, teacher_logits, y, ctx.tensors["fedcsd_prototypes"],
                                   hp["tau"], hp["variant"], hp["use_similarity"], True, hp["mask_type"])
                kept += float(mask.sum())
        student.train(was_training)
        return 1.0 - kept / max(1, ctx.num_samples)
