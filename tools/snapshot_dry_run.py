"""Copy a profile's dry-run rows (output/dry_run/<profile>.csv and its partitions) into the
committed benchmarks/dry_run/ and write that folder's README: how far the dry run has got, its
errors, and how to resume it from the committed rows.

    .venv/bin/python tools/snapshot_dry_run.py --profile paper

Only rows of configs the profile declares today are copied and counted, against the number of
rows a full dry run has (one per group of configs that differ only in their seed): a row left
from a config the profile no longer declares (its settings changed) is dropped and reported.
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

from fedlib.orchestration import dry_run, partition_check  # noqa: E402
from fedlib.paper.reproduce import declared_profile_runs  # noqa: E402


def snapshot(profile: str, declared: dict | None = None) -> Path:
    """Copy the declared rows and the partitions, write the README; returns the folder.
    ``declared``: the profile's runs (:func:`fedlib.paper.reproduce.declared_profile_runs`, read when None)."""
    source, target = ROOT / "output" / "dry_run", ROOT / "benchmarks" / "dry_run"
    names = [f"{profile}.csv", f"{profile}_partitions.csv"]
    for name in names:
        if not (source / name).exists():
            raise SystemExit(f"{source / name} does not exist: run ./reproduce.sh --profile {profile} --dry-run first")
    if declared is None:
        declared = declared_profile_runs(profile)
    written = dry_run.read_rows(source / names[0])
    expected = dry_run.seed_groups(declared, written)  # one row per group of seeds, as the dry run keeps them
    rows = pd.DataFrame([written[h] for h in expected if h in written], columns=list(dry_run.CSV_COLUMNS))
    rows = rows.fillna("").astype(str)
    # each row's seeds as the profile declares them today (a row written before a seed was added keeps it)
    rows["seeds"] = [" ".join(str(seed) for seed in expected[h][2]) for h in rows["hash"]]
    stale = len(written) - len(rows)
    target.mkdir(parents=True, exist_ok=True)
    rows.to_csv(target / names[0], index=False)
    shutil.copy2(source / names[1], target / names[1])
    partitions = pd.read_csv(target / names[1])
    errors = rows[rows["status"] != "ok"]
    dropped = f" ({stale} rows of configs the profile no longer declares left out)" if stale else ""
    lines = [f"# Dry run of the `{profile}` profile", "",
             f"Snapshot of {datetime.date.today().isoformat()} on {platform.machine()} CPU: {len(rows)} of "
             f"{len(expected)} rows{' so far' if len(rows) < len(expected) else ''}{dropped}.", "",
             f"- {dry_run.summary_line(rows)}", f"- {partition_check.summary_line(partitions)}", ""]
    if len(errors):
        lines += ["Errors:", ""] + [f"- `{r.hash}` {r.method} on {r.dataset} ({r.notebooks}): {r.error}"
                                   for r in errors.itertuples()] + [""]
    lines += ["Resume it where it stopped (rows already here are skipped):", "", "```bash",
              f"mkdir -p output/dry_run && cp benchmarks/dry_run/{profile}*.csv output/dry_run/",
              f"./reproduce.sh --no-install --profile {profile} --dry-run --retry-errors",
              f".venv/bin/python tools/snapshot_dry_run.py --profile {profile}",
              "```", ""]
    (target / "README.md").write_text("\n".join(lines))
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="paper")
    args = parser.parse_args()
    print(snapshot(args.profile))


if __name__ == "__main__":
    main()
