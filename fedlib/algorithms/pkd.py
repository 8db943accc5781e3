"""PKD (Gan et al., "Partial Knowledge Distillation for Alleviating the Inherent Inter-Class
Discrepancy in Federated Learning"): weak-class experts teach the global model where it errs.

Three stages, all inside the normal round loop (Algorithm 1 of the paper):

1. **Warm-up.** Rounds ``[0, warmup_rounds)`` are plain FedAvg.
2. **Weak classes and experts.** At the start of round ``warmup_rounds`` (``begin_round``, before
   any client of the round trains) the global model makes
   one pass over every client's training data, and
   :func:`fedlib.measures.weak_classes.discover_groups` turns the class-pair confusion and
   feature distances into weak-class groups, unless ``groups`` are given. For each group g an
   expert (the same network with |g| outputs) is trained by FedAvg on g's samples for
   ``expert_rounds`` rounds (:func:`train_expert`); those rounds do not count towards the run's.
   The KD stage continues from the warmed-up model (``student_init="warm"``) or restarts from
   the initial weights (``"fresh"``).
3. **Partial KD.** A sample whose true class is in a group g and whose student prediction is
   another class of g fires g's expert (at most one per sample, the smallest group first):

       L = CE(z, y) + lambda * L_PKD,   L_PKD = (1/B) * sum_{fired i} KL(p_e,i || p_s,i)

   both softmax(z / T) over g's classes (Eqs. 1-2); T = 5, lambda = 1.0 (0.5 on CIFAR).
   ``kl_direction``, ``normalise`` and ``t_squared`` choose what the paper leaves open.

Cost (Sec. 3.3, Eqs. 3-6) in units U of one FedAvg local-training round: each round logs
``cost_units`` and ``cost_units_total`` (the running total is ``server.extras["cost_units"]``),
and ``expert_fired_<g>`` (Fig. 11). The paper's open choices and fedlib's readings of them, and
the cost accounting: docs/facts.md#pkd.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fedlib.algorithms.base import (
    NON_NEGATIVE, NON_NEGATIVE_COUNT, POSITIVE, Algorithm, ClientContext, ClientUpdate, Outputs, Range)
from fedlib.algorithms.client_training import fit_client, seeded_batches
from fedlib.core.registry import register
from fedlib.core.state import ClientData, ServerState, keyed_seed, sample_clients
from fedlib.errors import FedlibError, one_of
from fedlib.measures.weak_classes import (GROUPINGS, check_groups, class_statistics, discover_groups,
                                          feature_distances, misclassification_probabilities)

EXPERT_KEY = 7717  # mixed into the seeds of expert training, apart from the run's own rounds


# ====================================================================== the partial KD loss
def expert_assignment(student_logits: Tensor, labels: Tensor, groups: Sequence[Sequence[int]]) -> Tensor:
    """(B, G) 0/1 float: which expert fires for each sample (at most one per row).

    Expert g fires when the true label is in g, the student's argmax is in g, and they differ.
    Groups are tried smallest first (ties: list order), and a sample already taken is skipped.
    """
    num_classes = student_logits.shape[1]
    predictions = student_logits.detach().argmax(dim=1)
    wrong = predictions != labels
    taken = torch.zeros_like(labels, dtype=torch.bool)
    fired = [torch.zeros_like(labels, dtype=torch.bool) for _ in groups]
    for g in sorted(range(len(groups)), key=lambda i: (len(groups[i]), i)):
        member = torch.zeros(num_classes, dtype=torch.bool, device=labels.device)
        member[list(groups[g])] = True
        fired[g] = member[labels] & member[predictions] & wrong & ~taken
        taken = taken | fired[g]
    if not fired:
        return student_logits.new_zeros(len(labels), 0)
    return torch.stack(fired, dim=1).to(student_logits.dtype)


def group_kl(student_logits: Tensor, expert_logits: Tensor, T: float, direction: str = "standard") -> Tensor:
    """Per-sample KL over one group's classes, both softmax(z / T); the expert is a constant.

    ``student_logits`` are already restricted to the group, shape (B, |g|) like the expert's.
    "standard": KL(p_e || p_s) (Hinton et al.); "printed": KL(p_s || p_e) (the paper's Eq. 1).
    """
    log_p_s = F.log_softmax(student_logits / T, dim=1)
    log_p_e = F.log_softmax(expert_logits.detach() / T, dim=1)
    if direction == "standard":
        return (log_p_e.exp() * (log_p_e - log_p_s)).sum(dim=1)
    if direction == "printed":
        return (log_p_s.exp() * (log_p_s - log_p_e)).sum(dim=1)
    raise one_of("kl_direction", direction, ("standard", "printed"))


def partial_kd_loss(student_logits: Tensor, expert_logits_per_group: Sequence[Tensor], labels: Tensor,
                    groups: Sequence[Sequence[int]], T: float = 5.0, kl_direction: str = "standard",
                    t_squared: bool = False, fired: Tensor | None = None, normalise: str = "batch") -> Tensor:
    """L_PKD for one batch: the fired samples' group KL, summed and divided by the batch size
    (``normalise="batch"``) or by the number of fired samples (``"fired"``, at least 1).

    ``expert_logits_per_group[g]`` is expert g's (B, |g|) output on the whole batch; samples for
    which no expert fires contribute exactly 0. ``t_squared`` multiplies by T^2 (Hinton et al.'s
    gradient-scale correction; the paper does not use it). ``fired`` is
    :func:`expert_assignment`'s result when the caller already has it.
    """
    if fired is None:
        fired = expert_assignment(student_logits, labels, groups)
    total = student_logits.new_zeros(())
    for g, (group, expert_logits) in enumerate(zip(groups, expert_logits_per_group)):
        columns = torch.as_tensor(list(group), device=student_logits.device)
        kl = group_kl(student_logits.index_select(1, columns), expert_logits, T, kl_direction)
        total = total + (fired[:, g] * kl).sum()
    scale = T ** 2 if t_squared else 1.0
    count = fired.sum().clamp_min(1.0) if normalise == "fired" else student_logits.shape[0]
    return scale * total / count


# ====================================================================== expert training
def train_expert(server: ServerState, group: Sequence[int], rounds: int, local_epochs: int,
                 expert_index: int = 0, init: str = "scratch") -> tuple[dict[str, Tensor], float]:
    """Train one |g|-output expert by FedAvg on the samples of ``group``'s classes.

    Returns the expert's state dict and its cost in U (Eq. 5, per round: (E_exp / E) times the
    share of the participating clients' samples that belong to the group). Clients with no
    sample of the group sit the round out; ``init="global"`` starts the body from the global model.
    """
    torch.manual_seed(keyed_seed(server.cfg.seed, EXPERT_KEY, expert_index))
    expert = server.new_model(num_classes=len(group))
    if init == "global":
        body = {k: v for k, v in server.model.state_dict().items() if not k.startswith("classifier.")}
        expert.load_state_dict(body, strict=False)
    local = server.new_model(num_classes=len(group))
    cost = sum(_expert_round(server, expert, local, group, r, local_epochs, expert_index) for r in range(rounds))
    return expert.state_dict(), cost


_FEDAVG = Algorithm()  # an expert's local training: plain FedAvg (cross-entropy, the run's SGD)


def _expert_round(server: ServerState, expert: nn.Module, local: nn.Module, group: Sequence[int],
                  round_index: int, local_epochs: int, expert_index: int) -> float:
    """One FedAvg round of an expert (updated in place) by :mod:`fedlib.algorithms.client_training`, seeded
    apart from the run's rounds; returns the round's cost in U."""
    cfg = server.cfg
    clients = sample_clients(keyed_seed(cfg.seed, EXPERT_KEY, expert_index), round_index, cfg.clients,
                             cfg.participation)
    label_map = torch.full((server.num_classes,), -1, dtype=torch.long, device=server.device)
    label_map[list(group)] = torch.arange(len(group), device=server.device)
    updates, total = [], 0
    for k in clients:
        client = server.data.client(k)
        total += client.num_samples
        subset = _group_subset(client, group)
        if subset.num_samples == 0:
            continue
        local.load_state_dict(expert.state_dict())
        seed = keyed_seed(cfg.seed, EXPERT_KEY, expert_index, round_index, k)
        batches = _relabelled(seeded_batches(subset, cfg.batch_size, local_epochs, seed), label_map)
        ctx = ClientContext(client_id=k, round=round_index, class_counts=subset.class_counts,
                            num_samples=subset.num_samples, data=subset, lr=cfg.lr * cfg.lr_decay ** round_index)
        updates.append(fit_client(server, _FEDAVG, ctx, batches, local))
    if not updates:
        return 0.0
    expert.load_state_dict(_FEDAVG.aggregate(server, updates))
    return (local_epochs / cfg.local_epochs) * sum(u.num_samples for u in updates) / max(total, 1)


def _group_subset(client: ClientData, group: Sequence[int]) -> ClientData:
    """The client's data restricted to the group's classes."""
    labels = client.data.train_y[client.indices]
    keep = torch.isin(labels, torch.as_tensor(list(group), device=labels.device))
    counts = torch.zeros_like(client.class_counts)
    counts[list(group)] = client.class_counts[list(group)]
    return ClientData(client.data, client.indices[keep], counts)


def _relabelled(batches: Iterator[tuple[Tensor, Tensor]], label_map: Tensor) -> Iterator[tuple[Tensor, Tensor]]:
    """The batches with the group's labels remapped to the expert's outputs 0..|g|-1."""
    for x, y in batches:
        yield x, label_map[y]


# ====================================================================== the method
@register
class PKD(Algorithm):
    """Warm-up FedAvg, weak-class experts, then FedAvg with partial KD from the experts."""

    name = "pkd"
    paper = "Gan et al., Partial Knowledge Distillation (PKD), 2024"
    defaults = {
        "warmup_rounds": 20, "expert_rounds": 25, "expert_local_epochs": 0,  # 0: the run's E
        "T": 5.0, "lam": 1.0, "kl_direction": "standard", "t_squared": False, "normalise": "batch",
        "groups": [],  # [] discovers them; else e.g. [[0, 6], [2, 4, 6]]
        "max_groups": 2,  # the G worst groups get experts; 0 keeps every group found
        "confusion": "soft", "confusion_ratio": 0.5, "distance_quantile": 0.5,
        "grouping": "cliques", "expert_init": "scratch", "student_init": "warm",
    }
    ranges = {"warmup_rounds": NON_NEGATIVE_COUNT, "expert_rounds": NON_NEGATIVE_COUNT,
              "expert_local_epochs": NON_NEGATIVE_COUNT, "max_groups": NON_NEGATIVE_COUNT, "T": POSITIVE,
              "lam": NON_NEGATIVE, "confusion_ratio": Range(0, 1, low_open=True),
              "distance_quantile": Range(0, 1, low_open=True)}
    dataset_defaults = {
        "mnist": {"warmup_rounds": 10, "grouping": "stars"},
        "cifar10": {"lam": 0.5, "max_groups": 1},
        "cifar100": {"lam": 0.5},
    }
    later_defaults = {"normalise": "batch", "student_init": "warm"}  # as before these arguments: hashes kept
    choices = {"normalise": ("batch", "fired"), "kl_direction": ("standard", "printed"), "confusion": ("soft", "hard"),
               "grouping": GROUPINGS, "expert_init": ("scratch", "global"), "student_init": ("warm", "fresh")}

    @classmethod
    def short_run(cls, method_args: dict, rounds: int) -> tuple[dict, int, str]:
        """No warm-up and one expert round, so round 0 already discovers weak classes, trains the
        experts and distils."""
        return ({"warmup_rounds": 0, "expert_rounds": 1}, rounds,
                "pkd: no warm-up, 1 expert round: round 0 runs weak-class discovery, expert training and the KD loss")

    @classmethod
    def short_run_missed(cls, rounds: list[dict]) -> str:
        """A slice on which no weak-class group was found never fired the KD loss."""
        if any(r.get("pkd_groups") for r in rounds):
            return ""
        return "pkd found no weak-class group on the slice: the KD loss did not fire"

    @classmethod
    def check_run(cls, hparams: dict[str, Any], cfg) -> None:
        """A run that ends within the warm-up never reaches PKD: it is FedAvg, bit for bit."""
        super().check_run(hparams, cfg)
        warmup = hparams["warmup_rounds"]
        if cfg.rounds <= warmup:
            raise FedlibError(f"pkd with {cfg.rounds} rounds never leaves its warm-up of warmup_rounds={warmup}: "
                              "it would be FedAvg stored as PKD; raise rounds above warmup_rounds or lower it")

    # ------------------------------------------------------------------ server side
    def setup(self, server: ServerState) -> None:
        super().setup(server)
        check_groups(self.hp["groups"], server.num_classes)
        server.extras.setdefault("cost_units", 0.0)
        server.extras.setdefault("cost_units_pending", 0.0)
        if self.hp["student_init"] == "fresh":  # the initial weights, until the KD stage starts from them
            server.extras.setdefault("pkd_initial_model", {k: v.detach().clone()
                                                           for k, v in server.model.state_dict().items()})

    def begin_round(self, server: ServerState) -> None:
        """Stage 2, at the first KD round before any client trains (the only place it runs):
        :meth:`prepare_experts` from the warmed-up model, then with ``student_init="fresh"`` the
        global model back to the run's initial weights. Later rounds, and a run resumed from a
        checkpoint holding the experts, find them in ``server.extras``."""
        super().begin_round(server)
        if not self.in_pkd_stage(server.round):
            return
        self.prepare_experts(server)
        if "pkd_initial_model" in server.extras:
            server.model.load_state_dict(server.extras.pop("pkd_initial_model"))

    def prepare_experts(self, server: ServerState) -> None:
        """Discover the weak-class groups and train their experts, once (nothing when
        ``server.extras`` holds them); the run's random state is left as it was."""
        if "pkd_experts" in server.extras:
            return
        with torch.random.fork_rng(devices=[server.device] if server.device.type == "cuda" else []):
            self._discover_and_train(server)

    def _discover_and_train(self, server: ServerState) -> None:
        stats = class_statistics(server.model, _all_local_batches(server), server.num_classes)
        confusion = misclassification_probabilities(stats, self.hp["confusion"])
        distances = feature_distances(stats)
        groups = check_groups(self.hp["groups"], server.num_classes) or discover_groups(
            confusion, distances, confusion_ratio=self.hp["confusion_ratio"],
            distance_quantile=self.hp["distance_quantile"], grouping=self.hp["grouping"],
            max_groups=self.hp["max_groups"] or None, class_accuracy=stats.class_accuracy)
        epochs = self.hp["expert_local_epochs"] or server.cfg.local_epochs
        experts, cost = [], 0.0
        for index, group in enumerate(groups):
            state, group_cost = train_expert(server, group, self.hp["expert_rounds"], epochs, index,
                                             self.hp["expert_init"])
            experts.append(state)
            cost += group_cost
        server.extras.update({
            "pkd_groups": [list(g) for g in groups], "pkd_experts": experts, "pkd_expert_cost": cost,
            "pkd_discovery": {"confusion": confusion.float(), "feature_distance": distances.float(),
                              "class_accuracy": stats.class_accuracy.float(), "round": server.round},
        })
        server.extras["cost_units_pending"] += cost

    def expert_modules(self, server: ServerState) -> list[nn.Module]:
        """Frozen expert networks built from ``server.extras`` once and cached on the server."""
        cache = server.cache.setdefault("pkd_experts", {})
        states = server.extras["pkd_experts"]
        if cache.get("states") is not states:  # new experts, or restored from a checkpoint
            modules = []
            for group, state in zip(server.extras["pkd_groups"], states):
                expert = server.new_model(num_classes=len(group))
                expert.load_state_dict(state)
                modules.append(expert.eval().requires_grad_(False))
            cache.update(states=states, modules=modules)
        return cache["modules"]

    def end_round(self, server: ServerState, updates: list[ClientUpdate]) -> None:
        super().end_round(server, updates)
        fired = sum(float(u.extras.get("pkd_fired", torch.zeros(0)).sum()) for u in updates)
        seen = sum(int(u.extras.get("pkd_seen", 0)) for u in updates)
        round_cost = 1.0 + (fired / (3 * seen) if seen else 0.0) + server.extras["cost_units_pending"]
        server.extras["cost_units_pending"] = 0.0
        server.extras["cost_units_round"] = round_cost
        server.extras["cost_units"] += round_cost

    def round_metrics(self, server: ServerState, updates: list[ClientUpdate]) -> dict[str, Any]:
        metrics = super().round_metrics(server, updates)
        metrics["cost_units"] = server.extras["cost_units_round"]
        metrics["cost_units_total"] = server.extras["cost_units"]
        if self.in_pkd_stage(server.round):
            metrics.update(_fired_fractions(updates, len(server.extras["pkd_groups"])))
            metrics["pkd_groups"] = server.extras["pkd_groups"]
        discovery = server.extras.get("pkd_discovery")
        if discovery is not None and discovery["round"] == server.round:
            metrics["pkd_expert_cost"] = server.extras["pkd_expert_cost"]
            for key in ("confusion", "feature_distance", "class_accuracy"):
                metrics[f"pkd_{key}"] = discovery[key].tolist()
        return metrics

    # ------------------------------------------------------------------ client side
    def in_pkd_stage(self, round_index: int) -> bool:
        """Whether round ``round_index`` is past the warm-up (stage 3, partial KD)."""
        return round_index >= self.hp["warmup_rounds"]

    def client_context(self, server: ServerState, ctx: ClientContext) -> None:
        super().client_context(server, ctx)
        if not self.in_pkd_stage(ctx.round):
            return
        if "pkd_experts" not in server.extras:
            raise FedlibError(f"pkd: round {ctx.round} is past the warm-up but no expert was trained; the "
                              "round's begin_round trains them before any client (engine.run_round calls it)")
        experts = self.expert_modules(server)
        for index, expert in enumerate(experts):
            ctx.teachers[f"pkd_expert_{index}"] = expert
        ctx.extras["pkd_groups"] = server.extras["pkd_groups"]
        ctx.extras["pkd_fired"] = torch.zeros(len(experts), device=server.device)
        ctx.extras["pkd_seen"] = 0

    def loss(self, out: Outputs, labels: Tensor, ctx: ClientContext,
             teacher_out: dict[str, Outputs]) -> Tensor:
        ce = F.cross_entropy(out.logits, labels)
        groups = ctx.extras.get("pkd_groups")
        if not groups:  # warm-up, or no weak group was found: plain FedAvg
            return ce
        expert_logits = [teacher_out[f"pkd_expert_{i}"].logits for i in range(len(groups))]
        # counted on the device, read once per client in client_upload (no per-batch sync)
        fired = expert_assignment(out.logits, labels, groups)
        ctx.extras["pkd_fired"] = ctx.extras["pkd_fired"] + fired.sum(0)
        ctx.extras["pkd_seen"] += labels.shape[0]
        distill = partial_kd_loss(out.logits, expert_logits, labels, groups, self.hp["T"],
                                  self.hp["kl_direction"], self.hp["t_squared"], fired=fired,
                                  normalise=self.hp["normalise"])
        return ce + self.hp["lam"] * distill

    def client_upload(self, model: nn.Module, ctx: ClientContext, update: ClientUpdate) -> None:
        super().client_upload(model, ctx, update)
        if "pkd_fired" not in ctx.extras:
            return
        fired, seen = ctx.extras["pkd_fired"].detach(), ctx.extras["pkd_seen"]
        update.extras["pkd_fired"], update.extras["pkd_seen"] = fired, seen
        for index, count in enumerate(fired.tolist()):
            update.metrics[f"expert_fired_{index}"] = count / max(seen, 1)


# ====================================================================== helpers
def _all_local_batches(server: ServerState):
    """Every client's training data in eval mode (the clients' discovery pass, summed)."""
    clients = (server.data.client(k) for k in range(server.cfg.clients))
    return itertools.chain.from_iterable(c.eval_batches() for c in clients if c.num_samples)


def _fired_fractions(updates: list[ClientUpdate], num_groups: int) -> dict[str, float]:
    """Per expert: fired samples / local samples processed, over all clients of the round."""
    seen = sum(int(u.extras.get("pkd_seen", 0)) for u in updates)
    fractions = {}
    for g in range(num_groups):
        fired = sum(float(u.extras["pkd_fired"][g]) for u in updates if "pkd_fired" in u.extras)
        fractions[f"expert_fired_{g}"] = fired / seen if seen else 0.0
    return fractions
