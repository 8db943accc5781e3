"""FedNova (Wang et al., NeurIPS 2020): normalised averaging of heterogeneous local progress.

Clients that take more local steps move further; plain averaging then biases the global model
towards them (objective inconsistency). FedNova divides each client's change by the length of
its local "path" before averaging, then rescales by the average path length:

    d_i     = (w_g - w_i) / a_i                    (normalised update of client i)
    tau_eff = sum_i p_i a_i                         (effective number of local steps)
    w_g    <- w_g - tau_eff * sum_i p_i d_i         (p_i = n_i / sum_j n_j over the round's clients)

For local SGD with momentum rho the path length is the l1 norm of the accumulated momentum
coefficients after tau_i steps (FedNova Sec. 4 / Appendix):

    a_i = (tau_i - rho (1 - rho^tau_i) / (1 - rho)) / (1 - rho)

which is tau_i when rho = 0. tau_i is the number of local steps the client took
(``ClientUpdate.num_steps``) and rho is the run's ``momentum``. Weight decay is not part of
a_i (as in the released FedNova and FedNTD code). The rule is applied to parameters; BatchNorm
buffers take the plain sample-weighted average, as in FedAvg.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from fedlib.algorithms.base import Algorithm, ClientUpdate, weighted_average
from fedlib.core.registry import register
from fedlib.errors import FedlibError

TAU_KEY = "fednova_tau_eff"


@register
class FedNova(Algorithm):
    """Normalised averaging: each client's update divided by its momentum-aware step count."""

    name = "fednova"
    paper = "Wang et al., NeurIPS 2020"

    def aggregate(self, server, updates: list[ClientUpdate]) -> dict[str, Tensor]:
        averaged = weighted_average([u.state for u in updates], [u.num_samples for u in updates])
        rho = float(server.cfg.momentum)
        path_lengths = [momentum_path_length(u.num_steps, rho) for u in updates]
        total = float(sum(u.num_samples for u in updates))
        weights = [u.num_samples / total for u in updates]
        tau_eff = sum(p * a for p, a in zip(weights, path_lengths))
        server.extras[TAU_KEY] = tau_eff  # logged by round_metrics
        global_state = server.model.state_dict()
        for name, _ in server.model.named_parameters():
            start = global_state[name].double()
            normalised = sum(p * (start - u.state[name].double()) / a
                             for p, a, u in zip(weights, path_lengths, updates) if a > 0)
            averaged[name] = (start - tau_eff * normalised).to(global_state[name].dtype)
        return averaged

    def round_metrics(self, server, updates: list[ClientUpdate]) -> dict[str, Any]:
        metrics = super().round_metrics(server, updates)
        metrics["fednova_tau_eff"] = float(server.extras.get(TAU_KEY, 0.0))
        return metrics


def momentum_path_length(steps: int, rho: float) -> float:
    """a_i = (tau - rho (1 - rho^tau) / (1 - rho)) / (1 - rho); equals tau for rho = 0."""
    if not 0.0 <= rho < 1.0:
        raise FedlibError(f"fednova needs 0 <= momentum < 1, got momentum={rho}; set RunConfig.momentum accordingly")
    return (steps - rho * (1.0 - rho ** steps) / (1.0 - rho)) / (1.0 - rho)
