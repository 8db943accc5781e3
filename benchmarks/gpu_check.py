"""The GPU check of issue 30, one part at a time: each part prints a markdown section.

    python -m benchmarks.gpu_check --part workloads --device cuda > section.md

``benchmarks/gpu_check.sh`` runs every part under its own time limit and joins the sections into
``benchmarks/RESULTS-gpu.md``. The parts:

- ``env``: the card, torch, CUDA, the determinism setting;
- ``tests``: the CUDA-marked tests (equivalence on every path, repeatability, determinism), counted;
- ``workloads``: (a) FedVLS CIFAR-10 MobileNetV2 fraction 0.02, (b) FedLMD CIFAR-10 cnn2,
  (c) PKD Fashion-MNIST LeNet-5 fraction 0.2, one round per path after an untimed one, against
  the naive loop (``benchmarks/naive.py``); CIFAR-10 is fedlib's stand-in of the full size
  (synthetic patterns: the timing does not depend on the pixels);
- ``rates``: the plan's steady-state probes (``fedlib.orchestration.timing``) of every kind of
  run the paper profile declares, on this device, cached in ``$FEDLIB_CACHE/plan_rates.json`` as
  each ends (FedAvg's rates, then evaluations, then the methods' ratios, one probe a side), and
  the plan they give;
- ``packing``: 1, 2, 4 and 8 runs of workload (c) side by side on the card (separate processes,
  cores / runs CPU threads each), all started together after their warm-up round behind a
  barrier, and timed over one shared window: images per second all together (the readings
  ``verified_paths.json``'s ``packing`` keeps, which cap the runs a card takes);
  ``$GPU_CHECK_PACKING_WORKLOAD`` = a or b times MobileNetV2 or cnn2 instead;
- ``profile``: torch.profiler's table of one MobileNetV2 FedVLS local step;
- ``opcount``: aten ops and host syncs per local step (``benchmarks/op_count.py``).

``--tiny`` shrinks every workload to a few dozen images and uses stand-ins for every dataset, so
the whole check runs on a CPU in minutes (``--device cpu --tiny``: the smoke test of this script;
tests/tools/test_gpu_check.py runs its parts in seconds).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import torch

from fedlib.datasets.data import stand_in_dataset
from fedlib.errors import one_line
from fedlib.datasets.sources import FILES, DataSource

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("env", "tests", "rates", "workloads", "packing", "profile", "opcount")
WORKLOAD_FRACTIONS = {"a": 0.02, "b": 1.0, "c": 0.2}
# (b) first: FedLMD Table 3's CIFAR-10 round at full size; then the paths (a) never reached
WORKLOAD_ORDER = ("b", "a", "c")
WORKLOAD_PATHS = {"a": ("naive", "sequential", "graphed", "sequential+bf16", "stacked+bf16", "sequential+cl", "stacked"),
                  "b": ("naive", "sequential", "graphed", "threads", "stacked", "stacked+cl", "stacked+bf16"),
                  "c": ("naive", "sequential", "graphed", "threads", "stacked", "stacked+bf16")}
PACKING = (1, 2, 4, 8)
PACKING_WINDOW = 8.0  # seconds every run of a packing row trains for, all started at once
# workload -> (fraction, path) of a packing run: small enough rounds for several in one window, on
# the path backend="auto" takes for its model on CUDA (fedlib/engine/verified_paths.json)
PACKING_WORKLOADS = {"c": (0.05, "stacked"), "b": (0.05, "threads"), "a": (0.002, "sequential")}
STAND_IN_SIZES = {"cifar10": (50000, 10000), "fashion_mnist": (60000, 10000)}


# ---------------------------------------------------------------------- data
@dataclass(frozen=True)
class FullSizeStandIns(DataSource):
    """Full-size stand-ins (``tiny``: 400 images) of ``names``; the other datasets from the files."""

    names: tuple[str, ...]
    tiny: bool

    real = False

    def load(self, name, data_dir=None, download=False, **options):
        if name not in self.names:
            return FILES.load(name, data_dir=data_dir, download=download, **options)
        train, test = (400, 50) if self.tiny else STAND_IN_SIZES.get(name, (50000, 10000))
        return stand_in_dataset(name, train, test, seed=0, **options)

    def describe(self) -> str:
        return f"full-size stand-ins of {', '.join(self.names)}"


def stand_ins(tiny: bool) -> FullSizeStandIns:
    """The check's data source: CIFAR-10 always a stand-in, Fashion-MNIST too when tiny or missing."""
    return FullSizeStandIns(_stand_in_names(tiny), tiny)


def _stand_in_names(tiny: bool) -> tuple[str, ...]:
    """CIFAR-10 always (the device carries no JPEG folder); Fashion-MNIST too when tiny or missing."""
    from fedlib.datasets import data

    names = ["cifar10"]
    if tiny or not data.dataset_available("fashion_mnist"):
        names.append("fashion_mnist")
    return tuple(names)


def workload(name: str, device: str, tiny: bool, source: DataSource | None = None):
    """The bench config of workload ``name`` at its check fraction (``tiny``: a few dozen images, 1 epoch),
    its data from ``source`` (default: the check's stand-ins)."""
    from benchmarks import bench

    source = source or stand_ins(tiny)

    cfg = bench.workload_config(name, 1.0, device, source)
    if tiny:
        images = 100 if cfg.partition == "balanced" else 4 * cfg.clients  # balanced: every client holds every class
        return cfg.replace(max_train_samples=images, max_test_samples=20, min_client_size=0, local_epochs=1,
                           batch_size=8)
    fraction = WORKLOAD_FRACTIONS[name]
    return bench.workload_config(name, fraction, device, source) if fraction < 1 else cfg


# ---------------------------------------------------------------------- parts
def part_env(device: str, tiny: bool) -> str:
    import fedlib.core.determinism  # noqa: F401 - sets CUBLAS_WORKSPACE_CONFIG, as every run does

    lines = ["## Machine", "", f"- torch {torch.__version__}, Python {sys.version.split()[0]}"]
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(0)
        lines.append(f"- {props.name}, {props.total_memory / 2**30:.0f} GiB, {props.multi_processor_count} SMs, "
                     f"CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}")
    lines.append(f"- CUBLAS_WORKSPACE_CONFIG={os.environ.get('CUBLAS_WORKSPACE_CONFIG', '')}, "
                 f"FEDLIB_DETERMINISTIC={os.environ.get('FEDLIB_DETERMINISTIC', '(unset: deterministic)')}")
    return "\n".join(lines)


def part_tests(device: str, tiny: bool) -> str:
    """The CUDA-marked tests, stopped after ``$GPU_CHECK_TEST_SECONDS`` (default 130) with what they
    reached counted; on a CPU (the smoke) one small CPU repeatability case instead."""
    if device.startswith("cuda"):
        selection = ["-m", "cuda", "tests/unit/core/test_determinism.py", "tests/unit/engine/test_repeatability.py",
                     "tests/unit/engine/test_backend_equivalence.py", "tests/unit/engine/test_graphed.py"]
    else:
        selection = ["tests/unit/engine/test_repeatability.py", "-k", "twice and cpu and lenet5"]
    selection += ["-k", os.environ["GPU_CHECK_TESTS_K"]] if os.environ.get("GPU_CHECK_TESTS_K") else []
    args = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", *selection]
    seconds = float(os.environ.get("GPU_CHECK_TEST_SECONDS", "130"))
    try:
        output, ending = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=seconds).stdout, ""
    except subprocess.TimeoutExpired as stopped:
        output = stopped.stdout.decode() if isinstance(stopped.stdout, bytes) else (stopped.stdout or "")
        ending = f" (stopped after {seconds:.0f} s: the counts are of the tests reached)"
    if os.environ.get("OUT"):  # the whole log travels back from a device call, failures' messages included
        Path(os.environ["OUT"], "gpu-check-tests.log").write_text(output)
    outcomes, failures = count_outcomes(output)
    counted = ", ".join(f"{outcomes[word]} {word.lower()}" for word in TEST_OUTCOMES if outcomes[word]) or "none"
    return "\n".join(["## CUDA tests (equivalence, repeatability, determinism)", "",
                      f"`pytest {' '.join(args[3:])}`: {counted}{ending}", "",
                      *[f"- failed: `{name}`" for name in failures[:40]]])


TEST_OUTCOMES = ("PASSED", "FAILED", "XFAIL", "XPASS", "SKIPPED", "ERROR")


def count_outcomes(verbose_output: str) -> tuple[Counter, list[str]]:
    """Outcomes in ``pytest -v`` output (one per test line), and the tests that failed or errored.
    A test id may hold spaces (``[cuda-stacked-fedcsd-{'variant': 'official'}]``)."""
    outcomes, failures = Counter(), []
    for match in OUTCOME_LINE.finditer(verbose_output):
        test, outcome = match.groups()
        outcomes[outcome] += 1
        failures += [test] if outcome in ("FAILED", "ERROR") else []
    return outcomes, failures


OUTCOME_LINE = re.compile(rf"^(\S+::.*?) ({'|'.join(TEST_OUTCOMES)})(?= |$)", re.MULTILINE)


def part_workloads(device: str, tiny: bool) -> Iterator[str]:
    """Rows as they are measured (a part stopped at its time limit keeps the rows it printed)."""
    from benchmarks import bench

    yield from ["## Workloads: seconds per round against the naive loop", "",
                "| workload | path | s/round | full-data s/round | x naive | img/s | TFLOP/s (3 x forward) |",
                "|---|---|---:|---:|---:|---:|---:|"]
    source = stand_ins(tiny)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, paths in workload_paths().items():
            cfg = workload(name, device, tiny, source)
            flops = bench.flops_per_image(cfg, source)
            fraction = 1.0 if tiny else WORKLOAD_FRACTIONS[name]
            base = None
            for path in paths:  # naive first: the others are compared with it
                try:
                    r = bench.time_path(cfg, path, rounds=1, repeat=1, profile=False, source=source)
                except Exception as error:  # noqa: BLE001 - a failing path is a result of the check
                    yield f"| ({name}) | {path} | failed: {one_line(error, 120, kind=False)} | | | | |"
                    continue
                _synchronize(device)
                base = base or (r["seconds"] if path == "naive" else None)
                rate = r["images"] / r["seconds"]
                ratio = f"{base / r['seconds']:.1f}" if base else "-"
                yield (f"| ({name}) | {path} | {r['seconds']:.2f} | {r['seconds'] / fraction:.1f} | {ratio} | "
                       f"{rate:.0f} | {rate * flops / 1e12:.3f} |")


def part_rates(device: str, tiny: bool) -> Iterator[str]:
    """The plan's probes on this device for the paper profile (``tiny``: the smoke profile of one
    notebook), one probe a side of each ratio, cached as they end; then the plan they give."""
    from fedlib import store
    from fedlib.orchestration import resources, timing
    from fedlib.paper.plan import format_plan, plan_frame
    from fedlib.paper.reproduce.declared import notebook_runs

    profile, only = ("smoke", "fedlmd_table3_partitions") if tiny else ("paper", None)
    resources.cap_threads()
    configs, results = notebook_runs(profile, only, device=device, progress=False)
    rates = timing.plan_rates(configs, results, device, probe=False, progress=False)
    rates.ratio_repeats = 1  # a quiet, dedicated device
    needed = rates.probes_needed(c for c in configs if not store.is_stored(c, results))
    yield from [f"## Plan rates on {timing.device_label(device)} ({len(needed)} probes, profile {profile})", "",
                f"Cached in `{timing.ProbeCache.for_device(device).path}` as each probe ends.", ""]
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rates.run_probes(needed, progress=False)
        yield f"{rates.probes_run} probes in {time.perf_counter() - started:.0f} s"
        frame = plan_frame({"declared": configs}, results, probe=False, device=device, progress=False)
    yield from ["", "```", format_plan(frame, profile, device), "```"]


def workload_paths() -> dict[str, tuple[str, ...]]:
    """Workload -> the paths to time, in order: :data:`WORKLOAD_PATHS`, or ``$GPU_CHECK_PATHS``
    ("a=stacked+bf16,sequential+cl;c=naive,stacked": those workloads and paths alone)."""
    chosen = os.environ.get("GPU_CHECK_PATHS", "").strip()
    if not chosen:
        return {name: WORKLOAD_PATHS[name] for name in WORKLOAD_ORDER}
    pairs = (part.split("=", 1) for part in chosen.split(";") if part.strip())
    return {name.strip(): tuple(p.strip() for p in paths.split(",")) for name, paths in pairs}


def packing_counts(tiny: bool) -> tuple[int, ...]:
    """Runs side by side to time: :data:`PACKING` (1 and 2 when tiny), or ``$GPU_CHECK_PACKING`` ("4 8")."""
    chosen = os.environ.get("GPU_CHECK_PACKING", "").split()
    return tuple(int(c) for c in chosen) if chosen else PACKING[:2] if tiny else PACKING


def packing_workload() -> str:
    """The workload packed: (c), or ``$GPU_CHECK_PACKING_WORKLOAD`` (a, b or c)."""
    name = os.environ.get("GPU_CHECK_PACKING_WORKLOAD", "c").strip() or "c"
    if name not in PACKING_WORKLOADS:
        raise SystemExit(f"error: GPU_CHECK_PACKING_WORKLOAD must be one of {', '.join(sorted(PACKING_WORKLOADS))}, got {name!r}")
    return name


def _synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def part_packing(device: str, tiny: bool) -> Iterator[str]:
    """Workload (c) at fraction 0.05 on the stacked path (or :func:`packing_workload`'s), 1/2/4/8 processes at once on the card,
    each with cores / processes CPU threads: every process trains its untimed round, then all wait
    at a barrier and train from the same instant for :data:`PACKING_WINDOW` seconds (whole rounds;
    the last may run past it). Images per second together = all images / (the last one's end -
    the start)."""
    name = packing_workload()
    fraction, path = PACKING_WORKLOADS[name]
    yield from [f"## Runs per GPU, side by side (workload ({name}) at fraction {fraction:g}, {path} path, separate processes "
                f"with cores / runs threads each, started together behind a barrier, {PACKING_WINDOW:.0f} s window)", "",
                "| runs | threads each | wall s | images/s together | x one run |", "|---:|---:|---:|---:|---:|"]
    single = None
    for count in packing_counts(tiny):
        threads = max(1, (os.cpu_count() or 1) // count)
        command = [sys.executable, "-m", "benchmarks.gpu_check", "--part", "one-run", "--device", device,
                   "--threads", str(threads)] + (["--tiny"] if tiny else [])
        procs = [subprocess.Popen(command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True) for _ in range(count)]
        ready = [p.stdout.readline().strip() == "ready" for p in procs]  # the barrier: every warm-up done
        started = time.perf_counter()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        outputs = [p.communicate()[0] for p in procs]
        wall = time.perf_counter() - started
        images = [float(out.split()[0]) for out in outputs if out.strip()]
        if not all(ready) or len(images) < count:
            yield f"| {count} | {threads} | {wall:.1f} | {len(images)} of {count} runs finished | |"
            continue
        rate = sum(images) / wall
        single = single or (rate if count == 1 else None)
        yield f"| {count} | {threads} | {wall:.1f} | {rate:.0f} | {f'{rate / single:.2f}' if single else '-'} |"


def part_one_run(device: str, tiny: bool) -> Iterator[str]:
    """One run of :func:`packing_workload` (at its fraction, on its path): 'ready' after its untimed
    round, then, once a line arrives on stdin, whole rounds for :data:`PACKING_WINDOW` seconds;
    the images it trained last."""
    from benchmarks import bench

    source = stand_ins(tiny)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        name = packing_workload()
        fraction, path = PACKING_WORKLOADS[name]
        cfg = workload(name, device, tiny, source) if tiny else bench.workload_config(name, fraction, device, source)
        server, next_round = bench.round_runner(cfg, path, source)
        next_round()
        _synchronize(device)
        yield "ready"
        sys.stdin.readline()
        started, images = time.perf_counter(), 0
        while time.perf_counter() - started < (1.0 if tiny else PACKING_WINDOW):
            images += bench.images_per_round_at(server, server.round)
            next_round()
            _synchronize(device)
    yield f"{images}"


def part_profile(device: str, tiny: bool) -> str:
    """torch.profiler's table of one local step of FedVLS on MobileNetV2 (sequential path; LeNet-5 when tiny)."""
    from torch.profiler import ProfilerActivity, profile

    from benchmarks.op_count import count_config
    from fedlib.algorithms.client_training import client_setup
    from fedlib.engine import engine

    model_name = "lenet5" if tiny else "mobilenetv2"
    cfg = count_config(model_name, "fedvls", batch_size=8 if tiny else 64).replace(device=device)
    server, algorithm = engine.prepare(cfg)
    ctx, batches = client_setup(server, algorithm, 0, cfg.lr)
    model = server.local_model()
    optimizer = algorithm.make_optimizer(model, ctx.lr, cfg.momentum, cfg.weight_decay, ctx)
    model.train()
    x, y = next(batches)
    for _ in range(2):  # warm-up: lazy state, cuDNN plans
        algorithm.train_step(model, optimizer, x, y, ctx)
    _synchronize(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    with profile(activities=activities) as prof:
        algorithm.train_step(model, optimizer, x, y, ctx)
        _synchronize(device)
    sort = "cuda_time_total" if device.startswith("cuda") else "cpu_time_total"
    table = prof.key_averages().table(sort_by=sort, row_limit=15, max_name_column_width=40)
    return "\n".join([f"## Profile of one {model_name} FedVLS local step (batch {len(y)}, sequential)", "",
                      "```", table.strip(), "```"])


def part_opcount(device: str, tiny: bool) -> str:
    from benchmarks import op_count

    methods, models = (["fedavg"], ["lenet5"]) if tiny else (["fedavg", "fedvls", "fedlmd", "pkd"],
                                                            ["lenet5", "cnn2", "mobilenetv2"])
    return "\n".join(["## Aten ops and host syncs per local step (counted on the CPU)", "",
                      op_count.table(methods, models, steps=2, where=not tiny,
                                     augmentations=() if tiny else ("crop_flip", "crop_flip_autoaugment"))])


PART_FUNCTIONS = {"env": part_env, "tests": part_tests, "rates": part_rates, "workloads": part_workloads,
                  "packing": part_packing, "profile": part_profile, "opcount": part_opcount, "one-run": part_one_run}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=sorted(PART_FUNCTIONS), required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="a few dozen images per workload, stand-ins only")
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"## {args.part}\n\nno CUDA device here: use --device cpu")
        return 2
    output = PART_FUNCTIONS[args.part](args.device, args.tiny)
    for line in [output] if isinstance(output, str) else output:
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
