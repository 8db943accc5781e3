"""FedCurv (Shoham et al., 2019): an EWC-style penalty from the other clients' Fisher information.

Each client keeps its weights where the other clients' tasks are sensitive (Eq. 7 of FedCurv):

    L_s(w) = CE(w) + lambda * sum_{j != s} (w - w_j)^T diag(F_j) (w - w_j)

with w_j and F_j the weights and diagonal Fisher of client j at the end of its last local
training. Expanding the square, the server only needs sums (the paper's communication trick):

    penalty = lambda * (P . w^2 - 2 Q . w + R),
    P = sum_{j != s} u_j,  Q = sum_{j != s} v_j,  R = sum_{j != s} u_j . w_j^2,
    u_j = diag(F_j),  v_j = u_j * w_j,

which equals the double sum above exactly (it is >= 0 up to rounding). Clients upload u and v
(and the scalar u . w^2) after training; the server keeps the latest upload of every client
(FedNTD's released code, whose FedCurv the FedLMD tables report; the paper's "all other
clients"), so memory is two parameter vectors per client seen. Round 0 has no penalty.

Documented choices: the diagonal Fisher is the mean over mini-batches of the squared gradient
of the batch cross-entropy, on at least ``fisher_samples`` (500) local samples in a fixed order,
model in eval mode (FedNTD's code; an empirical Fisher). lambda = 1.0 is FedNTD's code value;
FedCurv's paper tunes it per task.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fedlib.algorithms._common import round_cache
from fedlib.algorithms.base import COUNT, NON_NEGATIVE, Algorithm, ClientContext, ClientUpdate
from fedlib.core.registry import register

STATE_KEY = "fedcurv"


@register
class FedCurv(Algorithm):
    """Penalty lambda * sum_{j != s} ||w - w_j||^2_{F_j} from the other clients' Fisher diagonals."""

    name = "fedcurv"
    paper = "Shoham et al., arXiv 1910.07796, 2019"
    defaults = {"lam": 1.0, "fisher_samples": 500}
    ranges = {"lam": NON_NEGATIVE, "fisher_samples": COUNT}

    @classmethod
    def short_run(cls, method_args: dict, rounds: int) -> tuple[dict, int, str]:
        """Two rounds at least: the Fisher penalty needs round-0 uploads."""
        return {}, max(2, rounds), "fedcurv: 2 rounds, the Fisher penalty needs round-0 uploads"

    def setup(self, server) -> None:
        super().setup(server)
        server.extras[STATE_KEY] = {"u": {}, "v": {}, "r": {}}

    def client_context(self, server, ctx: ClientContext) -> None:
        super().client_context(server, ctx)
        ctx.extras["fedcurv_batch_size"] = server.cfg.batch_size
        totals = self._totals(server)
        state = server.extras[STATE_KEY]
        if totals is None or set(state["u"]) == {ctx.client_id}:
            return  # nobody else has uploaded a Fisher yet
        P, Q, R = totals
        own = ctx.client_id in state["u"]
        if own:
            P, Q, R = P - state["u"][ctx.client_id], Q - state["v"][ctx.client_id], R - state["r"][ctx.client_id]
        ctx.tensors["fedcurv_P"], ctx.tensors["fedcurv_Q"], ctx.tensors["fedcurv_R"] = P, Q, R

    def _totals(self, server) -> tuple[Tensor, Tensor, Tensor] | None:
        """(sum u, sum v, sum r) over every stored client, computed once per round."""
        state = server.extras[STATE_KEY]
        if not state["u"]:
            return None
        cache = round_cache(server, "fedcurv_totals")
        if "totals" not in cache:
            cache["totals"] = tuple(torch.stack(list(state[k].values())).sum(0) for k in ("u", "v", "r"))
        return cache["totals"]

    def penalty(self, model: nn.Module, ctx: ClientContext) -> Tensor | None:
        if "fedcurv_P" not in ctx.tensors:
            return None
        w = flat_parameters(model)
        t = ctx.tensors
        return fisher_penalty(w, t["fedcurv_P"], t["fedcurv_Q"], t["fedcurv_R"], self.hp["lam"])

    def client_upload(self, model: nn.Module, ctx: ClientContext, update: ClientUpdate) -> None:
        super().client_upload(model, ctx, update)
        batches = ctx.data.eval_batches(ctx.extras["fedcurv_batch_size"])
        u = diagonal_fisher(model, batches, self.hp["fisher_samples"])
        w = flat_parameters(model).detach()
        update.extras["fedcurv"] = {"u": u, "v": u * w, "r": (u * w * w).sum()}

    def end_round(self, server, updates: list[ClientUpdate]) -> None:
        super().end_round(server, updates)
        state = server.extras[STATE_KEY]
        for update in updates:
            for key in ("u", "v", "r"):
                state[key][update.client_id] = update.extras["fedcurv"][key]


def fisher_penalty(w: Tensor, P: Tensor, Q: Tensor, R: Tensor, lam: float) -> Tensor:
    """lambda * (P . w^2 - 2 Q . w + R) = lambda * sum_j sum u_j (w - w_j)^2."""
    return lam * (torch.dot(P, w * w) - 2.0 * torch.dot(Q, w) + R)


def flat_parameters(model: nn.Module) -> Tensor:
    """All parameters as one vector in their logical (NCHW) element order, whatever their memory
    layout: ``parameters_to_vector`` uses ``view`` and fails on channels-last convolution weights."""
    return torch.cat([p.reshape(-1) for p in model.parameters()])


def diagonal_fisher(model: nn.Module, batches, min_samples: int) -> Tensor:
    """Mean over mini-batches of the squared gradient of the batch cross-entropy (flat vector)."""
    was_training = model.training
    model.eval()
    params = [p for p in model.parameters()]
    total = torch.zeros(sum(p.numel() for p in params), dtype=params[0].dtype, device=params[0].device)
    count, seen = 0, 0
    for x, y in batches:
        grads = torch.autograd.grad(F.cross_entropy(model(x), y), params, allow_unused=True)
        flat = torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1) for g, p in zip(grads, params)])
        total += flat.detach() ** 2
        count, seen = count + 1, seen + len(y)
        if seen >= min_samples:
            break
    model.train(was_training)
    return total / max(count, 1)
