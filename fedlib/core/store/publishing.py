"""Publishing: a complete run's metrics (config, meta, round log, summary; no checkpoint) copied
into the reference store, from committed code only."""

from __future__ import annotations

import os
from pathlib import Path

from fedlib.core.store.files import write_atomic
from fedlib.core.store.paths import REFERENCE_FILES, REFERENCE_RESULTS, reference_root
from fedlib.core.store.provenance import is_clean_revision, trained_revisions
from fedlib.core.store.record import RunRecord
from fedlib.errors import FedlibError


def publish(record: "RunRecord", root: str | os.PathLike | None = None, *, force: bool = False) -> Path:
    """Copy a complete run's metrics (config, meta, rounds, summary; no checkpoint) into the
    reference store; returns its folder there. A run trained, at its start or at any resume, from
    code git does not hold (code revision '+dirty' or 'unknown') is refused unless ``force``."""
    if not record.complete:
        raise FedlibError(f"run {record.folder} is not complete: only finished runs are published")
    unclean = [r for r in trained_revisions(record.read_meta()) if not is_clean_revision(r)]
    if unclean and not force:
        raise FedlibError(f"run {record.folder.name} was trained from uncommitted code (code revision {unclean[0]}); "
                          "commit fedlib/ and retrain it, or publish it with force=True")
    target = Path(root or reference_root() or REFERENCE_RESULTS) / record.folder.name
    for name in REFERENCE_FILES:
        source = record.folder / name
        if source.exists():
            write_atomic(target / name, source.read_bytes())
    return target
