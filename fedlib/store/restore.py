"""Restoring a server from a stored run: the one place a checkpoint or a final state becomes the
server's global model, its method's extras (on the server's device) and its round.

The engine resumes a run from it (``engine._restore``, also behind ``RunResult.load_model``) and
an analysis continues a finished run from it (``analysis.drift.local_update``). The server is
handed in (built by the engine's ``prepare``, a layer above the store).
"""

from __future__ import annotations

from typing import Any

import torch

from fedlib.core.state import ServerState
from fedlib.store.record import RunRecord


def saved_state(record: RunRecord, device: str | torch.device) -> dict | None:
    """What a resume starts from: the resume checkpoint, else the final state (a run killed
    between dropping its checkpoint and writing its summary keeps only that); tensors on
    ``device``; None when the run saved neither."""
    return record.read_checkpoint(device) or record.read_final(device)


def restore_server(server: ServerState, state: dict, *, extras: bool = True) -> None:
    """Load ``state`` (a checkpoint or final state as :class:`RunRecord` reads it) into ``server``:
    the global model, the round, and, unless ``extras`` is False (a method other than the run's
    own), the method's server-side state moved to the server's device."""
    server.model.load_state_dict(state["model"])
    server.round = state["round"]
    if extras:
        server.extras = to_device(state.get("extras", {}), server.device)


def to_device(value: Any, device: str | torch.device) -> Any:
    """``value`` with every tensor in it moved to ``device``: through dicts, lists and tuples, at
    any depth; anything else (numbers, strings, None) as it is."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    if isinstance(value, list):
        return [to_device(v, device) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(to_device(v, device) for v in value)
    return value
