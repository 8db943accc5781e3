"""The claim: the lock a training holds on its run folder, so that a folder has one writer at a time.

A process claims a run folder (``claim.json``, created with ``O_EXCL``, naming its host, pid and a
token) before it writes; a second process is refused with one line; a claim whose process is dead
(same host) or whose heartbeat is older than ``STALE_CLAIM_SECONDS`` (another host) is taken over.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from pathlib import Path

from fedlib.errors import FedlibError

# a claim's heartbeat (the claim file's modification time) is refreshed by a background thread every
# HEARTBEAT_SECONDS while its holder lives and its run makes progress (a checkpoint within
# HUNG_RUN_SECONDS); a claim from another host counts as abandoned when its heartbeat is older than
# STALE_CLAIM_SECONDS (on this host, when its process is gone)
HEARTBEAT_SECONDS = 60
STALE_CLAIM_SECONDS = 10 * 60
HUNG_RUN_SECONDS = 6 * 3600
CLAIM_FILE = "claim.json"


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


def is_live_claim(path: Path) -> bool:
    """Whether the claim file at ``path`` names a live holder (its run is being trained now)."""
    current = _read_claim(path)
    return bool(current) and not _abandoned(current)
