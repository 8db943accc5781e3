"""The results store: one folder per config hash.

    <results>/<hash>/config.json     the full RunConfig (location fields included, for the record)
    <results>/<hash>/rounds.jsonl    one JSON line of metrics per evaluated round
    <results>/<hash>/checkpoint.pt   global model + algorithm state after the last finished round
    <results>/<hash>/meta.json       fedlib version, code revision, environment, timings
    <results>/<hash>/summary.json    written last: its presence means the run is complete
    <results>/<hash>/claim.json      while a process trains the run: its host, pid and heartbeat

Every file is written to a temporary name and moved into place (``os.replace`` is atomic on one
file system), so a crash never leaves a half-written file that reads as complete. A run folder
has one writer at a time: a process claims it (``RunRecord.claim``) before it writes, a second
process is refused with one line, and a claim whose process is dead (same host) or whose
heartbeat is older than ``STALE_CLAIM_SECONDS`` (another host) is taken over. Checkpoints load
with ``weights_only=True``: a crafted checkpoint cannot run code.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import platform
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import torch

from fedlib.config import RunConfig
from fedlib.errors import FedlibError

# a claim from another host counts as abandoned when its heartbeat (refreshed at every
# checkpoint) is older than this
STALE_CLAIM_SECONDS = 6 * 3600
CLAIM_FILE = "claim.json"

DEFAULT_RESULTS = "results"
# the committed, read-only store of finished full-scale runs (metrics only, no checkpoints)
REFERENCE_RESULTS = Path(__file__).resolve().parent.parent / "reference_results"
REFERENCE_FILES = ("config.json", "meta.json", "rounds.jsonl", "summary.json")


def results_root(results_dir: str | os.PathLike | None = None) -> Path:
    """Where results live: the argument, else $FEDLIB_RESULTS, else ./results."""
    return Path(results_dir or os.environ.get("FEDLIB_RESULTS") or DEFAULT_RESULTS)


def run_dir(cfg: RunConfig, results_dir: str | os.PathLike | None = None) -> Path:
    """The folder that holds (or will hold) the results of ``cfg``."""
    return results_root(results_dir or cfg.results_dir) / cfg.hash()


def reference_root() -> Path | None:
    """The read-only reference store ($FEDLIB_REFERENCE, else reference_results/ of this checkout;
    ``FEDLIB_REFERENCE=off`` disables it)."""
    value = os.environ.get("FEDLIB_REFERENCE")
    if value == "off":
        return None
    return Path(value) if value else REFERENCE_RESULTS


def reference_record(cfg: RunConfig) -> "RunRecord | None":
    """The complete run of ``cfg`` in the reference store, if it holds one."""
    root = reference_root()
    if root is None:
        return None
    record = RunRecord(root / cfg.hash())
    return record if record.complete else None


def is_stored(cfg: RunConfig, results_dir: str | os.PathLike | None = None) -> bool:
    """Whether a complete run of ``cfg`` is in the working store or the reference store."""
    return RunRecord(run_dir(cfg, results_dir)).complete or reference_record(cfg) is not None


def publish(record: "RunRecord", root: str | os.PathLike | None = None) -> Path:
    """Copy a complete run's metrics (config, meta, rounds, summary; no checkpoint) into the
    reference store; returns its folder there."""
    if not record.complete:
        raise FedlibError(f"run {record.folder} is not complete: only finished runs are published")
    target = Path(root or reference_root() or REFERENCE_RESULTS) / record.folder.name
    for name in REFERENCE_FILES:
        source = record.folder / name
        if source.exists():
            write_atomic(target / name, source.read_bytes())
    return target


# ------------------------------------------------------------------ atomic writes
def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so readers see either the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, value: Any) -> None:
    write_atomic(path, (json.dumps(value, indent=2, sort_keys=True, default=_jsonable) + "\n").encode())


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def _jsonable(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


# ------------------------------------------------------------------ the run folder
class RunRecord:
    """Read and write access to one run's folder."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    @property
    def complete(self) -> bool:
        return (self.folder / "summary.json").exists()

    def write_config(self, cfg: RunConfig) -> None:
        write_json(self.folder / "config.json", cfg.to_dict())

    def write_meta(self, meta: dict) -> None:
        write_json(self.folder / "meta.json", meta)

    def write_rounds(self, rounds: list[dict]) -> None:
        """Rewrite the per-round log in full (it is small; rewriting keeps it consistent)."""
        text = "".join(json.dumps(r, sort_keys=True, default=_jsonable) + "\n" for r in rounds)
        write_atomic(self.folder / "rounds.jsonl", text.encode())

    def read_rounds(self) -> list[dict]:
        path = self.folder / "rounds.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def write_checkpoint(self, state: dict) -> None:
        buffer = io.BytesIO()
        torch.save(state, buffer)
        write_atomic(self.folder / "checkpoint.pt", buffer.getvalue())

    def read_checkpoint(self) -> dict | None:
        """The last checkpoint (tensors, numbers, strings and containers only), or None.

        Loaded with ``weights_only=True``: a checkpoint holding any other object (a crafted
        pickle that would run code) or a truncated file is refused with one line."""
        path = self.folder / "checkpoint.pt"
        if not path.exists():
            return None
        try:
            return torch.load(path, map_location="cpu", weights_only=True)
        except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError) as exc:
            reason = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
            raise FedlibError(f"checkpoint {path} cannot be loaded safely ({reason}); delete it to "
                              "restart this run from round 0") from None

    def write_summary(self, summary: dict) -> None:
        write_json(self.folder / "summary.json", summary)

    def read_summary(self) -> dict:
        return read_json(self.folder / "summary.json")

    def read_config(self) -> RunConfig:
        return RunConfig.from_dict(read_json(self.folder / "config.json"))

    def read_meta(self) -> dict:
        path = self.folder / "meta.json"
        return read_json(path) if path.exists() else {}

    # -------------------------------------------------------------- one writer at a time
    @contextmanager
    def claim(self) -> Iterator["Claim"]:
        """Hold this run folder for writing; refuse (FedlibError) while another live process holds it."""
        claim = Claim(self.folder / CLAIM_FILE)
        claim.acquire()
        try:
            yield claim
        finally:
            claim.release()


class Claim:
    """An exclusive claim on a run folder: a file created with O_EXCL, naming its holder."""

    def __init__(self, path: Path):
        self.path = path
        self.token = uuid.uuid4().hex
        self.holder = {"host": socket.gethostname(), "pid": os.getpid(), "token": self.token}

    def acquire(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise FedlibError(f"cannot write the results store at {self.path.parent}: "
                              f"{exc.strerror or exc}") from None
        for _ in range(3):
            if self._create():
                return
            current = _read_claim(self.path)
            if current is not None and not _abandoned(current):
                raise FedlibError(
                    f"run {self.path.parent.name} is being written by pid {current.get('pid')} on "
                    f"{current.get('host')} (claimed {_age(current)} ago); wait for it, or delete "
                    f"{self.path} if that process is gone")
            if _read_claim(self.path) == current:  # still the abandoned claim: take it over
                self.path.unlink(missing_ok=True)
        raise FedlibError(f"could not claim run folder {self.path.parent}: other processes keep claiming it")

    def _create(self) -> bool:
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as handle:
            json.dump({**self.holder, "heartbeat": time.time()}, handle)
        return True

    def held(self) -> bool:
        """Whether this process still holds the claim (nobody took it over)."""
        current = _read_claim(self.path)
        return current is not None and current.get("token") == self.token

    def heartbeat(self) -> None:
        """Refresh the claim's time stamp; FedlibError when another process has taken it over."""
        if not self.held():
            raise FedlibError(f"lost the claim on run folder {self.path.parent} to another process; "
                              "stopping without writing")
        write_json(self.path, {**self.holder, "heartbeat": time.time()})

    def release(self) -> None:
        if self.held():
            self.path.unlink(missing_ok=True)


def _read_claim(path: Path) -> dict | None:
    try:
        value = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, UnicodeDecodeError, OSError):
        return {}  # unreadable: treated as abandoned
    return value if isinstance(value, dict) else {}


def _abandoned(claim: dict) -> bool:
    """A claim whose holder is dead (this host) or silent for too long (another host)."""
    pid, host, beat = claim.get("pid"), claim.get("host"), claim.get("heartbeat")
    if not isinstance(pid, int) or not isinstance(beat, (int, float)):
        return True
    if host == socket.gethostname():
        return not _alive(pid)
    return time.time() - beat > STALE_CLAIM_SECONDS


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _age(claim: dict) -> str:
    beat = claim.get("heartbeat")
    return f"{time.time() - beat:.0f} s" if isinstance(beat, (int, float)) else "an unknown time"


def list_runs(results_dir: str | os.PathLike | None = None, complete_only: bool = True) -> list[RunRecord]:
    """Every run folder in the store (complete ones only, by default)."""
    root = results_root(results_dir)
    if not root.exists():
        return []
    records = [RunRecord(p) for p in sorted(root.iterdir()) if (p / "config.json").exists()]
    return [r for r in records if r.complete or not complete_only]


# ------------------------------------------------------------------ provenance
def code_revision() -> str:
    """The git commit of the fedlib checkout (with '+dirty' when it has local changes)."""
    repo = Path(__file__).resolve().parent.parent
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                             text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "fedlib"], cwd=repo,
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (rev or "unknown") + ("+dirty" if dirty else "")


def environment() -> dict:
    """The software and hardware a run used."""
    import numpy

    env = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "cpu_threads": torch.get_num_threads(),
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
