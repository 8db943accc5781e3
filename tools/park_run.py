"""Park unfinished full-scale runs in git, so that a run longer than a session survives the machine.

A reference run (tools/reference_runs.py) trains for hours and checkpoints every round into the
ignored results/ store; a session that ends takes that store with it. This tool copies the resume
state of every unfinished run in a results store (checkpoint, per-client files, config, meta,
per-round log; no claim) into parked/<hash>/ of this checkout and commits it, and can repeat that
every few minutes while the run trains:

    .venv/bin/python tools/park_run.py --results ../runner/results --every 20 --commit

tools/reference_runs.py restores a parked run into its results store before training it, so it
resumes where the parked copy stopped (the same arithmetic as an uninterrupted run, when resumed
with the same thread count). A run in the reference store is unparked: its parked/ folder is deleted
(and the deletion committed with --commit). Nothing here is ever read as a result: parked/ is a
resume state only, and the stores never look at it.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARKED = ROOT / "parked"
sys.path.insert(0, str(ROOT))

from fedlib import store  # noqa: E402

KEEP = ("checkpoint.pt", "config.json", "meta.json", "rounds.jsonl")


def unfinished_runs(results: Path) -> list[Path]:
    """Run folders of ``results`` holding a resume checkpoint (training, or killed mid-run)."""
    return sorted(p.parent for p in results.glob(f"*/{store.CHECKPOINT_FILE}") if not (p.parent / "summary.json").exists())


def park(run: Path, parked: Path = PARKED) -> Path:
    """Copy the resume state of ``run`` into ``parked/<hash>/``, replacing an older copy.

    The checkpoint and its client files are copied before the per-round log, so the copy's log
    holds at least the rounds its checkpoint has (resume drops the log's rounds past the checkpoint)."""
    target = parked / run.name
    staging = parked / f".{run.name}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name in ("config.json", "meta.json", "checkpoint.pt"):
        shutil.copy2(run / name, staging / name)
    if (run / "clients").is_dir():
        shutil.copytree(run / "clients", staging / "clients")
    shutil.copy2(run / "rounds.jsonl", staging / "rounds.jsonl")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


def restore(run_hash: str, results: Path, parked: Path = PARKED) -> bool:
    """Copy ``parked/<run_hash>`` into ``results`` when the results store has no checkpoint for it
    that is as far along; True when something was restored."""
    source, target = parked / run_hash, results / run_hash
    if not (source / store.CHECKPOINT_FILE).exists() or (target / "summary.json").exists():
        return False
    if (target / store.CHECKPOINT_FILE).exists() and _rounds(target) >= _rounds(source):
        return False
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    return True


def _rounds(folder: Path) -> int:
    path = folder / "rounds.jsonl"
    return sum(1 for line in path.read_text().splitlines() if line.strip()) if path.exists() else 0


def unpark_published(parked: Path = PARKED) -> list[Path]:
    """Delete the parked copies of runs the reference store now holds; the deleted folders."""
    gone = []
    for folder in sorted(p for p in parked.glob("*") if p.is_dir() and not p.name.startswith(".")):
        if (store.REFERENCE_RESULTS / folder.name / "summary.json").exists():
            shutil.rmtree(folder)
            gone.append(folder)
    return gone


def git_commit(paths: list[Path], message: str) -> None:
    """Commit exactly ``paths`` (additions and deletions), retrying while another commit holds the index."""
    names = [str(p.relative_to(ROOT)) for p in paths]
    for _ in range(30):
        add = subprocess.run(["git", "add", "-A", "--", *names], cwd=ROOT, capture_output=True, text=True)
        if add.returncode == 0:
            changed = subprocess.run(["git", "diff", "--cached", "--quiet", "--", *names], cwd=ROOT).returncode
            if changed == 0:
                return
            if subprocess.run(["git", "commit", "-q", "-m", message, "--", *names], cwd=ROOT,
                              capture_output=True, text=True).returncode == 0:
                return
        time.sleep(10)
    print(f"could not commit {names}; commit them by hand", flush=True)


def park_all(results: Path, commit: bool) -> None:
    """Park every unfinished run of ``results`` and unpark the published ones (one pass)."""
    for run in unfinished_runs(results):
        target = park(run)
        print(f"parked {run.name} at round {_rounds(target)}", flush=True)
        if commit:
            git_commit([target], f"parked run {run.name}: resume state at round {_rounds(target)} (not a result)")
    gone = unpark_published()
    for folder in gone:
        print(f"unparked {folder.name}: it is in the reference store", flush=True)
    if commit and gone:
        git_commit(gone, "unpark runs the reference store now holds")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "results", help="the results store the runs train in")
    parser.add_argument("--every", type=float, help="repeat every this many minutes (until killed)")
    parser.add_argument("--commit", action="store_true", help="git-commit what changed under parked/")
    args = parser.parse_args(argv)
    if not args.results.is_dir():
        print(f"error: no results store at {args.results}", file=sys.stderr)
        return 2
    while True:
        park_all(args.results, args.commit)
        if not args.every:
            return 0
        time.sleep(60 * args.every)


if __name__ == "__main__":
    sys.exit(main())
