# Answer key, exercise 1 (notebooks/exercises/fedprox_exercise.ipynb): the cell a student writes.
# The teacher's pack (teaching/README.md) says how the check cell reads it.
import torch

from fedlib.algorithms.base import Algorithm
from fedlib.core.registry import register


@register
class MyFedProx(Algorithm):
    """FedAvg's local cross-entropy plus the proximal term (mu / 2) * ||w - w_g||^2."""

    name = "my_fedprox"
    defaults = {"mu": 0.01}

    def client_context(self, server, ctx):
        super().client_context(server, ctx)
        # w_g: the global weights this client received, frozen for the whole local update
        ctx.extras["anchor"] = [p.detach().clone() for p in server.model.parameters()]

    def penalty(self, model, ctx):
        squared = sum(torch.sum((w - w_g) ** 2) for w, w_g in zip(model.parameters(), ctx.extras["anchor"]))
        return 0.5 * self.hp["mu"] * squared
