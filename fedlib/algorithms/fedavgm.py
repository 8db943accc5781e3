"""FedAvgM (Hsu et al., 2019): FedAvg with momentum on the server.

The server treats the averaged client change as a pseudo-gradient and runs heavy-ball SGD on it:

    Delta_t = w_g - sum_k (n_k / n) w_k           (the round's averaged update, sign: descent)
    m_t     = beta * m_{t-1} + Delta_t            (server momentum, m_0 = 0)
    w_g    <- w_g - eta_s * m_t                   (server learning rate eta_s = 1)

With beta = 0 and eta_s = 1 this is FedAvg. ``server_momentum`` (beta) defaults to 0.9, the
value Hsu et al. discuss most; FedNTD's released code (whose setup FedLMD copies) uses 0.7, and
FedLMD Table 5 (``fedlmd+fedavgm``) does not state its value. The argument is called
``server_momentum`` rather than ``beta`` so it does not clash with FedLMD's ``beta``.

Only parameters get momentum. BatchNorm buffers (running mean/var, batch counters) are not
gradient-driven, so they take the plain sample-weighted average, as in FedAvg.
"""

from __future__ import annotations

import torch
from torch import Tensor

from fedlib.algorithms.base import POSITIVE, Algorithm, ClientUpdate, Range, weighted_average
from fedlib.core.registry import register

MOMENTUM_KEY = "fedavgm_momentum"


@register
class FedAvgM(Algorithm):
    """Heavy-ball momentum on the averaged update, applied by the server."""

    name = "fedavgm"
    paper = "Hsu et al., arXiv 1909.06335, 2019"
    defaults = {"server_momentum": 0.9, "server_lr": 1.0}
    ranges = {"server_momentum": Range(0, 1, high_open=True), "server_lr": POSITIVE}

    def setup(self, server) -> None:
        super().setup(server)
        server.extras[MOMENTUM_KEY] = {name: torch.zeros_like(p, dtype=torch.float32)
                                       for name, p in server.model.named_parameters()}

    def aggregate(self, server, updates: list[ClientUpdate]) -> dict[str, Tensor]:
        averaged = weighted_average([u.state for u in updates], [u.num_samples for u in updates])
        global_state = server.model.state_dict()
        momentum = server.extras[MOMENTUM_KEY]
        for name in momentum:
            new_params, momentum[name] = momentum_step(
                global_state[name], averaged[name], momentum[name],
                self.hp["server_momentum"], self.hp["server_lr"])
            averaged[name] = new_params
        return averaged


def momentum_step(global_params: Tensor, averaged: Tensor, momentum: Tensor, beta: float,
                  server_lr: float = 1.0) -> tuple[Tensor, Tensor]:
    """One server step: returns (new global parameters, new momentum)."""
    delta = global_params.float() - averaged.float()
    new_momentum = beta * momentum.to(delta.device) + delta
    new_params = global_params.float() - server_lr * new_momentum
    return new_params.to(global_params.dtype), new_momentum
