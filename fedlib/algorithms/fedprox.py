"""FedProx (Li et al., MLSys 2020): a proximal term keeps local weights near the global model.

    L_k(w) = CE(w) + (mu / 2) * ||w - w_g||^2

mu = 0.01 is the FedVLS appendix value (its code used 0.001). The term is a ``penalty`` hook,
so it combines with any local loss (``fedlmd+fedprox`` is FedLMD Table 5).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from fedlib.algorithms.base import NON_NEGATIVE, Algorithm, ClientContext
from fedlib.core.registry import register


@register
class FedProx(Algorithm):
    """Proximal term to the received global weights."""

    name = "fedprox"
    paper = "Li et al., MLSys 2020"
    defaults = {"mu": 0.01}
    ranges = {"mu": NON_NEGATIVE}
    pure_penalty = True  # reads model.parameters() and ctx only: the stacked path may run it

    def client_context(self, server, ctx: ClientContext) -> None:
        super().client_context(server, ctx)
        # a frozen copy of the received global parameters (same order as model.parameters())
        ctx.extras["prox_anchor"] = [p.detach().clone() for p in server.model.parameters()]

    def penalty(self, model: nn.Module, ctx: ClientContext) -> Tensor:
        return proximal_term(list(model.parameters()), ctx.extras["prox_anchor"], self.hp["mu"])


def proximal_term(params: list[Tensor], anchor: list[Tensor], mu: float) -> Tensor:
    """(mu / 2) * sum ||w - w_g||^2 over all parameters."""
    squared = sum(torch.sum((p - a) ** 2) for p, a in zip(params, anchor))
    return 0.5 * mu * squared
