"""Publishing: a complete run's metrics (config, meta, round log, summary; no checkpoint) copied
into the reference store, from committed code only; with its final model when asked (the lesson
runs, whose notebooks analyse the trained model and which are small)."""

from __future__ import annotations

import os
from pathlib import Path

from fedlib.errors import FedlibError
from fedlib.store.digest import seal, seal_problem
from fedlib.store.files import write_atomic
from fedlib.store.paths import REFERENCE_FILES, REFERENCE_RESULTS, reference_root
from fedlib.store.provenance import is_clean_revision, trained_revisions
from fedlib.store.record import FINAL_FILE, RunRecord


MAX_PUBLISHED_MODEL = 2 * 2**20  # bytes: a final model larger than this stays out of the committed store


def publish(record: "RunRecord", root: str | os.PathLike | None = None, *, force: bool = False,
            with_model: bool = False) -> Path:
    """Copy a complete run's metrics (config, meta, rounds, summary; no checkpoint) into the
    reference store; returns its folder there. ``with_model`` copies its final model too (final.pt),
    refused in one line above :data:`MAX_PUBLISHED_MODEL`. A run trained, at its start or at any
    resume, from code git does not hold (code revision '+dirty' or 'unknown') is refused unless
    ``force``."""
    if not record.complete:
        raise FedlibError(f"run {record.folder} is not complete: only finished runs are published")
    unclean = [r for r in trained_revisions(record.read_meta()) if not is_clean_revision(r)]
    if unclean and not force:
        raise FedlibError(f"run {record.folder.name} was trained from uncommitted code (code revision {unclean[0]}); "
                          "commit fedlib/ and retrain it, or publish it with force=True")
    names = REFERENCE_FILES
    if with_model:
        model = record.folder / FINAL_FILE
        if not model.exists():
            raise FedlibError(f"run {record.folder.name} has no {FINAL_FILE} to publish with its metrics")
        if model.stat().st_size > MAX_PUBLISHED_MODEL:
            raise FedlibError(f"run {record.folder.name}: its {FINAL_FILE} has {model.stat().st_size:,} bytes, over the "
                              f"{MAX_PUBLISHED_MODEL:,} the committed store takes; publish its metrics only")
        names = (*REFERENCE_FILES, FINAL_FILE)
    target = Path(root or reference_root() or REFERENCE_RESULTS) / record.folder.name
    problem = seal_problem(record.folder)
    if problem:
        raise FedlibError(f"run {record.folder.name} is not published: {problem}")
    for name in names:
        source = record.folder / name
        if source.exists():
            write_atomic(target / name, source.read_bytes())
    seal(target)  # over the files the reference store holds (final.pt only when published with it)
    return target
