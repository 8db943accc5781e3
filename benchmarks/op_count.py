"""Per-step overhead on the CPU: aten ops dispatched and host syncs per local step, method x model.

    python -m benchmarks.op_count --methods fedavg,fedvls,fedlmd,pkd --models lenet5,cnn2,mobilenetv2 \
        --augmentations crop_flip,crop_flip_autoaugment

On a GPU every aten op is at least one kernel launch from Python, and every host sync (a value
read back to Python: ``.item()``, ``float(t)``, ``bool(t)``, an op whose output shape depends on
the data such as ``nonzero``) stalls the launch queue until the GPU catches up. When a model is
small for the card, those two counts, not the arithmetic, set the speed. Both are properties of
the code, not of the hardware, so they are counted here on the CPU with a TorchDispatchMode and
progress on them is visible without a GPU.

Counted: one local step of one client on the sequential path (``train_step``: forward passes,
loss, backward, optimiser), averaged over ``--steps`` steps after the first; on the stacked path
one step of a whole stack of clients (``--clients``), counted per step of the stack through the
stacked backend's ``step_context`` argument. Data is a synthetic stand-in of the model's input
shape (the counts do not depend on pixel values). Neither count includes drawing and augmenting
the batch: the augmentation of one batch (``--augmentations``, a preset of
:data:`fedlib.datasets.augment.AUGMENTATIONS`, on a CIFAR-shaped 3x32x32 uint8 batch) is counted
on lines of its own, once per batch of one client; with ``--draw-clients N``, also one stacked
step's draw of N clients' batches (indices, augmentation, normalisation, the stacked tensors),
client by client (the former draw) and all at once (the stacked path's draw).
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

from fedlib.algorithms.client_training import client_setup, seeded_batches
from fedlib.engine.backends.step_graph import SYNC_OPS  # the host-syncing ops a CUDA graph cannot replay
from fedlib.core.config import RunConfig
from fedlib.core.registry import method_class
from fedlib.core.state import keyed_seed, sample_clients
from fedlib.datasets.augment import augment_spec, prepare_batch
from fedlib.engine import engine
from fedlib.engine.backends import stacked, stacked_batches

# ops that make the host wait for the device: a value read back, or an output sized by the data
INPUT_SHAPES = {"lenet5": (1, 28), "mlp": (1, 28), "simple_cnn": (1, 28), "cnn2": (3, 32), "convnet_s": (3, 32),
                "mobilenetv2": (3, 32), "resnet8": (3, 32), "resnet18": (3, 32), "vgg9": (3, 32)}
# arguments beyond what a method's short run changes (Algorithm.short_run): the variant the notebooks train
METHOD_ARGS = {"fedvls": {"variant": "official"}}
AUGMENTATION_SHAPE = (3, 32, 32)  # the CIFAR images the augmentation presets were written for
CIFAR_MOMENTS = ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))  # mean, std (the counts ignore them)


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
    """Ops and syncs per step of the whole stack in round 0's local training on the stacked path
    (None: the method falls back). Only the steps are counted (the backend's ``step_context``),
    not the round's setup, the batches' augmentation, the uploads or the aggregation."""
    server, algorithm = engine.prepare(cfg.replace(backend="stacked"))
    if stacked.unsupported_reason(algorithm):
        return None
    ticks = []
    counts = OpCounts()

    def counted_step() -> OpCounts:
        ticks.append(1)
        return counts

    algorithm.begin_round(server)  # as engine.run_round does before any client
    server.round_clients = sample_clients(cfg.seed, 0, cfg.clients, cfg.participation)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stacked.train_round(server, algorithm, server.round_clients, cfg.lr, step_context=counted_step)
    return _per(counts, max(1, len(ticks)))


def augmentation_counts(name: str, batch_size: int = 32, steps: int = 3,
                        shape: tuple[int, int, int] = AUGMENTATION_SHAPE) -> OpCounts:
    """Ops and syncs of augmenting and normalising one uint8 batch with the preset ``name`` (as a
    client's training batches are made), averaged over ``steps`` batches after one uncounted."""
    spec = augment_spec(name)
    generator = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (batch_size, *shape), dtype=torch.uint8, generator=generator)
    counts = OpCounts()
    prepare_batch(images, *CIFAR_MOMENTS, spec, generator)  # anything made once (cached constants)
    for _ in range(steps):
        with counts:
            prepare_batch(images, *CIFAR_MOMENTS, spec, generator)
    return _per(counts, steps)


def draw_config(name: str, clients: int = 8, batch_size: int = 32, steps: int = 3) -> RunConfig:
    """CIFAR-shaped synthetic data under the preset ``name``, split evenly over ``clients`` clients
    with ``steps`` + 1 full batches each at least."""
    per_class = -(-clients * batch_size * (steps + 1) // 10)
    options = {"image_shape": AUGMENTATION_SHAPE, "train_per_class": per_class, "test_per_class": 1}
    return RunConfig(dataset="synthetic", dataset_options=options, model="cnn2", method="fedavg",
                     partition="iid", clients=clients, rounds=1, batch_size=batch_size, augmentation=name,
                     device="cpu", backend="stacked")


def stacked_draw_counts(name: str, clients: int = 8, batch_size: int = 32, steps: int = 3,
                        together: bool = True) -> OpCounts:
    """Ops and syncs of drawing one stacked step's batches for ``clients`` clients under the preset
    ``name`` (indices, augmentation's numbers, augmenting, normalising, the (clients, batch, ...)
    tensors): all at once as the stacked path draws them (``together``), or client by client
    (the reference it replaced); averaged over ``steps`` steps after one uncounted (which draws
    the epoch's orders)."""
    cfg = draw_config(name, clients, batch_size, steps)
    server, _ = engine.prepare(cfg)
    iterators = [seeded_batches(server.data.client(k), batch_size, 1, keyed_seed(cfg.seed, 0, k))
                 for k in range(clients)]
    draw = stacked_batches.draw_together if together else stacked_batches.draw_per_client
    draw(iterators, clients)
    counts = OpCounts()
    for _ in range(steps):
        with counts:
            groups = draw(iterators, clients)
        assert len(groups) == 1 and groups[0][1].shape[:2] == (clients, batch_size)
    return _per(counts, steps)


def _draw_lines(augmentations: tuple[str, ...], clients: int, steps: int) -> list[str]:
    """One line per preset: ops and syncs of one stacked step's draw, client by client and at once."""
    lines = ["", f"| augmentation (stack step's draw, {clients} clients x batch 32) | ops per client | ops at once "
             "| syncs per client | syncs at once |", "|---|---:|---:|---:|---:|"]
    for name in augmentations:
        old = stacked_draw_counts(name, clients, steps=steps, together=False)
        new = stacked_draw_counts(name, clients, steps=steps)
        lines.append(f"| {name} | {old.total:.0f} | {new.total:.0f} | {sum(old.syncs.values()):.1f} "
                     f"| {sum(new.syncs.values()):.1f} |")
    return lines


def _per(counts: OpCounts, steps: int) -> OpCounts:
    scale = lambda c: Counter({k: v / steps for k, v in c.items()})  # noqa: E731
    return OpCounts(scale(counts.ops), scale(counts.syncs), scale(counts.origins))


def table(methods: list[str], models: list[str], steps: int = 3, with_stacked: bool = True,
          where: bool = False, augmentations: tuple[str, ...] = (), draw_clients: int = 0) -> str:
    """The markdown table of ops and syncs per step, method x model (sequential, and stacked),
    then one line per augmentation preset: ops and syncs of augmenting one client's batch, and
    (``draw_clients`` > 0) of drawing one stacked step's batches of that many clients."""
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
    if augmentations:
        lines += ["", f"| augmentation ({'x'.join(map(str, AUGMENTATION_SHAPE))}, batch 32) | ops/batch | syncs/batch |",
                  "|---|---:|---:|"]
        for name in augmentations:
            aug = augmentation_counts(name, steps=steps)
            lines.append(f"| {name} | {aug.total:.0f} | {sum(aug.syncs.values()):.1f} |")
            if where:
                notes += [f"- {name}: {count:.1f} per batch from {origin}" for origin, count in aug.origins.most_common(5)]
    if augmentations and draw_clients > 0:
        lines += _draw_lines(augmentations, draw_clients, steps)
    return "\n".join(lines + ([""] + notes if notes else []))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default="fedavg,fedvls,fedlmd,pkd")
    parser.add_argument("--models", default="lenet5,cnn2,mobilenetv2")
    parser.add_argument("--steps", type=int, default=3, help="sequential steps counted (after one uncounted)")
    parser.add_argument("--no-stacked", action="store_true", help="count the sequential path only")
    parser.add_argument("--where", action="store_true", help="list where the host syncs come from")
    parser.add_argument("--augmentations", default="crop_flip,crop_flip_autoaugment",
                        help="augmentation presets counted per batch, comma-separated ('' for none)")
    parser.add_argument("--draw-clients", type=int, default=0,
                        help="also count one stacked step's draw of this many clients' batches per augmentation")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    augmentations = tuple(name for name in args.augmentations.split(",") if name)
    print(table(args.methods.split(","), args.models.split(","), args.steps, not args.no_stacked, args.where,
                augmentations, args.draw_clients))


if __name__ == "__main__":
    main()
