"""SCAFFOLD (Karimireddy et al., ICML 2020): control variates correct the client drift.

The server keeps a control variate c (an estimate of the global gradient) and every client i a
control variate c_i (an estimate of its own gradient). Local steps follow the corrected
gradient (Algorithm 1, line 10)

    y <- y - eta_l (g_i(y) - c_i + c),

so a client whose data pulls away from the global direction is pushed back. After K local steps
the client refreshes its variate with option II (Eq. 4 / line 12)

    c_i+ = c_i - c + (x - y_i) / (K eta_l),

and the server updates (lines 16-17), with global learning rate 1,

    x <- sum_i (n_i / n) y_i          c <- c + (1 / N) sum_{i in S} (c_i+ - c_i)

where N is the total number of clients. The paper averages the models uniformly; we keep
FedAvg's sample-count weights so SCAFFOLD differs from FedAvg only by the correction (equal
client sizes make them the same). Because the server rule *is* FedAvg, SCAFFOLD composes with a
different server rule (``scaffold+fedexp``, FedExP Table 2). Weight decay is applied by the
optimiser on top of the corrected gradient. ``control_divisor="momentum"`` replaces K by the
momentum-aware path length of FedNova (what FedNTD's released code calls adaptive division);
the default ``"steps"`` is the paper's K. All c_i start at zero; they live in ``server.extras``
(one parameter-sized vector set per client that has trained at least once).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from fedlib.algorithms.base import Algorithm, ClientContext, ClientUpdate
from fedlib.algorithms.fednova import momentum_path_length
from fedlib.core.registry import register

SERVER_KEY = "scaffold_c"
CLIENTS_KEY = "scaffold_c_clients"


@register
class Scaffold(Algorithm):
    """Gradient correction g - c_i + c with option-II control variates."""

    name = "scaffold"
    paper = "Karimireddy et al., ICML 2020"
    defaults = {"control_divisor": "steps"}
    choices = {"control_divisor": ("steps", "momentum")}

    def setup(self, server) -> None:
        super().setup(server)
        server.extras[SERVER_KEY] = {n: torch.zeros_like(p) for n, p in server.model.named_parameters()}
        server.extras[CLIENTS_KEY] = {}

    def client_context(self, server, ctx: ClientContext) -> None:
        super().client_context(server, ctx)
        server_c = server.extras[SERVER_KEY]
        client_c = server.extras[CLIENTS_KEY].get(ctx.client_id)
        names = [n for n, _ in server.model.named_parameters()]
        own = [client_c[n] if client_c is not None else torch.zeros_like(server_c[n]) for n in names]
        ctx.extras["scaffold_names"] = names
        ctx.extras["scaffold_c"] = [server_c[n] for n in names]
        ctx.extras["scaffold_c_i"] = own
        ctx.extras["scaffold_correction"] = [server_c[n] - ci for n, ci in zip(names, own)]
        ctx.extras["scaffold_start"] = [p.detach().clone() for p in server.model.parameters()]
        ctx.extras["scaffold_lr"] = ctx.lr
        ctx.extras["scaffold_momentum"] = float(server.cfg.momentum)

    def before_step(self, model: nn.Module, ctx: ClientContext) -> None:
        correct_gradients(list(model.parameters()), ctx.extras["scaffold_correction"])

    def client_upload(self, model: nn.Module, ctx: ClientContext, update: ClientUpdate) -> None:
        super().client_upload(model, ctx, update)
        steps = update.num_steps
        if self.hp["control_divisor"] == "momentum":
            steps = momentum_path_length(steps, ctx.extras["scaffold_momentum"])
        new_c_i = option_two_update(ctx.extras["scaffold_c_i"], ctx.extras["scaffold_c"],
                                    ctx.extras["scaffold_start"], [p.detach() for p in model.parameters()],
                                    steps, ctx.extras["scaffold_lr"])
        update.extras["scaffold_c_i"] = dict(zip(ctx.extras["scaffold_names"], new_c_i))

    def end_round(self, server, updates: list[ClientUpdate]) -> None:
        super().end_round(server, updates)
        server_c = server.extras[SERVER_KEY]
        clients = server.extras[CLIENTS_KEY]
        num_clients = server.cfg.clients
        for update in updates:
            new_c_i = update.extras["scaffold_c_i"]
            old_c_i = clients.get(update.client_id)
            for n, value in new_c_i.items():
                old = old_c_i[n] if old_c_i is not None else torch.zeros_like(value)
                server_c[n] = server_c[n] + (value - old) / num_clients
            clients[update.client_id] = new_c_i


def correct_gradients(params: list[Tensor], correction: list[Tensor]) -> None:
    """g <- g + (c - c_i) in place (a parameter without gradient gets the correction alone)."""
    with torch.no_grad():
        for p, delta in zip(params, correction):
            if p.grad is None:
                p.grad = delta.clone()
            else:
                p.grad.add_(delta)


def option_two_update(c_i: list[Tensor], c: list[Tensor], start: list[Tensor], end: list[Tensor],
                      steps: float, lr: float) -> list[Tensor]:
    """c_i+ = c_i - c + (x - y_i) / (K * eta_l); unchanged when the client took no step."""
    if steps <= 0:
        return [ci.clone() for ci in c_i]
    scale = 1.0 / (steps * lr)
    return [ci - cc + (x - y) * scale for ci, cc, x, y in zip(c_i, c, start, end)]
