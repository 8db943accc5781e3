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

import torch

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

    The copy takes the client files the copied checkpoint names (a checkpoint written meanwhile
    may delete them: then it starts over), and the per-round log after the checkpoint, so the
    copy's log holds at least the rounds its checkpoint has (resume drops the log's later rounds)."""
    for _ in range(5):
        staging = _stage(run, parked)
        if staging is not None:
            target = parked / run.name
            shutil.rmtree(target, ignore_errors=True)
            staging.rename(target)
            return target
        time.sleep(2)
    raise OSError(f"{run} kept changing while it was copied")


def _stage(run: Path, parked: Path) -> Path | None:
    """The run's resume state copied into a staging folder, or None when a round was saved meanwhile."""
    staging = parked / f".{run.name}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    checkpoint = run / store.CHECKPOINT_FILE
    before = checkpoint.stat().st_mtime_ns
    for name in ("config.json", "meta.json", store.CHECKPOINT_FILE):
        shutil.copy2(run / name, staging / name)
    state = torch.load(staging / store.CHECKPOINT_FILE, map_location="cpu", weights_only=True, mmap=True)
    try:
        for name in (state.get("client_files") or {}).values():
            (staging / "clients").mkdir(exist_ok=True)
            shutil.copy2(run / "clients" / name, staging / "clients" / name)
        shutil.copy2(run / "rounds.jsonl", staging / "rounds.jsonl")
    except FileNotFoundError:
        return None
    return staging if checkpoint.stat().st_mtime_ns == before else None


def restore(run_hash: str, results: Path, parked: Path = PARKED) -> bool:
    """Copy ``parked/<run_hash>`` into ``results`` when the results store holds nothing as far
    along for it (no live claim, no final state, no checkpoint at as many rounds); True when
    something was restored."""
    source, target = parked / run_hash, results / run_hash
    if not (source / store.CHECKPOINT_FILE).exists() or (target / "summary.json").exists():
        return False
    here = store.RunRecord(target)
    if target.exists():
        if here.in_progress() or (target / store.FINAL_FILE).exists():
            return False
        if (here.saved_round() or 0) >= (store.RunRecord(source).saved_round() or 0):
            return False
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    return True


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
    """Park every unfinished run of ``results`` and unpark the published ones (one pass); a run
    that cannot be copied now (it finished meanwhile, say) is reported and left for the next pass."""
    for run in unfinished_runs(results):
        try:
            target = park(run)
        except OSError as error:
            print(f"not parked now: {run.name}: {error}", flush=True)
            continue
        rounds = store.RunRecord(target).saved_round()
        print(f"parked {run.name} at round {rounds}", flush=True)
        if commit:
            git_commit([target], f"parked run {run.name}: resume state at round {rounds} (not a result)")
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
