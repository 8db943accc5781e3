"""FedExP (Jhunjhunwala et al., ICLR 2023): an adaptive server step size by extrapolation.

FedAvg moves the global model by the averaged client update. FedExP moves further along that
direction by a step eta_g >= 1 chosen from how much the client updates agree (Eq. 8 of FedExP,
in the form of its released code):

    D_i   = w_i - w_g                                  (client i's update)
    D     = sum_i p_i D_i,   p_i = n_i / sum_{j in S} n_j
    eta_g = max(1, sum_i p_i ||D_i||^2 / (2 (||D||^2 + |S| eps)))
    w_g  <- w_g + eta_g * D

When the clients' updates point the same way ||D||^2 ~ mean ||D_i||^2 and eta_g stays 1
(FedAvg); when they cancel out, ||D|| is small and the server extrapolates. The paper writes
p_i = 1/|S| (uniform); its code, which this follows, uses sample-count weights; both coincide on
equal client sizes. eps = 0.01 (FedVLS appendix; FedExP's code uses 1e-3). Because ||D_i||^2
scales with the local learning rate squared, eps is multiplied by lr_decay^(2 t) in round t, as
FedExP's code does. Norms run over the parameters; BatchNorm buffers are averaged as in FedAvg.

Evaluation uses the average of the last two global iterates (FedExP Sec. 5: extrapolation makes
the iterates oscillate around the optimum); the first round has no earlier iterate and
evaluates the model itself. ``eval_model(server)`` returns that averaged model.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from fedlib.algorithms.base import POSITIVE, Algorithm, ClientUpdate, weighted_average
from fedlib.core.registry import register

PREVIOUS_KEY = "fedexp_previous_params"
STEP_KEY = "fedexp_eta_g"


@register
class FedExP(Algorithm):
    """Server-side extrapolation with an adaptive step eta_g >= 1."""

    name = "fedexp"
    paper = "Jhunjhunwala et al., ICLR 2023"
    defaults = {"eps": 0.01}
    ranges = {"eps": POSITIVE}

    def aggregate(self, server, updates: list[ClientUpdate]) -> dict[str, Tensor]:
        averaged = weighted_average([u.state for u in updates], [u.num_samples for u in updates])
        global_state = server.model.state_dict()
        names = [name for name, _ in server.model.named_parameters()]
        eps = self.hp["eps"] * float(server.cfg.lr_decay) ** (2 * server.round)
        deltas = [{n: u.state[n].double() - global_state[n].double() for n in names} for u in updates]
        weights = [float(u.num_samples) for u in updates]
        step = extrapolation_step(deltas, weights, eps)
        server.extras[STEP_KEY] = step  # this round's eta_g, logged by round_metrics
        if server.round > 0:  # the initial model is never one of the averaged iterates
            server.extras[PREVIOUS_KEY] = {n: global_state[n].detach().clone() for n in names}
        for n in names:
            mean_delta = sum(w * d[n] for w, d in zip(weights, deltas)) / sum(weights)
            averaged[n] = (global_state[n].double() + step * mean_delta).to(global_state[n].dtype)
        return averaged

    def eval_model(self, server) -> nn.Module:
        """The average of the last two global iterates (the global model itself in round 0)."""
        previous = server.extras.get(PREVIOUS_KEY)
        if previous is None:
            return server.model
        module = server.cache.get("fedexp_eval_model")
        if module is None:
            module = server.cache["fedexp_eval_model"] = server.new_model()
        state = server.model.state_dict()
        for name, old in previous.items():
            state[name] = (state[name] + old.to(state[name].device)) / 2
        module.load_state_dict(state)
        return module

    def round_metrics(self, server, updates: list[ClientUpdate]) -> dict[str, Any]:
        metrics = super().round_metrics(server, updates)
        metrics["fedexp_eta_g"] = float(server.extras.get(STEP_KEY, 1.0))
        return metrics


def extrapolation_step(deltas: list[dict[str, Tensor]], weights: list[float], eps: float) -> float:
    """eta_g = max(1, sum_i p_i ||D_i||^2 / (2 (||sum_i p_i D_i||^2 + |S| eps))), p_i = w_i / sum w."""
    total = float(sum(weights))
    probs = [w / total for w in weights]
    mean_sq_norm = sum(p * sum(float(t.pow(2).sum()) for t in d.values()) for p, d in zip(probs, deltas))
    mean_delta_sq_norm = sum(float(sum(p * d[n] for p, d in zip(probs, deltas)).pow(2).sum())
                             for n in deltas[0])
    return max(1.0, mean_sq_norm / (2.0 * (mean_delta_sq_norm + len(deltas) * eps)))
