"""Where the stores are: the working store (``results/``, where runs train) and the committed,
read-only reference store (``reference_results/``), a run's folder in them, and the refusal to
train into the reference store."""

from __future__ import annotations

import os
from pathlib import Path

from fedlib.core.config import RunConfig
from fedlib.errors import FedlibError
from fedlib.folders import env_folder, switched_off, user_folder

DEFAULT_RESULTS = "results"
# the committed, read-only store of finished full-scale runs (metrics only, no checkpoints); a run it
# holds is served before the working store's run of that hash (served_record)
REFERENCE_RESULTS = Path(__file__).resolve().parents[2] / "reference_results"
REFERENCE_FILES = ("config.json", "meta.json", "rounds.jsonl", "summary.json")
REFERENCE_ENV = "FEDLIB_REFERENCE"  # the reference store's folder, or "off"
WRITE_REFERENCE_ENV = "FEDLIB_WRITE_REFERENCE"  # =1: let runs train into the reference store on purpose


def results_root(results_dir: str | os.PathLike | None = None) -> Path:
    """Where results live: the argument, else $FEDLIB_RESULTS, else ./results (``~`` expanded; a
    blank folder is an error, not the default)."""
    return user_folder(results_dir, "results folder") or env_folder("FEDLIB_RESULTS") or Path(DEFAULT_RESULTS)


def run_dir(cfg: RunConfig, results_dir: str | os.PathLike | None = None) -> Path:
    """The folder that holds (or will hold) the results of ``cfg``."""
    return results_root(results_dir if results_dir is not None else cfg.results_dir) / cfg.hash()


def reference_root() -> Path | None:
    """The read-only reference store ($FEDLIB_REFERENCE, else reference_results/ of this checkout;
    ``FEDLIB_REFERENCE=off`` disables it)."""
    if switched_off(REFERENCE_ENV):
        return None
    return env_folder(REFERENCE_ENV) or REFERENCE_RESULTS


def analysis_cache(results_dir: str | os.PathLike | None, folder: str, name: str) -> Path:
    """Where an analysis cached beside the store (``<store>/<folder>/<name>``: a drift study, tracked
    class statistics) is read from: the working store's file when it exists, else the reference
    store's (the committed lesson runs ship theirs), else the working store's path, to write."""
    working = results_root(results_dir) / folder / name
    reference = reference_root()
    if not working.exists() and reference is not None and (reference / folder / name).exists():
        return reference / folder / name
    return working


def same_folder(a: Path, b: Path) -> bool:
    """Whether two paths name one folder."""
    return Path(a).resolve() == Path(b).resolve()



_WRITE_REFERENCE = False  # this process's mode, set by an edge (orchestration.environment: $FEDLIB_WRITE_REFERENCE)


def set_write_reference(on: bool) -> bool:
    """Let this process's runs train into the reference store on purpose (``on``); returns the mode before."""
    global _WRITE_REFERENCE
    before, _WRITE_REFERENCE = _WRITE_REFERENCE, bool(on)
    return before


def check_writable(root: Path) -> None:
    """Refuse (one line) to train into the reference store, the committed read-only one (it holds
    metrics only, copied there by :func:`publish`), unless an edge allowed it (:func:`set_write_reference`,
    from ``$FEDLIB_WRITE_REFERENCE=1``)."""
    if _WRITE_REFERENCE:
        return
    for reference in {reference_root(), REFERENCE_RESULTS} - {None}:
        if Path(root).exists() and Path(reference).exists() and same_folder(root, reference):
            raise FedlibError(f"{root} is the read-only reference store; train into another results store (the "
                              f"default ./results) and publish finished runs, or set {WRITE_REFERENCE_ENV}=1 to write "
                              "there on purpose")

