"""MOON (Li et al., CVPR 2021): model-contrastive federated learning.

The local representation z of a sample is pulled towards the global model's representation
z_glob (positive) and pushed from the client's own previous local model's representation z_prev
(negative), InfoNCE-style with cosine similarity sim and temperature tau (Eqs. 1-3 of MOON):

    l_con = -log( exp(sim(z, z_glob)/tau) / (exp(sim(z, z_glob)/tau) + exp(sim(z, z_prev)/tau)) )
    L     = CE + mu * l_con                                   (batch means)

mu = 0.01, tau = 0.5 (FedVLS appendix; MOON's code uses mu = 1 or 5 and FedVLS's code 0.001).
The global model and the previous local model are frozen teachers. A client training for the
first time has no previous model: MOON's code then uses the initial model; we use the received
global model, which makes l_con the constant log 2 (no gradient) for that round.

``projection_head`` (default off, as in FedCSD's and FedNTD's comparisons): MOON's networks
insert a 2-layer MLP (D -> D, ReLU, D -> 256) between the body and the classifier. fedlib's
models are fixed, so here the head is a side branch used only for l_con: z = head(features);
the classifier keeps reading the raw features. The head's weights belong to the algorithm: each
client starts from the global head, trains its own copy with the model (``make_optimizer`` adds it), the
server averages the heads with FedAvg weights, and each client's last head serves its next
negative. Head weights are kept in ``server.extras`` so resumed runs continue exactly.
Without the head, z is the model's penultimate features.
"""

from __future__ import annotations


import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fedlib.algorithms._common import global_teacher, round_cache
from fedlib.algorithms.base import (
    NON_NEGATIVE, POSITIVE, Algorithm, ClientContext, ClientUpdate, Outputs, weighted_average)
from fedlib.core.registry import register

PREVIOUS_KEY = "moon_previous"
HEAD_KEY = "moon_head"
PROJECTION_DIM = 256


@register
class MOON(Algorithm):
    """CE + mu * contrastive loss (global model positive, previous local model negative)."""

    name = "moon"
    paper = "Li et al., CVPR 2021"
    defaults = {"mu": 0.01, "tau": 0.5, "projection_head": False}
    ranges = {"mu": NON_NEGATIVE, "tau": POSITIVE}
    # the head's initial weights are kept: a part whose setup draws first would change them
    order_matters = "its setup draws the projection head's initial weights from the global random stream"

    @classmethod
    def short_run(cls, method_args: dict, rounds: int) -> tuple[dict, int, str]:
        """Two rounds at least: previous local models exist from round 1."""
        return {}, max(2, rounds), "moon: 2 rounds, previous local models exist from round 1"

    @classmethod
    def result_revision(cls, hparams: dict) -> int:
        """1: with a projection head, each client of a round trains its own head (before: one head
        module shared by the algorithm instance, built once from the global random stream)."""
        return int(bool(hparams["projection_head"]))

    def setup(self, server) -> None:
        super().setup(server)
        server.extras[PREVIOUS_KEY] = {}
        if self.hp["projection_head"]:
            head = projection_head(server.model.feature_dim).to(server.device)
            server.extras[HEAD_KEY] = {"global": head.state_dict(), "clients": {}}

    def client_context(self, server, ctx: ClientContext) -> None:
        super().client_context(server, ctx)
        teacher = global_teacher(server)
        previous = server.extras[PREVIOUS_KEY].get(ctx.client_id)
        ctx.teachers["moon_global"] = teacher
        ctx.teachers["moon_previous"] = teacher if previous is None else _previous_model(server, ctx.client_id, previous)
        if self.hp["projection_head"]:
            ctx.extras["moon_heads"] = _client_heads(server, ctx.client_id)

    def make_optimizer(self, model: nn.Module, lr: float, momentum: float, weight_decay: float,
                       ctx: ClientContext | None = None) -> torch.optim.Optimizer:
        params = list(model.parameters())
        if ctx is not None and "moon_heads" in ctx.extras:  # the client's own projection head trains too
            params += list(ctx.extras["moon_heads"][0].parameters())
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)

    def loss(self, out: Outputs, labels: Tensor, ctx: ClientContext,
             teacher_out: dict[str, Outputs]) -> Tensor:
        z, z_glob, z_prev = out.features, teacher_out["moon_global"].features, teacher_out["moon_previous"].features
        if "moon_heads" in ctx.extras:
            head, global_head, previous_head = ctx.extras["moon_heads"]
            z = head(z)
            with torch.no_grad():
                z_glob, z_prev = global_head(z_glob), previous_head(z_prev)
        ce = F.cross_entropy(out.logits, labels)
        return ce + self.hp["mu"] * contrastive_loss(z, z_glob, z_prev, self.hp["tau"])

    def client_upload(self, model: nn.Module, ctx: ClientContext, update: ClientUpdate) -> None:
        super().client_upload(model, ctx, update)
        if "moon_heads" in ctx.extras:
            head = ctx.extras["moon_heads"][0]
            update.extras["moon_head"] = {k: v.detach().clone() for k, v in head.state_dict().items()}

    def end_round(self, server, updates: list[ClientUpdate]) -> None:
        super().end_round(server, updates)
        for update in updates:  # update.state is already a detached copy of the local model
            server.extras[PREVIOUS_KEY][update.client_id] = update.state
        if self.hp["projection_head"]:
            heads = server.extras[HEAD_KEY]
            states = [u.extras["moon_head"] for u in updates]
            heads["global"] = weighted_average(states, [u.num_samples for u in updates])
            for update, state in zip(updates, states):
                heads["clients"][update.client_id] = state


def _previous_model(server, client_id: int, state: dict) -> nn.Module:
    """A frozen module holding this client's previous local model: one per client of the round
    (the fast paths build every client's context before any of them trains)."""
    modules = round_cache(server, "moon_previous")
    if client_id not in modules:
        modules[client_id] = server.new_model().eval().requires_grad_(False)
    modules[client_id].load_state_dict(state)
    return modules[client_id]


def _client_heads(server, client_id: int) -> tuple[nn.Module, nn.Module, nn.Module]:
    """(trainable head from the global head, frozen global head, frozen previous head) of one
    client in this round; each client of the round gets its own modules."""
    heads = server.extras[HEAD_KEY]
    dim = server.model.feature_dim
    modules = round_cache(server, "moon_heads")
    if client_id not in modules:
        modules[client_id] = tuple(projection_head(dim).to(server.device) for _ in range(3))
    head, global_head, previous_head = modules[client_id]
    head.load_state_dict(heads["global"])
    global_head.load_state_dict(heads["global"])
    previous_head.load_state_dict(heads["clients"].get(client_id, heads["global"]))
    global_head.requires_grad_(False)
    previous_head.requires_grad_(False)
    return head, global_head, previous_head


def projection_head(dim: int, out_dim: int = PROJECTION_DIM) -> nn.Module:
    """MOON's projection head: Linear(D, D), ReLU, Linear(D, 256)."""
    return nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, out_dim))


def contrastive_loss(z: Tensor, z_global: Tensor, z_previous: Tensor, tau: float) -> Tensor:
    """Batch mean of -log(e^{sim(z,z_g)/tau} / (e^{sim(z,z_g)/tau} + e^{sim(z,z_p)/tau}))."""
    positive = F.cosine_similarity(z, z_global.detach(), dim=1)
    negative = F.cosine_similarity(z, z_previous.detach(), dim=1)
    logits = torch.stack([positive, negative], dim=1) / tau
    return (torch.logsumexp(logits, dim=1) - logits[:, 0]).mean()
