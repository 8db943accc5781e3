"""The method contract: every hook a federated method may override, and the rules it keeps.

The engine owns the loop (sample clients, train them locally, aggregate, evaluate, checkpoint)
and calls these hooks at fixed points; a method overrides only what its paper changes.
Methods combine by composition (``"fedlmd+fedprox"``): a hook marked *one* comes from the
single part that overrides it (two parts overriding it is an error), a hook marked *each* runs
for every part through ``super()``.

==================  ===========================================================  =====  =========
hook                when it runs                                                 parts  example
==================  ===========================================================  =====  =========
``setup``           once, before round 0: create state in ``server.extras``      each   FedCSD
``begin_round``     every round, before its clients are sampled: server work     each   PKD
``client_context``  before a client trains: teachers, per-client tensors, state  each   FedNTD
``make_optimizer``  before a client trains: its local optimiser                  one    MOON
``loss``            every local batch: the objective from the outputs (rule 2)   one    FedVLS
``penalty``         every local batch: a term on the parameters (rule 3)         one    FedProx
``objective``       every local batch: forward passes, then loss + penalty       one
``before_step``     after backward, before the optimiser step: edit gradients    one    SCAFFOLD
``train_step``      one whole local step (forward, backward, update)             one    FedSAM
``client_upload``   after local training: extra things the client sends          each   SCAFFOLD
``aggregate``       the server rule: client states -> the new global state       one    FedAvgM
``end_round``       after aggregation: update server-side state                  each   FedCSD
``round_metrics``   after the round: extra numbers to log                        each   PKD
``eval_model``      at evaluation: the network evaluated and reported            one    FedConcat
==================  ===========================================================  =====  =========

Rules:

1. State lives in ``server.extras`` (what an exact resume needs, checkpointed) or
   ``server.cache`` (rebuildable, never checkpointed), see :class:`fedlib.core.state.ServerState`;
   a client's state lives in its :class:`ClientContext`; nothing lives on the method instance.
2. ``loss`` is a function of tensors: no Python branching on tensor values, no host syncs
   (``.item()``). It reads the outputs, the labels and ``ctx``'s ``class_counts``/``class_prior``,
   ``tensors``, ``extras``, ``lr`` and ``round`` (not ``client_id``, ``num_samples`` nor
   ``data``). Its one allowed side effect: replacing tensors or numbers that ``client_context``
   put in ``ctx.extras`` (per-client counters carried from batch to batch, e.g. PKD's firing
   counts). So the same loss runs on every backend, the stacked one (under vmap) included.
3. ``penalty`` may run on the stacked backend only when the class defining it declares
   ``pure_penalty = True``: it reads ``model.parameters()`` and ``ctx`` and nothing else.
4. A method that must train its clients one after another says why in ``sequential_only``.
   Overriding ``train_step``, ``before_step`` or ``objective``, or an undeclared penalty, does
   the same (:meth:`Algorithm.sequential_reason`); the threads and stacked backends then fall
   back to the sequential path with one warning. Nothing outside the method's class decides this.

:class:`Observer` is the other, outside interface: analysis hooks that watch a run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fedlib.core.config import RunConfig
from fedlib.core.state import ClientData, ServerState


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
    data: ClientData  # the client's local data (batches in eval or train mode)
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
        if value != value or value in (float("inf"), float("-inf")):  # NaN, or an infinity no setting means
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
    # why the method must train its clients one after another on the sequential path (rule 4;
    # None: the threads and stacked paths may run it); each fast path warns once and falls back
    sequential_only: ClassVar[str | None] = None
    # True when the method's result depends on the order of float sums: it then trains in the NCHW
    # layout even when ``channels_last`` is asked (one warning), since the layout is not hashed
    layout_sensitive: ClassVar[bool] = False
    # set by the class that defines ``penalty`` when it reads only model.parameters() and ctx (rule 3)
    pure_penalty: ClassVar[bool] = False
    # the hooks marked "one" in the table: a composition takes each from its single overriding part
    exclusive_hooks: ClassVar[tuple[str, ...]] = ("loss", "penalty", "before_step", "train_step", "aggregate",
                                                  "make_optimizer", "objective", "eval_model")
    # why a composition with this method runs its parts in the order given (None: any order computes
    # the same, so a composition takes one canonical order, fedlib.core.registry.canonical_method)
    order_matters: ClassVar[str | None] = None
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
    def short_run(cls, method_args: dict[str, Any], rounds: int) -> tuple[dict[str, Any], int, str]:
        """How a run of only ``rounds`` round(s) (a dry run, a timing probe) still takes the path
        the method's later rounds take: (``method_args`` changes, rounds to run, a note saying so).
        Only the method knows; FedAvg's first round is like every other (no change)."""
        return {}, rounds, ""

    @classmethod
    def short_run_missed(cls, rounds: list[dict[str, Any]]) -> str:
        """What a short run's per-round metrics show it did not reach of the method's path
        (empty: nothing), for the dry run's row."""
        return ""

    @classmethod
    def check_run(cls, hparams: dict[str, Any], cfg: RunConfig) -> None:
        """Raise FedlibError (one line) when the resolved hyperparameters cannot work with the
        run's other settings (``cfg``: the RunConfig being made). Ranges are checked before."""

    @classmethod
    def hook_owner(cls, hook: str) -> type[Algorithm] | None:
        """The class whose ``hook`` this method uses (None: FedAvg's, defined here)."""
        for klass in cls.__mro__:
            if hook in vars(klass):
                return None if klass is Algorithm else klass
        return None

    @classmethod
    def sequential_reason(cls) -> str | None:
        """Why the clients must train one after another (rule 4; None: every backend may run it)."""
        if cls.sequential_only:
            return f"{cls.name}: {cls.sequential_only}"
        for hook in ("train_step", "before_step", "objective"):
            owner = cls.hook_owner(hook)
            if owner is not None:
                return f"{owner.name} overrides the {hook!r} hook"
        owner = cls.hook_owner("penalty")
        if owner is not None and not vars(owner).get("pure_penalty", False):
            return f"{owner.name}'s penalty is not known to be a pure function of the parameters"
        return None

    # ------------------------------------------------------------------ server side
    def setup(self, server: ServerState) -> None:
        """Create server-side state in ``server.extras`` (saved in every checkpoint)."""

    def begin_round(self, server: ServerState) -> None:
        """Server-side work at the start of round ``server.round``, before any client trains."""

    def aggregate(self, server: ServerState, updates: list[ClientUpdate]) -> dict[str, Tensor]:
        """FedAvg: the sample-count-weighted mean of every state entry (BN buffers included)."""
        return weighted_average([u.state for u in updates], [u.num_samples for u in updates])

    def end_round(self, server: ServerState, updates: list[ClientUpdate]) -> None:
        """Update server-side state after the new global model is in place."""

    def round_metrics(self, server: ServerState, updates: list[ClientUpdate]) -> dict[str, Any]:
        """Extra numbers to store with the round (means of the clients' own metrics by default)."""
        keys = sorted({k for u in updates for k in u.metrics})
        return {k: sum(u.metrics.get(k, 0.0) for u in updates) / len(updates) for k in keys}

    # ------------------------------------------------------------------ client side
    def client_context(self, server: ServerState, ctx: ClientContext) -> None:
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

    # ------------------------------------------------------------------ evaluation
    def eval_model(self, server: ServerState) -> nn.Module:
        """The network the run evaluates and reports (FedAvg: the global model)."""
        return server.model


# ---------------------------------------------------------------------- observers
class Observer(Protocol):
    """Watches a run from outside: ``engine.run(cfg, hooks=[observer])``. An observer defines any
    of these methods (the others are skipped) and changes nothing it is handed, except that it
    may add entries to a round's ``metrics`` (they are logged with the round). With observers,
    the threads backend trains the clients sequentially."""

    def on_round_start(self, server: ServerState, clients: list[int]) -> None:
        """The round's clients are sampled; none has trained yet."""

    def on_client_end(self, server: ServerState, ctx: ClientContext, model: nn.Module,
                      update: ClientUpdate) -> None:
        """A client finished: ``model`` holds its trained weights (until the next client)."""

    def on_round_end(self, server: ServerState, updates: list[ClientUpdate], metrics: dict[str, Any]) -> None:
        """The new global model is in place; ``metrics`` holds the round's training-side numbers."""


def notify(observers: Sequence[Observer], event: str, *args: Any) -> None:
    """Call ``event`` (``"on_round_start"``, ...) on every observer that defines it, in order."""
    for observer in observers:
        method = getattr(observer, event, None)
        if method is not None:
            method(*args)


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
