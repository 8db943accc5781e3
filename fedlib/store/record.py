"""RunRecord: read and write access to one run's folder (config, meta, round log, checkpoints,
summary), and the run folders of a store.

A checkpoint is committed by replacing checkpoint.pt, after the client files it names are written;
a client file is rewritten only when that client's state changed (the round's participants), so a
checkpoint costs the model plus the round's clients, and a kill at any moment leaves the last
committed checkpoint whole plus at most one round's client files, which the next writer deletes.
Checkpoints load with ``weights_only=True``: a crafted checkpoint cannot run code.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import torch

from fedlib.core.config import RunConfig
from fedlib.errors import FedlibError, one_line
from fedlib.store.claim import CLAIM_FILE, Claim, is_live_claim
from fedlib.store.client_tables import (client_bundles, join_client_tables, same_fingerprint, split_client_tables,
                                             state_fingerprint)
from fedlib.store.digest import check_file, seal
from fedlib.store.files import disk_bytes, jsonable, read_json, write_atomic, write_json
from fedlib.store.paths import REFERENCE_FILES, check_writable, results_root

CHECKPOINT_FILE = "checkpoint.pt"  # the resume checkpoint of a run in progress
CLIENTS_DIR = "clients"  # its per-client files
FINAL_FILE = "final.pt"  # what a finished run keeps: final global model + run-level server state
MODEL_READS_ENV = "FEDLIB_MODEL_READS"  # a file: RunRecord.note_model_read appends each run whose model is analysed


def _serialise(value: Any) -> bytes:
    """``value`` as the bytes ``torch.save`` writes."""
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def _load(path: Path, device: str | torch.device, checkpoint: Path) -> Any:
    """One checkpoint file, weights only, tensors on ``device``; one line naming ``checkpoint``
    (the file to delete) when it cannot be loaded safely."""
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError) as exc:
        reason = one_line(exc, 160, kind=False)
        where = "" if path == checkpoint else f" in {path.parent.name}/{path.name}"
        raise FedlibError(f"checkpoint {checkpoint} cannot be loaded safely ({reason}{where}); delete it to "
                          "restart this run from round 0") from None



_MODEL_READS: str | None = None  # this process's model-reads log, set by an edge (orchestration.environment)


def set_model_reads_log(path: str | os.PathLike | None) -> str | None:
    """Note every run whose model is read for an analysis in file ``path`` (None: nowhere);
    returns the file before."""
    global _MODEL_READS
    before, _MODEL_READS = _MODEL_READS, (os.fspath(path) if path else None)
    return before


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
        text = "".join(json.dumps(r, sort_keys=True, default=jsonable) + "\n" for r in rounds)
        write_atomic(self.folder / "rounds.jsonl", text.encode())

    def read_rounds(self) -> list[dict]:
        path = self._checked("rounds.jsonl")
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
        fingerprint = state_fingerprint(bundle)
        saved = self._saved_clients.get(client)
        if saved is not None and same_fingerprint(saved[1], fingerprint):
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
        self._saved_clients = {k: (name, state_fingerprint(bundles[k])) for k, name in files.items()}
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
        path = self._checked(FINAL_FILE)
        return _load(path, device, path) if path.exists() else None

    def read_latest(self, device: str | torch.device = "cpu") -> dict | None:
        """The final state of a finished run, else the resume checkpoint (runs stored before
        final.pt existed keep only that), else None: the model an analysis reads (see
        :meth:`note_model_read`)."""
        state = self.read_final(device) or self.read_checkpoint(device)
        if state is not None:
            self.note_model_read()
        return state

    def note_model_read(self) -> None:
        """With a model-reads log set (:func:`set_model_reads_log`, from ``$FEDLIB_MODEL_READS`` at an
        edge), append this run's hash to that file: how ``tools/lesson_store.py`` learns which runs'
        models a notebook analyses (training, resuming and serving a run read its state without calling this)."""
        log = _MODEL_READS
        if log:
            with open(log, "a", encoding="utf-8") as reads:
                reads.write(self.folder.name + "\n")

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

    def seal(self) -> None:
        """Write digest.json over the finished run's files (:mod:`.digest`): call after the summary."""
        seal(self.folder)

    def read_summary(self) -> dict:
        return read_json(self._checked("summary.json"))

    def read_config(self) -> RunConfig:
        return RunConfig.from_dict(read_json(self._checked("config.json")))

    def read_meta(self) -> dict:
        path = self._checked("meta.json")
        return read_json(path) if path.exists() else {}

    def _checked(self, name: str) -> Path:
        """The path of the run's file ``name``, once it matches the run's seal (a sealed run's
        edited or missing file is refused in one line; see :mod:`.digest`)."""
        check_file(self.folder, name)
        return self.folder / name

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
        return is_live_claim(self.folder / CLAIM_FILE)

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


def list_runs(results_dir: str | os.PathLike | None = None, complete_only: bool = True) -> list[RunRecord]:
    """Every run folder in the store (complete ones only, by default)."""
    root = results_root(results_dir)
    if not root.exists():
        return []
    records = [RunRecord(p) for p in sorted(root.iterdir()) if (p / "config.json").exists()]
    return [r for r in records if r.complete or not complete_only]
