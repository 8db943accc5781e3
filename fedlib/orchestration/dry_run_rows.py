"""A dry run's rows: the CSV it appends to as configs finish (so a killed dry run resumes where
it stopped), rows of older code renamed to today's config hashes, and the rows as text."""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Sequence

import pandas as pd

from fedlib.core.config import RunConfig, hash_with_unread_settings

CSV_COLUMNS = ("hash", "notebooks", "dataset", "model", "method", "partition", "clients", "seeds", "data", "status",
               "error", "rounds", "train_slice", "images", "seconds", "seconds_per_image", "peak_rss_mb",
               "parameters", "threads", "wall_seconds", "note")


def read_rows(csv_path: str | os.PathLike) -> dict[str, dict]:
    """The rows of a dry-run CSV by config hash (a hash listed twice: its last row)."""
    path = Path(csv_path)
    if not path.exists():
        return {}
    with path.open(newline="") as handle:
        return {row["hash"]: row for row in csv.DictReader(handle)}


def append_row(csv_path: str | os.PathLike, row: dict) -> None:
    """Append one row, writing the header first into a new file (and bringing a file written
    with other columns, by another fedlib version, to today's); flushed at once."""
    path = Path(csv_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or path.stat().st_size == 0
    if not new and _header(path) != list(CSV_COLUMNS):
        _rewrite(path, read_rows(path).values())
    with path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerow({key: _cell(row.get(key, "")) for key in CSV_COLUMNS})


def _header(path: Path) -> list[str]:
    with path.open(newline="") as handle:
        return next(csv.reader(handle), [])


def _rewrite(path: Path, rows) -> None:
    """Write ``rows`` with today's columns into a new file that then replaces ``path``."""
    scratch = path.with_suffix(path.suffix + ".tmp")
    with scratch.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS, extrasaction="ignore", restval="")
        writer.writeheader()
        writer.writerows(rows)
    scratch.replace(path)


def _cell(value):
    return f"{value:.6g}" if isinstance(value, float) else value


def rekey_old_hashes(csv_path: str | os.PathLike, configs: dict[str, tuple[RunConfig, Sequence[str]]]) -> dict[str, dict]:
    """The CSV's rows by hash, after renaming rows that older code keyed by a config's hash with
    every partition setting hashed (:func:`fedlib.core.config.hash_with_unread_settings`) to its hash
    today, so a resumed dry run does not run them again; the file is rewritten if any moved."""
    done = read_rows(csv_path)
    moved = 0
    for digest, (cfg, *_) in configs.items():
        old = hash_with_unread_settings(cfg)
        if old != digest and old in done and digest not in done:
            done[digest] = {**done.pop(old), "hash": digest}
            moved += 1
    if moved:
        _rewrite(Path(csv_path), done.values())
        print(f"{csv_path}: {moved} rows written under an older config hash renamed to today's", flush=True)
    return done


# ---------------------------------------------------------------------- as text
TABLE_COLUMNS = ["dataset", "model", "method", "partition", "clients", "data", "status", "peak_rss_mb",
                 "parameters", "seconds_per_image", "error"]


def format_dry_run(frame: pd.DataFrame, csv_path: str | os.PathLike | None = None) -> str:
    """The dry run as text: one line per config, a summary line, then every error on its own line."""
    if frame.empty:
        return "dry run: no configs"
    shown = frame.reindex(columns=TABLE_COLUMNS).fillna("")
    shown["seconds_per_image"] = [_short(v) for v in shown["seconds_per_image"]]
    lines = [shown.to_string(index=False), summary_line(frame)]
    errors = frame[frame["status"] != "ok"]
    lines += [f"error: {r.hash} {r.method} on {r.dataset} ({r.notebooks}): {r.error}" for r in errors.itertuples()]
    if csv_path is not None:
        lines.append(f"rows in {csv_path}")
    return "\n".join(lines)


def summary_line(frame: pd.DataFrame) -> str:
    """'N ok, M errors, K on stand-in data (N configs; D declared, ...)' over the rows of
    ``frame`` (a row stands for the declared configs of every seed in its ``seeds`` column)."""
    ok = int((frame["status"] == "ok").sum())
    stand_in = int((frame["data"] == "stand-in").sum())
    declared = sum(len(str(seeds).split()) or 1 for seeds in frame["seeds"].fillna(""))
    standing = f"; {declared} declared, counting each row's other seeds" if declared > len(frame) else ""
    return f"dry run: {ok} ok, {len(frame) - ok} errors, {stand_in} on stand-in data ({len(frame)} configs{standing})"


def _short(value) -> str:
    try:
        return f"{float(value):.2e}"
    except (TypeError, ValueError):
        return ""
