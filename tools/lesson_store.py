"""Build the lesson store: execute each notebook that has a ``lesson`` profile, time it, and publish
the runs it trained into the committed reference store (with the final models it analysed and the
analyses it cached), so that a fresh clone opens the notebook with its figure already there.

    FEDLIB_DATA=../shared/datasets .venv/bin/python tools/lesson_store.py --only getting_started --commit

Each notebook runs through ``python -m fedlib.paper.reproduce --profile lesson`` into a scratch
working store (``--scratch``; emptied first): runs the reference store already holds (shared with a
notebook built before) are served from it, the others train. The seconds it took, the runs it trained
and the machine go to ``notebooks/lesson_times.json``, which the course index quotes. ``--publish``
also writes its figures and tables to ``figures/lesson/`` and ``tables/lesson/``.

``--standalone`` times what a student pays who changes a parameter every run depends on (the dataset,
the rounds): the reference store is switched off (``FEDLIB_REFERENCE=off``), so every run the notebook
declares trains, and nothing is published; the seconds go to the notebook's ``standalone`` entry.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fedlib import store  # noqa: E402
from fedlib.errors import FedlibError  # noqa: E402
from fedlib.paper.reproduce import find_notebooks, load_profiles  # noqa: E402
from fedlib.reporting import retrain_time  # noqa: E402
from fedlib.store.record import MODEL_READS_ENV  # noqa: E402
from tools.park_run import git_commit  # noqa: E402  (one git-commit helper for the tools that commit runs)

PROFILE = "lesson"
MODEL_READS = "model_reads.txt"  # in the scratch store: the runs whose final models the notebook read
TIMES = ROOT / "notebooks" / "lesson_times.json"
MACHINE = ROOT / retrain_time.MACHINE_FILE  # the speed check of the machine the times were measured on


def reference_store() -> Path:
    """The reference store runs are published into ($FEDLIB_REFERENCE, else reference_results/)."""
    return store.reference_root() or store.REFERENCE_RESULTS


def lesson_notebooks(only: str | None) -> list[Path]:
    """The notebooks (of ``only``) whose profiles yaml defines the lesson profile."""
    return [nb for nb in find_notebooks(ROOT / "notebooks", only)
            if PROFILE in load_profiles(ROOT / "profiles", nb.stem)]


def execute(notebook: Path, scratch: Path, publish: bool, threads: int | None, standalone: bool = False,
            edits: list[tuple[str, str]] = ()) -> float:
    """Run ``notebook`` in the lesson profile into ``scratch``; the wall seconds it took. The runs
    whose final models it read are listed in ``scratch/model_reads.txt``. ``standalone``: with the
    reference store off, so that every run trains. ``edits``: (parameter, YAML value) pairs passed over
    the profile, as a Try-it prompt sets them (its executed notebook goes to ``scratch/notebook``)."""
    command = [sys.executable, "-m", "fedlib.paper.reproduce", "--profile", PROFILE, "--only", notebook.stem,
               "--results", str(scratch)]
    for name, value in edits:
        command += ["-p", name, value]
    if edits:
        command += ["--out", str(scratch / "notebook")]
    if publish:
        command += ["--publish", "--figures", str(ROOT / "figures" / PROFILE), "--tables", str(ROOT / "tables" / PROFILE)]
    if threads:
        command += ["--threads", str(threads)]
    started = time.time()
    env = {**os.environ, MODEL_READS_ENV: str((scratch / MODEL_READS).resolve())}  # the kernel runs elsewhere
    if standalone:
        env[store.REFERENCE_ENV] = "off"
    done = subprocess.run(command, cwd=ROOT, env=env)
    seconds = time.time() - started
    if done.returncode != 0:
        raise FedlibError(f"{notebook.stem} failed in the lesson profile (exit {done.returncode}); see "
                          f"output/{PROFILE}/{notebook.name}")
    return seconds


TIMING_KEYS = ("seconds",)  # what a round records of the machine, not of the run: left out of the comparison


def add_model(retrained: Path, committed: Path) -> Path:
    """Give a committed metrics-only run the final model the notebook trained again (fedlib.engine.model_source)
    in the scratch store: only when the retrained run's rounds equal the committed ones in every metric, so that
    the model is the committed run's; its folder in the reference store, re-sealed over the model."""
    record, reference = store.RunRecord(retrained), store.RunRecord(committed)
    if not record.complete or not (retrained / store.FINAL_FILE).exists():
        raise FedlibError(f"the notebook analysed the model of {committed.name}, which the reference store holds without "
                          "it, and the scratch store has no finished retrain of it")
    mine, theirs = ([{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in x.read_rounds()]
                    for x in (record, reference))
    if mine != theirs:
        first = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
        raise FedlibError(f"run {committed.name} trained again here differs from the committed run from round {first + 1} "
                          "on: its model is not the committed run's; delete the committed run and build the lessons "
                          "that use it again")
    store.write_atomic(committed / store.FINAL_FILE, (retrained / store.FINAL_FILE).read_bytes())
    store.seal(committed)
    return committed


def publish_trained(scratch: Path) -> list[Path]:
    """Publish every complete run in ``scratch`` the reference store lacks: its metrics, and its
    final model when the notebook read it (a run it analyses); their folders in the reference store.

    A model the notebook read from a run the reference store already held without its model (trained again
    in the scratch store, fedlib.engine.model_source) is added to that run when the retrain's rounds are the
    committed ones (:func:`add_model`); otherwise it is an error."""
    reads = scratch / MODEL_READS
    read = set(reads.read_text().split()) if reads.exists() else set()
    lacking = sorted(h for h in read if (reference_store() / h).exists()
                     and not (reference_store() / h / store.FINAL_FILE).exists())
    published = [add_model(scratch / h, reference_store() / h) for h in lacking]
    for folder in sorted(p for p in scratch.iterdir() if p.is_dir()):
        record = store.RunRecord(folder)
        if record.complete and not (reference_store() / folder.name / "summary.json").exists():
            published.append(store.publish(record, with_model=folder.name in read))
    return published


ANALYSIS_FOLDERS = ("drift", "analysis", "local_update")  # caches a notebook's analyses keep beside the store
# (store.analysis_cache): a drift study, tracked class statistics, local updates (fedlib.analysis.local_update)


def publish_analyses(scratch: Path) -> list[Path]:
    """Copy the analysis caches the notebook wrote (a drift study, tracked class statistics, local updates) into
    the reference store, where ``store.analysis_cache`` finds them on a fresh clone."""
    copied = []
    for folder in ANALYSIS_FOLDERS:
        for source in sorted((scratch / folder).glob("*")) if (scratch / folder).is_dir() else []:
            target = reference_store() / folder / source.name
            if not target.exists():
                store.write_atomic(target, source.read_bytes())
                copied.append(target)
    return copied


def prompt_edits(stem: str, number: int) -> list[tuple[str, str]]:
    """The (parameter, value) pairs Try-it prompt ``number`` (from 1) of ``stem`` sets."""
    from tools.try_it import ASSIGNMENT, PROMPTS

    prompts = PROMPTS.get(stem, ([], []))[0]
    if not 1 <= number <= len(prompts):
        raise FedlibError(f"{stem} has {len(prompts)} Try-it prompts; --try-it takes 1 to {len(prompts)}")
    edits = ASSIGNMENT.findall(prompts[number - 1])
    if not edits:
        raise FedlibError(f"{stem}'s Try-it prompt {number} sets no parameter: nothing to run")
    return edits


def build_try_it(only: str | None, number: int, scratch: Path, threads: int | None, commit: bool) -> int:
    """Run one lesson with Try-it prompt ``number``'s edits and publish the runs it trained."""
    notebooks = lesson_notebooks(only)
    if len(notebooks) != 1:
        raise FedlibError(f"--try-it needs exactly one lesson notebook in --only; {only!r} selects {len(notebooks)}")
    notebook = notebooks[0]
    edits = prompt_edits(notebook.stem, number)
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    seconds = execute(notebook, scratch, False, threads, edits=edits)
    published = publish_trained(scratch)
    analyses = publish_analyses(scratch)
    what = ", ".join(f"{name} = {value}" for name, value in edits)
    print(f"{notebook.stem} Try-it {number} ({what}): {seconds:.0f} s, {len(published)} runs and {len(analyses)} "
          f"analyses published; executed notebook in {scratch / 'notebook'}", flush=True)
    if commit and (published or analyses):
        git_commit([*published, *analyses], f"lesson store: {notebook.stem} Try-it {number} ({what}): "
                                            f"{len(published)} runs, {seconds:.0f} s here")
    return 0


def record_time(stem: str, seconds: float, trained: int) -> None:
    """Write the notebook's lesson build time into ``notebooks/lesson_times.json`` (its standalone
    time, if measured, is kept)."""
    times = json.loads(TIMES.read_text()) if TIMES.exists() else {}
    kept = {"standalone": times[stem]["standalone"]} if "standalone" in times.get(stem, {}) else {}
    times[stem] = {"seconds": round(seconds), "runs_trained": trained, "cores": os.cpu_count(),
                   "date": datetime.date.today().isoformat(),
                   "note": "executed with the reference store as it stood: runs built by an earlier notebook were served",
                   **kept}
    TIMES.write_text(json.dumps(dict(sorted(times.items())), indent=1) + "\n")


def record_standalone(stem: str, seconds: float, trained: int, threads: int | None, load: str,
                      rate: float | None = None) -> None:
    """Write the notebook's standalone time (every run trained) into its ``notebooks/lesson_times.json`` entry,
    with ``rate``, the speed check measured just before (:func:`fedlib.reporting.retrain_time.machine_rate`)."""
    times = json.loads(TIMES.read_text()) if TIMES.exists() else {}
    entry = times.setdefault(stem, {})
    entry["standalone"] = {"seconds": round(seconds), "runs_trained": trained, "threads": threads,
                           "cores": os.cpu_count(), "date": datetime.date.today().isoformat(), "load": load}
    if rate is not None:
        entry["standalone"]["check_rate"] = round(rate, 1)
    TIMES.write_text(json.dumps(dict(sorted(times.items())), indent=1) + "\n")


def calibrate(load: str) -> float:
    """Write this machine's :func:`fedlib.reporting.retrain_time.machine_rate` (the best of five: the
    least disturbed) into ``notebooks/lesson_machine.json``, with the date, cores and ``load``."""
    rate = retrain_time.best_rate(5)
    MACHINE.write_text(json.dumps({"steps_per_second": round(rate, 1), "check": retrain_time.CHECK_NAME,
                                   "cores": os.cpu_count(),
                                   "date": datetime.date.today().isoformat(), "load": load}, indent=1) + "\n")
    return rate


def trained_runs(scratch: Path) -> int:
    """How many complete runs the notebook left in its scratch store."""
    return sum(1 for p in scratch.iterdir() if p.is_dir() and store.RunRecord(p).complete)


COURSE = ROOT / "notebooks" / "README.md"


def lesson_cell(stem: str, times: dict, lessons: set[str]) -> str:
    """The course table's lesson column for ``stem``: the measured time to train every run it declares
    (standalone) where measured, else its build time; "not built" for a lesson profile without one
    yet, "-" for a notebook without a lesson profile."""
    if stem not in lessons:
        return "-"
    if stem not in times:
        return "not built"
    seconds = times[stem].get("standalone", times[stem])["seconds"]
    return f"{seconds} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def course_text(text: str, times: dict, lessons: set[str]) -> str:
    """``notebooks/README.md`` with each course row's last column (lesson) set from ``times``."""
    def row(line: str) -> str:
        match = re.match(r"^\| \d+ \| \[(\w+)\]\(", line)
        if not match:
            return line
        cells = line.rstrip().rstrip("|").split(" | ")
        return " | ".join(cells[:-1] + [lesson_cell(match.group(1), times, lessons)]) + " |"
    return "\n".join(row(line) for line in text.split("\n"))


def write_course() -> None:
    """Set the course index's lesson column from ``notebooks/lesson_times.json``."""
    times = json.loads(TIMES.read_text()) if TIMES.exists() else {}
    lessons = {nb.stem for nb in lesson_notebooks(None)}
    COURSE.write_text(course_text(COURSE.read_text(encoding="utf-8"), times, lessons), encoding="utf-8")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated notebook names (default: every notebook with a lesson profile)")
    parser.add_argument("--scratch", default=str(ROOT / "output" / "lesson_store"), help="scratch working store")
    parser.add_argument("--publish", action="store_true", help="also write figures/lesson/ and tables/lesson/")
    parser.add_argument("--threads", type=int, help="torch threads for the notebooks' runs")
    parser.add_argument("--commit", action="store_true", help="git-commit each notebook's runs and time")
    parser.add_argument("--standalone", action="store_true",
                        help="time each notebook with the reference store off (every run trains); publish nothing")
    parser.add_argument("--load", default="",
                        help="with --standalone: what else ran on the machine meanwhile, recorded with the time")
    parser.add_argument("--calibrate", action="store_true",
                        help="only measure this machine's speed check (best of 5) into notebooks/lesson_machine.json: "
                             "the rate the lessons scale their stored retrain times by; run it where --standalone ran")
    parser.add_argument("--try-it", type=int, metavar="N",
                        help="with one --only notebook: run it with Try-it prompt N's edits (tools/try_it.py) and "
                             "publish the runs it trained, for the prompt's 'what you should see'; times nothing")
    parser.add_argument("--write-course", action="store_true",
                        help="only set the lesson column of notebooks/README.md from notebooks/lesson_times.json")
    args = parser.parse_args(argv)
    if args.write_course:
        write_course()
        return 0
    if args.calibrate:
        rate = calibrate(args.load)
        print(f"speed check: {rate:.1f} steps/s (best of 5) -> {MACHINE.relative_to(ROOT)}")
        return 0
    revision = store.code_revision()
    if not args.standalone and not store.is_clean_revision(revision):
        raise FedlibError(f"fedlib/ has uncommitted changes (code revision {revision}): commit them first; the "
                          "reference store takes only runs of committed code")
    if args.try_it is not None:
        return build_try_it(args.only, args.try_it, Path(args.scratch), args.threads, args.commit)
    for notebook in lesson_notebooks(args.only):
        scratch = Path(args.scratch)
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        if args.standalone:
            rate = retrain_time.best_rate(3)  # the machine as the time is taken
            seconds = execute(notebook, scratch, False, args.threads, standalone=True)
            trained = trained_runs(scratch)
            record_standalone(notebook.stem, seconds, trained, args.threads, args.load, rate)
            write_course()
            print(f"{notebook.stem}: {seconds:.0f} s standalone, {trained} runs trained", flush=True)
            if args.commit:
                git_commit([TIMES, COURSE], f"lesson times: {notebook.stem} standalone {seconds:.0f} s here")
            continue
        seconds = execute(notebook, scratch, args.publish, args.threads)
        published = publish_trained(scratch)
        analyses = publish_analyses(scratch)
        record_time(notebook.stem, seconds, len(published))
        write_course()
        print(f"{notebook.stem}: {seconds:.0f} s, {len(published)} runs and {len(analyses)} analyses published",
              flush=True)
        if args.commit:
            outputs = [ROOT / "figures" / PROFILE, ROOT / "tables" / PROFILE] if args.publish else []
            paths = [p for p in [*published, *analyses, TIMES, COURSE, *outputs] if p.exists()]
            git_commit(paths, f"lesson store: {notebook.stem} ({len(published)} runs, {seconds:.0f} s here)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except FedlibError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
