"""Run a grid of configs side by side: local worker processes, or Ray tasks on one machine or a cluster.

:func:`execute` takes a list of :class:`RunConfig`, keeps one per config hash, skips the runs a
store already holds and trains the rest on an executor:

- ``serial``: one after another in this process;
- ``local``: ``workers`` spawned processes on this machine, each with its share of the cores
  (:func:`fedlib.orchestration.resources.thread_budget`) and, for a GPU run, a place on a GPU with room for its
  estimated memory (:func:`fedlib.orchestration.resources.run_gpu_bytes`): several runs share a card as long as
  their estimates fit 90 % of it, and a run waits while none has room;
- ``ray``: one Ray task per run (``pip install -e '.[ray]'``), on a local Ray instance with
  ``workers`` runs at a time, or on a running cluster (``address="auto"`` or
  ``"ray://host:port"``); a task asks for a share of a GPU sized to its model
  (:func:`fedlib.orchestration.resources.gpu_share`) when the cluster has GPUs, else for CPUs only.

The results store keeps the executors honest. A worker claims a run before it trains it
(:meth:`fedlib.store.RunRecord.claim`), so a run that another process or another executor is
training is not trained twice: it waits, and is counted as finished elsewhere once that process
stores it, or trained here (resuming from its checkpoint) if that process dies. A worker that
dies mid-run (killed, preempted, out of memory) is replaced and its run is given again, up to
``retries`` times; the run resumes from its last checkpoint and ends with the metrics of an
uninterrupted run. A run that raises, or diverges, is reported once in the summary at the end
and does not stop the others; so is a resume with another thread count, backend or code revision
(the engine's ``store.ProvenanceWarning``), as a note.

One progress bar counts the runs (done, diverged, failed, running; ETA from the runs finished so
far); ``verbose`` adds one line per finished run; a summary table ends the call, with each
failure and its error.
"""

from __future__ import annotations

import os
import time
import warnings
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from fedlib import store
from fedlib.core.config import RunConfig
from fedlib.errors import FedlibError, one_of
from fedlib.orchestration import resources, scheduler
from fedlib.orchestration.pools import (  # noqa: F401 - ray_resources and RAY_INSTALL, importable from here
    RAY_INSTALL, LocalPool, RayPool, SerialPool, import_ray, ray_resources)
from fedlib.orchestration.training_job import (  # noqa: F401 - train_one, importable from here
    DIVERGED, DONE, ELSEWHERE, FAILED, STORED, train_one)

EXECUTORS = ("serial", "local", "ray")
DEFAULT_RETRIES = 2  # a run whose worker dies is given again at most this often
POLL_SECONDS = 2.0  # how often runs claimed by another process are looked at again
MAX_SUMMARY_ROWS = 40  # per-run rows in the final table (failures are always listed)


@dataclass
class Outcome:
    """What became of one run: ``status`` is ``stored`` (already in a store), ``done`` or
    ``diverged`` (trained here), ``elsewhere`` (another process trained it meanwhile) or
    ``failed`` (``error`` says why)."""

    config: RunConfig
    status: str
    attempts: int = 0  # workers that took it in this call (more than 1: a worker died)
    seconds: float = 0.0  # wall seconds of its last attempt
    best_accuracy: float | None = None
    error: str = ""
    worker: str = ""  # host:pid that trained it
    notes: list[str] = field(default_factory=list)  # its provenance warnings (store.ProvenanceWarning)

    @property
    def ok(self) -> bool:
        return self.status != FAILED


# ====================================================================== the grid
def execute(configs: Sequence[RunConfig], *, executor: str = "local", workers: int | None = None,
            threads: int | None = None, results_dir: str | os.PathLike | None = None, address: str | None = None,
            retries: int = DEFAULT_RETRIES, progress: bool = True, verbose: bool = False,
            poll_seconds: float = POLL_SECONDS) -> list[Outcome]:
    """Train every config the store lacks on ``executor`` (serial, local or ray); one
    :class:`Outcome` per distinct config, in the order given.

    ``workers`` runs go side by side (default: one per available core; on a Ray cluster at
    ``address``, as many as its resources hold), each with ``threads`` intra-op threads (default:
    the cores divided by the workers, 1 on a cluster; ``$FEDLIB_THREADS`` overrides). A run
    whose worker dies is given again up to ``retries`` times and resumes from its checkpoint; a
    failing run is reported in the summary and does not stop the others. Local workers are spawned
    processes: a script that calls this needs the ``if __name__ == "__main__":`` guard."""
    if executor not in EXECUTORS:
        raise one_of("executor", executor, EXECUTORS)
    if workers is not None and workers < 1:
        raise FedlibError(f"workers must be >= 1, got {workers}")
    if address and executor != "ray":
        raise FedlibError(f"--address {address} needs --executor ray (got {executor})")
    if executor == "ray":
        import_ray()  # a missing Ray is one line, whatever the store holds
    unique = {cfg.hash(): _located(cfg, results_dir) for cfg in configs}
    outcomes = {h: Outcome(cfg, STORED) for h, cfg in unique.items() if store.is_stored(cfg)}
    todo = [cfg for h, cfg in unique.items() if h not in outcomes]
    slots = _slots(executor, workers, address, len(todo))
    on_cluster = executor == "ray" and bool(address)
    # a run on a cluster gets one thread unless told otherwise: this machine's cores say nothing of its nodes
    budget = resources.thread_budget(resources.available_cores() if on_cluster else slots, threads)
    if todo and not on_cluster:
        _warn_oversubscribed(slots, budget)
    started = time.perf_counter()
    if todo:
        pool = _make_pool(executor, workers if on_cluster else slots, budget, address, verbose)
        board = _Board(len(todo), len(outcomes), progress, verbose)
        try:
            outcomes.update(_schedule(todo, pool, board, retries, poll_seconds))
        finally:
            board.close()
            pool.close()
    ordered = [outcomes[h] for h in unique]
    if progress:
        print(format_summary(ordered, executor, slots, time.perf_counter() - started, address))
    return ordered


def _located(cfg: RunConfig, results_dir: str | os.PathLike | None) -> RunConfig:
    """``cfg`` with absolute results and data folders, so a worker anywhere writes the same store."""
    root = store.results_root(results_dir if results_dir is not None else cfg.results_dir).resolve()
    data_dir = str(Path(cfg.data_dir).resolve()) if cfg.data_dir else None
    return cfg.replace(results_dir=str(root), data_dir=data_dir)


def _slots(executor: str, workers: int | None, address: str | None, todo: int) -> int:
    """Runs side by side: 1 serial; ``workers`` (default: one per available core), never more
    than there are runs; 0 (unknown: the cluster decides) on a Ray cluster without ``workers``."""
    if executor == "serial":
        return 1
    if executor == "ray" and address:
        return workers or 0
    return max(1, min(workers or resources.available_cores(), max(todo, 1)))


def _warn_oversubscribed(slots: int, threads: int) -> None:
    """One line when ``slots`` runs of ``threads`` threads each ask for more cores than this process
    may use: they still run, but slow each other down (threads wait on each other's cores)."""
    cores = resources.available_cores()
    if slots * threads > cores:
        warnings.warn(f"{slots} runs side by side x {threads} threads each = {slots * threads} threads on "
                      f"{cores} cores: they will slow each other down; use at most {cores} workers "
                      f"(threads default to cores / workers)", RuntimeWarning, stacklevel=3)


def _make_pool(executor: str, workers: int | None, threads: int, address: str | None, verbose: bool):
    if executor == "serial":
        return SerialPool(threads)
    if executor == "local":
        return LocalPool(workers or 1, threads)
    return RayPool(workers, threads, address, verbose)


def _schedule(todo: list[RunConfig], pool, board: "_Board", retries: int, poll_seconds: float) -> dict[str, Outcome]:
    """Give runs to the pool as it has room (:func:`fedlib.orchestration.scheduler.schedule`); retry
    a run whose worker died; park a run another process holds until that process stores it (or
    dies). Returns hash -> outcome."""
    queue, parked = deque(todo), []
    attempts: Counter = Counter()
    outcomes: dict[str, Outcome] = {}
    last_look = time.monotonic()

    def started(cfg: RunConfig) -> None:
        attempts[cfg.hash()] += 1
        board.started()

    def collected(cfg: RunConfig, result: dict) -> None:
        board.stopped()
        digest, status = cfg.hash(), result["status"]
        if status == "claimed":
            attempts[digest] -= 1  # another process is on it: not an attempt of ours
            parked.append(cfg)
        elif status == "died" and attempts[digest] <= retries:
            queue.appendleft(cfg)  # resumes from its checkpoint: the dead worker's claim is taken over
            board.note(f"worker died on {_label(cfg)}; giving it again ({result['error']})")
        else:
            if status == "died":
                status = FAILED
                result = {**result, "error": f"{result['error']}, {attempts[digest]} times"}
            outcomes[digest] = _outcome(cfg, status, attempts[digest], result)
            board.finished(outcomes[digest])

    def waiting() -> bool:
        nonlocal parked, last_look
        if parked and (time.monotonic() - last_look >= poll_seconds or not (queue or pool.running())):
            if not (queue or pool.running()):
                time.sleep(poll_seconds)
            last_look = time.monotonic()
            parked = _look_at_parked(parked, queue, outcomes, board)
        board.refresh(len(parked))
        return bool(parked)

    scheduler.schedule(queue, pool, collected, poll_seconds=poll_seconds, started=started, waiting=waiting)
    return outcomes


def _look_at_parked(parked: list[RunConfig], queue: deque, outcomes: dict, board: "_Board") -> list[RunConfig]:
    """Runs another process held: stored now (finished elsewhere), free (that process died: train
    and resume it here), or still held (keep waiting)."""
    still = []
    for cfg in parked:
        if store.is_stored(cfg):
            outcomes[cfg.hash()] = Outcome(cfg, ELSEWHERE)
            board.finished(outcomes[cfg.hash()])
        elif not store.RunRecord(store.run_dir(cfg)).in_progress():
            queue.append(cfg)
        else:
            still.append(cfg)
    return still


def _outcome(cfg: RunConfig, status: str, attempts: int, result: dict) -> Outcome:
    return Outcome(cfg, status, attempts, float(result.get("seconds") or 0.0), result.get("best_accuracy"),
                   result.get("error", "") if status == FAILED else "", result.get("worker", ""),
                   list(result.get("notes") or []))


def _label(cfg: RunConfig) -> str:
    return f"{cfg.hash()} ({cfg.method} on {cfg.dataset}/{cfg.model}, seed {cfg.seed})"


# ====================================================================== progress and summary
class _Board:
    """One progress bar over the grid: runs finished, and done / diverged / failed / running counts."""

    def __init__(self, total: int, stored: int, progress: bool, verbose: bool):
        from tqdm.auto import tqdm

        self.counts: Counter = Counter()
        self.running = self.parked = 0
        self.verbose = verbose
        self.progress = progress
        self.bar = tqdm(total=total, desc=f"runs ({stored} stored)" if stored else "runs", unit="run",
                        disable=not progress, smoothing=0)

    def started(self) -> None:
        self.running += 1
        self.refresh()

    def stopped(self) -> None:
        self.running -= 1

    def finished(self, outcome: Outcome) -> None:
        self.counts[outcome.status] += 1
        self.refresh()
        self.bar.update(1)
        if self.verbose:
            self.note(_outcome_line(outcome))
        for line in outcome.notes:
            self.note(f"note: {line}")

    def note(self, line: str) -> None:
        if self.progress:
            self.bar.write(line)

    def refresh(self, parked: int | None = None) -> None:
        self.parked = self.parked if parked is None else parked
        parts = [f"done {self.counts[DONE] + self.counts[ELSEWHERE]}"]
        parts += [f"{name} {self.counts[name]}" for name in (DIVERGED, FAILED) if self.counts[name]]
        parts.append(f"running {self.running}")
        if self.parked:
            parts.append(f"held elsewhere {self.parked}")
        text = ", ".join(parts)
        if text != getattr(self.bar, "postfix", None):  # redrawn when the counts change (a run given out shows at once)
            self.bar.set_postfix_str(text, refresh=True)

    def close(self) -> None:
        self.bar.close()


def _outcome_line(outcome: Outcome) -> str:
    accuracy = f", best {100 * outcome.best_accuracy:.2f} %" if outcome.best_accuracy is not None else ""
    error = f": {outcome.error}" if outcome.error else ""
    return f"{outcome.status}: {_label(outcome.config)} in {outcome.seconds:.1f} s{accuracy}{error}"


def _note_lines(outcomes: Sequence[Outcome]) -> list[str]:
    """The runs' provenance notes (a resume with other arithmetic or code), under a count."""
    notes = [line for o in outcomes for line in o.notes]
    if not notes:
        return []
    return [f"{len(notes)} provenance note{'s' * (len(notes) != 1)} (numbers not from one uninterrupted "
            "computation of their config):"] + [f"  {line}" for line in notes]


def format_summary(outcomes: Sequence[Outcome], executor: str = "local", slots: int = 1,
                   seconds: float = 0.0, address: str | None = None) -> str:
    """The table that ends :func:`execute`: counts per status, one row per run handled in this
    call (at most :data:`MAX_SUMMARY_ROWS`), then every failure with its error."""
    counts = Counter(o.status for o in outcomes)
    where = {"serial": "in this process", "local": f"on {slots} local worker{'s' * (slots != 1)}",
             "ray": f"on Ray at {address}" if address else f"on a local Ray with {slots} worker{'s' * (slots != 1)}"}
    order = (STORED, DONE, DIVERGED, ELSEWHERE, FAILED)
    tally = ", ".join(f"{counts[s]} {s}" for s in order if counts[s])
    lines = [f"{len(outcomes)} runs: {tally or 'none'} ({seconds:.1f} s {where[executor]})"]
    handled = [o for o in outcomes if o.status != STORED]
    if handled:
        lines.append(f"{'hash':12}  {'method':16} {'dataset/model':24} {'seed':>4}  {'status':9} {'tries':>5} "
                     f"{'seconds':>8}  best")
    for o in handled[:MAX_SUMMARY_ROWS]:
        c = o.config
        best = f"{100 * o.best_accuracy:.2f}" if o.best_accuracy is not None else "-"
        lines.append(f"{c.hash():12}  {c.method[:16]:16} {(c.dataset + '/' + c.model)[:24]:24} {c.seed:>4}  "
                     f"{o.status:9} {o.attempts:>5} {o.seconds:8.1f}  {best}")
    if len(handled) > MAX_SUMMARY_ROWS:
        lines.append(f"... and {len(handled) - MAX_SUMMARY_ROWS} more runs")
    failed = [o for o in outcomes if o.status == FAILED]
    if failed:
        lines.append(f"{len(failed)} run{'s' * (len(failed) != 1)} failed:")
        lines += [f"  {_label(o.config)}: {o.error}" for o in failed]
    lines += _note_lines(outcomes)
    diverged = [o for o in outcomes if o.status == DIVERGED]
    if diverged:
        lines.append(f"{len(diverged)} run{'s' * (len(diverged) != 1)} diverged (stored with diverged=true): "
                     + ", ".join(o.config.hash() for o in diverged))
    return "\n".join(lines)
