"""The results store: one folder per config hash.

    <results>/<hash>/config.json     the full RunConfig (location fields included, for the record)
    <results>/<hash>/rounds.jsonl    one JSON line of metrics per evaluated round
    <results>/<hash>/meta.json       fedlib version, code revision, environment, as the run started;
                                     ``resumes``: one entry per resume (revision, threads, host, ...)
    <results>/<hash>/checkpoint.pt   while the run trains: global model + algorithm state after the
                                     last finished round (the resume checkpoint), naming ...
    <results>/<hash>/clients/*.pt    ... one file per client holding that client's state (MOON's
                                     previous model, SCAFFOLD's control variate, FedCurv's Fisher)
    <results>/<hash>/final.pt        once the run is over: the final global model and the server's
                                     run-level state; checkpoint.pt and clients/ are then deleted
    <results>/<hash>/summary.json    written last: its presence means the run is complete
    <results>/<hash>/claim.json      while a process trains the run: its host, pid and heartbeat
    <results>/.superseded/<old>/     a run ``migrate_hashes`` set aside when it renamed folders after a
                                     change of the hash rule: the same computation as a run it kept

Every file is written to a temporary name and moved into place (``os.replace`` is atomic on one
file system), so a crash never leaves a half-written file that reads as complete. A checkpoint is
committed by replacing checkpoint.pt, after the client files it names are written; a client file
is rewritten only when that client's state changed (the round's participants), so a checkpoint
costs the model plus the round's clients, and a kill at any moment leaves the last committed
checkpoint whole plus at most one round's client files, which the next writer deletes. A run folder
has one writer at a time: a process claims it (``RunRecord.claim``) before it writes, a second
process is refused with one line, and a claim whose process is dead (same host) or whose
heartbeat is older than ``STALE_CLAIM_SECONDS`` (another host) is taken over. Checkpoints load
with ``weights_only=True``: a crafted checkpoint cannot run code.
"""

from __future__ import annotations

import datetime
import hashlib
import io
import json
import os
import pickle
import platform
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import torch
from torch.utils._pytree import tree_flatten

from fedlib.core.config import RunConfig, hash_with_unread_settings, unread_partition_defaults
from fedlib.errors import FedlibError, one_line

# a claim's heartbeat (the claim file's modification time) is refreshed by a background thread every
# HEARTBEAT_SECONDS while its holder lives and its run makes progress (a checkpoint within
# HUNG_RUN_SECONDS); a claim from another host counts as abandoned when its heartbeat is older than
# STALE_CLAIM_SECONDS (on this host, when its process is gone)
HEARTBEAT_SECONDS = 60
STALE_CLAIM_SECONDS = 10 * 60
HUNG_RUN_SECONDS = 6 * 3600
CLAIM_FILE = "claim.json"
CHECKPOINT_FILE = "checkpoint.pt"  # the resume checkpoint of a run in progress
CLIENTS_DIR = "clients"  # its per-client files
FINAL_FILE = "final.pt"  # what a finished run keeps: final global model + run-level server state
CLIENT_TABLE = "__client_table__"  # in checkpoint.pt's extras: where a per-client table sat

DEFAULT_RESULTS = "results"
# the committed, read-only store of finished full-scale runs (metrics only, no checkpoints); a run it
# holds is served before the working store's run of that hash (served_record)
REFERENCE_RESULTS = Path(__file__).resolve().parents[2] / "reference_results"
REFERENCE_FILES = ("config.json", "meta.json", "rounds.jsonl", "summary.json")
WRITE_REFERENCE_ENV = "FEDLIB_WRITE_REFERENCE"  # =1: let runs train into the reference store on purpose


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


def reference_record(cfg: RunConfig, results_dir: str | os.PathLike | None = None) -> "RunRecord | None":
    """The complete run of ``cfg`` in the reference store, if it holds one. When it does not, and
    it or the working store (``results_dir``) holds the run under its old hash, a one-line warning
    says to run ``fedlib migrate``."""
    root = reference_root()
    record = None if root is None else RunRecord(root / cfg.hash())
    if record is not None and record.complete:
        return record
    _hint_unmigrated(cfg, [results_root(results_dir or cfg.results_dir)] + ([root] if root is not None else []))
    return None


def is_stored(cfg: RunConfig, results_dir: str | os.PathLike | None = None) -> bool:
    """Whether a complete run of ``cfg`` is in the working store or the reference store."""
    return RunRecord(run_dir(cfg, results_dir)).complete or reference_record(cfg, results_dir) is not None


class ProvenanceWarning(RuntimeWarning):
    """A run's numbers may not be what its config alone says: it was resumed with other arithmetic
    or other code, or a working-store run of its hash holds other numbers than the reference run served."""


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


def same_folder(a: Path, b: Path) -> bool:
    """Whether two paths name one folder."""
    return Path(a).resolve() == Path(b).resolve()


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


def is_clean_revision(revision: str) -> bool:
    """Whether ``revision`` names a commit: not 'unknown' and without '+dirty' (local changes)."""
    return bool(revision) and revision != "unknown" and "+" not in revision


def trained_revisions(meta: dict) -> list[str]:
    """The code revisions a run trained with: the one it started with, then each resume's."""
    resumes = [r for r in meta.get("resumes") or [] if isinstance(r, dict)]
    return [str(x.get("code_revision", "unknown")) for x in [meta] + resumes]


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


# ------------------------------------------------------------------ checkpoint files
def _serialise(value: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def _load(path: Path, device: str | torch.device, checkpoint: Path) -> Any:
    """One checkpoint file, weights only, tensors on ``device``; one line naming ``checkpoint``
    (the file to delete) when it cannot be loaded safely."""
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError) as exc:
        reason = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        where = "" if path == checkpoint else f" in {path.parent.name}/{path.name}"
        raise FedlibError(f"checkpoint {checkpoint} cannot be loaded safely ({reason}{where}); delete it to "
                          "restart this run from round 0") from None


def is_client_table(value: Any) -> bool:
    """Whether ``value`` is per-client state: a non-empty dict keyed by client ids (ints) that
    holds tensors, such as MOON's previous local models or SCAFFOLD's control variates."""
    if not isinstance(value, dict) or not value:
        return False
    if not all(isinstance(k, int) and not isinstance(k, bool) for k in value):
        return False
    return any(isinstance(leaf, torch.Tensor) for leaf in tree_flatten(list(value.values()))[0])


def split_client_tables(extras: dict) -> tuple[dict, list[tuple[str, dict]]]:
    """``extras`` with every client table (in dicts at any depth) replaced by a marker holding its
    index and its keys in order, and the (path, table) pairs in index order."""
    tables: list[tuple[str, dict]] = []

    def walk(value: Any, path: str) -> Any:
        if is_client_table(value):
            tables.append((path, value))
            return {CLIENT_TABLE: len(tables) - 1, "keys": list(value)}
        if isinstance(value, dict):
            return {k: walk(v, f"{path}/{k}" if path else str(k)) for k, v in value.items()}
        return value

    return walk(extras, ""), tables


def join_client_tables(skeleton: dict, bundles: dict[int, dict] | None) -> dict:
    """The inverse of :func:`split_client_tables`: each marker becomes its table again (keys in
    their stored order) from the per-client ``bundles``; with ``bundles=None``, an empty table."""
    def walk(value: Any) -> Any:
        if isinstance(value, dict) and CLIENT_TABLE in value:
            index = value[CLIENT_TABLE]
            return {} if bundles is None else {k: bundles[k][index] for k in value["keys"]}
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    return walk(skeleton)


def client_bundles(tables: list[tuple[str, dict]]) -> dict[int, dict[int, Any]]:
    """Per client: its entry in every table that has one, keyed by the table's index."""
    bundles: dict[int, dict[int, Any]] = {}
    for index, (_, table) in enumerate(tables):
        for client, entry in table.items():
            bundles.setdefault(client, {})[index] = entry
    return bundles


def _fingerprint(value: Any) -> tuple:
    """What identifies ``value``'s content without reading it: its structure, each tensor's
    identity and version counter (bumped by every in-place change), each other leaf's value.
    The tensors are held, so their identities cannot be reused while the fingerprint lives."""
    leaves, spec = tree_flatten(value)
    keys = tuple((id(x), x._version) if isinstance(x, torch.Tensor) else ("value", x) for x in leaves)
    return spec, keys, leaves


def _same_fingerprint(a: tuple, b: tuple) -> bool:
    try:
        return a[0] == b[0] and a[1] == b[1]
    except (RuntimeError, TypeError, ValueError):  # a leaf whose == is not a plain bool
        return False


def disk_bytes(folder: Path) -> int:
    """Bytes the files under ``folder`` occupy on disk (allocated blocks, as ``du`` counts)."""
    total = 0
    for path in Path(folder).rglob("*"):
        try:
            info = path.lstat()
        except OSError:  # deleted while we walk
            continue
        if stat.S_ISREG(info.st_mode):
            total += info.st_blocks * 512 if hasattr(info, "st_blocks") else info.st_size
    return total


def human_bytes(count: int) -> str:
    """``count`` bytes in binary units: '512 B', '6.4 MiB', '1.3 GiB'."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    value, power = float(count), 0
    while value >= 1024 and power < len(units) - 1:
        value, power = value / 1024, power + 1
    return f"{count} B" if power == 0 else f"{value:.1f} {units[power]}"


# ------------------------------------------------------------------ the run folder
class RunRecord:
    """Read and write access to one run's folder."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        # client -> (file name, fingerprint) of the client files of the checkpoint this record
        # last wrote or read: unchanged clients are not written again
        self._saved_clients: dict[int, tuple[str, tuple]] = {}

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

    # -------------------------------------------------------------- checkpoints
    def write_checkpoint(self, state: dict) -> None:
        """Save the resume checkpoint ``state`` (round, model, extras, ...).

        The client tables of ``state["extras"]`` go to one file per client under clients/, written
        only for clients whose state changed since this record's last write or read; checkpoint.pt,
        replaced last, commits them; the files it no longer names are deleted after it."""
        skeleton, tables = split_client_tables(state.get("extras", {}))
        staged = {k: self._client_file(k, bundle, state.get("round", 0))
                  for k, bundle in client_bundles(tables).items()}
        files = {k: name for k, (name, _) in staged.items()}
        write_atomic(self.folder / CHECKPOINT_FILE, _serialise({**state, "extras": skeleton, "client_files": files}))
        replaced = {name for name, _ in self._saved_clients.values()} - set(files.values())
        self._saved_clients = {k: (name, fingerprint) for k, (name, fingerprint) in staged.items()}
        for name in replaced:
            (self.folder / CLIENTS_DIR / name).unlink(missing_ok=True)

    def _client_file(self, client: int, bundle: dict, round_index: int) -> tuple[str, tuple]:
        """The file holding ``bundle`` (client ``client``'s entries): the one saved before when
        the state is unchanged, else a new file with a name no committed checkpoint uses."""
        fingerprint = _fingerprint(bundle)
        saved = self._saved_clients.get(client)
        if saved is not None and _same_fingerprint(saved[1], fingerprint):
            return saved
        name = f"{client}-r{round_index}-{uuid.uuid4().hex[:8]}.pt"
        write_atomic(self.folder / CLIENTS_DIR / name, _serialise(bundle))
        return name, fingerprint

    def read_checkpoint(self, device: str | torch.device = "cpu") -> dict | None:
        """The resume checkpoint, client tables joined back, tensors on ``device``; None when the
        run has none (never started, or finished: see :meth:`read_final`).

        Loaded with ``weights_only=True``: a checkpoint holding any other object (a crafted
        pickle that would run code), a truncated file or a missing client file is refused with
        one line."""
        path = self.folder / CHECKPOINT_FILE
        if not path.exists():
            return None
        state = _load(path, device, path)
        files = state.pop("client_files", None)
        if files is None:  # written before client files existed: the tables are inline
            return state
        bundles = {k: _load(self.folder / CLIENTS_DIR / name, device, path) for k, name in files.items()}
        state["extras"] = join_client_tables(state["extras"], bundles)
        self._saved_clients = {k: (name, _fingerprint(bundles[k])) for k, name in files.items()}
        return state

    def write_final(self, state: dict) -> None:
        """Save what a finished run keeps: ``state`` with its client tables emptied (their paths
        listed under ``dropped_client_state``), a file about the size of the model."""
        skeleton, tables = split_client_tables(state.get("extras", {}))
        dropped = [path for path, _ in tables]
        write_atomic(self.folder / FINAL_FILE, _serialise({**state, "extras": join_client_tables(skeleton, None),
                                                           "dropped_client_state": dropped}))

    def read_final(self, device: str | torch.device = "cpu") -> dict | None:
        """The finished run's final state (see :meth:`write_final`), or None."""
        path = self.folder / FINAL_FILE
        return _load(path, device, path) if path.exists() else None

    def read_latest(self, device: str | torch.device = "cpu") -> dict | None:
        """The final state of a finished run, else the resume checkpoint (runs stored before
        final.pt existed keep only that), else None."""
        return self.read_final(device) or self.read_checkpoint(device)

    def remove_resume_checkpoint(self) -> None:
        """Delete checkpoint.pt, then its client files (call once final.pt is written)."""
        (self.folder / CHECKPOINT_FILE).unlink(missing_ok=True)
        shutil.rmtree(self.folder / CLIENTS_DIR, ignore_errors=True)
        self._saved_clients = {}

    def discard_partial_writes(self) -> None:
        """Delete what a writer killed mid-write left behind: temporary files, and client files the
        committed checkpoint does not name. Only the claim's holder may call this, after reading
        the checkpoint (whose client files it keeps)."""
        keep = {name for name, _ in self._saved_clients.values()} if (self.folder / CHECKPOINT_FILE).exists() else set()
        clients = self.folder / CLIENTS_DIR
        partial = [path for path in self.folder.glob(".*.tmp") if not path.name.startswith(f".{CLAIM_FILE}.")]
        for path in partial + (list(clients.iterdir()) if clients.is_dir() else []):
            if path.name not in keep:
                path.unlink(missing_ok=True)
        if clients.is_dir() and not any(clients.iterdir()):
            clients.rmdir()

    @property
    def disk_bytes(self) -> int:
        """Bytes the run folder occupies on disk."""
        return disk_bytes(self.folder)

    def write_summary(self, summary: dict) -> None:
        write_json(self.folder / "summary.json", summary)

    def read_summary(self) -> dict:
        return read_json(self.folder / "summary.json")

    def read_config(self) -> RunConfig:
        return RunConfig.from_dict(read_json(self.folder / "config.json"))

    def read_meta(self) -> dict:
        path = self.folder / "meta.json"
        return read_json(path) if path.exists() else {}

    # -------------------------------------------------------------- read helpers for people
    def rounds_logged(self) -> int:
        """How many rounds rounds.jsonl holds (0 when it is missing), without parsing them."""
        path = self.folder / "rounds.jsonl"
        if not path.exists():
            return 0
        return sum(1 for line in path.read_bytes().splitlines() if line.strip())

    def finished_at(self) -> float | None:
        """When the run was completed (summary.json's modification time, seconds since the
        epoch), or None for a run that is not complete."""
        path = self.folder / "summary.json"
        return path.stat().st_mtime if path.exists() else None

    def last_modified(self) -> float:
        """The latest modification time of the run's metric files (of its folder when it has none)."""
        times = [path.stat().st_mtime for path in (self.folder / name for name in REFERENCE_FILES) if path.exists()]
        return max(times) if times else self.folder.stat().st_mtime

    def saved_round(self) -> int | None:
        """Rounds done in the last committed state (resume checkpoint, else final state), read
        memory-mapped so no tensor is loaded; None when neither exists or cannot be read."""
        for name in (CHECKPOINT_FILE, FINAL_FILE):
            path = self.folder / name
            if not path.exists():
                continue
            try:
                state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError):
                return None
            return state.get("round") if isinstance(state, dict) else None
        return None

    def in_progress(self) -> bool:
        """Whether a live process holds the run's claim (it is training now)."""
        current = _read_claim(self.folder / CLAIM_FILE)
        return bool(current) and not _abandoned(current)

    # -------------------------------------------------------------- one writer at a time
    @contextmanager
    def claim(self) -> Iterator["Claim"]:
        """Hold this run folder for writing; refuse (FedlibError) while another live process holds
        it, or when it lies in the read-only reference store (see :func:`check_writable`)."""
        check_writable(self.folder.parent)
        claim = Claim(self.folder / CLAIM_FILE)
        claim.acquire()
        try:
            yield claim
        finally:
            claim.release()


def check_writable(root: Path) -> None:
    """Refuse (one line) to train into the reference store, the committed read-only one (it holds
    metrics only, copied there by :func:`publish`), unless ``$FEDLIB_WRITE_REFERENCE=1`` asks for it."""
    if os.environ.get(WRITE_REFERENCE_ENV, "") not in ("", "0"):
        return
    for reference in {reference_root(), REFERENCE_RESULTS} - {None}:
        if Path(root).exists() and Path(reference).exists() and same_folder(root, reference):
            raise FedlibError(f"{root} is the read-only reference store; train into another results store (the "
                              f"default ./results) and publish finished runs, or set {WRITE_REFERENCE_ENV}=1 to write "
                              "there on purpose")


class ClaimedError(FedlibError):
    """The run folder is claimed by another live process (it is training that run now)."""


class Claim:
    """An exclusive claim on a run folder: a file created with O_EXCL, naming its holder."""

    def __init__(self, path: Path):
        self.path = path
        self.token = uuid.uuid4().hex
        self.holder = {"host": socket.gethostname(), "pid": os.getpid(), "token": self.token}
        self._lock = threading.Lock()  # one heartbeat at a time within this process
        self._stop = threading.Event()
        self._beating: threading.Thread | None = None
        self._progress = time.time()  # the last checkpoint's heartbeat (or the claim itself)

    def acquire(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise FedlibError(f"cannot write the results store at {self.path.parent}: "
                              f"{exc.strerror or exc}") from None
        for _ in range(3):
            if self._create():
                self._start_beating()
                return
            current = _read_claim(self.path)
            if current is not None and not _abandoned(current):
                raise ClaimedError(
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
        """The run made progress (a checkpoint): refresh the claim; FedlibError when another process
        has taken it over."""
        self._touch()
        self._progress = time.time()

    def _touch(self) -> None:
        """Set the claim file's modification time to now. The file is never rewritten, so a beat that
        comes late, after another process took the claim over, cannot put this holder's name back."""
        with self._lock:
            if not self.held():
                raise FedlibError(f"lost the claim on run folder {self.path.parent} to another process; "
                                  "stopping without writing")
            os.utime(self.path)

    def _start_beating(self) -> None:
        """Keep the claim fresh from a daemon thread, so that a live holder's claim never looks stale
        to other hosts however long a round takes (the thread dies with the process)."""
        self._beating = threading.Thread(target=self._beat_until_released, name=f"claim {self.path.parent.name}",
                                         daemon=True)
        self._beating.start()

    def _beat_until_released(self) -> None:
        """Beat until released, taken over, or the run hangs (no checkpoint for HUNG_RUN_SECONDS: its
        claim then goes stale and another worker may take the run over); a failed beat (a full disk, a
        shared filesystem away for a moment) is tried again at the next one."""
        while not self._stop.wait(HEARTBEAT_SECONDS):
            if time.time() - self._progress > HUNG_RUN_SECONDS:
                return
            try:
                self._touch()
            except FedlibError:
                return  # taken over: the writer's next checkpoint stops it
            except OSError:
                continue

    def release(self) -> None:
        self._stop.set()
        if self._beating is not None:
            self._beating.join()
        with self._lock:
            if self.held():
                self.path.unlink(missing_ok=True)


def _read_claim(path: Path) -> dict | None:
    """The claim's holder; its ``heartbeat`` is the later of the time written at claiming and the
    file's modification time (which the holder's beats refresh)."""
    try:
        value = json.loads(path.read_text())
        touched = path.stat().st_mtime
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, UnicodeDecodeError, OSError):
        return {}  # unreadable: treated as abandoned
    if not isinstance(value, dict):
        return {}
    if isinstance(value.get("heartbeat"), (int, float)):
        value["heartbeat"] = max(value["heartbeat"], touched)
    return value


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


def inconsistency(expected_hash: str, stored: RunConfig, summary: Any, rounds: list[dict]) -> str | None:
    """Why a complete run's files disagree with each other or with the hash it is kept under (None
    when they agree): ``stored`` is its config.json, ``summary`` its summary.json, ``rounds`` its
    rounds.jsonl. A run that did not diverge must hold all of its config's rounds: a shorter one is
    refused, never served as the config's result (nor retrained over its summary). The engine
    checks this before serving a run, ``fedlib list``/``show``/``export`` before calling it done."""
    if stored.hash() != expected_hash:
        return f"its config.json hashes to {stored.hash()}, not {expected_hash}"
    if not isinstance(summary, dict) or summary.get("rounds_run") != len(rounds):
        counted = summary.get("rounds_run") if isinstance(summary, dict) else "?"
        return f"its summary counts {counted} rounds but rounds.jsonl holds {len(rounds)}"
    problem = rounds_problem(rounds)
    if problem:
        return problem
    if len(rounds) > stored.rounds:
        return f"it holds {len(rounds)} rounds but its config {stored.rounds}"
    if len(rounds) < stored.rounds and not summary.get("diverged"):
        return f"it holds {len(rounds)} of its config's {stored.rounds} rounds and did not diverge"
    return None


def rounds_problem(rounds: list) -> str | None:
    """Why a rounds.jsonl log is not rounds 0, 1, 2, ... in order (None when it is)."""
    if not all(isinstance(r, dict) for r in rounds) or [r.get("round") for r in rounds] != list(range(len(rounds))):
        return "rounds.jsonl does not hold rounds 0, 1, 2, ... in order"
    return None


def list_runs(results_dir: str | os.PathLike | None = None, complete_only: bool = True) -> list[RunRecord]:
    """Every run folder in the store (complete ones only, by default)."""
    root = results_root(results_dir)
    if not root.exists():
        return []
    records = [RunRecord(p) for p in sorted(root.iterdir()) if (p / "config.json").exists()]
    return [r for r in records if r.complete or not complete_only]


# ------------------------------------------------------------------ hash migration
# Partition settings a scheme does not read left the config hash (RunConfig.hashed_fields): a run
# stored with such a setting off its default sits under its old hash until migrate_hashes renames it.
ASIDE_DIR = ".superseded"  # where migrate_hashes moves a run that another run of its new hash replaces
_HINTED: set[Path] = set()


def _hint_unmigrated(cfg: RunConfig, roots: list[Path]) -> None:
    """Warn once per folder (one line) when a store holds ``cfg``'s run under its old hash."""
    unread = unread_partition_defaults(cfg.partition)
    if all(getattr(cfg, name) == value for name, value in unread.items()):
        return  # both hashes agree
    old = hash_with_unread_settings(cfg)
    for root in roots:
        folder = Path(root) / old
        if folder not in _HINTED and (folder / "config.json").exists():
            _HINTED.add(folder)
            warnings.warn(f"{folder} holds run {cfg.hash()} under its old config hash; rename it with: "
                          f"fedlib migrate --results {root}", UserWarning, stacklevel=3)


@dataclass
class Migration:
    """What :func:`migrate_hashes` did to one store (with ``dry_run``: would do)."""

    root: Path
    renamed: list[tuple[str, str]] = field(default_factory=list)  # (old hash, new hash)
    set_aside: list[tuple[str, str]] = field(default_factory=list)  # (folder moved to ASIDE_DIR, hash it lost)
    left: list[tuple[str, str]] = field(default_factory=list)  # (folders not touched, why)

    def lines(self) -> list[str]:
        """One line per change or refusal, then a count."""
        lines = [f"renamed {old} -> {new}" for old, new in self.renamed]
        lines += [f"moved {name} to {ASIDE_DIR}/{name}: the same computation as run {new}, which is kept (finished, "
                  "or more rounds)" for name, new in self.set_aside]
        lines += [f"left {name} alone: {why}" for name, why in self.left]
        return lines + [f"{self.root}: {len(self.renamed)} renamed, {len(self.set_aside)} set aside, "
                        f"{len(self.left)} left alone"]


def migrate_hashes(root: str | os.PathLike, *, dry_run: bool = False) -> Migration:
    """Rename every run folder of ``root`` named by its old hash (``config.hash_with_unread_settings``)
    to its hash now, and set that hash in its summary.json, the only file of a run folder that
    records it (config.json, meta.json, rounds.jsonl and the checkpoints do not).

    Runs that now share a hash trained identically by construction: the complete one with the
    most rounds keeps it (the one already there on a tie) and the others move to ``ASIDE_DIR``,
    reported, never deleted. Left alone, and reported: a folder named by neither hash of its
    config (a stale run of an older results version or method revision) and a group some live
    process is writing. Running it again changes nothing; ``dry_run`` only reports.
    """
    migration, groups = Migration(Path(root)), {}
    for record in list_runs(root, complete_only=False):
        try:
            cfg = record.read_config()
        except (ValueError, TypeError, OSError) as exc:  # FedlibError is a ValueError
            migration.left.append((record.folder.name, f"its config.json cannot be read ({one_line(exc)})"))
            continue
        new, old = cfg.hash(), hash_with_unread_settings(cfg)
        if record.folder.name in (new, old):
            groups.setdefault(new, []).append((record, old))
        else:
            migration.left.append((record.folder.name, f"its config hashes to {new}, not to its name "
                                                       "(a stale run, or another hash rule changed)"))
    for new, members in groups.items():
        _migrate_group(Path(root), new, members, migration, dry_run)
    return migration


def _migrate_group(root: Path, new: str, members: list[tuple["RunRecord", str]], migration: Migration,
                   dry_run: bool) -> None:
    """Give hash ``new`` to the best of ``members`` (record, old hash) of the folders that now hash
    to it: the complete one with the most rounds, on a tie the one already named ``new``; move the
    others to ASIDE_DIR."""
    if [record.folder.name for record, _ in members] == [new]:
        if not dry_run:
            _set_summary_hash(members[0][0].folder, members[0][1], new)
        return
    keep, old = max(members, key=lambda m: (m[0].complete, m[0].rounds_logged(), m[0].folder.name == new))
    losers = [record.folder for record, _ in members if record is not keep]
    names = ", ".join(record.folder.name for record, _ in members)
    if any(record.in_progress() for record, _ in members):
        migration.left.append((names, "a live process is writing it; migrate again when it is done"))
    elif any((root / ASIDE_DIR / folder.name).exists() for folder in losers):
        migration.left.append((names, f"{ASIDE_DIR}/ already holds a folder of that name; compare the two and "
                                      "remove one by hand"))
    else:
        migration.set_aside += [(folder.name, new) for folder in losers]
        if keep.folder.name != new:
            migration.renamed.append((keep.folder.name, new))
        if not dry_run:
            _move(root, keep.folder, losers, old, new)


def _move(root: Path, keep: Path, losers: list[Path], old: str, new: str) -> None:
    """Move ``losers`` aside first (one may hold the name ``new``), then ``keep`` to ``new``."""
    for folder in losers:
        (root / ASIDE_DIR).mkdir(exist_ok=True)
        os.rename(folder, root / ASIDE_DIR / folder.name)
    if keep.name != new:
        os.rename(keep, root / new)
    _set_summary_hash(root / new, old, new)


def _set_summary_hash(folder: Path, old: str, new: str) -> None:
    """Rewrite summary.json's ``config_hash`` from ``old`` to ``new`` (nothing when it holds another)."""
    try:
        summary = read_json(folder / "summary.json")
    except (OSError, ValueError):  # no summary yet (an unfinished run), or an unreadable one
        return
    if old != new and isinstance(summary, dict) and summary.get("config_hash") == old:
        write_json(folder / "summary.json", {**summary, "config_hash": new})


# ------------------------------------------------------------------ provenance
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
