"""What ``backend="auto"`` trains on: measured, verified paths only.

On a CPU, auto is the threads backend (verified there by the registry-wide equivalence test,
every commit). On any other device kind it reads ``verified_paths.json`` beside this file: which
paths have passed equivalence and repeatability on that kind, the methods whose fast paths have
not, and per model the fastest verified path as measured. A model or device kind without a
measurement, or a method whose fast paths failed there, gets the sequential reference path:
slower, perhaps, but never a path nobody has checked on that hardware.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

TABLE_PATH = Path(__file__).with_name("verified_paths.json")
REFERENCE = "sequential"


@lru_cache(maxsize=1)
def verified_paths() -> dict[str, Any]:
    """The committed table of verified paths (read once)."""
    return json.loads(TABLE_PATH.read_text())


def choose_backend(model: str, method: str, device_type: str, table: dict[str, Any] | None = None) -> str:
    """The backend ``auto`` means for ``method`` training ``model`` on ``device_type`` ("cpu", "cuda", ...):
    threads on a CPU; elsewhere the fastest verified path for the model from ``table`` (default:
    :func:`verified_paths`), else sequential."""
    if device_type == "cpu":
        return "threads"
    entry = (table if table is not None else verified_paths()).get("devices", {}).get(device_type)
    if not entry:
        return REFERENCE
    parts = [part.strip() for part in method.split("+")]
    if any(part in entry.get("unverified_methods", {}) for part in parts):
        return REFERENCE
    fastest = entry.get("fastest", {}).get(model, {})
    backend = fastest.get("backend") if isinstance(fastest, dict) else fastest
    return backend if backend in entry.get("verified", {}) else REFERENCE
