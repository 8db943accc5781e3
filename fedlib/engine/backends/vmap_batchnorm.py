"""BatchNorm on the stacked path, where it runs under vmap: bf16 inputs, and train-mode teachers.

**bf16.** Under bf16 autocast, BatchNorm layers take their input in float32 on the stacked path
(:func:`batchnorm_in_float32`). vmap's batch rule for BatchNorm folds the clients into the
channels and calls the plain kernel with a stand-in weight of the *input's* dtype (bf16) beside
the float32 running statistics, a mix the kernels refuse (CUDA: "Expected running_mean to have
type BFloat16 but got Float", in the backward). Only the GPU crashed because CPU autocast leaves
vmapped convolutions in float32, so BatchNorm never got a bf16 input on the CPU's stacked path
(its bf16 runs there are bf16 in the linear layers only). Normalising a float32 copy of the bf16
input is the arithmetic cuDNN does anyway (float32 statistics); only the output's rounding to
bf16 moves to the next autocast op.

**Train-mode teachers.** A teacher all clients share (the received global model of FedVLS's
official variant, FedCSD's official teacher, ``teacher_mode="train"``) with BatchNorm in train
mode must normalise each client's batch with that client's own statistics. It runs for all
clients in one vmapped forward pass, its parameters shared and the batch split per client
(:func:`teacher_under_vmap`), rather than once per client in a Python loop
(:func:`teacher_per_client`, which runs M times as many kernels); its running statistics end as
that loop over the clients in stack order leaves them. Where the vmap cannot run
(:func:`teacher_loop_reason`) the stacked path keeps the loop.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap

from fedlib.models import has_dropout

# ====================================================================== bf16
_LOW_PRECISION = (torch.bfloat16, torch.float16)


def _float_input(_module: nn.Module, args: tuple) -> tuple | None:
    """A forward pre-hook: a low-precision input becomes float32 (other inputs pass unchanged)."""
    if args and isinstance(args[0], Tensor) and args[0].dtype in _LOW_PRECISION:
        return (args[0].float(), *args[1:])
    return None


@contextmanager
def batchnorm_in_float32(model: nn.Module, enabled: bool = True) -> Iterator[None]:
    """While open, ``model``'s BatchNorm layers normalise a float32 copy of a bf16/fp16 input, so
    their kernel sees one dtype for input, weight and running statistics (see the module notes)."""
    layers = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)] if enabled else []
    handles = [layer.register_forward_pre_hook(_float_input) for layer in layers]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


# ====================================================================== train-mode teachers
def _tracking_layers(teacher: nn.Module) -> dict[str, nn.modules.batchnorm._BatchNorm]:
    """The BatchNorm layers of ``teacher`` whose forward pass updates running statistics, by name."""
    return {name: m for name, m in teacher.named_modules()
            if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.training and m.track_running_stats
            and m.running_mean is not None}


def teacher_loop_reason(teacher: nn.Module) -> str | None:
    """Why a train-mode BatchNorm teacher cannot run for all clients under one vmap (None when it
    can): a layer with ``momentum=None`` (a cumulative average) turns its step count into a Python
    number every forward pass, which vmap cannot do with a count per client."""
    for name, layer in _tracking_layers(teacher).items():
        if layer.momentum is None:
            return f"its BatchNorm layer {name!r} has momentum=None (a cumulative average)"
    return None


def teacher_per_client(teacher: nn.Module, x: Tensor) -> tuple[Tensor, Tensor]:
    """Features and logits of ``teacher`` on x (m, B, ...), one forward pass per client in stack
    order (each client's batch statistics; the running statistics updated m times)."""
    pairs = [teacher(xk, return_features=True) for xk in x]
    return torch.stack([f for f, _ in pairs]), torch.stack([l for _, l in pairs])


@torch.no_grad()
def teacher_under_vmap(teacher: nn.Module, x: Tensor, weights: dict | None = None) -> tuple[Tensor, Tensor]:
    """:func:`teacher_per_client` as one vmapped forward pass: the parameters shared (not
    batched), the batch split per client, so train-mode BatchNorm normalises each client's batch
    with that client's statistics.

    Running statistics: each client updates its own zeroed copy, which leaves it ``momentum *
    stat_k`` (its batch mean, or unbiased variance); the loop over k = 0..m-1 would leave
    ``(1-momentum)^m * r + sum_k (1-momentum)^(m-1-k) * momentum * stat_k``, which is then
    written into the teacher's buffers, all layers at once (a handful of ops a step, whatever the
    depth), and ``num_batches_tracked`` grows by m. Equal to the loop to float rounding.
    ``weights`` caches the powers of (1-momentum) between calls. Layers with ``momentum=None``
    cannot run here (:func:`teacher_loop_reason`). A teacher with dropout draws other masks than
    the loop (vmap's randomness="different"), as the stacked model does against the sequential path.
    """
    count = x.shape[0]
    layers = _tracking_layers(teacher)
    params = dict(teacher.named_parameters())
    names = [f"{prefix}.{kind}" for prefix in layers for kind in ("running_mean", "running_var")]
    counters = [f"{prefix}.num_batches_tracked" for prefix, layer in layers.items()
                if layer.num_batches_tracked is not None]
    # each client's copies: contiguous (m, C) views (vmap writes a non-contiguous one into a temporary copy)
    buffers = dict(teacher.named_buffers())
    dtype = buffers[names[0]].dtype if names else torch.float32
    sizes = [count * buffers[n].numel() for n in names]
    zeros = torch.zeros(sum(sizes), device=x.device, dtype=dtype)
    copies = {n: part.view(count, -1) for n, part in zip(names, zeros.split(sizes))} if names else {}
    steps = torch.zeros(count * len(counters), device=x.device, dtype=torch.long)
    copies.update({n: part for n, part in zip(counters, steps.split(count))})
    shared = {n: b for n, b in buffers.items() if n not in copies}
    randomness = "different" if has_dropout(teacher) else "error"

    def one_client(copy: dict, xk: Tensor):
        return functional_call(teacher, (params, shared, copy), (xk,), {"return_features": True})

    features, logits = vmap(one_client, randomness=randomness)(copies, x)
    by_momentum: dict[float, list[str]] = {}
    for prefix, layer in layers.items():
        by_momentum.setdefault(float(layer.momentum), []).append(prefix)
    weights = {} if weights is None else weights
    for momentum, prefixes in by_momentum.items():
        group = [f"{prefix}.{kind}" for prefix in prefixes for kind in ("running_mean", "running_var")]
        key = (momentum, count, x.device, dtype)
        if key not in weights:
            weights[key] = torch.tensor([(1 - momentum) ** (count - 1 - k) for k in range(count)],
                                        device=x.device, dtype=dtype)
        # (m, total) -> (total,): every layer's sum over the clients in one product
        summed = weights[key] @ torch.cat([copies[n] for n in group], dim=1)
        running = [buffers[n] for n in group]
        torch._foreach_mul_(running, (1 - momentum) ** count)
        torch._foreach_add_(running, list(summed.split([b.numel() for b in running])))
    if counters:
        torch._foreach_add_([buffers[n] for n in counters], count)
    return features, logits
