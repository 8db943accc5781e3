"""Render a committed table folder again from its stored runs and compare every table with the
committed one: how a change to fedlib shows it left every committed number as it was.

    .venv/bin/python tools/rerender_check.py tables/paper               # every table in the folder
    .venv/bin/python tools/rerender_check.py tables/lesson --only pkd_fig2,fedcsd_fig1

Each table's notebook, profile and parameters come from the folder's ``index.json`` (what the
publishing run recorded). The tables of one notebook and one set of parameters are rendered
together by ``reproduce --render-only`` (nothing trains: a run neither store holds shows as not
run), into a scratch folder, never over the committed files. A table is ``same`` when its CSV
text is identical, ``numbers equal`` when only the text differs (a float printed another way),
else ``DIFFERS`` with the largest difference; the exit status is 1 when any table differs or a
notebook fails. The quick profile's runs are not committed, so its tables (``tables/``) can only
be checked on the machine that trained them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Render:
    """One reproduce call: a notebook at a profile with the parameters over it."""

    notebook: str
    profile: str
    parameters: str  # json, sorted keys: hashable

    def command(self, scratch: Path, threads: int) -> list[str]:
        """The reproduce command that renders this group's tables into ``scratch``."""
        stem = Path(self.notebook).stem
        command = [sys.executable, "-m", "fedlib.paper.reproduce", "--profile", self.profile, "--render-only",
                   "--only", stem, "--threads", str(threads), "--out", str(scratch / "notebooks"),
                   "--figures", str(scratch / "figures"), "--tables", str(scratch / "tables")]
        for name, value in json.loads(self.parameters).items():
            command += ["-p", name, json.dumps(value)]
        return command


def renders(index: dict, only: list[str]) -> dict[Render, list[str]]:
    """The committed CSV tables of ``index`` grouped by the render that makes them."""
    groups: dict[Render, list[str]] = {}
    for table, entry in sorted(index.items()):
        if not table.endswith(".csv") or (only and not any(part in table for part in only)):
            continue
        key = Render(entry["notebook"], entry["profile"], json.dumps(entry.get("parameters") or {}, sort_keys=True))
        groups.setdefault(key, []).append(table)
    return groups


def compare(committed: Path, rendered: Path) -> str:
    """``same``, ``numbers equal``, ``missing`` or ``DIFFERS (...)`` for one table."""
    if not rendered.exists():
        return "missing (the render wrote no such table)"
    if committed.read_text() == rendered.read_text():
        return "same"
    old, new = pd.read_csv(committed), pd.read_csv(rendered)
    if old.shape != new.shape or list(old.columns) != list(new.columns):
        return f"DIFFERS (shape {old.shape} -> {new.shape})"
    numeric = old.select_dtypes("number").columns
    text_same = old.drop(columns=numeric).fillna("").astype(str).equals(new.drop(columns=numeric).fillna("").astype(str))
    gap = (old[numeric] - new[numeric]).abs().max().max() if len(numeric) else 0.0
    nan_same = old[numeric].isna().equals(new[numeric].isna())
    if text_same and nan_same and (pd.isna(gap) or gap == 0):
        return "numbers equal"
    return f"DIFFERS (largest numeric difference {gap:.6g}{'' if text_same else ', text cells differ'}" \
           f"{'' if nan_same else ', missing cells differ'})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="a committed table folder with an index.json (tables/paper, tables/lesson)")
    parser.add_argument("--only", help="comma-separated substrings of table names")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each render (default 1)")
    args = parser.parse_args(argv)
    folder = Path(args.folder)
    index_file = folder / "index.json"
    if not index_file.exists():
        print(f"error: {index_file} not found: give a committed table folder (tables/paper, tables/lesson)",
              file=sys.stderr)
        return 2
    groups = renders(json.loads(index_file.read_text()), args.only.split(",") if args.only else [])
    failed = 0
    for render, tables in groups.items():
        with tempfile.TemporaryDirectory(prefix="rerender-") as scratch:
            done = subprocess.run(render.command(Path(scratch), args.threads), cwd=ROOT, capture_output=True, text=True)
            label = f"{Path(render.notebook).stem} ({render.profile}, {render.parameters})"
            if done.returncode != 0:
                failed += len(tables)
                print(f"FAILED {label}: {(done.stderr or done.stdout).strip().splitlines()[-1:]}", flush=True)
                continue
            for table in tables:
                verdict = compare(folder / table, Path(scratch) / "tables" / table)
                failed += not verdict.startswith(("same", "numbers equal"))
                print(f"{verdict:<16} {table}", flush=True)
    print(f"{sum(map(len, groups.values()))} tables, {failed} not unchanged")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
