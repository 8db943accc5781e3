"""A finished run's seal: ``digest.json``, the SHA-256 of each of its files, written last.

Once a run is complete its files never change, so any later difference is an edit or damage: a
hand-edited ``summary.json`` or ``rounds.jsonl`` would otherwise be served as the run's result.
:class:`~fedlib.store.record.RunRecord` checks a sealed file each time it reads one and refuses
it in one line naming the file; ``fedlib run``, ``show``, ``list``, ``export`` and the notebooks all
read through it. What the seal covers:

- the metric files (:data:`SEALED_FILES`): all must be present and match;
- ``final.pt``, the final model, when it is present (the reference store publishes the metrics
  alone, without it).

It detects edits and corruption, not a forger: whoever edits a file can also write a new digest.
The committed reference store has git for that.

A complete run without a seal was stored before runs were sealed: it is served with a one-line
warning, and ``fedlib migrate`` seals it after checking that its files agree.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

from fedlib.errors import FedlibError
from fedlib.store.files import write_json
from fedlib.store.paths import REFERENCE_FILES
from fedlib.store.provenance import ProvenanceWarning

DIGEST_FILE = "digest.json"
SEALED_FILES = REFERENCE_FILES  # config.json, meta.json, rounds.jsonl, summary.json
OPTIONAL_FILES = ("final.pt",)  # sealed when present; a metrics-only copy may leave it out
KEPT_WHILE_FINISHING = ("config.json", "rounds.jsonl")  # a finishing run rewrites its meta, model and summary
_UNSEALED_WARNED: set[Path] = set()


def file_digest(path: Path) -> str:
    """The SHA-256 of ``path``'s bytes, in hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def seal(folder: Path) -> None:
    """Write ``folder``'s digest.json over the sealed files it holds (call after summary.json)."""
    folder = Path(folder)
    names = [n for n in (*SEALED_FILES, *OPTIONAL_FILES) if (folder / n).exists()]
    write_json(folder / DIGEST_FILE, {"sha256": {name: file_digest(folder / name) for name in names}})


def is_sealed(folder: Path) -> bool:
    return (Path(folder) / DIGEST_FILE).exists()


def check_file(folder: Path, name: str) -> None:
    """Refuse (FedlibError, one line) a sealed run's file ``name`` that no longer matches its
    digest; nothing for an unsealed run or a file the seal does not cover. A sealed run without
    its summary.json (killed while finishing again) is checked on the files finishing never
    rewrites (:data:`KEPT_WHILE_FINISHING`): its metrics cannot be edited by deleting the summary."""
    if not (Path(folder) / "summary.json").exists() and name not in KEPT_WHILE_FINISHING:
        return
    problem = _mismatch(Path(folder), name, _digests(Path(folder)))
    if problem:
        raise FedlibError(f"stored run {Path(folder).name}: {problem}; restore the file or delete {folder} "
                          "to recompute the run")


def seal_problem(folder: Path) -> str | None:
    """Why ``folder``'s files do not match its seal (None when they do, or when it has none)."""
    if not (Path(folder) / "summary.json").exists():
        return None
    digests = _digests_or_problem(Path(folder))
    if isinstance(digests, str) or not digests:
        return digests or None
    uncovered = [name for name in SEALED_FILES if name not in digests]
    if uncovered:
        return f"its {DIGEST_FILE} does not cover {uncovered[0]}"
    return next(filter(None, (_mismatch(Path(folder), name, digests) for name in digests)), None)


def _mismatch(folder: Path, name: str, digests: dict[str, str]) -> str | None:
    """'its NAME does not match its digest (...)' when the sealed file differs; None when it matches,
    or the seal does not cover it."""
    expected = digests.get(name)
    if expected is None:
        return None
    path = folder / name
    if not path.exists():
        return None if name in OPTIONAL_FILES else f"its {name} is missing (sealed when the run finished)"
    if file_digest(path) != expected:
        return f"its {name} does not match its {DIGEST_FILE} (changed after the run finished)"
    return None


def warn_unsealed(folder: Path) -> None:
    """Once per folder: a complete run without digest.json cannot be checked for edits."""
    folder = Path(folder)
    if folder in _UNSEALED_WARNED:
        return
    _UNSEALED_WARNED.add(folder)
    warnings.warn(f"stored run {folder.name} has no {DIGEST_FILE} (stored before runs were sealed): an edit of its "
                  f"files cannot be noticed; `fedlib migrate` seals it", ProvenanceWarning, stacklevel=4)


def _digests(folder: Path) -> dict[str, str]:
    digests = _digests_or_problem(folder)
    if isinstance(digests, str):
        raise FedlibError(f"stored run {folder.name}: {digests}; delete {folder} to recompute the run")
    return digests


def _digests_or_problem(folder: Path) -> dict[str, str] | str:
    path = folder / DIGEST_FILE
    if not path.exists():
        return {}
    try:
        digests = json.loads(path.read_text())["sha256"]
    except (ValueError, KeyError, TypeError, OSError):
        return f"its {DIGEST_FILE} cannot be read"
    if not isinstance(digests, dict) or not all(isinstance(v, str) for v in digests.values()):
        return f"its {DIGEST_FILE} cannot be read"
    return digests
