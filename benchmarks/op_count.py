"""Per-step overhead on the CPU: aten ops dispatched and host syncs per local step, method x model.

    python -m benchmarks.op_count --methods fedavg,fedvls,fedlmd,pkd --models lenet5,cnn2,mobilenetv2

On a GPU every aten op is at least one kernel launch from Python, and every host sync (a value
read back to Python: ``.item()``, ``float(t)``, ``bool(t)``, an op whose output shape depends on
the data such as ``nonzero``) stalls the launch queue until the GPU catches up. When a model is
small for the card, those two counts, not the arithmetic, set the speed. Both are properties of
the code, not of the hardware, so they are counted here on the CPU with a TorchDispatchMode and
progress on them is visible without a GPU.

Counted: one local step of one client on the sequential path (``train_step``: forward passes,
loss, backward, optimiser), averaged over ``--steps`` steps after the first; on the stacked path
one step of a whole stack of clients (``--clients``), counted per step of the stack. Data is a
synthetic stand-in of the model's input shape (the counts do not depend on pixel values).
A sync's origin (the innermost fedlib frame that asked) is listed with ``--where``.
"""

from __future__ import annotations

import argparse
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from fedlib.algorithms import method_class
from fedlib.core import engine
from fedlib.core.backends import stacked
from fedlib.core.client_training import client_setup
from fedlib.core.config import RunConfig
from fedlib.core.state import sample_clients

# ops that make the host wait for the device: a value read back, or an output sized by the data
SYNC_OPS = {"_local_scalar_dense", "nonzero", "masked_select", "_unique2", "unique_dim", "unique_consecutive",
            "equal", "is_nonzero", "repeat_interleave"}
INPUT_SHAPES = {"lenet5": (1, 28), "mlp": (1, 28), "simple_cnn": (1, 28), "cnn2": (3, 32), "convnet_s": (3, 32),
                "mobilenetv2": (3, 32), "resnet8": (3, 32), "resnet18": (3, 32), "vgg9": (3, 32)}
# arguments beyond what a method's short run changes (Algorithm.short_run): the variant the notebooks train
METHOD_ARGS = {"fedvls": {"variant": "official"}}


@dataclass
class OpCounts(TorchDispatchMode):
    """Counts every aten op dispatched inside it, and the host syncs among them (with their origin)."""

    ops: Counter = field(default_factory=Counter)
    syncs: Counter = field(default_factory=Counter)
    origins: Counter = field(default_factory=Counter)

    def __post_init__(self):
        super().__init__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.__name__.split(".")[0]
        self.ops[name] += 1
        if name in SYNC_OPS:
            self.syncs[name] += 1
            self.origins[_origin()] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.ops.values())


def _origin() -> str:
    """The innermost frame inside fedlib that led to this op ('file:line function')."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        if "/fedlib/" in frame.filename.replace("\\", "/"):
            return f"{frame.filename.split('fedlib/')[-1]}:{frame.lineno} {frame.name}"
    return "outside fedlib"


def _round_zero_args(method: str) -> dict:
    """Arguments with which ``method`` reaches its local loss in round 0 (its short run's, e.g. PKD
    without warm-up)."""
    args = dict(METHOD_ARGS.get(method, {}))
    return {**args, **method_class(method).short_run(args, 1)[0]}


def count_config(model: str, method: str, clients: int = 4, batch_size: int = 32) -> RunConfig:
    """A small run of ``method`` on ``model``: synthetic data of the model's input shape."""
    channels, size = INPUT_SHAPES.get(model, (3, 32))
    options = {"image_shape": (channels, size, size), "train_per_class": 40, "test_per_class": 4}
    return RunConfig(dataset="synthetic", dataset_options=options, model=model, method=method,
                     method_args=_round_zero_args(method), partition="iid", clients=clients, rounds=1,
                     batch_size=batch_size, momentum=0.9, weight_decay=5e-4, device="cpu", backend="sequential")


def sequential_step_counts(cfg: RunConfig, steps: int = 3) -> OpCounts:
    """Ops and syncs of ``steps`` sequential local steps of the round's first client (after one uncounted step)."""
    server, algorithm = engine.prepare(cfg)
    algorithm.begin_round(server)  # as engine.run_round does before any client
    server.round_clients = sample_clients(cfg.seed, 0, cfg.clients, cfg.participation)
    ctx, batches = client_setup(server, algorithm, server.round_clients[0], cfg.lr)
    model = server.local_model()
    optimizer = algorithm.make_optimizer(model, ctx.lr, cfg.momentum, cfg.weight_decay, ctx)
    model.train()
    counts = OpCounts()
    for index, (x, y) in enumerate(batches):
        if index > steps:
            break
        if index == 0:  # lazy state (momentum buffers) is made in the first step
            algorithm.train_step(model, optimizer, x, y, ctx)
            continue
        with counts:
            algorithm.train_step(model, optimizer, x, y, ctx)
    return _per(counts, steps)


def stacked_step_counts(cfg: RunConfig) -> OpCounts | None:
    """Ops and syncs per step of the whole stack in one stacked round (None: the method falls back)."""
    server, algorithm = engine.prepare(cfg.replace(backend="stacked"))
    if stacked.unsupported_reason(algorithm):
        return None
    ticks = []
    original = stacked._tick
    counts = OpCounts()

    def counted_tick(*args, **kwargs):  # only the steps: not the round's setup, upload and aggregation
        ticks.append(1)
        with counts:
            return original(*args, **kwargs)

    stacked._tick = counted_tick
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            engine.run_round(server, algorithm)
    finally:
        stacked._tick = original
    return _per(counts, max(1, len(ticks)))


def _per(counts: OpCounts, steps: int) -> OpCounts:
    scale = lambda c: Counter({k: v / steps for k, v in c.items()})  # noqa: E731
    return OpCounts(scale(counts.ops), scale(counts.syncs), scale(counts.origins))


def table(methods: list[str], models: list[str], steps: int = 3, with_stacked: bool = True,
          where: bool = False) -> str:
    """The markdown table of ops and syncs per step, method x model (sequential, and stacked)."""
    lines = ["| method | model | ops/step sequential | syncs/step sequential | ops/step stacked (whole stack) "
             "| syncs/step stacked |", "|---|---|---:|---:|---:|---:|"]
    notes = []
    for method in methods:
        for model in models:
            cfg = count_config(model, method)
            seq = sequential_step_counts(cfg, steps)
            stk = stacked_step_counts(cfg) if with_stacked else None
            stacked_cells = (f"{stk.total:.0f} | {sum(stk.syncs.values()):.1f}" if stk is not None
                             else "falls back | -" if with_stacked else "not counted | -")
            lines.append(f"| {method} | {model} | {seq.total:.0f} | {sum(seq.syncs.values()):.1f} | {stacked_cells} |")
            if where:
                for origin, count in (seq.origins + (stk.origins if stk else Counter())).most_common(5):
                    notes.append(f"- {method}/{model}: {count:.1f} per step from {origin}")
    return "\n".join(lines + ([""] + notes if notes else []))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default="fedavg,fedvls,fedlmd,pkd")
    parser.add_argument("--models", default="lenet5,cnn2,mobilenetv2")
    parser.add_argument("--steps", type=int, default=3, help="sequential steps counted (after one uncounted)")
    parser.add_argument("--no-stacked", action="store_true", help="count the sequential path only")
    parser.add_argument("--where", action="store_true", help="list where the host syncs come from")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(table(args.methods.split(","), args.models.split(","), args.steps, not args.no_stacked, args.where))


if __name__ == "__main__":
    main()
