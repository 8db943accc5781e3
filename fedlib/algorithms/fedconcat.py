"""FedConcat (Diao, Li and He, AAAI 2024): one model per cluster of similar clients, concatenated.

"Exploiting Label Skews in Federated Learning with Model Concatenation". Under label skew,
clients with similar label distributions can share a model without much drift, and the
encoders of several such models together see every class. Before round 0 the clients' label
distributions p_k(c) are clustered by k-means into ``clusters`` groups (the paper's K). In the
encoder stage (rounds 0 .. encoder_rounds - 1) each cluster trains its own full model by FedAvg
among its members, all from the same initial weights. In the classifier stage the K encoders are
frozen and concatenated ([f_1(x), ..., f_K(x)], K * D wide) and a new linear classifier is
trained by FedAvg over all clients, ``classifier_steps`` SGD steps a client per round (0: its
full local epochs), averaged without weights. ``head_init="clusters"`` starts that classifier from
the cluster classifiers side by side with their biases summed (their logits' sum).

How it maps onto the engine (the run's ``rounds`` = encoder rounds + classifier rounds): the
cluster models and the classifier live in ``server.extras["fedconcat"]``; in the encoder stage a
client's local model is loaded with its cluster's weights, in the classifier stage the client
trains the concatenated classifier and leaves the engine's local model untouched. ``eval_model``
is the concatenation (during the encoder stage with the summed-logits head, the ensemble of the
cluster models); ``server.model`` is NOT the predictor (its shape is wrong): during the encoder
stage it holds the sample-weighted average of the round's local models. FedConcat cannot be
combined with other methods ("fedconcat+x"): their hooks would see ``server.model``.
Differences from the official code: docs/facts.md#fedconcat.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fedlib.algorithms.base import (
    COUNT, NON_NEGATIVE_COUNT, Algorithm, ClientContext, ClientUpdate, weighted_average)
from fedlib.core.registry import register
from fedlib.core.state import ServerState
from fedlib.errors import FedlibError


@register
class FedConcat(Algorithm):
    """Clustered FedAvg of full models, then a shared classifier on their concatenated encoders."""

    name = "fedconcat"
    paper = "Diao, Li and He, AAAI 2024"
    defaults = {"clusters": 2, "encoder_rounds": 50, "classifier_steps": 3, "head_init": "random"}
    ranges = {"clusters": COUNT, "encoder_rounds": COUNT, "classifier_steps": NON_NEGATIVE_COUNT}
    dataset_defaults = {"cifar100": {"head_init": "clusters"}, "tinyimagenet": {"head_init": "clusters"}}
    choices = {"head_init": ("random", "clusters")}

    @classmethod
    def short_run(cls, method_args: dict, rounds: int) -> tuple[dict, int, str]:
        """The asked rounds for the encoders, then one round of the concatenated classifier."""
        return {"encoder_rounds": rounds}, rounds + 1, f"fedconcat: {rounds} encoder round(s), then 1 classifier round"

    # ------------------------------------------------------------------ server side
    def setup(self, server: ServerState) -> None:
        super().setup(server)
        distributions = label_distributions(np.asarray(server.data.partition.counts, dtype=np.float64))
        assignment = cluster_clients(distributions, self.hp["clusters"], server.cfg.seed)
        initial = {k: v.detach().clone() for k, v in server.model.state_dict().items()}
        server.extras["fedconcat"] = {
            "assignment": assignment,
            "cluster_states": [{k: v.clone() for k, v in initial.items()} for _ in range(self.hp["clusters"])],
            "head": None,
        }

    @classmethod
    def check_run(cls, hparams: dict[str, Any], cfg) -> None:
        """FedConcat runs alone, with 1 <= clusters <= clients and 0 < encoder_rounds < rounds."""
        if "+" in cls.name:
            raise FedlibError("fedconcat cannot be combined with other methods: it trains one model per "
                              "cluster, which the other parts' hooks would not see; run it alone")
        clusters, encoder_rounds = hparams["clusters"], hparams["encoder_rounds"]
        if not 1 <= clusters <= cfg.clients:
            raise FedlibError(f"fedconcat clusters={clusters} must be between 1 and the number of clients "
                              f"({cfg.clients})")
        if not 0 < encoder_rounds < cfg.rounds:
            raise FedlibError(f"fedconcat needs 0 < encoder_rounds < rounds (got encoder_rounds={encoder_rounds}, "
                              f"rounds={cfg.rounds}); lower encoder_rounds or raise rounds")

    def in_encoder_stage(self, server: ServerState) -> bool:
        """True while the cluster models train (rounds 0 .. encoder_rounds - 1)."""
        return server.round < self.hp["encoder_rounds"]

    def aggregate(self, server: ServerState, updates: list[ClientUpdate]) -> dict[str, Tensor]:
        state = server.extras["fedconcat"]
        if not self.in_encoder_stage(server):
            heads = [u.extras["fedconcat_head"] for u in updates]
            state["head"] = weighted_average(heads, [1.0] * len(heads))
            return {k: v.clone() for k, v in server.model.state_dict().items()}
        for cluster in range(self.hp["clusters"]):
            members = [u for u in updates if state["assignment"][u.client_id] == cluster]
            if members:
                state["cluster_states"][cluster] = weighted_average([u.state for u in members],
                                                                    [u.num_samples for u in members])
        return weighted_average([u.state for u in updates], [u.num_samples for u in updates])

    def round_metrics(self, server: ServerState, updates: list[ClientUpdate]) -> dict[str, Any]:
        metrics = super().round_metrics(server, updates)
        if server.round == 0:
            metrics["fedconcat_assignment"] = list(server.extras["fedconcat"]["assignment"])
        return metrics

    def eval_model(self, server: ServerState) -> nn.Module:
        """The concatenated cluster encoders and the current (or summed-logits) classifier."""
        encoders = self._encoders(server)
        head = self._head_module(server, encoders)
        state = server.extras["fedconcat"]
        head.load_state_dict(state["head"] if state["head"] is not None else clusters_head_state(encoders))
        return ConcatenatedModel(encoders, head).eval()

    # ------------------------------------------------------------------ client side
    def client_context(self, server: ServerState, ctx: ClientContext) -> None:
        super().client_context(server, ctx)
        state = server.extras["fedconcat"]
        if self.in_encoder_stage(server):
            ctx.extras["fedconcat_start"] = state["cluster_states"][state["assignment"][ctx.client_id]]
            ctx.extras["fedconcat_loaded"] = False
            return
        encoders = self._encoders(server)
        if state["head"] is None:
            state["head"] = self._initial_head(server, encoders)
        head = nn.Linear(sum(feature_width(e) for e in encoders), server.num_classes).to(server.device)
        head.load_state_dict(state["head"])
        cfg = server.cfg
        ctx.extras["fedconcat_encoders"] = encoders
        ctx.extras["fedconcat_head"] = head
        ctx.extras["fedconcat_optimizer"] = torch.optim.SGD(head.parameters(), lr=ctx.lr, momentum=cfg.momentum,
                                                            weight_decay=cfg.weight_decay)
        ctx.extras["fedconcat_steps"] = 0

    def train_step(self, model: nn.Module, optimizer: torch.optim.Optimizer, x: Tensor,
                   labels: Tensor, ctx: ClientContext) -> Tensor:
        if "fedconcat_start" in ctx.extras:
            if not ctx.extras["fedconcat_loaded"]:  # first step: start from the cluster's model
                model.load_state_dict(ctx.extras["fedconcat_start"])
                ctx.extras["fedconcat_loaded"] = True
            return super().train_step(model, optimizer, x, labels, ctx)
        return self._classifier_step(x, labels, ctx)

    def _classifier_step(self, x: Tensor, labels: Tensor, ctx: ClientContext) -> Tensor:
        limit = self.hp["classifier_steps"]
        if limit and ctx.extras["fedconcat_steps"] >= limit:
            return ctx.extras["fedconcat_last_loss"]  # this client's classifier steps are spent
        with torch.no_grad():
            features = concatenated_features(ctx.extras["fedconcat_encoders"], x)
        value = F.cross_entropy(ctx.extras["fedconcat_head"](features), labels)
        optimizer = ctx.extras["fedconcat_optimizer"]
        optimizer.zero_grad(set_to_none=True)
        value.backward()
        optimizer.step()
        ctx.extras["fedconcat_steps"] += 1
        ctx.extras["fedconcat_last_loss"] = value.detach()
        return value.detach()

    def client_upload(self, model: nn.Module, ctx: ClientContext, update: ClientUpdate) -> None:
        super().client_upload(model, ctx, update)
        if "fedconcat_head" in ctx.extras:
            update.extras["fedconcat_head"] = {k: v.detach().clone()
                                               for k, v in ctx.extras["fedconcat_head"].state_dict().items()}

    # ------------------------------------------------------------------ helpers
    def _encoders(self, server: ServerState) -> list[nn.Module]:
        """One frozen module per cluster, kept on the server and reloaded from the extras."""
        modules = server.cache.setdefault("fedconcat_encoders", [])
        while len(modules) < self.hp["clusters"]:
            modules.append(server.new_model().requires_grad_(False))
        for module, state in zip(modules, server.extras["fedconcat"]["cluster_states"]):
            module.load_state_dict(state)
            module.eval()
        return modules[: self.hp["clusters"]]

    def _head_module(self, server: ServerState, encoders: list[nn.Module]) -> nn.Linear:
        return nn.Linear(sum(feature_width(e) for e in encoders), server.num_classes).to(server.device)

    def _initial_head(self, server: ServerState, encoders: list[nn.Module]) -> dict[str, Tensor]:
        if self.hp["head_init"] == "clusters":
            return clusters_head_state(encoders)
        width = sum(feature_width(e) for e in encoders)
        generator = torch.Generator().manual_seed(int(server.cfg.seed))
        return {k: v.to(server.device) for k, v in random_linear_state(width, server.num_classes, generator).items()}


class ConcatenatedModel(nn.Module):
    """Frozen encoders side by side, then one linear classifier: logits = W [f_1(x), ..., f_K(x)] + b."""

    def __init__(self, encoders: list[nn.Module], head: nn.Linear):
        super().__init__()
        self.encoders = nn.ModuleList(encoders)
        self.head = head

    def forward(self, x: Tensor, return_features: bool = False):
        features = concatenated_features(list(self.encoders), x)
        logits = self.head(features)
        return (features, logits) if return_features else logits


def concatenated_features(encoders: list[nn.Module], x: Tensor) -> Tensor:
    """(B, K * D): each encoder's penultimate features, in cluster order."""
    return torch.cat([encoder(x, return_features=True)[0] for encoder in encoders], dim=1)


def feature_width(model: nn.Module) -> int:
    """D, the width of a model's penultimate features (its classifier's input)."""
    return model.classifier.in_features


def clusters_head_state(encoders: list[nn.Module]) -> dict[str, Tensor]:
    """The cluster classifiers side by side, biases summed: its logits are the sum of theirs."""
    weight = torch.cat([e.classifier.weight.detach() for e in encoders], dim=1)
    bias = sum(e.classifier.bias.detach() for e in encoders)
    return {"weight": weight.clone(), "bias": bias.clone()}


def random_linear_state(in_features: int, out_features: int, generator: torch.Generator) -> dict[str, Tensor]:
    """PyTorch's default nn.Linear initialisation, U(-1/sqrt(in), 1/sqrt(in)), from ``generator``."""
    bound = 1.0 / math.sqrt(in_features)
    weight = (torch.rand(out_features, in_features, generator=generator) * 2 - 1) * bound
    bias = (torch.rand(out_features, generator=generator) * 2 - 1) * bound
    return {"weight": weight, "bias": bias}


def label_distributions(class_counts: np.ndarray) -> np.ndarray:
    """(K, C) rows p_k(c) = n_{k,c} / n_k (a client with no samples gets a zero row)."""
    totals = class_counts.sum(axis=1, keepdims=True)
    return class_counts / np.maximum(totals, 1.0)


def cluster_clients(distributions: np.ndarray, clusters: int, seed: int) -> list[int]:
    """k-means cluster index of every client's label distribution."""
    if clusters == 1:
        return [0] * len(distributions)
    from sklearn.cluster import KMeans

    labels = KMeans(n_clusters=clusters, n_init=10, random_state=seed).fit(distributions).labels_
    return [int(label) for label in labels]
