"""FedGF (Lee and Yoon, ICML 2024): SAM steps guided by the flatness of the *global* model.

"Rethinking the Flat Minima Searching in Federated Learning". Local SAM (FedSAM) finds flat
minima of each client's loss, yet the averaged model need not sit in a flat region of the
global loss ("flatness discrepancy"). FedGF moves the SAM ascent point towards a *global
perturbed model* computed by the server from the last global update:

    server, after aggregating round t (w_t sent, w_{t+1} the new global model):
        D_t   = mean_k ||w_t - w_k||                          divergence of the client models
        W_t   = last `window` values of 1[D_t > c_cos]
        c     = mean(W_t)                                     mixing coefficient for round t+1
        w~    = w_{t+1} + g_rho * (w_t - w_{t+1}) / ||w_t - w_{t+1}||   global perturbed model
    client, every local step from weights w:
        w_l   = w + rho * g / ||g||,  g = grad L(w)           local SAM ascent point
        w_mix = c * w~ + (1 - c) * w_l                        interpolated ascent point
        w    <- SGD-momentum step from w with grad L(w_mix)

In round 0 there is no global perturbed model yet and the step is plain SAM. Norms are over all
parameters together (BatchNorm buffers excluded), as in the authors' code, which these formulas
follow; w~ stays fixed for the whole round while w moves. rho = 0.1, c_cos = 0.3 (FedVLS
appendix; reading c_cos as the threshold above is an interpretation: docs/facts.md#fedgf),
g_rho = rho and window = 30 (the code's). The objective is the method combination's
(``self.objective``), and the step is FedSAM's (:func:`fedlib.algorithms.fedsam.sam_step`) with this
ascent point: the second forward pass leaves BatchNorm running statistics untouched, and another
part's ``before_step`` edits the gradient taken at w_mix.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import torch
from torch import Tensor, nn

from fedlib.algorithms._common import global_teacher
from fedlib.algorithms.base import COUNT, NON_NEGATIVE, UNIT_INTERVAL, Algorithm, ClientContext, ClientUpdate
from fedlib.algorithms.fedsam import ascent_perturbation, sam_step
from fedlib.core.registry import register
from fedlib.core.state import ServerState

ROUND_START = "fedgf_round_start"  # cache key of the global model the round's clients received


@register
class FedGF(Algorithm):
    """SAM whose ascent point is pulled towards the server's global perturbed model."""

    name = "fedgf"
    paper = "Lee and Yoon, ICML 2024"
    defaults = {"rho": 0.1, "g_rho": 0.1, "c_cos": 0.3, "window": 30}
    ranges = {"rho": NON_NEGATIVE, "g_rho": NON_NEGATIVE, "c_cos": UNIT_INTERVAL, "window": COUNT}

    @classmethod
    def short_run(cls, method_args: dict, rounds: int) -> tuple[dict, int, str]:
        """Two rounds at least: the global perturbed model exists from round 1."""
        return {}, max(2, rounds), "fedgf: 2 rounds, the global perturbed model exists from round 1"

    def setup(self, server: ServerState) -> None:
        super().setup(server)
        server.extras["fedgf"] = {"indicators": [], "c": 0.0, "perturbed": None}

    def client_context(self, server: ServerState, ctx: ClientContext) -> None:
        super().client_context(server, ctx)
        global_teacher(server, key=ROUND_START)  # snapshot w_t once per round for end_round
        state = server.extras["fedgf"]
        ctx.extras["fedgf_c"] = float(state["c"])
        ctx.extras["fedgf_point"] = state["perturbed"]
        ctx.metrics["fedgf_c"] = float(state["c"])

    def train_step(self, model: nn.Module, optimizer: torch.optim.Optimizer, x: Tensor,
                   labels: Tensor, ctx: ClientContext) -> Tensor:
        ascend = partial(guided_ascent, rho=self.hp["rho"], global_point=ctx.extras["fedgf_point"],
                         c=ctx.extras["fedgf_c"])
        return sam_step(self, model, optimizer, x, labels, ctx, ascend)

    def end_round(self, server: ServerState, updates: list[ClientUpdate]) -> None:
        super().end_round(server, updates)
        previous = global_teacher(server, key=ROUND_START)  # w_t, cached this round
        names = [name for name, _ in server.model.named_parameters()]
        old = [previous.state_dict()[n] for n in names]
        new = [p.detach() for p in server.model.parameters()]
        state = server.extras["fedgf"]
        divergence = client_divergence(old, [[u.state[n] for n in names] for u in updates])
        state["indicators"] = (state["indicators"] + [int(divergence > self.hp["c_cos"])])[-self.hp["window"]:]
        state["c"] = sum(state["indicators"]) / len(state["indicators"])
        state["perturbed"] = global_perturbed_model(old, new, self.hp["g_rho"])
        state["divergence"] = divergence

    def round_metrics(self, server: ServerState, updates: list[ClientUpdate]) -> dict:
        metrics = super().round_metrics(server, updates)
        metrics["fedgf_divergence"] = float(server.extras["fedgf"]["divergence"])
        return metrics


def guided_ascent(params: list[nn.Parameter], rho: float, global_point: list[Tensor] | None,
                  c: float) -> Callable[[], None]:
    """FedGF's ascent, in place (:func:`move_to_ascent_point`); the move back restores a copy of w."""
    start = [p.detach().clone() for p in params]
    move_to_ascent_point(params, rho, global_point, c)

    def move_back() -> None:
        for p, w in zip(params, start):
            p.copy_(w)

    return move_back


def move_to_ascent_point(params: list[Tensor], rho: float, global_point: list[Tensor] | None,
                         c: float) -> None:
    """In place: w <- c * w~ + (1 - c) * (w + rho g/||g||); plain SAM when w~ is None.

    Parameters without a gradient get no local perturbation (e = 0) but are still mixed.
    """
    with_grad = [p for p in params if p.grad is not None]
    for p, e in zip(with_grad, ascent_perturbation([p.grad for p in with_grad], rho)):
        p.add_(e)
    if global_point is None:
        return
    for p, g in zip(params, global_point):
        p.mul_(1.0 - c).add_(g.to(p.dtype), alpha=c)


def client_divergence(global_params: list[Tensor], client_params: list[list[Tensor]]) -> float:
    """D = mean over clients of ||w_g - w_k||, the norm over all parameters together."""
    distances = [torch.sqrt(sum(((g.double() - k.double()) ** 2).sum() for g, k in zip(global_params, client)))
                 for client in client_params]
    return float(sum(distances) / len(distances))


def global_perturbed_model(old: list[Tensor], new: list[Tensor], g_rho: float) -> list[Tensor]:
    """w~ = w_new + g_rho * (w_old - w_new) / ||w_old - w_new|| (w_new itself when they agree)."""
    steps = [o.detach() - n.detach() for o, n in zip(old, new)]
    norm = torch.sqrt(sum(s.pow(2).sum() for s in steps))
    scale = g_rho / norm.clamp_min(1e-12)
    return [n.detach() + s * scale for n, s in zip(new, steps)]
