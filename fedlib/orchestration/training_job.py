"""One run, trained in whatever process holds it (this one, a local worker, a Ray task): the job
every executor pool hands out, and the words for how a run ended."""

from __future__ import annotations

import os
import socket
import time
import warnings

from fedlib import store
from fedlib.core.config import RunConfig
from fedlib.errors import one_line
from fedlib.orchestration import resources

# how a run ended in this call
STORED, DONE, DIVERGED, ELSEWHERE, FAILED = "stored", "done", "diverged", "elsewhere", "failed"


def train_one(config: dict, threads: int) -> dict:
    """Train (or resume) one run in this process with ``threads`` intra-op threads; never raises.

    Returns a dict: ``status`` (done, diverged, elsewhere: another process stored it meanwhile,
    claimed: another live process holds it, failed), ``error``, ``seconds``, ``best_accuracy``,
    ``worker``, ``notes`` (the run's provenance warnings: a resume with other arithmetic or code,
    for one). The executor asked the store about the run before handing it out, so the store is
    not asked again here (a run another process stores meanwhile is found under its claim)."""
    resources.set_thread_budget(threads=threads)
    worker, notes = f"{socket.gethostname()}:{os.getpid()}", []
    started = time.perf_counter()
    try:
        result = _run_noting(RunConfig.from_dict(config), notes)
    except store.ClaimedError as exc:
        return {"status": "claimed", "error": str(exc), "worker": worker}
    except Exception as exc:  # noqa: BLE001 - any failure is this run's, reported at the end
        return {"status": FAILED, "error": one_line(exc), "worker": worker, "notes": notes,
                "seconds": time.perf_counter() - started}
    if result.origin == "served":  # another process stored it while this one waited for its claim
        status = ELSEWHERE
    else:
        status = DIVERGED if result.summary.get("diverged") else DONE
    return {"status": status, "seconds": time.perf_counter() - started, "worker": worker,
            "best_accuracy": None if result.diverged else result.best_accuracy, "notes": notes}


def _run_noting(cfg: RunConfig, notes: list[str]):
    """``engine.run(cfg)`` with its warnings kept off the screen; the provenance ones go to ``notes``
    for the summary (diverged runs are reported there by status)."""
    from fedlib.engine import engine

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return engine.run(cfg, progress=False, served=None)  # the executor asked the store
        finally:
            notes += [str(w.message) for w in caught if issubclass(w.category, store.ProvenanceWarning)]
