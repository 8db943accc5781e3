"""Provenance: what code and environment a run trained with. The code revision (the git commit,
'+dirty' with local changes; a copy without git reads the stamp its checkout wrote), the software
and hardware, one record per resume in meta.json, and the warning a run gets when its numbers may
not be what its config alone says."""

from __future__ import annotations

import datetime
import hashlib
import platform
import socket
import subprocess
import sys
from pathlib import Path

import torch

from fedlib.errors import FedlibError
from fedlib.store.files import read_json, write_json


class ProvenanceWarning(RuntimeWarning):
    """A run's numbers may not be what its config alone says: it was resumed with other arithmetic
    or other code, or a working-store run of its hash holds other numbers than the reference run served."""



def is_clean_revision(revision: str) -> bool:
    """Whether ``revision`` names a commit: not 'unknown' and without '+dirty' (local changes)."""
    return bool(revision) and revision != "unknown" and "+" not in revision


def trained_revisions(meta: dict) -> list[str]:
    """The code revisions a run trained with: the one it started with, then each resume's."""
    resumes = [r for r in meta.get("resumes") or [] if isinstance(r, dict)]
    return [str(x.get("code_revision", "unknown")) for x in [meta] + resumes]



def code_revision() -> str:
    """The git commit of the fedlib checkout (with '+dirty' when it has local changes).

    A copy without git, or whose git is stale (a GPU machine gets the files), reads the commit from
    ``.carry/code_revision.json``, written by ``code_revision_stamp`` in the checkout it was copied
    from, and checks it against the files: '+dirty' when fedlib/ differs from what was stamped."""
    repo = Path(__file__).resolve().parents[2]
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                             text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "fedlib"], cwd=repo,
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        rev, dirty = "", ""
    stamped = _stamped_revision(repo)
    if (not rev or dirty) and is_clean_revision(stamped):  # a copy whose git is stale or missing
        return stamped
    return (rev or "unknown") + ("+dirty" if dirty else "")


STAMP_FILE = Path(".carry") / "code_revision.json"


def fedlib_digest(repo: Path) -> str:
    """SHA-256 over the names and bytes of every file under ``repo``/fedlib (caches left out)."""
    digest = hashlib.sha256()
    for path in sorted((repo / "fedlib").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            digest.update(path.relative_to(repo).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def code_revision_stamp(repo: Path | None = None) -> Path:
    """Write the commit and the digest of fedlib/ to ``.carry/code_revision.json``, for a copy of this
    checkout that travels without git; refused while fedlib/ has uncommitted changes."""
    repo = repo or Path(__file__).resolve().parents[2]
    revision = code_revision()
    if not is_clean_revision(revision):
        raise FedlibError(f"fedlib/ is at code revision {revision}: commit it before stamping a copy")
    write_json(repo / STAMP_FILE, {"commit": revision, "fedlib_sha256": fedlib_digest(repo)})
    return repo / STAMP_FILE


def _stamped_revision(repo: Path) -> str:
    """The stamped commit of a copy without git, '+dirty' when its fedlib/ is not what was stamped."""
    try:
        stamp = read_json(repo / STAMP_FILE)
        commit = str(stamp["commit"])
    except (OSError, ValueError, KeyError, TypeError):
        return "unknown"
    return commit if stamp.get("fedlib_sha256") == fedlib_digest(repo) else commit + "+dirty"


def resume_entry(rounds_done: int, backend: str, device: str) -> dict:
    """What meta.json's ``resumes`` list records of one resume after ``rounds_done`` rounds: the
    code revision, backend, device, torch threads and version, host and date it went on with."""
    return {"rounds_done": rounds_done, "code_revision": code_revision(), "backend": backend, "device": device,
            "cpu_threads": torch.get_num_threads(), "torch": torch.__version__, "host": socket.gethostname(),
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it ('AMD EPYC'), else the platform's processor."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def environment() -> dict:
    """The software and hardware a run used."""
    import numpy

    env = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "cpu_threads": torch.get_num_threads(),
        "cpu": cpu_model(),
        "cuda": torch.version.cuda,
    }
    try:
        import torchvision

        env["torchvision"] = torchvision.__version__
    except ImportError:  # pragma: no cover - torchvision is a dependency
        pass
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
    return env
