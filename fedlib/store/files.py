"""The store's files: each written atomically (readers see the old file or the whole new one), JSON
read and written, and the bytes a folder occupies on disk."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import torch


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
    write_atomic(path, (json.dumps(value, indent=2, sort_keys=True, default=jsonable) + "\n").encode())


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def jsonable(value: Any) -> Any:
    """``value`` as JSON can hold it (a tensor or an array as a list): ``json.dumps``'s ``default``."""
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


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

