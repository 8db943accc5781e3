"""Time per round of the naive loop and of fedlib's sequential and stacked paths, side by side.

    FEDLIB_DATA=/work/shared/datasets python -m benchmarks.bench --workload c --fraction 0.1

Each path gets a fresh server from the same config, runs one untimed round (lazy setup, PKD's
expert training), then ``--rounds`` timed rounds, ``--repeat`` times; the median is reported.
``--fraction`` trains on a stratified share of the training set (every client's data shrinks
by the same factor), so a full-data round takes about time / fraction: the extrapolated column.
Throughput counts the local training images (epochs included); TFLOP/s uses the FLOPs of one
local step of the student: its forward pass counted by torch.utils.flop_counter, times 3 (the
usual estimate of forward + backward: the backward computes gradients for inputs and weights,
about twice the forward). The backward is not counted directly because FlopCounterMode
over-counts depthwise convolutions' backward (as dense, ~7x too much for MobileNetV2). Teacher
forwards are not counted, so TFLOP/s is a lower bound for distillation methods.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import platform
import pstats
import statistics
import time
from typing import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode

from benchmarks.naive import naive_round, naive_train_set
from fedlib.core.config import RunConfig
from fedlib.core.state import ServerState, build_run_model, sample_clients
from fedlib.datasets.sources import FILES, DataSource
from fedlib.engine import engine

WORKLOADS = {
    "a": dict(dataset="cifar10", partition="dirichlet", beta=0.05, clients=10, participation=1.0,
              local_epochs=10, batch_size=64, model="mobilenetv2", method="fedvls", lr=0.01,
              momentum=0.9, weight_decay=5e-4),
    "b": dict(dataset="cifar10", partition="dirichlet", beta=0.05, clients=100, participation=0.1,
              min_client_size=2,  # as FedLMD's paper profile at Dir(0.05): 10 is almost never met
              local_epochs=5, batch_size=50, model="cnn2", method="fedlmd", lr=0.01, momentum=0.9,
              weight_decay=1e-5),
    "c": dict(dataset="fashion_mnist", partition="balanced", clients=10, participation=1.0,
              local_epochs=5, batch_size=50, model="lenet5", method="pkd", lr=0.01, momentum=0.9,
              method_args={"warmup_rounds": 0, "expert_rounds": 1}),
}
PATHS = ("naive", "sequential", "threads", "stacked", "graphed")
# suffixes a fedlib path may carry, e.g. "sequential+cl+bf16": the config fields they set
PATH_OPTIONS = {"cl": {"channels_last": True}, "bf16": {"precision": "bf16"}}


def workload_config(name: str, fraction: float, device: str, source: DataSource = FILES) -> RunConfig:
    settings = dict(WORKLOADS[name])
    cfg = RunConfig(**settings, rounds=1000, seed=0, device=device)
    if fraction < 1:
        total = len(engine.load_run_dataset(cfg, source).train_y)
        # tiny shares cannot give every Dir(0.05) client 10 samples: allow empty clients
        cfg = cfg.replace(max_train_samples=max(cfg.clients * 2, int(total * fraction)), min_client_size=0)
    return cfg


def round_runner(cfg: RunConfig, path: str, source: DataSource = FILES) -> tuple[ServerState, Callable[[], None]]:
    """A prepared server (data from ``source``) and a function that runs its next round on ``path``.

    ``path`` is naive, sequential, threads, stacked or graphed, the fedlib ones optionally followed by ``+cl``
    (channels-last layout) and/or ``+bf16`` (bf16 autocast).
    """
    name, *options = path.split("+")
    changes = {"backend": "sequential" if name == "naive" else name}
    for option in options:
        changes.update(PATH_OPTIONS[option])
    server, algorithm = engine.prepare(cfg.replace(**changes), source)
    if name == "naive":
        train_set = naive_train_set(server)
        step = lambda: naive_round(server, algorithm, train_set)  # noqa: E731
    else:
        step = lambda: engine.run_round(server, algorithm)  # noqa: E731

    def next_round() -> None:
        step()
        server.round += 1

    return server, next_round


TRAINING_FLOPS_PER_FORWARD = 3  # forward + backward (input and weight gradients) = 3 forwards


def forward_flops_per_image(model: torch.nn.Module, image_shape: tuple, batch_size: int) -> float:
    """FLOPs of one forward pass of ``model`` (training mode), per image, counted by FlopCounterMode."""
    x = torch.zeros(batch_size, *image_shape)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(x)
    return counter.get_total_flops() / batch_size


def flops_per_image(cfg: RunConfig, source: DataSource = FILES) -> float:
    """FLOPs of one local training step of the student per image: 3 x its counted forward pass."""
    dataset = engine.load_run_dataset(cfg, source)
    model = build_run_model(cfg, dataset)
    return TRAINING_FLOPS_PER_FORWARD * forward_flops_per_image(model, dataset.image_shape, cfg.batch_size)


def time_path(cfg: RunConfig, path: str, rounds: int, repeat: int, profile: bool,
              source: DataSource = FILES) -> dict:
    server, next_round = round_runner(cfg, path, source)
    next_round()  # untimed: lazy setup and PKD's experts
    times, images = [], []
    for _ in range(repeat):
        images.append(sum(images_per_round_at(server, r) for r in range(server.round, server.round + rounds)))
        started = time.perf_counter()
        for _ in range(rounds):
            next_round()
        times.append((time.perf_counter() - started) / rounds)
    report = {"seconds": statistics.median(times), "all": times, "images": statistics.median(images) / rounds}
    if profile:
        report["profile"] = profile_round(next_round)
    return report


def images_per_round_at(server: ServerState, round_index: int) -> int:
    cfg = server.cfg
    clients = sample_clients(cfg.seed, round_index, cfg.clients, cfg.participation)
    return cfg.local_epochs * sum(server.data.client(k).num_samples for k in clients)


def profile_round(next_round: Callable[[], None], top: int = 12) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    next_round()
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
    return text.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="c")
    parser.add_argument("--fraction", type=float, default=1.0, help="share of the training set used")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--paths", default=",".join(PATHS),
                        help="comma-separated; fedlib paths may add +cl and/or +bf16, e.g. sequential+cl")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    parser.add_argument("--profile", action="store_true", help="cProfile one more round per path")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = workload_config(args.workload, args.fraction, args.device)
    flops = flops_per_image(cfg)
    print(f"workload {args.workload}: {cfg.method} {cfg.dataset} {cfg.model} K={cfg.clients} "
          f"part={cfg.participation} E={cfg.local_epochs} B={cfg.batch_size} fraction={args.fraction}")
    print(f"host {platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"threads {torch.get_num_threads()}, load {os.getloadavg()[0]:.2f}, "
          f"{flops / 1e6:.2f} MFLOP per training image", flush=True)
    results = {}
    for path in args.paths.split(","):
        results[path] = time_path(cfg, path, args.rounds, args.repeat, args.profile)
        print(f"  {path}: {' '.join(f'{t:.2f}' for t in results[path]['all'])} s/round", flush=True)
    base = results.get("naive", {}).get("seconds")
    print(f"{'path':<20}{'s/round':>10}{'full-data s/round':>19}{'x naive':>9}{'img/s':>10}{'TFLOP/s':>9}  runs")
    for path, r in results.items():
        rate = r["images"] / r["seconds"]
        ratio = f"{base / r['seconds']:.2f}" if base else "-"
        runs = " ".join(f"{t:.2f}" for t in r["all"])
        print(f"{path:<20}{r['seconds']:>10.3f}{r['seconds'] / args.fraction:>19.1f}{ratio:>9}"
              f"{rate:>10.0f}{rate * flops / 1e12:>9.4f}  [{runs}]")
    print(f"load after: {os.getloadavg()[0]:.2f}")
    for path, r in results.items():
        if "profile" in r:
            print(f"\n==== profile: {path}\n{r['profile']}")


if __name__ == "__main__":
    main()
