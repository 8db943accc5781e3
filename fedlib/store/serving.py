"""Which store serves a run: a complete run (its summary.json exists) of the config's hash comes
from the committed reference store whenever that holds it, else from the working store. A complete
working-store run the reference run shadows is never used, and is warned about once when its
per-round metrics differ. :func:`run_state` is the one question a caller asks about a config (served
from the reference store, complete in the working store, partial, absent)."""

from __future__ import annotations

import enum
import json
import os
import warnings
from pathlib import Path
from typing import Iterable

from fedlib.core.config import RunConfig
from fedlib.store.migration import hint_unmigrated
from fedlib.store.paths import reference_root, results_root, run_dir, same_folder
from fedlib.store.provenance import ProvenanceWarning
from fedlib.store.record import RunRecord


def reference_record(cfg: RunConfig, results_dir: str | os.PathLike | None = None) -> "RunRecord | None":
    """The complete run of ``cfg`` in the reference store, if it holds one. When it does not, and
    it or the working store (``results_dir``) holds the run under its old hash, a one-line warning
    says to run ``fedlib migrate``."""
    root = reference_root()
    record = None if root is None else RunRecord(root / cfg.hash())
    if record is not None and record.complete:
        return record
    hint_unmigrated(cfg, [results_root(results_dir if results_dir is not None else cfg.results_dir)] + ([root] if root is not None else []))
    return None


class RunState(enum.Enum):
    """What state the stores hold a config's run in (:func:`run_state`)."""

    REFERENCE = "reference"  # complete in the reference store, which serves it
    COMPLETE = "complete"  # complete in the working store (the reference store lacks it)
    PARTIAL = "partial"  # started in the working store, not finished: a run resumes it from its checkpoint
    ABSENT = "absent"  # in no store

    @property
    def stored(self) -> bool:
        """Whether a store serves the run (complete in one of them)."""
        return self in (RunState.REFERENCE, RunState.COMPLETE)


def run_state(cfg: RunConfig, results_dir: str | os.PathLike | None = None) -> RunState:
    """The one question a caller asks the stores about ``cfg``: served from the reference store,
    complete in the working store (``results_dir``), partial there (resumable), or absent."""
    if reference_record(cfg, results_dir) is not None:
        return RunState.REFERENCE
    working = RunRecord(run_dir(cfg, results_dir))
    if working.complete:
        return RunState.COMPLETE
    return RunState.PARTIAL if (working.folder / "config.json").exists() else RunState.ABSENT


def run_states(configs: Iterable[RunConfig], results_dir: str | os.PathLike | None = None) -> dict[str, RunState]:
    """Config hash -> :func:`run_state`, each distinct config asked once."""
    unique = {cfg.hash(): cfg for cfg in configs}
    return {key: run_state(cfg, results_dir) for key, cfg in unique.items()}


def stored_record(cfg: RunConfig, state: RunState, results_dir: str | os.PathLike | None = None) -> "RunRecord | None":
    """The record serving ``cfg``'s run in ``state`` (what :func:`run_state` said; nothing is looked
    up again): the reference store's, the working store's, or None for a run no store serves."""
    if state is RunState.REFERENCE:
        return RunRecord(reference_root() / cfg.hash())
    return RunRecord(run_dir(cfg, results_dir)) if state is RunState.COMPLETE else None


def is_stored(cfg: RunConfig, results_dir: str | os.PathLike | None = None) -> bool:
    """Whether a complete run of ``cfg`` is in the working store or the reference store."""
    return run_state(cfg, results_dir).stored


_SHADOW_WARNED: set[tuple[Path, Path]] = set()


def served_record(cfg: RunConfig, results_dir: str | os.PathLike | None = None) -> "RunRecord | None":
    """The complete run of ``cfg`` a store serves: the reference store's whenever it holds one,
    else the working store's, else None. A complete working-store run the reference run shadows
    is never used; one warning (once per pair of folders) when its per-round metrics differ."""
    working = RunRecord(run_dir(cfg, results_dir))
    reference = reference_record(cfg, results_dir)
    if reference is None:
        return working if working.complete else None
    if working.complete and not same_folder(working.folder, reference.folder):
        _warn_if_shadowed_differs(working, reference)
    return reference


def _warn_if_shadowed_differs(working: "RunRecord", reference: "RunRecord") -> None:
    pair = (working.folder, reference.folder)
    if pair in _SHADOW_WARNED or same_metrics(working, reference):
        return
    _SHADOW_WARNED.add(pair)
    warnings.warn(f"run {reference.folder.name}: the working store's {working.folder} holds other per-round metrics "
                  f"than the reference store's {reference.folder}; the reference one is used", ProvenanceWarning,
                  stacklevel=4)


def same_metrics(a: "RunRecord", b: "RunRecord") -> bool:
    """Whether two runs logged the same per-round metrics, wall time ('seconds') aside (False when
    either log cannot be read)."""
    try:
        logs = [[{k: v for k, v in r.items() if k != "seconds"} for r in x.read_rounds()] for x in (a, b)]
    except (ValueError, OSError, AttributeError):
        return False
    return json.dumps(logs[0], sort_keys=True) == json.dumps(logs[1], sort_keys=True)  # NaN equals NaN here

