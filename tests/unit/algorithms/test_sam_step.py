"""The SAM step FedSAM and FedGF share (fedlib.algorithms.fedsam.sam_step) computes, bit for bit,
what each method's own ``train_step`` computed before it was shared.

The references below are those two ``train_step`` bodies as they stood in fedsam.py and fedgf.py
before the shared step (commit c185458), with ``self`` renamed ``method``; the helpers they call
(ascent_perturbation, frozen_batchnorm_stats, move_to_ascent_point) are unchanged."""

import copy

import pytest
import torch
from torch import nn

from fedlib.algorithms.base import ClientContext
from fedlib.algorithms.fedgf import move_to_ascent_point
from fedlib.algorithms.fedsam import FedSAM, ascent_perturbation, frozen_batchnorm_stats
from fedlib.core.registry import build_algorithm


def reference_fedsam_step(method, model, optimizer, x, labels, ctx):
    optimizer.zero_grad(set_to_none=True)
    value = method.objective(model, x, labels, ctx)
    value.backward()
    params = [p for p in model.parameters() if p.grad is not None]
    perturbation = ascent_perturbation([p.grad for p in params], method.hp["rho"])
    with torch.no_grad():
        for p, e in zip(params, perturbation):
            p.add_(e)
    optimizer.zero_grad(set_to_none=True)
    with frozen_batchnorm_stats(model):
        method.objective(model, x, labels, ctx).backward()
    with torch.no_grad():
        for p, e in zip(params, perturbation):
            p.sub_(e)
    method.before_step(model, ctx)
    optimizer.step()
    return value.detach()


def reference_fedgf_step(method, model, optimizer, x, labels, ctx):
    optimizer.zero_grad(set_to_none=True)
    value = method.objective(model, x, labels, ctx)
    value.backward()
    params = list(model.parameters())
    start = [p.detach().clone() for p in params]
    with torch.no_grad():
        move_to_ascent_point(params, method.hp["rho"], ctx.extras["fedgf_point"], ctx.extras["fedgf_c"])
    optimizer.zero_grad(set_to_none=True)
    with frozen_batchnorm_stats(model):
        method.objective(model, x, labels, ctx).backward()
    with torch.no_grad():
        for p, w in zip(params, start):
            p.copy_(w)
    method.before_step(model, ctx)
    optimizer.step()
    return value.detach()


class SmallNet(nn.Module):
    """Linear, BatchNorm, ReLU, then a linear head; ``spare`` takes no part (its gradient stays None)."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU())
        self.head = nn.Linear(6, 3)
        self.spare = nn.Parameter(torch.ones(2))

    def forward(self, x, return_features=False):
        features = self.body(x)
        logits = self.head(features)
        return (features, logits) if return_features else logits


class HalvedSAM(FedSAM):
    """FedSAM with a gradient edit before the optimiser step, as another part's ``before_step`` is."""

    def before_step(self, model, ctx):
        for p in model.parameters():
            if p.grad is not None:
                p.grad.mul_(0.5)


def run_both(method, reference_step, ctx, steps=4):
    """Train two copies of one model ``steps`` steps, by the method and by the reference; assert
    every state entry, the momentum buffers and the losses are identical after every step."""
    torch.manual_seed(0)
    model = SmallNet()
    twin = copy.deepcopy(model)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4) for m in (model, twin)]
    for _ in range(steps):
        x, labels = torch.randn(8, 4), torch.randint(0, 3, (8,))
        loss = method.train_step(model, optimizers[0], x, labels, ctx)
        expected = reference_step(method, twin, optimizers[1], x, labels, ctx)
        assert torch.equal(loss, expected)
        for key, value in twin.state_dict().items():
            assert torch.equal(model.state_dict()[key], value), key
        for p, q in zip(model.parameters(), twin.parameters()):
            buffers = [optimizer.state.get(r, {}).get("momentum_buffer") for optimizer, r in zip(optimizers, (p, q))]
            assert (buffers[0] is None) == (buffers[1] is None)
            assert buffers[0] is None or torch.equal(*buffers)
    return model


def context(**extras) -> ClientContext:
    return ClientContext(0, 0, torch.ones(3), 8, None, extras=dict(extras))


@pytest.mark.parametrize("method", [build_algorithm("fedsam", {"rho": 0.3}), HalvedSAM({"rho": 0.3})],
                         ids=["fedsam", "fedsam with a before_step"])
def test_fedsam_steps_are_the_same_bits_as_before_the_shared_step(method):
    model = run_both(method, reference_fedsam_step, context())
    assert model.spare.grad is None and torch.equal(model.spare.detach(), torch.ones(2))
    assert int(model.body[1].num_batches_tracked) == 4, "the second pass counted a batch"


@pytest.mark.parametrize("c", [0.0, 0.4])
@pytest.mark.parametrize("with_point", [False, True], ids=["round 0 (plain SAM)", "global perturbed model"])
def test_fedgf_steps_are_the_same_bits_as_before_the_shared_step(with_point, c):
    method = build_algorithm("fedgf", {"rho": 0.3})
    torch.manual_seed(1)
    point = [torch.randn_like(p) for p in SmallNet().parameters()] if with_point else None
    model = run_both(method, reference_fedgf_step, context(fedgf_point=point, fedgf_c=c))
    assert torch.equal(model.spare.detach(), torch.ones(2)), "mixed towards the point, then restored"
