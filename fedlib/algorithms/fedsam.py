"""FedSAM (Qu et al., ICML 2022): local training with Sharpness-Aware Minimization.

Each local step minimises the worst loss in a ball of radius rho around the weights (SAM,
Foret et al. 2021), which drives clients to flat minima that average better:

    e     = rho * g / ||g||,          g = grad L(w)          (ascent to the worst neighbour)
    g_SAM = grad L(w + e)                                    (gradient at the perturbed point)
    w    <- SGD-momentum step from w with g_SAM

||g|| is the l2 norm over all parameters together. rho = 0.1 (FedVLS appendix; the FedVLS code
used 1.0). The objective is whatever the method combination defines (``self.objective``: loss +
penalty), so ``fedvls+fedsam`` is SAM on the FedVLS loss (FedVLS Table 6). Gradient edits of
another part (``before_step``, e.g. SCAFFOLD) apply to g_SAM. The second forward pass does not
update BatchNorm running statistics, so each batch counts once, as in plain SGD. The returned
loss is the one at w. :func:`sam_step` is the step FedSAM and FedGF share; they differ only in the
ascent point (:func:`sam_ascent` here, :func:`fedlib.algorithms.fedgf.guided_ascent`).
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import partial
from typing import Callable, Iterator

import torch
from torch import Tensor, nn

from fedlib.algorithms.base import NON_NEGATIVE, Algorithm, ClientContext
from fedlib.core.registry import register


@register
class FedSAM(Algorithm):
    """SAM local steps: gradient taken at w + rho g/||g||, applied at w."""

    name = "fedsam"
    paper = "Qu et al., ICML 2022"
    defaults = {"rho": 0.1}
    ranges = {"rho": NON_NEGATIVE}

    def train_step(self, model: nn.Module, optimizer: torch.optim.Optimizer, x: Tensor,
                   labels: Tensor, ctx: ClientContext) -> Tensor:
        return sam_step(self, model, optimizer, x, labels, ctx, partial(sam_ascent, rho=self.hp["rho"]))


# the move to a SAM step's ascent point: edits the parameters in place (their gradients hold g) and
# returns the move back to where they were
Ascent = Callable[[list[nn.Parameter]], Callable[[], None]]


def sam_step(method: Algorithm, model: nn.Module, optimizer: torch.optim.Optimizer, x: Tensor,
             labels: Tensor, ctx: ClientContext, ascend: Ascent) -> Tensor:
    """One SAM local step, FedSAM's and FedGF's: the objective and its gradient g at w, ``ascend``
    to the ascent point (no autograd), the gradient there with BatchNorm running statistics frozen,
    back to w, the method's ``before_step`` on that gradient, the optimiser step. Returns the loss
    at w, detached."""
    optimizer.zero_grad(set_to_none=True)
    value = method.objective(model, x, labels, ctx)
    value.backward()
    with torch.no_grad():
        move_back = ascend(list(model.parameters()))
    optimizer.zero_grad(set_to_none=True)
    with frozen_batchnorm_stats(model):
        method.objective(model, x, labels, ctx).backward()
    with torch.no_grad():
        move_back()
    method.before_step(model, ctx)
    optimizer.step()
    return value.detach()


def sam_ascent(params: list[nn.Parameter], rho: float) -> Callable[[], None]:
    """FedSAM's ascent, in place: w <- w + e, e = rho g/||g|| over the parameters with a gradient;
    the move back subtracts the same e."""
    with_grad = [p for p in params if p.grad is not None]
    perturbation = ascent_perturbation([p.grad for p in with_grad], rho)
    for p, e in zip(with_grad, perturbation):
        p.add_(e)

    def move_back() -> None:
        for p, e in zip(with_grad, perturbation):
            p.sub_(e)

    return move_back


def ascent_perturbation(grads: list[Tensor], rho: float) -> list[Tensor]:
    """e = rho * g / ||g|| with the norm over all tensors together (zero when g = 0)."""
    norm = torch.sqrt(sum(g.detach().pow(2).sum() for g in grads))
    scale = rho / norm.clamp_min(1e-12)
    return [g.detach() * scale for g in grads]


@contextmanager
def frozen_batchnorm_stats(model: nn.Module) -> Iterator[None]:
    """Keep BatchNorm running statistics (and batch counters) unchanged inside the block."""
    saved = [(m, m.momentum, None if m.num_batches_tracked is None else m.num_batches_tracked.clone())
             for m in model.modules()
             if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats]
    for module, _, _ in saved:
        module.momentum = 0.0  # running = (1 - 0) * running + 0 * batch
    try:
        yield
    finally:
        for module, momentum, counter in saved:
            module.momentum = momentum
            if counter is not None:
                module.num_batches_tracked.copy_(counter)
