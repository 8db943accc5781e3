"""The algorithm interface: a federated method is a handful of hooks on top of FedAvg.

The engine owns the loop (sample clients, train locally, aggregate, evaluate, checkpoint) and
calls these hooks at fixed points. A method overrides only what its paper changes:

=====================  ===========================================================  ==========
hook                   when the engine calls it                                     example
=====================  ===========================================================  ==========
``setup``              once, before round 0 (server state lives in ``server.extras``) FedCSD
``client_context``     before a client trains: attach teachers / per-client tensors  FedNTD
``loss``               every local batch: the local objective from the outputs       FedVLS
``penalty``            every local batch: a term on the parameters                    FedProx
``before_step``        after backward, before the optimiser step: edit gradients     SCAFFOLD
``train_step``         one whole local step (forward, backward, update)               FedSAM
``client_upload``      after local training: extra things the client sends           SCAFFOLD
``aggregate``          the server rule that turns client states into the new global   FedAvgM
``end_round``          after aggregation: update server-side state                    FedCSD
``round_metrics``      extra numbers to log for the round                             PKD
=====================  ===========================================================  ==========

``loss`` is a pure function of tensors (student outputs, teacher outputs, labels and the
client's tensors): no Python branching on tensor values, so it also runs on the stacked,
many-clients-at-once path of the engine.

Methods combine by composition (``"fedlmd+fedprox"``, ``"fedvls+fedsam"``): each hook comes from
the one part that overrides it, hooks that accumulate (``setup``, ``client_context``,
``client_upload``, ``end_round``, ``round_metrics``) run for every part through ``super()``.
Two parts that override the same exclusive hook (two losses, two server rules) is an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

if TYPE_CHECKING:  # pragma: no cover
    from fedlib.engine import ClientData, ServerState


@dataclass
class Outputs:
    """What a model says about a batch: penultimate features (B, D) and logits (B, C)."""

    features: Tensor
    logits: Tensor


@dataclass
class ClientContext:
    """Everything one client knows while it trains in one round."""

    client_id: int
    round: int
    class_counts: Tensor  # (C,) float, this client's sample count per class
    num_samples: int
    data: "ClientData"  # the client's local data (batches in eval or train mode)
    lr: float = 0.0  # this round's local learning rate (after the per-round decay)
    teachers: dict[str, nn.Module] = field(default_factory=dict)  # run on every batch, no grad
    tensors: dict[str, Tensor] = field(default_factory=dict)  # per-client constants
    extras: dict[str, Any] = field(default_factory=dict)  # anything else the method keeps
    metrics: dict[str, float] = field(default_factory=dict)  # per-client numbers to log
    autocast_dtype: torch.dtype | None = None  # bf16 forward passes when the run's precision is bf16

    @property
    def class_prior(self) -> Tensor:
        """p_k(c) = n_{k,c} / n_k."""
        return self.class_counts / self.class_counts.sum().clamp_min(1)


@dataclass
class ClientUpdate:
    """What a client sends back: its model state and counts, plus method-specific uploads."""

    client_id: int
    state: dict[str, Tensor]
    num_samples: int
    num_steps: int
    extras: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Range:
    """The allowed values of a numeric hyperparameter: an interval, open or closed at each end,
    optionally integers only. ``str(Range(0, 1))`` is ``[0, 1]``."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    integer: bool = False

    def contains(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.integer and not isinstance(value, int):
            return False
        if value != value:  # NaN
            return False
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return not (self.high is not None and (value > self.high or (self.high_open and value == self.high)))

    def __str__(self) -> str:
        left = "(" if self.low_open or self.low is None else "["
        right = ")" if self.high_open or self.high is None else "]"
        low = "-inf" if self.low is None else f"{self.low:g}"
        high = "inf" if self.high is None else f"{self.high:g}"
        kind = "an integer in " if self.integer else ""
        return f"{kind}{left}{low}, {high}{right}"


POSITIVE = Range(0, None, low_open=True)
NON_NEGATIVE = Range(0)
UNIT_INTERVAL = Range(0, 1)
COUNT = Range(1, None, integer=True)  # a positive whole number
NON_NEGATIVE_COUNT = Range(0, None, integer=True)


EXCLUSIVE_HOOKS = ("loss", "penalty", "before_step", "train_step", "aggregate", "make_optimizer")


class Algorithm:
    """FedAvg, and the hooks every other method overrides. Subclasses set the class fields."""

    name: ClassVar[str] = "fedavg"
    paper: ClassVar[str] = "McMahan et al., AISTATS 2017"
    defaults: ClassVar[dict[str, Any]] = {}
    # per-dataset hyperparameter defaults from the paper's settings, e.g. {"cifar100": {"lam": 0.5}}
    dataset_defaults: ClassVar[dict[str, dict[str, Any]]] = {}
    # allowed values of string hyperparameters, e.g. {"variant": ("paper", "official")}
    choices: ClassVar[dict[str, tuple]] = {}
    # allowed values of numeric hyperparameters, checked when the RunConfig is made,
    # e.g. {"alpha": UNIT_INTERVAL, "tau": POSITIVE}
    ranges: ClassVar[dict[str, Range]] = {}
    # why the method must train its clients one after another on the sequential path (None:
    # the threads and stacked paths may run it); each fast path warns once and falls back
    sequential_only: ClassVar[str | None] = None
    # arguments added after results were stored, with the value that reproduces the earlier
    # computation: at that value they stay out of the config hash (stored hashes do not move)
    later_defaults: ClassVar[dict[str, Any]] = {}

    def __init__(self, hparams: dict[str, Any] | None = None):
        self.hp: dict[str, Any] = dict(hparams or {})

    def __repr__(self) -> str:
        return f"{self.name}({self.hp})"

    @classmethod
    def result_revision(cls, hparams: dict[str, Any]) -> int:
        """Bumped when a fix changes what a method computes under unchanged arguments (0: never
        changed). A non-zero revision enters the config hash, so results stored before the fix
        are not served for the fixed computation."""
        return 0

    @classmethod
    def check_run(cls, hparams: dict[str, Any], cfg: Any) -> None:
        """Raise FedlibError (one line) when the resolved hyperparameters cannot work with the
        run's other settings (``cfg``: the RunConfig being made). Ranges are checked before."""

    # ------------------------------------------------------------------ server side
    def setup(self, server: "ServerState") -> None:
        """Create server-side state in ``server.extras`` (saved in every checkpoint)."""

    def aggregate(self, server: "ServerState", updates: list[ClientUpdate]) -> dict[str, Tensor]:
        """FedAvg: the sample-count-weighted mean of every state entry (BN buffers included)."""
        return weighted_average([u.state for u in updates], [u.num_samples for u in updates])

    def end_round(self, server: "ServerState", updates: list[ClientUpdate]) -> None:
        """Update server-side state after the new global model is in place."""

    def round_metrics(self, server: "ServerState", updates: list[ClientUpdate]) -> dict[str, Any]:
        """Extra numbers to store with the round (means of the clients' own metrics by default)."""
        keys = sorted({k for u in updates for k in u.metrics})
        return {k: sum(u.metrics.get(k, 0.0) for u in updates) / len(updates) for k in keys}

    # ------------------------------------------------------------------ client side
    def client_context(self, server: "ServerState", ctx: ClientContext) -> None:
        """Attach teachers and per-client tensors to ``ctx`` before local training."""

    def make_optimizer(self, model: nn.Module, lr: float, momentum: float, weight_decay: float,
                       ctx: ClientContext | None = None) -> torch.optim.Optimizer:
        """Local optimiser: SGD with the run's momentum and weight decay. ``ctx`` is the client's
        context when a client trains (None when the stacked path only reads the rule)."""
        return torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)

    def loss(self, out: Outputs, labels: Tensor, ctx: ClientContext,
             teacher_out: dict[str, Outputs]) -> Tensor:
        """The local objective for one batch (FedAvg: cross-entropy)."""
        return F.cross_entropy(out.logits, labels)

    def penalty(self, model: nn.Module, ctx: ClientContext) -> Tensor | None:
        """A term on the parameters added to the loss (None: no term)."""
        return None

    def before_step(self, model: nn.Module, ctx: ClientContext) -> None:
        """Edit gradients in place before the optimiser step."""

    def objective(self, model: nn.Module, x: Tensor, labels: Tensor, ctx: ClientContext) -> Tensor:
        """Forward the student and the teachers, then loss + penalty."""
        with autocast(x, ctx.autocast_dtype):
            features, logits = model(x, return_features=True)
            teacher_out = run_teachers(ctx.teachers, x)
        value = self.loss(Outputs(features.float(), logits.float()), labels, ctx, teacher_out)
        extra = self.penalty(model, ctx)
        return value if extra is None else value + extra

    def train_step(self, model: nn.Module, optimizer: torch.optim.Optimizer, x: Tensor,
                   labels: Tensor, ctx: ClientContext) -> Tensor:
        """One local SGD step; returns the detached loss."""
        optimizer.zero_grad(set_to_none=True)
        value = self.objective(model, x, labels, ctx)
        value.backward()
        self.before_step(model, ctx)
        optimizer.step()
        return value.detach()

    def client_upload(self, model: nn.Module, ctx: ClientContext, update: ClientUpdate) -> None:
        """Add method-specific uploads to ``update.extras`` after local training."""


# ---------------------------------------------------------------------- helpers
def run_teachers(teachers: dict[str, nn.Module], x: Tensor) -> dict[str, Outputs]:
    """Evaluate every teacher on the batch without gradients."""
    outputs = {}
    with torch.no_grad():
        for name, teacher in teachers.items():
            features, logits = teacher(x, return_features=True)
            outputs[name] = Outputs(features.detach().float(), logits.detach().float())
    return outputs


def autocast(x: Tensor, dtype: torch.dtype | None):
    """Mixed precision for the forward passes on ``x``'s device when ``dtype`` is given, else a no-op.

    Parameters, gradients, optimiser state and losses stay fp32; outputs are cast back with
    ``.float()`` before the loss.
    """
    return torch.autocast(x.device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None)


def weighted_average(states: list[dict[str, Tensor]], weights: list[float]) -> dict[str, Tensor]:
    """Weighted mean of state dicts; integer buffers (BN's num_batches_tracked) are rounded."""
    if float(sum(weights)) == 0.0:  # every client was empty: their states are the global one
        weights = [1.0] * len(states)
    total = float(sum(weights))
    averaged = {}
    for key in states[0]:
        acc = sum(s[key].double() * (w / total) for s, w in zip(states, weights))
        reference = states[0][key]
        averaged[key] = acc.round().to(reference.dtype) if not reference.is_floating_point() else acc.to(reference.dtype)
    return averaged


def iterate_eval(ctx: ClientContext, batch_size: int = 500) -> Iterator[tuple[Tensor, Tensor]]:
    """The client's local data in eval mode (normalised, not augmented)."""
    return ctx.data.eval_batches(batch_size)
