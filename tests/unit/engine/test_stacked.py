"""The stacked (many-clients-at-once) path agrees with the sequential reference path.

Tolerance: parameters after one round within 1e-5 (absolute), round metrics within 1e-6
relative. The two paths sum in different orders, so they agree to float tolerance, not bitwise.
"""

import json
import math
import os
import warnings

import pytest
import torch

from fedlib.core.config import RunConfig
from fedlib.core.state import build_run_model, sample_clients
from fedlib.engine import engine
from fedlib.engine.backends import stacked
from fedlib.orchestration import environment
from fedlib.errors import FedlibError
from tests.helpers import tiny_config

ATOL = 1e-5
PKD_ARGS = {"warmup_rounds": 0, "expert_rounds": 1, "groups": [[0, 1], [2, 3, 4]]}


pytestmark = pytest.mark.usefixtures("one_thread")


# Dir(0.3) over 300 samples gives 4 clients of very different sizes; batch 16 leaves partial
# last batches, so masking, prefix views and gathered groups are all exercised.
UNEQUAL_CLIENTS = dict(model="lenet5", beta=0.3, max_train_samples=300, max_test_samples=100, rounds=1,
                       local_epochs=2, batch_size=16, lr=0.01, weight_decay=1e-3, seed=3)


def run_both(cfg: RunConfig, max_stack: int | None = None):
    """One round on each path; returns (sequential server, metrics), (stacked server, metrics)."""
    seq_server, seq_alg = engine.prepare(cfg)
    seq_metrics = engine.run_round(seq_server, seq_alg)
    stk_server, stk_alg = engine.prepare(cfg.replace(backend="stacked"))
    if max_stack is None:
        stk_metrics = engine.run_round(stk_server, stk_alg)
    else:  # same as run_round, with a capped stack
        clients = sample_clients(cfg.seed, 0, cfg.clients, cfg.participation)
        stk_server.round_clients = clients
        updates = stacked.train_round(stk_server, stk_alg, clients, cfg.lr, max_stack=max_stack)
        stk_server.model.load_state_dict(stk_alg.aggregate(stk_server, updates))
        stk_metrics = {}
    return (seq_server, seq_metrics), (stk_server, stk_metrics)


def assert_same_state(a: dict, b: dict, atol: float = ATOL) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if a[key].is_floating_point():
            assert torch.allclose(a[key], b[key], atol=atol, rtol=0), (key, (a[key] - b[key]).abs().max())
        else:
            assert torch.equal(a[key], b[key]), key


def assert_same_metrics(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key, value in a.items():
        if isinstance(value, float):
            assert math.isclose(value, b[key], rel_tol=1e-6, abs_tol=1e-9), (key, value, b[key])
        else:
            assert value == b[key], key


def test_partition_really_has_unequal_clients():
    server, _ = engine.prepare(tiny_config(UNEQUAL_CLIENTS))
    sizes = [server.data.client(k).num_samples for k in range(4)]
    assert len(set(sizes)) == 4 and any(n % 16 for n in sizes)


@pytest.mark.parametrize("method, args", [
    ("fedavg", {}), ("fedprox", {"mu": 0.1}), ("fedvls", {}), ("fedlmd", {}),
    ("fedlmd_tf", {}), ("fedcsd", {"mu": 0.5, "tau": 4.0}), ("pkd", PKD_ARGS),
])
def test_stacked_matches_sequential(method, args):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no fallback allowed for these methods
        (seq, seq_metrics), (stk, stk_metrics) = run_both(tiny_config(UNEQUAL_CLIENTS, method=method, method_args=args))
    moved = max(float((v - engine.prepare(tiny_config(UNEQUAL_CLIENTS))[0].model.state_dict()[k]).abs().max())
                for k, v in seq.model.state_dict().items())
    assert moved > 1e-3  # training changed the model, so agreement is not trivial
    assert_same_state(seq.model.state_dict(), stk.model.state_dict())
    assert_same_metrics(seq_metrics, stk_metrics)
    if method == "pkd":  # the firing counters PKD's loss keeps in ctx.extras reach the metrics
        assert "expert_fired_0" in stk_metrics and "cost_units" in stk_metrics


def test_batchnorm_buffers_and_train_mode_teacher_match():
    # FedVLS's official variant runs the teacher in train mode: per-client batch statistics
    cfg = tiny_config(UNEQUAL_CLIENTS, model="resnet8", method="fedvls", method_args={"variant": "official"},
                      max_train_samples=160, local_epochs=1)
    (seq, _), (stk, _) = run_both(cfg)
    assert_same_state(seq.model.state_dict(), stk.model.state_dict(), atol=1e-4)


def test_chunked_stack_matches_sequential():
    cfg = tiny_config(UNEQUAL_CLIENTS, method="fedlmd", momentum=0.9)
    (seq, _), (stk, _) = run_both(cfg, max_stack=3)  # chunks of 3 and 1 clients
    assert_same_state(seq.model.state_dict(), stk.model.state_dict())


@pytest.mark.parametrize("method", ["fedsam", "scaffold"])
def test_unstackable_methods_fall_back_once_with_a_warning(method):
    stacked._WARNED.clear()
    cfg = tiny_config(UNEQUAL_CLIENTS, method=method, rounds=1, local_epochs=1)
    with pytest.warns(UserWarning, match=f"{method} runs on the sequential path"):
        result = engine.run(cfg.replace(backend="stacked"), use_store=False, progress=False)
    reference = engine.run(cfg, use_store=False, progress=False)
    assert result.final_accuracy == reference.final_accuracy  # the very same sequential numbers
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # said once: the second run is silent
        engine.run(cfg.replace(backend="stacked"), use_store=False, progress=False)


def test_auto_backend_falls_back_silently():
    stacked._WARNED.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        engine.run(tiny_config(UNEQUAL_CLIENTS, method="fedsam", backend="auto", local_epochs=1), use_store=False,
                   progress=False)


@pytest.mark.parametrize("momentum, dampening, nesterov, decay", [
    (0.0, 0.0, False, 0.0), (0.9, 0.0, False, 5e-4), (0.9, 0.1, False, 0.0), (0.9, 0.0, True, 1e-3)])
def test_sgd_rule_is_torch_sgd(momentum, dampening, nesterov, decay):
    torch.manual_seed(0)
    reference = torch.randn(5, 3, requires_grad=True)
    ours = reference.detach().clone()
    buf = torch.zeros_like(ours)
    optimizer = torch.optim.SGD([reference], lr=0.1, momentum=momentum, dampening=dampening,
                                nesterov=nesterov, weight_decay=decay)
    rule = stacked.SGDRule(0.1, momentum, dampening, decay, nesterov)
    for step in range(4):
        grad = torch.randn(5, 3)
        reference.grad = grad.clone()
        optimizer.step()
        rule.step(ours, grad, buf, first=step == 0)
    assert torch.allclose(ours, reference.detach(), atol=1e-7, rtol=0)


@pytest.mark.parametrize("momentum, dampening, nesterov, decay", [
    (0.0, 0.0, False, 0.0), (0.9, 0.0, False, 5e-4), (0.9, 0.1, False, 0.0), (0.9, 0.0, True, 1e-3)])
def test_the_foreach_step_is_the_per_tensor_step_bit_for_bit(momentum, dampening, nesterov, decay):
    torch.manual_seed(0)
    shapes = [(4, 3, 3, 3), (4, 3), (4, 10, 7)]
    one = [torch.randn(s) for s in shapes]
    every = [t.clone() for t in one]
    one_bufs, every_bufs = ([torch.zeros(s) for s in shapes] for _ in range(2))
    rule = stacked.SGDRule(0.05, momentum, dampening, decay, nesterov)
    for step in range(4):
        grads = [torch.randn(s) for s in shapes]
        for param, grad, buf in zip(one, grads, one_bufs):
            rule.step(param, grad, buf if momentum else None, first=step == 0)
        rule.step_all(every, grads, every_bufs if momentum else [], first=step == 0)
    assert all(torch.equal(a, b) for a, b in zip(one, every))
    assert all(torch.equal(a, b) for a, b in zip(one_bufs, every_bufs))


def test_which_methods_stack():
    from fedlib.core.registry import build_algorithm

    for method in ("fedavg", "fedprox", "fedvls", "fedlmd", "fedlmd_tf", "fedcsd", "pkd", "fedlmd+fedprox"):
        assert stacked.unsupported_reason(build_algorithm(method)) is None, method
    assert "train_step" in stacked.unsupported_reason(build_algorithm("fedsam"))
    assert "before_step" in stacked.unsupported_reason(build_algorithm("scaffold"))
    assert "penalty" in stacked.unsupported_reason(build_algorithm("fedcurv"))


def test_too_little_memory_is_a_clear_error():
    model = build_run_model(tiny_config(UNEQUAL_CLIENTS), engine.load_run_dataset(tiny_config(UNEQUAL_CLIENTS)))
    sample = torch.zeros(1, 1, 28, 28)
    assert stacked.stack_size(model, sample, 16, 10, torch.device("cpu"), budget=1 << 40) == 10
    needed = stacked.bytes_per_client(model, sample, 16)
    assert stacked.stack_size(model, sample, 16, 10, torch.device("cpu"), budget=3 * needed) == 3
    with pytest.raises(FedlibError, match="lower batch_size"):
        stacked.stack_size(model, sample, 16, 10, torch.device("cpu"), budget=needed - 1)


def test_backend_is_validated_and_not_hashed():
    assert tiny_config(UNEQUAL_CLIENTS, backend="stacked").hash() == tiny_config(UNEQUAL_CLIENTS).hash()
    with pytest.raises(FedlibError, match="unknown backend 'vmap'"):
        tiny_config(UNEQUAL_CLIENTS, backend="vmap")


class _BatchNormDtypes(torch.utils._python_dispatch.TorchDispatchMode):
    """Records the floating dtypes of every tensor argument of each BatchNorm kernel call."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if "batch_norm" in func.__name__:
            dtypes = {a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()}
            self.calls.append((func.__name__, dtypes))
        return func(*args, **(kwargs or {}))


def _vmapped_batchnorm_step(layer: torch.nn.Module, x: torch.Tensor) -> None:
    """Forward and backward of ``layer`` per client under vmap, as the stacked path runs it."""
    from torch.func import functional_call, vmap

    params = {n: p.detach().unsqueeze(0).repeat(len(x), 1).requires_grad_() for n, p in layer.named_parameters()}
    buffers = {n: b.unsqueeze(0).repeat(len(x), *[1] * b.dim()).clone() for n, b in layer.named_buffers()}
    out = vmap(lambda p, b, xk: functional_call(layer, (p, b), (xk,)))(params, buffers, x)
    out.float().square().sum().backward()


def test_bf16_batchnorm_under_vmap_crashes_on_the_cpu_too_without_float32_inputs():
    """The cause of CUDA's "Expected running_mean to have type BFloat16 but got Float" on the
    stacked path: vmap's BatchNorm rule calls the kernel with a stand-in weight of the *input's*
    dtype (bf16) beside the float32 running statistics, a mix the kernels refuse. The stacked
    round itself ran on the CPU only because CPU autocast leaves vmapped convolutions in float32,
    so BatchNorm never got a bf16 input there; fed one directly, the CPU kernel fails as well."""
    layer = torch.nn.BatchNorm2d(3)
    x = torch.randn(2, 4, 3, 5, 5).to(torch.bfloat16).requires_grad_()  # 2 clients, batches of 4
    with pytest.raises(RuntimeError, match="BFloat16"):
        _vmapped_batchnorm_step(layer, x)


def test_bf16_batchnorm_under_vmap_runs_with_float32_inputs_and_one_dtype_per_kernel():
    layer = torch.nn.BatchNorm2d(3)
    x = torch.randn(2, 4, 3, 5, 5).to(torch.bfloat16).requires_grad_()
    with stacked.batchnorm_in_float32(layer), _BatchNormDtypes() as seen:
        _vmapped_batchnorm_step(layer, x)
    names = {name for name, _ in seen.calls}
    assert any("backward" in name for name in names) and len(names) >= 2
    assert all(dtypes == {torch.float32} for _, dtypes in seen.calls), seen.calls
    assert not layer._forward_pre_hooks, "the hooks are gone when the block ends"


def test_a_bf16_stacked_round_on_a_batchnorm_model_stays_stacked_and_finite():
    cfg = tiny_config(UNEQUAL_CLIENTS, model="resnet8", max_train_samples=80, local_epochs=1,
                      precision="bf16", backend="stacked")
    server, algorithm = engine.prepare(cfg)
    with _BatchNormDtypes() as seen, warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback to the sequential path
        engine.run_round(server, algorithm)
    assert seen.calls and all(len(dtypes) == 1 for _, dtypes in seen.calls)
    assert all(torch.isfinite(v).all() for v in server.model.state_dict().values() if v.is_floating_point())


def test_the_float32_batchnorm_hooks_are_removed_after_the_round():
    server, algorithm = engine.prepare(tiny_config(UNEQUAL_CLIENTS, model="resnet8", max_train_samples=80,
                                                   precision="bf16", backend="stacked"))
    engine.run_round(server, algorithm)
    layers = [m for m in server.local_model().modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert layers and all(not layer._forward_pre_hooks for layer in layers)


def test_channels_last_with_batchnorm_stacks_everywhere_but_on_cuda():
    from fedlib.models import build_model

    resnet, cnn = build_model("resnet8", 10), build_model("cnn2", 10)
    cuda, cpu = torch.device("cuda"), torch.device("cpu")  # a device object needs no GPU
    assert "vmap on CUDA" in stacked.layout_reason(cuda, True, resnet)
    assert stacked.layout_reason(cuda, False, resnet) is None
    assert stacked.layout_reason(cuda, True, cnn) is None
    assert stacked.layout_reason(cpu, True, resnet) is None


def test_the_stack_never_depends_on_the_memory_free_at_the_moment(tmp_path, monkeypatch):
    """The same stacked BatchNorm config under two very different free-memory readings: the same
    bits (the stack was sized from free memory once, and a run chose stacks of 3 then 1)."""
    import os

    real = os.sysconf
    cfg = tiny_config(UNEQUAL_CLIENTS, model="resnet8", dataset_options={"image_shape": [3, 16, 16]},
                      backend="stacked", rounds=1, max_train_samples=64, batch_size=8)
    states = []
    for free_pages in (1, 1 << 40):
        monkeypatch.setattr(os, "sysconf", lambda name, free=free_pages: free if name == "SC_AVPHYS_PAGES" else real(name))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = engine.run(cfg, results_dir=tmp_path / str(free_pages), progress=False)
        states.append(result.global_state())
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])


def test_the_stack_budget_is_a_setting_or_a_share_of_total_memory_and_is_recorded(tmp_path, monkeypatch):
    cpu = torch.device("cpu")
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert stacked.stack_memory(cpu) == int(total * stacked.MEMORY_FRACTION["cpu"])
    environment.apply({stacked.STACK_MEMORY_ENV: "123456789"})  # what an edge reads
    assert stacked.stack_memory(cpu) == 123456789
    result = engine.run(tiny_config(rounds=1), results_dir=tmp_path, progress=False)
    assert json.loads((result.folder / "meta.json").read_text())["environment"]["stack_memory"] == 123456789
    with pytest.raises(FedlibError, match="FEDLIB_STACK_MEMORY='8GiB': give the bytes"):
        environment.apply({stacked.STACK_MEMORY_ENV: "8GiB"})
    environment.reset()
    assert stacked.stack_memory(cpu) == int(total * stacked.MEMORY_FRACTION["cpu"])


# ---------------------------------------------------------------------- train-mode teachers under vmap
def _train_mode_teacher(model: str) -> torch.nn.Module:
    """A frozen train-mode teacher whose running statistics are not the defaults (so their update counts)."""
    from fedlib.models import build_model

    torch.manual_seed(0)
    teacher = build_model(model, 10).train().requires_grad_(False)
    for layer in teacher.modules():
        if isinstance(layer, torch.nn.BatchNorm2d):
            layer.running_mean.normal_()
            layer.running_var.uniform_(0.5, 2.0)
            layer.num_batches_tracked.fill_(7)
    return teacher


@pytest.mark.parametrize("model", ["resnet8", "mobilenetv2"])
def test_a_train_mode_teacher_under_vmap_is_the_per_client_loop(model):
    """Outputs: each client's batch normalised with its own statistics; running statistics: as the
    loop over the clients in stack order leaves them (num_batches_tracked exactly)."""
    import copy

    looped = _train_mode_teacher(model)
    vmapped = copy.deepcopy(looped)
    x = torch.randn(3, 8, 3, 16, 16) * 2 + 0.5  # 3 clients, batches of 8
    x[1] *= 3  # batch statistics that really differ between clients
    with torch.no_grad():
        for _ in range(2):  # the second step starts from the running statistics the first left
            features, logits = stacked.teacher_per_client(looped, x)
            vmap_features, vmap_logits = stacked.teacher_under_vmap(vmapped, x)
    # float32 rounding: with one thread vmap's batched convolutions and the per-client ones take different
    # kernels, and through MobileNetV2's depth the outputs (about 2 at most) differ by up to 1.8e-5 (a 2-core
    # AMD EPYC); with two threads they are equal to the bit
    torch.testing.assert_close(vmap_features, features, rtol=1e-5, atol=5e-5)
    torch.testing.assert_close(vmap_logits, logits, rtol=1e-5, atol=5e-5)
    loop_state, vmap_state = looped.state_dict(), vmapped.state_dict()
    counters = [k for k in loop_state if k.endswith("num_batches_tracked")]
    assert counters and all(int(loop_state[k]) == 7 + 2 * 3 for k in counters)  # 2 steps x 3 clients
    for key, value in loop_state.items():
        if value.is_floating_point():
            torch.testing.assert_close(vmap_state[key], value, rtol=1e-5, atol=1e-6)
        else:
            assert torch.equal(vmap_state[key], value), key


def test_a_batchnorm_without_momentum_keeps_the_teacher_in_the_loop():
    """momentum=None (a cumulative average) reads the step count back as a number each forward
    pass, which vmap cannot do per client: that teacher runs once per client, and says why."""
    from torch.func import functional_call, vmap

    teacher = _train_mode_teacher("resnet8")
    assert stacked.teacher_loop_reason(teacher) is None
    name, layer = next((n, m) for n, m in teacher.named_modules() if isinstance(m, torch.nn.BatchNorm2d))
    layer.momentum = None
    assert f"{name!r} has momentum=None" in stacked.teacher_loop_reason(teacher)
    buffers = {n: b.unsqueeze(0).repeat(2, *[1] * b.dim()) for n, b in teacher.named_buffers()}
    with pytest.raises(RuntimeError):
        vmap(lambda b, xk: functional_call(teacher, b, (xk,)))(buffers, torch.randn(2, 4, 3, 16, 16))
    assert not stacked.teacher_loop_reason(teacher.eval())  # eval mode: no update, nothing to read


def _stacked_rounds(cfg, rounds: int) -> list[tuple[dict, dict]]:
    """(global model state, the round's train-mode teacher state) after each stacked round."""
    server, algorithm = engine.prepare(cfg.replace(backend="stacked"))
    states = []
    for _ in range(rounds):
        engine.run_round(server, algorithm)
        teacher = server.cache["global_teachers"]["global"]["model"]
        states.append(({k: v.clone() for k, v in server.model.state_dict().items()},
                       {k: v.clone() for k, v in teacher.state_dict().items()}))
        server.round += 1
    return states


def test_a_round_with_the_vmapped_teacher_trains_as_the_per_client_loop(monkeypatch):
    """FedVLS official (train-mode teacher) on ResNet-8, two free-running rounds: the model and the
    teacher's running statistics after each round agree with the loop's to float rounding."""
    cfg = tiny_config(UNEQUAL_CLIENTS, model="resnet8", method="fedvls", method_args={"variant": "official"},
                      dataset_options={"image_shape": [3, 16, 16]}, max_train_samples=160, local_epochs=1)
    stacked._WARNED.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the vmapped teacher: no warning, no fallback
        vmapped = _stacked_rounds(cfg, 2)
    monkeypatch.setattr(stacked, "teacher_loop_reason", lambda teacher: "forced by the test")
    with pytest.warns(UserWarning, match="runs its teacher 'global' once per client: forced by the test"):
        looped = _stacked_rounds(cfg, 2)
    start = engine.prepare(cfg)[0].model.state_dict()
    assert max(float((vmapped[-1][0][k] - start[k]).abs().max()) for k in start) > 1e-3  # training moved it
    for (model_v, teacher_v), (model_l, teacher_l) in zip(vmapped, looped):
        assert_same_state(model_l, model_v)
        assert_same_state(teacher_l, teacher_v)  # running statistics, num_batches_tracked exactly


def test_a_bf16_round_with_a_vmapped_train_mode_teacher_stays_stacked_and_finite():
    cfg = tiny_config(UNEQUAL_CLIENTS, model="resnet8", method="fedvls", method_args={"variant": "official"},
                      max_train_samples=80, local_epochs=1, precision="bf16", backend="stacked")
    server, algorithm = engine.prepare(cfg)
    with _BatchNormDtypes() as seen, warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback, no teacher loop
        engine.run_round(server, algorithm)
    assert seen.calls and all(len(dtypes) == 1 for _, dtypes in seen.calls)
    assert all(torch.isfinite(v).all() for v in server.model.state_dict().values() if v.is_floating_point())
    teacher = server.cache["global_teachers"]["global"]["model"]
    assert all(not m._forward_pre_hooks for m in teacher.modules())


def test_step_context_is_open_around_every_step_of_the_stack():
    """The public hook op_count counts with: entered once per local step of the stack."""
    from contextlib import contextmanager

    cfg = tiny_config(UNEQUAL_CLIENTS, local_epochs=1, backend="stacked")
    server, algorithm = engine.prepare(cfg)
    algorithm.begin_round(server)
    clients = sample_clients(cfg.seed, 0, cfg.clients, cfg.participation)
    server.round_clients = clients
    opened = []

    @contextmanager
    def step():
        opened.append(torch.is_grad_enabled())
        yield

    updates = stacked.train_round(server, algorithm, clients, cfg.lr, step_context=step)
    assert len(opened) == max(u.num_steps for u in updates) > 1
