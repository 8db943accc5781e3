"""Images per second per CPU core for the models a CPU can afford, against their training FLOPs
and this core's fp32 peak (benchmarks/RESULTS-cpu.md).

For each model: one SGD step (forward, cross-entropy, backward, momentum SGD with weight decay,
the step the engine takes) at the papers' batch size on random inputs of the data's shape,
timed over ``--steps`` steps after warm-up steps, in the default layout and in channels-last;
the training FLOPs of one image counted by ``torch.utils.flop_counter`` (forward + backward).
The peak is measured, not assumed: the best of a few large fp32 matrix products (2048 x 2048)
on the same thread count, the fastest this core does fp32 arithmetic through torch's BLAS.

    .venv/bin/python -m benchmarks.cpu_rates --threads 1
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fedlib.models import build_model  # noqa: E402
from fedlib.store.provenance import cpu_model  # noqa: E402

# (label, model, channels, image size, classes, batch): the papers' CPU-sized cells
CASES = (
    ("MLP 784-200-200-10, MNIST (FedVLS)", "mlp", 1, 28, 10, 64),
    ("LeNet-5, Fashion-MNIST (PKD)", "lenet5", 1, 28, 10, 50),
    ("cnn2, CIFAR-10 (FedLMD)", "cnn2", 3, 32, 10, 50),
    ("ResNet-8, CIFAR-10", "resnet8", 3, 32, 10, 50),
)


def peak_gflops(size: int = 2048, repeats: int = 5) -> float:
    """The best fp32 GFLOP/s of ``repeats`` (size x size) @ (size x size) products."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - started)
    return 2 * size ** 3 / best / 1e9


def train_flops(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """FLOPs of one training step's forward and backward over the batch ``x``, per image."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        F.cross_entropy(model(x), y).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / len(x)


def step_seconds(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int, warmup: int = 5) -> float:
    """Median seconds of one SGD step over ``steps`` timed steps."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-5)
    times = []
    for index in range(warmup + steps):
        started = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        if index >= warmup:
            times.append(time.perf_counter() - started)
    return sorted(times)[len(times) // 2]


def measure(steps: int) -> list[dict]:
    rows = []
    for label, name, channels, size, classes, batch in CASES:
        torch.manual_seed(0)
        x, y = torch.randn(batch, channels, size, size), torch.randint(0, classes, (batch,))
        model = build_model(name, classes, channels, size)
        flops = train_flops(model, x, y)
        row = {"label": label, "batch": batch, "gflop_per_image": flops / 1e9}
        for layout in ("default", "channels_last"):
            torch.manual_seed(0)
            model = build_model(name, classes, channels, size)
            inputs = x
            if layout == "channels_last" and name != "mlp":
                model = model.to(memory_format=torch.channels_last)
                inputs = x.contiguous(memory_format=torch.channels_last)
            elif layout == "channels_last":
                continue
            seconds = step_seconds(model, inputs, y, steps)
            row[layout] = batch / seconds
        rows.append(row)
    return rows


def markdown(rows: list[dict], peak: float, threads: int) -> str:
    lines = [f"CPU: {cpu_model()} ({platform.machine()}), {threads} torch thread(s), torch {torch.__version__}; "
             f"measured fp32 peak {peak:.1f} GFLOP/s (best 2048x2048 matrix product)", "",
             "| model, data | batch | GFLOP / image (fwd+bwd) | images/s | GFLOP/s | % of peak "
             "| images/s channels-last | % of peak |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        default = r["default"]
        achieved = default * r["gflop_per_image"]
        cl = r.get("channels_last")
        cl_cells = (f"{cl:,.0f} | {100 * cl * r['gflop_per_image'] / peak:.0f} %" if cl else "- | -")
        lines.append(f"| {r['label']} | {r['batch']} | {r['gflop_per_image']:.4f} | {default:,.0f} | {achieved:.1f} | "
                     f"{100 * achieved / peak:.0f} % | {cl_cells} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    peak = peak_gflops()
    print(markdown(measure(args.steps), peak, args.threads))
    return 0


if __name__ == "__main__":
    sys.exit(main())
