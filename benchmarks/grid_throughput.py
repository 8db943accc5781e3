"""Runs per hour of a quick grid with 1, 2, ... local workers (fedlib.orchestration.executor), on this machine.

    FEDLIB_DATA=/work/shared/datasets .venv/bin/python -m benchmarks.grid_throughput --workers 1,2
    .venv/bin/python -m benchmarks.grid_throughput --notebook fedlmd_table5_combinations --profile quick
    .venv/bin/python -m benchmarks.grid_throughput --executor ray --workers 1,2

Each worker count trains the same grid from an empty temporary store (nothing is kept), with the
default backend and each worker's share of the cores; the wall time includes starting the worker
processes (or Ray), as a user would see it. The grid is a reduced Fashion-MNIST one (LeNet-5,
2,000 training images, 10 clients, 3 rounds, four methods, two seeds) unless ``--notebook``
names a table notebook, whose declared runs in ``--profile`` are used (``--limit`` keeps the
first N). Run it on a quiet machine: other processes on the same cores change the ratios.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time

from fedlib.core.config import RunConfig
from fedlib.orchestration.executor import execute
from fedlib.orchestration.experiments import grid
from fedlib.orchestration.resources import available_cores, thread_budget


def quick_grid() -> list[RunConfig]:
    """Eight short runs: four methods x two seeds on reduced Fashion-MNIST."""
    base = RunConfig(dataset="fashion_mnist", model="lenet5", partition="dirichlet", beta=0.5, clients=10,
                     rounds=3, local_epochs=1, batch_size=50, lr=0.01, momentum=0.9, max_train_samples=2000,
                     max_test_samples=1000, device="cpu")
    return grid(base, method=["fedavg", "fedprox", "fedntd", "fedvls"], seed=[0, 1])


def notebook_grid(stem: str, profile: str) -> list[RunConfig]:
    """The distinct runs ``notebooks/<stem>.ipynb`` declares in ``profile``."""
    from fedlib.paper.reproduce import notebook_runs

    return notebook_runs(profile, stem, device="cpu", progress=False)[0]


def measure(configs: list[RunConfig], executor: str, workers: int) -> dict:
    """Train ``configs`` from an empty store with ``workers`` workers; wall seconds and runs per hour."""
    with tempfile.TemporaryDirectory(prefix="fedlib-grid-bench-") as store:
        started = time.perf_counter()
        outcomes = execute(configs, executor=executor, workers=workers, results_dir=store, progress=False)
        seconds = time.perf_counter() - started
    failed = sum(o.status == "failed" for o in outcomes)
    return {"workers": workers, "threads": thread_budget(workers), "runs": len(outcomes), "failed": failed,
            "seconds": seconds, "runs_per_hour": 3600 * (len(outcomes) - failed) / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts to measure")
    parser.add_argument("--executor", choices=("local", "ray"), default="local")
    parser.add_argument("--notebook", help="use this table notebook's declared runs instead of the built-in grid")
    parser.add_argument("--profile", default="quick", help="the notebook's profile (with --notebook)")
    parser.add_argument("--limit", type=int, help="keep the first N runs of the grid")
    args = parser.parse_args()
    configs = notebook_grid(args.notebook, args.profile) if args.notebook else quick_grid()
    configs = configs[:args.limit] if args.limit else configs
    print(f"{platform.node()}: {available_cores()} cores, load average {os.getloadavg()[0]:.1f}; "
          f"{len(configs)} runs ({args.notebook or 'built-in quick grid'}), executor {args.executor}, "
          f"backend {configs[0].backend if configs else '-'}")
    rows = [measure(configs, args.executor, int(n)) for n in args.workers.split(",")]
    base = rows[0]["runs_per_hour"]
    print(f"{'workers':>7} {'threads':>7} {'runs':>5} {'failed':>6} {'seconds':>8} {'runs/hour':>9} {'speedup':>7}")
    for row in rows:
        print(f"{row['workers']:>7} {row['threads']:>7} {row['runs']:>5} {row['failed']:>6} {row['seconds']:>8.1f} "
              f"{row['runs_per_hour']:>9.1f} {row['runs_per_hour'] / base:>7.2f}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
