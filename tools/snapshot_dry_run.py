"""Copy a profile's dry-run rows (output/dry_run/<profile>.csv and its partitions) into the
committed benchmarks/dry_run/ and write that folder's README: how far the dry run has got, its
errors, and how to resume it from the committed rows.

    .venv/bin/python tools/snapshot_dry_run.py --profile paper
"""

from __future__ import annotations

import argparse
import datetime
import platform
import shutil
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fedlib import dry_run, partition_check  # noqa: E402


def snapshot(profile: str, declared_rows: int | None) -> Path:
    """Copy the CSVs and write the README; returns the folder."""
    source, target = ROOT / "output" / "dry_run", ROOT / "benchmarks" / "dry_run"
    target.mkdir(parents=True, exist_ok=True)
    names = [f"{profile}.csv", f"{profile}_partitions.csv"]
    for name in names:
        if not (source / name).exists():
            raise SystemExit(f"{source / name} does not exist: run ./reproduce.sh --profile {profile} --dry-run first")
        shutil.copy2(source / name, target / name)
    rows = pd.read_csv(target / names[0], dtype=str).fillna("")
    partitions = pd.read_csv(target / names[1])
    errors = rows[rows["status"] != "ok"]
    done = f"{len(rows)} of {declared_rows} rows" if declared_rows else f"{len(rows)} rows"
    lines = [f"# Dry run of the `{profile}` profile", "",
             f"Snapshot of {datetime.date.today().isoformat()} on {platform.machine()} CPU: {done} so far.", "",
             f"- {dry_run.summary_line(rows)}", f"- {partition_check.summary_line(partitions)}", ""]
    if len(errors):
        lines += ["Errors:", ""] + [f"- `{r.hash}` {r.method} on {r.dataset} ({r.notebooks}): {r.error}"
                                   for r in errors.itertuples()] + [""]
    lines += ["Resume it where it stopped (rows already here are skipped):", "", "```bash",
              f"mkdir -p output/dry_run && cp benchmarks/dry_run/{profile}*.csv output/dry_run/",
              f"./reproduce.sh --no-install --profile {profile} --dry-run --retry-errors",
              f".venv/bin/python tools/snapshot_dry_run.py --profile {profile} --declared {declared_rows or 'N'}",
              "```", ""]
    (target / "README.md").write_text("\n".join(lines))
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="paper")
    parser.add_argument("--declared", type=int, help="how many rows the full dry run has (its progress bar's total)")
    args = parser.parse_args()
    print(snapshot(args.profile, args.declared))


if __name__ == "__main__":
    main()
