"""How long retraining a lesson takes on the machine it runs on.

A lesson serves its committed runs; a student who changes a parameter every run depends on retrains
them all. ``notebooks/lesson_times.json`` holds that time as measured on the course's machine (the
``standalone`` entry, ``tools/lesson_store.py --standalone``) with how fast that machine ran a fixed
training check just before (:func:`machine_rate`, its ``check_rate``; ``notebooks/lesson_machine.json``
for times taken before the check existed). The lesson prints the
stored time scaled by how fast this machine runs the same check::

    retraining this lesson's 9 runs: about 3 min on this machine (162 s where it was measured, a
    machine that ran the speed check 1.0x as fast as this one)

The check is one second of SGD steps on one thread (an MLP and LeNet-5 on MNIST-sized random
inputs, the lessons' own networks), so the estimate follows the CPU, not the load of the moment
alone: a busy machine measures slower and says so.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch
from torch import nn

from fedlib.models import build_model

TIMES_FILE = Path("notebooks") / "lesson_times.json"
MACHINE_FILE = Path("notebooks") / "lesson_machine.json"
CHECK_SECONDS = 1.0  # how long the speed check runs (split over its two networks)
CHECK_BATCH = 64
CHECK_NAME = "SGD steps a second, geometric mean of an MLP and LeNet-5, batch 64, 28x28, one thread"


def _steps_per_second(model: nn.Module, inputs: torch.Tensor, labels: torch.Tensor, seconds: float) -> float:
    """SGD steps a second of ``model`` on one batch, over about ``seconds`` after two untimed steps."""
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def step() -> None:
        optimiser.zero_grad(set_to_none=True)
        loss_fn(model(inputs), labels).backward()
        optimiser.step()

    for _ in range(2):
        step()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        steps += 1
    return steps / (time.perf_counter() - start)


def machine_rate(seconds: float = CHECK_SECONDS) -> float:
    """This machine's speed on the lessons' kind of work: the geometric mean of SGD steps a second
    of an MLP and of LeNet-5 (batches of 64 MNIST-sized images, one torch thread, fixed seed)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        generator = torch.Generator().manual_seed(0)
        inputs = torch.randn(CHECK_BATCH, 1, 28, 28, generator=generator)
        labels = torch.randint(0, 10, (CHECK_BATCH,), generator=generator)
        rates = []
        for name in ("mlp", "lenet5"):
            torch.manual_seed(0)
            model = build_model(name, 10, in_channels=1, image_size=28)
            rates.append(_steps_per_second(model, inputs, labels, seconds / 2))
    finally:
        torch.set_num_threads(threads)
    return (rates[0] * rates[1]) ** 0.5


def best_rate(tries: int) -> float:
    """The best of ``tries`` :func:`machine_rate` checks: the least disturbed by other work."""
    return max(machine_rate() for _ in range(tries))


def stored_time(root: Path, stem: str) -> dict | None:
    """The lesson's standalone retrain entry (seconds, runs_trained, ...), None where not measured."""
    path = root / TIMES_FILE
    if not path.is_file():
        return None
    entry = json.loads(path.read_text(encoding="utf-8")).get(stem, {})
    return entry.get("standalone")


def reference_rate(root: Path) -> float | None:
    """:func:`machine_rate` of the machine the lesson times were measured on, None if not recorded."""
    path = root / MACHINE_FILE
    if not path.is_file():
        return None
    return float(json.loads(path.read_text(encoding="utf-8"))["steps_per_second"])


def duration_text(seconds: float) -> str:
    """'40 s', '3 min' or '1.5 h'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def estimate_line(entry: dict, reference: float, here: float) -> str:
    """The line a lesson prints: the stored retrain time scaled by the two machines' rates."""
    seconds = entry["seconds"] * reference / here
    runs = entry.get("runs_trained")
    what = f"this lesson's {runs} run{'s' * (runs != 1)}" if runs else "this lesson"
    return (f"retraining {what}: about {duration_text(seconds)} on this machine ({entry['seconds']} s where it "
            f"was measured, a machine that ran the speed check {reference / here:.1f}x as fast as this one)")


def retrain_line(root: Path, stem: str, rate: float | None = None) -> str | None:
    """What retraining lesson ``stem`` costs here, or None where nothing trains or no time is stored.
    ``rate``: this machine's :func:`machine_rate` (measured when not given)."""
    entry = stored_time(root, stem)
    reference = entry.get("check_rate") or reference_rate(root) if entry else None  # its own check first
    if entry is None or reference is None or not entry.get("runs_trained"):
        return None
    return estimate_line(entry, reference, machine_rate() if rate is None else rate)
