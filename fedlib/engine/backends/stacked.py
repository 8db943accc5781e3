"""The stacked path: the clients of a round train together as one computation.

Every parameter and buffer gets a leading client dimension; one local step of all clients is
``vmap(functional_call(model))`` over that dimension, each client on its own batch, followed by
one backward pass through the summed per-client losses (client k's loss only reaches client k's
parameters, so the gradients are exactly the per-client ones). SGD with momentum, dampening,
Nesterov and weight decay is elementwise, so applying torch.optim.SGD's rule to the stacked
tensors gives each client the update it would get alone.

What each client keeps apart: parameters, momentum, BatchNorm running statistics, its data
order and augmentation (the same keyed generators as the sequential path, so the same batches,
drawn for all clients at once: :mod:`fedlib.engine.backends.stacked_batches`),
its class counts and the per-client tensors and numbers of its context (stacked). Teachers that
all clients share (the received global model, FedCSD's moving average, PKD's experts) run once
on the concatenated batch outside vmap; one with BatchNorm in train mode, whose batch statistics
must stay per client, runs once under its own vmap (:func:`teacher_under_vmap`), or where that
cannot run (:func:`teacher_loop_reason`) once per client in a loop, with one warning.

Clients run different numbers of steps. They are sorted by step count, so the clients still
training at step t are a prefix of the stack (slices are views: no copies); finished clients
are left out of the computation entirely, so their parameters, momentum and buffers are frozen.
A client whose batch at step t is smaller (the last batch of an epoch) runs in its own group of
equal batch size, gathered out of the stack and scattered back.

Results agree with the sequential path to float tolerance, not bitwise (batched kernels sum in a
different order). Models with dropout draw different random masks than the sequential path.

BatchNorm under vmap (:mod:`fedlib.engine.backends.vmap_batchnorm`): under bf16 autocast its layers
take their input in float32 (:func:`batchnorm_in_float32`), and a train-mode teacher runs for all
clients at once with each client's batch statistics (:func:`teacher_under_vmap`).

What a method must keep to run here is its contract (rules 2-4 of :mod:`fedlib.algorithms.base`):
``loss`` and a ``pure_penalty`` run under vmap, the tensors and numbers of ``ctx.extras`` are per
client (anything else there must be equal across clients), and a tensor or number ``loss``
writes into ``extras`` (PKD's firing counters) is carried per client from step to step and
handed back to the client's context before ``client_upload``. Methods with a
``sequential_reason`` (SAM, SCAFFOLD, FedCurv), an optimiser other than plain SGD, or teachers
that differ per client (MOON) fall back to the sequential path with one warning.
"""

from __future__ import annotations

import os
import warnings
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from fedlib.algorithms.base import Algorithm, ClientContext, ClientUpdate, Observer, Outputs, autocast, notify
from fedlib.algorithms.client_training import client_setup, train_client
from fedlib.core.state import ServerState
from fedlib.engine.backends.stacked_batches import draw_batches
from fedlib.engine.backends.vmap_batchnorm import (batchnorm_in_float32, teacher_loop_reason, teacher_per_client,
                                                  teacher_under_vmap)
from fedlib.errors import FedlibError
from fedlib.models import has_batchnorm, has_dropout

# share of the device's total memory the client stack may take (the rest: teachers, allocator slack)
MEMORY_FRACTION = {"cuda": 0.8, "cpu": 0.5}
STACK_MEMORY_ENV = "FEDLIB_STACK_MEMORY"  # bytes the client stack may take, in place of that share
_STACK_MEMORY: list[int | None] = [None]  # the bytes an edge set ($FEDLIB_STACK_MEMORY, orchestration.environment)
_WARNED: set[tuple[str, str]] = set()


# ====================================================================== which methods can stack
def unsupported_reason(algorithm: Algorithm) -> str | None:
    """Why ``algorithm`` cannot run stacked (None when it can), as its class declares it."""
    return algorithm.sequential_reason()


def layout_reason(device: torch.device, channels_last: bool, model: nn.Module) -> str | None:
    """Why a model cannot stack in its memory layout on ``device`` (None when it can): on CUDA,
    BatchNorm asks whether a channels_last input is contiguous in that format, which vmap does not
    answer (torch: "NYI: querying is_contiguous inside of vmap"; the H200 check of 2026-11-28)."""
    if device.type == "cuda" and channels_last and has_batchnorm(model):
        return "channels_last with BatchNorm cannot run under vmap on CUDA"
    return None


def warn_fallback(method: str, reason: str) -> None:
    """Say once per (method, reason) that the sequential path runs instead."""
    if (method, reason) not in _WARNED:
        _WARNED.add((method, reason))
        warnings.warn(f"{method} runs on the sequential path: {reason}", stacklevel=3)


def warn_teacher_loop(method: str, teacher: str, reason: str) -> None:
    """Say once per (method, teacher, reason) that a train-mode teacher runs once per client in a
    loop (the same numbers as under vmap, more kernel launches)."""
    key = (method, f"teacher {teacher}: {reason}")
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(f"{method} stays stacked but runs its teacher {teacher!r} once per client: {reason}",
                      stacklevel=3)


# ====================================================================== optimiser
@dataclass(frozen=True)
class SGDRule:
    """torch.optim.SGD's hyperparameters, applied to stacked tensors."""

    lr: float
    momentum: float = 0.0
    dampening: float = 0.0
    weight_decay: float = 0.0
    nesterov: bool = False

    @torch.no_grad()
    def step(self, param: Tensor, grad: Tensor, buf: Tensor | None, first: bool) -> None:
        """Update ``param`` (and ``buf``) in place exactly as SGD.step does for one tensor."""
        if self.weight_decay:
            grad = grad.add(param, alpha=self.weight_decay)
        if self.momentum:
            if first:  # SGD starts its buffer as a copy of the first gradient
                buf.copy_(grad)
            else:
                buf.mul_(self.momentum).add_(grad, alpha=1 - self.dampening)
            grad = grad.add(buf, alpha=self.momentum) if self.nesterov else buf
        param.add_(grad, alpha=-self.lr)

    @torch.no_grad()
    def step_all(self, params: list[Tensor], grads: list[Tensor], bufs: list[Tensor], first: bool) -> None:
        """:meth:`step` on every tensor of ``params`` at once with torch's multi-tensor (foreach)
        ops: the same arithmetic per element, a handful of kernel launches a local step instead of
        a handful per parameter (``bufs`` empty without momentum)."""
        if self.weight_decay:
            grads = torch._foreach_add(grads, params, alpha=self.weight_decay)
        if self.momentum:
            if first:
                torch._foreach_copy_(bufs, grads)
            else:
                torch._foreach_mul_(bufs, self.momentum)
                torch._foreach_add_(bufs, grads, alpha=1 - self.dampening)
            grads = torch._foreach_add(grads, bufs, alpha=self.momentum) if self.nesterov else bufs
        torch._foreach_add_(params, grads, alpha=-self.lr)


def sgd_rule(algorithm: Algorithm, model: nn.Module, lr: float, momentum: float,
             weight_decay: float) -> SGDRule | str:
    """The method's optimiser as an SGDRule, or the reason it cannot be stacked."""
    optimizer = algorithm.make_optimizer(model, lr, momentum, weight_decay)
    if type(optimizer) is not torch.optim.SGD or len(optimizer.param_groups) != 1:
        return f"its optimiser ({type(optimizer).__name__}) is not a single-group torch.optim.SGD"
    group = optimizer.param_groups[0]
    if group.get("maximize"):
        return "its SGD maximizes"
    return SGDRule(group["lr"], group["momentum"], group["dampening"], group["weight_decay"],
                   group["nesterov"])


# ====================================================================== per-client contexts
def _is_state(value: Any) -> bool:
    """Whether an extras value is per-client state: a tensor, a number, or a container of
    tensors only (a list of ints such as PKD's groups is a constant, not state)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return True
    leaves, _ = tree_flatten(value)
    return bool(leaves) and all(isinstance(v, Tensor) for v in leaves)


def _stack_values(values: list[Any], device: torch.device) -> Any:
    """Stack a per-client pytree of tensors/numbers along a new leading client dimension."""
    flat = [tree_flatten(v) for v in values]
    spec = flat[0][1]
    columns = zip(*[leaves for leaves, _ in flat])
    stacked = [torch.stack([torch.as_tensor(v, device=device) for v in column]) for column in columns]
    return tree_unflatten(stacked, spec)


def _unstack_value(value: Any, index: int, template: Any) -> Any:
    """Client ``index``'s slice of a stacked pytree, numbers turned back into Python numbers."""
    def pick(stacked: Tensor, original: Any) -> Any:
        item = stacked[index]
        return type(original)(item.item()) if isinstance(original, (int, float)) else item

    leaves, spec = tree_flatten(value)
    originals, _ = tree_flatten(template)
    return tree_unflatten([pick(s, o) for s, o in zip(leaves, originals)], spec)


def _split_context(ctxs: list[ClientContext], device: torch.device) -> tuple[dict, dict] | str:
    """(per-client state stacked, constants shared), or why the contexts cannot be stacked."""
    keys = set(ctxs[0].extras)
    if any(set(c.extras) != keys for c in ctxs):
        return "its clients' contexts hold different extras"
    state, shared = {}, {}
    for key in sorted(keys):
        values = [c.extras[key] for c in ctxs]
        if _is_state(values[0]):
            state[key] = _stack_values(values, device)
        elif all(v == values[0] for v in values[1:]):
            shared[key] = values[0]
        else:
            return f"its context entry {key!r} differs between clients and is not a tensor"
    return state, shared


def _shared_teachers(ctxs: list[ClientContext]) -> dict[str, nn.Module] | str:
    names = set(ctxs[0].teachers)
    for ctx in ctxs:
        if set(ctx.teachers) != names or any(ctx.teachers[n] is not ctxs[0].teachers[n] for n in names):
            return "its teachers differ between clients"
    return dict(ctxs[0].teachers)


class _ParamView:
    """Stands in for the model inside ``penalty``: parameters() yields one client's tensors."""

    def __init__(self, params: dict[str, Tensor]):
        self._params = params

    def parameters(self):
        return iter(self._params.values())

    def named_parameters(self):
        return iter(self._params.items())


# ====================================================================== memory
def set_stack_memory(size: int | None) -> int | None:
    """Bytes the client stack of this process's runs may use (None: :data:`MEMORY_FRACTION`); returns the one before."""
    before, _STACK_MEMORY[0] = _STACK_MEMORY[0], size
    return before


def stack_memory(device: torch.device) -> int:
    """Bytes the client stack may use: what an edge set (:func:`set_stack_memory`), else a share
    (:data:`MEMORY_FRACTION`) of the device's total memory, never of what is free at the moment:
    how many clients share a stack sets the kernels' shapes, and with them a client's last bits,
    so it must not depend on what else the machine is doing (meta.json records it)."""
    if _STACK_MEMORY[0] is not None:
        return _STACK_MEMORY[0]
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory * MEMORY_FRACTION["cuda"])
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not Linux: assume a modest 4 GiB
        total = 4 << 30
    return int(total * MEMORY_FRACTION["cpu"])


@torch.no_grad()
def bytes_per_client(model: nn.Module, sample: Tensor, batch_size: int) -> int:
    """Rough bytes one stacked client needs: parameters, gradients, momentum, buffers, and
    every module's activations for one batch kept for the backward pass (and their gradients)."""
    activations = []
    hooks = [m.register_forward_hook(lambda _m, _i, out: activations.append(out.numel()))
             for m in model.modules() if not list(m.children())]
    was_training = model.training
    try:
        model.eval()
        model(sample[:1])
    finally:
        model.train(was_training)
        for hook in hooks:
            hook.remove()
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    return 3 * params + buffers + 2 * 4 * batch_size * (sum(activations) + sample[:1].numel())


def stack_size(model: nn.Module, sample: Tensor, batch_size: int, num_clients: int,
               device: torch.device, budget: int | None = None) -> int:
    """How many clients train at once: all of them, or as many as the memory budget holds."""
    needed = bytes_per_client(model, sample, batch_size)
    budget = stack_memory(device) if budget is None else budget
    fit = budget // needed
    if fit < 1:
        raise FedlibError(f"one client needs about {needed / 2**20:.0f} MiB on {device} but only "
                          f"{budget / 2**20:.0f} MiB may hold the stack; lower batch_size, use a smaller model, or "
                          f"set {STACK_MEMORY_ENV}")
    return int(min(fit, num_clients))


# ====================================================================== the stack of clients
def _take(value: Tensor, selection: slice | Tensor) -> Tensor:
    """A slice is a view into the stack; an index tensor gathers a copy."""
    return value[selection] if isinstance(selection, slice) else value.index_select(0, selection)


def _put(value: Tensor, selection: slice | Tensor, part: Tensor) -> None:
    """Write a gathered part back (a view was written in place already)."""
    if not isinstance(selection, slice):
        value.index_copy_(0, selection, part)


class ClientStack:
    """Parameters, momentum, buffers and context state of several clients, stacked on dim 0."""

    def __init__(self, server: ServerState, algorithm: Algorithm, ctxs: list[ClientContext],
                 rule: SGDRule, teachers: dict[str, nn.Module], shared: dict, state: dict):
        self.model = server.local_model()
        self.algorithm, self.rule, self.teachers, self.shared = algorithm, rule, teachers, shared
        self.template = replace(ctxs[0], client_id=-1, num_samples=-1, data=None, metrics={})
        count = len(ctxs)
        self.params = {n: _repeat(p, count) for n, p in self.model.named_parameters()}
        self.buffers = {n: _repeat(b, count) for n, b in self.model.named_buffers()}
        self.momentum = {n: torch.zeros_like(p) for n, p in self.params.items()} if rule.momentum else {}
        self.tensors = {"class_counts": torch.stack([c.class_counts for c in ctxs])}
        for key in ctxs[0].tensors:
            self.tensors[key] = torch.stack([c.tensors[key] for c in ctxs])
        self.state = state
        self.randomness = "different" if has_dropout(self.model) else "error"
        # how each teacher runs: "batch" (the concatenated batch), "vmap" (train-mode BatchNorm,
        # teacher_under_vmap) or "loop" (teacher_per_client, the reason in teacher_loops)
        self.teacher_paths: dict[str, str] = {}
        self.teacher_loops: dict[str, str] = {}
        for name, teacher in teachers.items():
            reason = teacher_loop_reason(teacher)
            if not (teacher.training and has_batchnorm(teacher)):
                self.teacher_paths[name] = "batch"
            elif reason is None:
                self.teacher_paths[name] = "vmap"
            else:
                self.teacher_paths[name], self.teacher_loops[name] = "loop", reason
        self._teacher_weights: dict = {}  # teacher_under_vmap's cached powers of (1 - momentum)

    def vmapped_teachers(self) -> list[nn.Module]:
        """The teachers that run under vmap (their BatchNorm takes float32 under bf16, as the model's)."""
        return [self.teachers[n] for n, path in self.teacher_paths.items() if path == "vmap"]

    def step(self, selection: slice | Tensor, x: Tensor, y: Tensor, first: bool) -> None:
        """One local step of the selected clients on their batches x (m, B, ...), y (m, B)."""
        params = {n: _take(p, selection).detach().requires_grad_() for n, p in self.params.items()}
        buffers = {n: _take(b, selection) for n, b in self.buffers.items()}
        tensors = {n: _take(t, selection) for n, t in self.tensors.items()}
        state = tree_map(lambda t: _take(t, selection), self.state)
        teacher_out = self._run_teachers(x)
        losses, new_state = vmap(self._client_loss, randomness=self.randomness)(
            params, buffers, x, y, tensors, state, teacher_out)
        losses.sum().backward()
        trained = [name for name, param in params.items() if param.grad is not None]  # SGD skips the others
        bufs = [_take(self.momentum[name], selection) for name in trained] if self.rule.momentum else []
        self.rule.step_all([params[n].data for n in trained], [params[n].grad for n in trained], bufs, first)
        for index, name in enumerate(trained):
            _put(self.params[name], selection, params[name].data)
            if bufs:
                _put(self.momentum[name], selection, bufs[index])
        for name, value in buffers.items():
            _put(self.buffers[name], selection, value)
        self._store_state(selection, new_state)

    def _client_loss(self, params, buffers, x, y, tensors, state, teacher_out):
        """One client's loss + penalty (runs under vmap: every tensor here is one client's)."""
        with autocast(x, self.template.autocast_dtype):
            features, logits = functional_call(self.model, (params, buffers), (x,), {"return_features": True})
        features, logits = features.float(), logits.float()
        extras = {**self.shared, **state}
        tensors = dict(tensors)
        ctx = replace(self.template, class_counts=tensors.pop("class_counts"), tensors=tensors,
                      extras=extras, teachers=self.teachers)
        outputs = {name: Outputs(f, l) for name, (f, l) in teacher_out.items()}
        value = self.algorithm.loss(Outputs(features, logits), y, ctx, outputs)
        extra = self.algorithm.penalty(_ParamView(params), ctx)
        value = value if extra is None else value + extra
        return value, tree_map(lambda v: torch.as_tensor(v).detach(), {k: ctx.extras[k] for k in state})

    @torch.no_grad()
    def _run_teachers(self, x: Tensor) -> dict[str, tuple[Tensor, Tensor]]:
        """Shared teachers on x (m, B, ...): each on the path :attr:`teacher_paths` names."""
        outputs = {}
        with autocast(x, self.template.autocast_dtype):
            for name, teacher in self.teachers.items():
                outputs[name] = self._run_teacher(teacher, x, self.teacher_paths[name])
        return {name: (f.float(), l.float()) for name, (f, l) in outputs.items()}

    def _run_teacher(self, teacher: nn.Module, x: Tensor, path: str) -> tuple[Tensor, Tensor]:
        """Features and logits of one teacher on x (m, B, ...)."""
        if path == "vmap":
            return teacher_under_vmap(teacher, x, self._teacher_weights)
        if path == "loop":
            return teacher_per_client(teacher, x)
        features, logits = teacher(x.flatten(0, 1), return_features=True)
        return features.unflatten(0, x.shape[:2]), logits.unflatten(0, x.shape[:2])

    def _store_state(self, selection: slice | Tensor, new_state: dict) -> None:
        for key, value in new_state.items():
            old_leaves, spec = tree_flatten(self.state[key])
            new_leaves, _ = tree_flatten(value)
            for old, new in zip(old_leaves, new_leaves):
                if isinstance(selection, slice):
                    old[selection] = new.to(old.dtype)
                else:
                    old.index_copy_(0, selection, new.to(old.dtype))

    def client_state(self, index: int, keys: list[str]) -> dict[str, Tensor]:
        """Client ``index``'s model state, in the model's state_dict order."""
        merged = {**self.params, **self.buffers}
        return {k: merged[k][index].detach().clone() for k in keys}


def _repeat(value: Tensor, count: int) -> Tensor:
    return value.detach().unsqueeze(0).repeat(count, *[1] * value.dim()).clone()


# ====================================================================== one round
def _client_setup(server: ServerState, algorithm: Algorithm, client_id: int, lr: float):
    """The client's context, batch iterator and step count, seeded exactly as in the sequential path."""
    ctx, batches = client_setup(server, algorithm, client_id, lr)
    return ctx, batches, ctx.data.steps_per_epoch(server.cfg.batch_size) * server.cfg.local_epochs


StepContext = Callable[[], AbstractContextManager]


def _tick(stack: ClientStack, iterators: list, active: int, first: bool,
          step_context: StepContext | None = None) -> None:
    """One step of the first ``active`` clients, grouped by batch size (their batches, augmented,
    are drawn at once per size (:func:`draw_batches`) before ``step_context`` opens)."""
    groups = draw_batches(iterators, active)
    with step_context() if step_context is not None else nullcontext():
        for members, x, y in groups:
            if members == list(range(len(members))):
                selection: slice | Tensor = slice(0, len(members))
            else:
                selection = torch.tensor(members, device=y.device)
            stack.step(selection, x, y, first)


def _train_chunk(server: ServerState, algorithm: Algorithm, setups: list, rule: SGDRule,
                 hooks: Sequence[Observer], step_context: StepContext | None = None) -> list[ClientUpdate] | str:
    """Train the clients of ``setups`` (sorted by step count, most first) as one stack."""
    ctxs = [ctx for ctx, _, _ in setups]
    teachers = _shared_teachers(ctxs)
    split = _split_context(ctxs, server.device)
    for outcome in (teachers, split):
        if isinstance(outcome, str):
            return outcome
    state, shared = split
    stack = ClientStack(server, algorithm, ctxs, rule, teachers, shared, state)
    if server.cfg.backend == "stacked":
        for name, reason in stack.teacher_loops.items():
            warn_teacher_loop(server.cfg.method, name, reason)
    steps = [s for _, _, s in setups]
    iterators = [it for _, it, _ in setups]
    with ExitStack() as float32_layers:
        for module in [stack.model, *stack.vmapped_teachers()]:
            float32_layers.enter_context(batchnorm_in_float32(module, enabled=server.autocast_dtype is not None))
        for t in range(max(steps, default=0)):
            _tick(stack, iterators, sum(1 for s in steps if s > t), first=t == 0, step_context=step_context)
    keys = list(server.model.state_dict())
    updates = []
    for index, (ctx, _, count) in enumerate(setups):
        for key in state:
            ctx.extras[key] = _unstack_value(stack.state[key], index, ctx.extras[key])
        update = ClientUpdate(ctx.client_id, stack.client_state(index, keys), ctx.num_samples, count,
                              metrics=dict(ctx.metrics))
        _finish_client(server, algorithm, ctx, update, hooks)
        updates.append(update)
    return updates


def _finish_client(server: ServerState, algorithm: Algorithm, ctx: ClientContext,
                   update: ClientUpdate, hooks: Sequence[Observer]) -> None:
    """client_upload and on_client_end, with the client's trained model in the scratch module."""
    model = server.local_model()
    model.load_state_dict(update.state)
    algorithm.client_upload(model, ctx, update)
    notify(hooks, "on_client_end", server, ctx, model, update)


def train_round(server: ServerState, algorithm: Algorithm, clients: list[int], lr: float,
                hooks: Sequence[Observer] = (), max_stack: int | None = None,
                step_context: StepContext | None = None) -> list[ClientUpdate]:
    """Local training of the round's clients on the stacked path (updates in ``clients`` order).

    Falls back to :func:`fedlib.algorithms.client_training.train_client` for methods the stacked path cannot run,
    with one warning (silently under ``backend="auto"``). ``max_stack`` caps the clients per
    stack below what the memory allows. ``step_context``, for measuring tools: called once per
    local step of a stack, the context it returns is open while that step computes (all its
    batch-size groups: teachers, forward, backward, optimiser; not the drawing and augmenting of
    the batches, nor the round's setup and uploads); ``benchmarks/op_count.py`` counts ops in it.
    It is not called when the round falls back to the sequential path.
    """
    cfg = server.cfg
    reason = unsupported_reason(algorithm) or layout_reason(server.device, cfg.channels_last, server.model)
    rule = reason or sgd_rule(algorithm, server.local_model(), lr, cfg.momentum, cfg.weight_decay)
    if isinstance(rule, SGDRule):
        setups = sorted((_client_setup(server, algorithm, k, lr) for k in clients), key=lambda s: -s[2])
        sample = server.data.normalise(server.data.train_x[:1])
        size = stack_size(server.local_model(), sample, cfg.batch_size, len(setups), server.device)
        size = min(size, max_stack or size)
        updates: list[ClientUpdate] = []
        for start in range(0, len(setups), size):
            chunk = _train_chunk(server, algorithm, setups[start:start + size], rule, hooks, step_context)
            if isinstance(chunk, str):
                rule = chunk  # contexts that cannot stack: redo the round sequentially
                break
            updates += chunk
        else:
            order = {k: i for i, k in enumerate(clients)}
            return sorted(updates, key=lambda u: order[u.client_id])
    if cfg.backend == "stacked":
        warn_fallback(cfg.method, rule)
    return [train_client(server, algorithm, k, lr, hooks) for k in clients]
