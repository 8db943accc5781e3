"""Prove that every declared run runs: one round of each config on a small slice of its data, on
the CPU (``./reproduce.sh --profile paper --dry-run``, or :func:`dry_run`).

The dry-run copy of a config (:func:`dry_run_config`) keeps the model, the method and its
arguments, the partition scheme, the client count, the augmentation and the batch size; it
changes only what makes the run small: one round of one local epoch (two rounds, or shorter
warm-ups, for methods whose first round skips the path later rounds take: see
each method's ``short_run``), a training slice of :data:`IMAGES_PER_CLIENT` images per client
(doubled until the partition can be drawn over its clients), a few test images per class, the
sequential path on the CPU, and a temporary results folder (nothing is stored). Where the
dataset's files are missing it trains on a stand-in of the same shape
(:func:`fedlib.datasets.data.stand_in_dataset`: image size, channels, classes; one natural group per
client for natural partitions) and says so in the ``data`` column.

Each config runs in a worker process that runs only configs of the same dataset and model (a
``LocalPool`` fed by the executor's loop, :mod:`fedlib.orchestration.scheduler`), so a crash or a
runaway config costs one row, not the whole run, and what another kind left in memory stays out
of its peak: ``peak_rss_mb`` is the worker's resident-memory high-water mark during
that config (the kernel's, reset before each config), which counts torch's CPU tensors that
``tracemalloc`` does not see. Rows are appended to a CSV as they finish, so a killed dry run
resumes where it stopped; configs already in the CSV are skipped.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
import warnings
from collections import deque
from typing import TYPE_CHECKING, Iterator, Sequence

import pandas as pd

from fedlib.core.config import RunConfig
from fedlib.errors import FedlibError, one_line
from fedlib.orchestration import scheduler
from fedlib.orchestration.dry_run_rows import (  # noqa: F401 - the rows' names, importable from here
    CSV_COLUMNS, append_row, format_dry_run, read_rows, rekey_old_hashes, summary_line)
from fedlib.orchestration.peak_memory import PeakMemory, release_memory
from fedlib.orchestration.pools import LocalPool, LocalWorker

if TYPE_CHECKING:
    from fedlib.datasets.sources import DataSource

IMAGES_PER_CLIENT = 16  # the first slice tried: this many training images per client
MAX_DOUBLINGS = 6  # the slice doubles at most this often (16 -> 1024 images per client) for the partition
TEST_IMAGES_PER_CLASS = 2
JOBS_PER_WORKER = 40  # a worker process is replaced after this many configs (memory stays its own)
DEFAULT_TIMEOUT_S = 1800
POLL_SECONDS = 1.0  # how long the loop waits for a worker's row before it looks for overrun ones
BUNDLED = ("digits", "synthetic")  # datasets fedlib makes itself: always real, never a stand-in


# ---------------------------------------------------------------------- the dry-run copy
def dry_run_config(cfg: RunConfig, min_rounds: int = 1, device: str = "cpu") -> tuple[RunConfig, str]:
    """The dry-run copy of ``cfg`` (before its slice is chosen) and a note on what its method
    changes, if anything: ``min_rounds`` round(s) of one local epoch on ``device``, on the
    sequential reference path (the one a clock hook can time client by client), evaluated after
    the last round, a temporary results folder."""
    from fedlib.core.registry import method_class

    changes, rounds, note = method_class(cfg.method).short_run(cfg.method_args, min_rounds)
    dry = cfg.replace(rounds=rounds, local_epochs=1, method_args={**cfg.method_args, **changes}, device=device,
                      eval_every=rounds, backend="sequential", results_dir=None)
    return dry, note


# ---------------------------------------------------------------------- one config
def run_one(cfg: RunConfig, stand_in: bool | None = None, results_dir: str | os.PathLike | None = None,
            images_per_client: int = IMAGES_PER_CLIENT, min_rounds: int = 1, device: str = "cpu",
            test_images: int | None = None, tidy: bool = True) -> dict:
    """Dry-run one config in this process: the row of the CSV, less what the caller knows, plus
    ``round_seconds``, ``round_images`` (one entry per round), ``client_seconds`` and
    ``client_images`` (one per client trained). ``test_images`` overrides the test slice;
    ``tidy`` hands the memory back afterwards (what the next config's peak needs; probes skip it).

    ``stand_in`` None uses the real data where they are found, else a stand-in; True uses a
    stand-in for every dataset but the bundled ones (the plan's probes: speed depends on the
    shape, not the pixels).
    """
    from fedlib.datasets import data

    started = time.perf_counter()
    dry, note = dry_run_config(cfg, min_rounds, device)
    real = cfg.dataset in BUNDLED or (not stand_in and data.missing_dataset_message(cfg.dataset, cfg.data_dir) is None)
    row = {"data": "real" if real else "stand-in", "status": "ok", "error": "", "threads": _torch_threads()}
    notes = [note, "" if real else _real_size(cfg)]
    with tempfile.TemporaryDirectory(prefix="fedlib-dry-run-") as scratch:
        try:
            with PeakMemory() as peak:
                sliced = choose_slice(dry, real, images_per_client, test_images)
                row.update(_timed_run(sliced, real, results_dir or scratch))
            row["peak_rss_mb"] = peak.megabytes
            if sliced.min_client_size != dry.min_client_size:
                notes.append(f"min_client_size {dry.min_client_size} -> 1 on the slice")
            notes.append(row.pop("extra_note"))
        except Exception as error:  # noqa: BLE001 -- one line per config; the dry run goes on
            row.update(status="error", error=one_line(error))
        finally:
            _forget_datasets(tidy)
    row["note"] = "; ".join(n for n in notes if n)
    row["wall_seconds"] = round(time.perf_counter() - started, 2)
    return row


def _real_size(cfg: RunConfig) -> str:
    """What a stand-in row's peak memory lacks: the real dataset, which a run loads whole."""
    from fedlib.datasets import data

    shape = data.dataset_shape(cfg.dataset, **data.split_option(cfg.dataset_options)[1])
    megabytes = (shape.train_size + shape.test_size) * shape.channels * shape.image_size ** 2 / 2 ** 20
    return f"the real data would add ~{megabytes:,.0f} MB to the peak"


def _timed_run(dry: RunConfig, real: bool, results_dir: str) -> dict:
    """Run ``dry`` with a clock on every round; the measured columns of its row."""
    from fedlib.engine import engine

    clock = RoundClock()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = engine.run(dry.replace(results_dir=results_dir), hooks=[clock], use_store=False,
                            progress=False, results_dir=results_dir, source=data_source(dry, real))
    seconds, images = sum(clock.seconds), sum(clock.images)
    notes = [one_line(w.message) for w in caught if issubclass(w.category, RuntimeWarning)][:1]
    notes += _method_notes(dry, result)
    return {"rounds": len(clock.seconds), "train_slice": dry.max_train_samples, "images": images,
            "seconds": round(seconds, 3), "seconds_per_image": seconds / images if images else float("nan"),
            "round_seconds": clock.seconds, "round_images": clock.images, "client_seconds": clock.client_seconds,
            "client_images": clock.client_images, "parameters": clock.parameters,
            "extra_note": "; ".join(notes)}


def _method_notes(dry: RunConfig, result) -> list[str]:
    """What a reader of the row must know: a method path the slice did not reach."""
    from fedlib.core.registry import method_class

    missed = method_class(dry.method).short_run_missed(result.rounds)
    notes = [missed] if missed else []
    if result.summary.get("diverged"):
        notes.append("diverged on the slice")
    return notes


class RoundClock:
    """Engine hook: wall seconds and images trained of every round and of every client (the
    evaluation after a round excluded), and the global model's parameter count."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self.images: list[int] = []
        self.client_seconds: list[float] = []
        self.client_images: list[int] = []
        self.parameters = 0
        self._started = self._last = 0.0

    def on_round_start(self, server, clients) -> None:
        self.parameters = sum(p.numel() for p in server.model.parameters())
        self._started = self._last = time.perf_counter()

    def on_client_end(self, server, ctx, model, update) -> None:
        now = time.perf_counter()
        self.client_seconds.append(now - self._last)
        self.client_images.append(update.num_samples * server.cfg.local_epochs)
        self._last = now

    def on_round_end(self, server, updates, metrics) -> None:
        self.seconds.append(time.perf_counter() - self._started)
        self.images.append(int(metrics.get("local_samples", 0)))


# ---------------------------------------------------------------------- the slice
def choose_slice(dry: RunConfig, real: bool, images_per_client: int = IMAGES_PER_CLIENT,
                 test_images: int | None = None) -> RunConfig:
    """``dry`` with the smallest slice (``images_per_client`` per client, doubled) over which its
    partition can be drawn. Where the config's ``min_client_size`` needs most of the data (a
    Dirichlet split with a small beta over many clients), it is lowered to 1 for the slice and
    the note says so. The last candidate if none can (the run then fails with the partitioner's
    message)."""
    for candidate in _slice_candidates(dry, images_per_client, test_images):
        if _drawable(candidate, real):
            return candidate
    return candidate


def _slice_candidates(dry: RunConfig, images_per_client: int, test_images: int | None) -> Iterator[RunConfig]:
    """Slices to try, smallest first: the config's own min_client_size on a few sizes, then 1."""
    from fedlib.datasets import data

    shape = data.dataset_shape(dry.dataset, **data.split_option(dry.dataset_options)[1])
    test = test_images or max(TEST_IMAGES_PER_CLASS * shape.num_classes, 20)
    test = min(dry.max_test_samples or shape.test_size, test)
    full = dry.max_train_samples or shape.train_size
    ladder = (images_per_client * dry.clients * 2 ** d for d in range(MAX_DOUBLINGS + 1))
    sizes = sorted({min(full, max(dry.clients, size)) for size in ladder})
    own = [dry.replace(max_train_samples=n, max_test_samples=test) for n in sizes[:3]]
    lowered = [dry.replace(max_train_samples=n, max_test_samples=test, min_client_size=1) for n in sizes]
    yield from own + (lowered if dry.min_client_size > 1 else [])


def _drawable(cfg: RunConfig, real: bool) -> bool:
    """Whether the engine can draw ``cfg``'s partition from its slice (the call engine.prepare makes)."""
    from fedlib.engine import engine

    # a stand-in's labels and groups do not depend on its pixels
    dataset = engine.load_run_dataset(cfg, data_source(cfg, real, image_size=1))
    try:
        draw_partition(cfg, dataset)
    except FedlibError:
        return False
    return True


def draw_partition(cfg: RunConfig, dataset):
    """``cfg``'s partition of ``dataset``'s training labels: the call engine.prepare makes."""
    from fedlib.datasets.partition import make_partition

    return make_partition(cfg.partition, dataset.train_y.numpy(), cfg.clients, dataset.num_classes, cfg.seed,
                          beta=cfg.beta, shards_per_client=cfg.shards_per_client,
                          classes_per_client=cfg.classes_per_client, groups=dataset.train_groups,
                          min_size=cfg.min_client_size, quantity_split=cfg.quantity_split,
                          global_balance=cfg.global_balance)


def data_source(cfg: RunConfig, real: bool, image_size: int | None = None) -> DataSource:
    """Where the engine reads ``cfg``'s slice: the real files, or stand-ins of the slice's size
    (``image_size`` overrides their pixels' size)."""
    from fedlib.datasets.sources import FILES, StandIns

    if real:
        return FILES
    groups = cfg.clients if cfg.partition == "natural" else None  # one writer / domain per client
    return StandIns(cfg.max_train_samples, cfg.max_test_samples, seed=cfg.seed, groups=groups, image_size=image_size)


def _forget_datasets(tidy: bool) -> None:
    """Drop the engine's datasets; ``tidy`` also hands freed memory back to the system, so that
    the next config's peak starts from what this process really holds."""
    from fedlib.engine import engine

    engine.forget_datasets()
    if tidy:
        release_memory()


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


# ---------------------------------------------------------------------- many configs
def dry_run(configs: dict[str, tuple[RunConfig, Sequence[str]]], csv_path: str | os.PathLike, *,
            jobs: int = 1, limit: int | None = None, retry_errors: bool = False,
            timeout_s: float = DEFAULT_TIMEOUT_S, progress: bool = True, every_seed: bool = False) -> pd.DataFrame:
    """Dry-run every config of ``configs`` (hash -> (config, notebooks declaring it)) not yet in
    ``csv_path``, in ``jobs`` worker processes (0: in this process, no isolation: for debugging);
    returns the rows of all of them.

    Configs that differ only in their seed take the same code path with other random draws, so
    they share one row (:func:`seed_groups`; its ``seeds`` column lists them) unless
    ``every_seed``. What the seed changes at full scale, the partition, is drawn for every seed
    by :func:`fedlib.orchestration.partition_check.check_partitions`.

    ``limit`` runs at most that many new configs, spread over datasets, then models, then methods
    so that a small sample covers as many kinds as it can. ``retry_errors`` runs again the
    configs whose row says error. Workers are spawned processes: a script that calls this must
    do so under ``if __name__ == "__main__":``.
    """
    if jobs < 0:
        raise FedlibError(f"jobs must be >= 0 (0: in this process), got {jobs}")
    done = rekey_old_hashes(csv_path, configs)
    if not every_seed:
        configs = seed_groups(configs, done)
    todo = [h for h in configs if h not in done or (retry_errors and done[h]["status"] != "ok")]
    todo = _spread(todo, configs)[:limit] if limit is not None else todo
    todo = cheapest_first(todo, configs)
    running = set(todo)
    already = sum(1 for h in configs if h in done and h not in running)  # the bar counts the CSV rows too
    run = _run_in_workers if jobs else _run_here
    run(todo, configs, csv_path, jobs, timeout_s, progress, already=already)
    rows = read_rows(csv_path)
    frame = pd.DataFrame([rows[h] for h in configs if h in rows], columns=list(CSV_COLUMNS))
    if not every_seed:  # a row written before the other seeds were declared lists them all
        frame["seeds"] = [" ".join(map(str, configs[h][2])) for h in frame["hash"]]
    return frame


def seed_groups(configs: dict[str, tuple[RunConfig, Sequence[str]]],
                done: dict[str, dict] | None = None) -> dict[str, tuple[RunConfig, list[str], list[int]]]:
    """``configs`` with one entry per group of configs that differ only in their seed: hash ->
    (config, the notebooks declaring any of them, the group's seeds). The entry is the member
    already in ``done`` (a dry run's rows), else the one with the smallest seed."""
    done = done or {}
    groups: dict[str, list[str]] = {}
    for digest, (cfg, _) in configs.items():
        groups.setdefault(cfg.replace(seed=0).hash(), []).append(digest)
    kept = {}
    for members in groups.values():
        members.sort(key=lambda h: (h not in done, configs[h][0].seed))
        notebooks = list(dict.fromkeys(stem for h in members for stem in configs[h][1]))
        kept[members[0]] = (configs[members[0]][0], notebooks, sorted(configs[h][0].seed for h in members))
    return kept


def _kind(cfg: RunConfig) -> tuple:
    return cfg.dataset, cfg.model, cfg.method


def cheapest_first(hashes: list[str], configs: dict) -> list[str]:
    """``hashes`` ordered by the forward FLOPs of one image of their (dataset, model), cheapest
    first, then by kind (same data and model back to back: warm caches). A dry run stopped early
    has then proven the most kinds, and what it leaves is the slow tail (a MobileNetV2 on
    TinyImageNet costs minutes a row on a CPU, an MLP on MNIST seconds). A config whose model
    cannot be built or run for its data goes last: its own row then records the error."""
    costs: dict[tuple, float] = {}

    def cost(cfg: RunConfig) -> float:
        key = (cfg.dataset, cfg.model, repr(cfg.dataset_options))
        if key not in costs:
            try:
                costs[key] = forward_flops(cfg)
            except Exception:  # noqa: BLE001 -- that row's own dry run reports it
                costs[key] = math.inf
        return costs[key]

    return sorted(hashes, key=lambda h: (cost(configs[h][0]), _kind(configs[h][0])))


def forward_flops(cfg: RunConfig) -> float:
    """FLOPs of ``cfg``'s model on one image of ``cfg``'s dataset (its shape; no pixels loaded)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from fedlib.datasets import data
    from fedlib.models import build_model

    shape = data.dataset_shape(cfg.dataset, **data.split_option(cfg.dataset_options)[1])
    model = build_model(cfg.model, shape.num_classes, in_channels=shape.channels, image_size=shape.image_size).eval()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.zeros(1, shape.channels, shape.image_size, shape.image_size))
    return float(counter.get_total_flops())


def _spread(hashes: list[str], configs: dict) -> list[str]:
    """``hashes`` reordered so that any first few cover as many datasets, then models, then
    methods as they can: one config of each dataset's first (model, method), then of their
    other models, then of their other methods, then the kinds' other configs."""
    taken: dict[tuple, int] = {}  # configs of a kind met so far
    order: dict[tuple, dict] = {}  # group -> its members in the order they first appear
    ranks = {}
    for h in hashes:
        dataset, model, method = kind = _kind(configs[h][0])
        taken[kind] = taken.get(kind, -1) + 1
        ranks[h] = (taken[kind], _first_seen(order, (dataset, model), method), _first_seen(order, (dataset,), model),
                    _first_seen(order, (), dataset))
    return sorted(hashes, key=ranks.__getitem__)


def _first_seen(order: dict[tuple, dict], group: tuple, member: str) -> int:
    """The position of ``member`` among the members of ``group`` in order of first appearance."""
    members = order.setdefault(group, {})
    return members.setdefault(member, len(members))


def _progress_bar(total: int, already: int, progress: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=already, desc="dry run", unit="config", disable=not progress)


def _record(csv_path, bar, cfg: RunConfig, notebooks: Sequence[str], row: dict, seeds: Sequence[int] = ()) -> None:
    """Append a finished config's row to the CSV and advance the bar."""
    append_row(csv_path, {**_identity(cfg, notebooks, seeds), **row})
    bar.update(1)
    if row["status"] != "ok":
        bar.set_postfix_str(f"last error: {cfg.method} on {cfg.dataset}")


def _run_here(todo: list[str], configs: dict, csv_path, jobs: int, timeout_s: float, progress: bool,
              already: int) -> None:
    """Every config of ``todo`` in this process, one after another (no timeout)."""
    with _progress_bar(already + len(todo), already, progress) as bar:
        for digest in todo:
            cfg, notebooks, *seeds = configs[digest]
            row = run_one(cfg)
            _record(csv_path, bar, cfg, notebooks, {k: v for k, v in row.items()
                                                    if not k.startswith(("round_", "client_"))}, *seeds)


def _run_in_workers(todo: list[str], configs: dict, csv_path, jobs: int, timeout_s: float, progress: bool,
                    already: int) -> None:
    """Every config of ``todo`` measured in ``jobs`` worker processes, through the executor's loop
    (:func:`fedlib.orchestration.scheduler.schedule`) on a :class:`~fedlib.orchestration.pools.LocalPool`
    that kills a worker overrunning ``timeout_s`` and replaces one for another kind
    (:func:`_needs_new_worker`); a worker that dies or overruns costs its config an error row."""
    from fedlib.orchestration.resources import thread_budget

    threads = thread_budget(jobs)
    keys = {configs[h][0].hash(): h for h in todo}  # a config's hash -> its key in configs
    pool = LocalPool(min(jobs, len(todo)), threads, measure_row, timeout_s=timeout_s, replace=_needs_new_worker,
                     use_gpus=False)
    bar = _progress_bar(already + len(todo), already, progress)

    def collected(sent: RunConfig, row: dict) -> None:
        digest = keys[sent.hash()]
        if row["status"] == "died":  # the worker died or overran: it is gone, the config has an error row
            row = {"status": "error", "error": row["error"], "data": "", "threads": threads}
        cfg, notebooks, *seeds = configs[digest]
        _record(csv_path, bar, cfg, notebooks, {**row, "hash": digest}, *seeds)

    try:
        scheduler.schedule(deque(configs[h][0] for h in todo), pool, collected, poll_seconds=POLL_SECONDS)
    finally:
        bar.close()
        pool.close()


def _needs_new_worker(worker: LocalWorker, cfg: RunConfig) -> bool:
    """Whether ``cfg`` needs a new worker rather than ``worker``: one that has measured
    JOBS_PER_WORKER configs already, or configs of another (dataset, model) kind (what a config
    leaves in memory, freed memory a process keeps, stays out of another kind's peak)."""
    return worker.jobs >= JOBS_PER_WORKER or (worker.last.dataset, worker.last.model) != (cfg.dataset, cfg.model)


def _identity(cfg: RunConfig, notebooks: Sequence[str], seeds: Sequence[int] = ()) -> dict:
    return {"hash": cfg.hash(), "notebooks": ";".join(notebooks), "dataset": cfg.dataset, "model": cfg.model,
            "method": cfg.method, "partition": cfg.partition, "clients": cfg.clients,
            "seeds": " ".join(str(seed) for seed in (seeds or [cfg.seed]))}


def measure_row(job: dict, threads: int) -> dict:
    """A worker's job: the dry-run row of one config dict, measured with ``threads`` torch threads
    (less the per-round and per-client lists, which stay in the worker)."""
    import torch

    torch.set_num_threads(threads)
    row = run_one(RunConfig.from_dict(job))
    return {k: v for k, v in row.items() if not k.startswith(("round_", "client_"))}


