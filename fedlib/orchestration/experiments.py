"""Running a grid of runs and tabulating the results: run only what the store lacks.

A notebook gets its experiment as a list of :class:`RunConfig` (from its function in
:mod:`fedlib.paper.grids`; :func:`grid` combines field values), calls :func:`run_all`, and turns the
results into a DataFrame with :func:`results_frame`; :mod:`fedlib.reporting.report` shows and saves it.
"""

from __future__ import annotations

import itertools
import numbers
import os
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from fedlib import store
from fedlib.core.config import RunConfig
from fedlib.engine.engine import NotRun, RunResult, run
from fedlib.engine.engine import render_only as engine_render_only
from fedlib.errors import FedlibError


def grid(base: RunConfig, **axes: Sequence[Any]) -> list[RunConfig]:
    """Every combination of the given field values on top of ``base``.

    ``grid(base, method=["fedavg", "fedvls"], seed=[0, 1, 2])`` gives 6 configs. A value of the
    ``method_args`` axis is a dict merged into the base's method arguments.
    """
    names = list(axes)
    configs = []
    for values in itertools.product(*(axes[n] for n in names)):
        changes = dict(zip(names, values))
        if "method_args" in changes:
            changes["method_args"] = {**base.method_args, **changes["method_args"]}
        configs.append(base.replace(**changes))
    return configs


def _count(configs: Iterable[RunConfig], results_dir: str | os.PathLike | None = None,
           found: dict[str, Any] | None = None) -> dict[str, int]:
    """How many of ``configs`` are distinct, and how many of those are already stored (the
    notebook's plan with hours is :func:`fedlib.reporting.report.describe_plan`). ``found``, when
    given, receives each distinct config's served record (None where no store holds it): the one
    lookup a render makes per config."""
    unique = {c.hash(): c for c in configs}
    records = {h: store.served_record(c, results_dir) for h, c in unique.items()}
    if found is not None:
        found.update(records)
    stored = sum(record is not None for record in records.values())
    return {"runs": len(unique), "stored": stored, "to_run": len(unique) - stored}


def run_all(configs: Sequence[RunConfig], results_dir: str | os.PathLike | None = None,
            progress: bool = True, *, executor: str = "serial", workers: int | None = None,
            address: str | None = None, threads: int | None = None, verbose: bool = False,
            render_only: bool | None = None) -> list[RunResult]:
    """Run every config not yet in the store and return all results, in order.

    ``executor="serial"`` trains them here one after another; ``"local"`` (``workers`` processes on
    this machine; ``workers > 1`` alone means it) or ``"ray"`` (local Ray, or the cluster at
    ``address``) trains them side by side first (:func:`fedlib.orchestration.executor.execute`), then serves
    every result from the store (``verbose``: a line per run the executor finishes). A run that
    fails on a worker raises here, after all the others have finished.

    ``render_only`` (None: this process's mode, :func:`fedlib.engine.engine.render_only`): nothing
    trains; a run in no store is a placeholder whose cells read "not run"."""
    from tqdm.auto import tqdm

    from fedlib.orchestration.resources import apply_thread_budget

    apply_thread_budget(threads)
    rendering = engine_render_only() if render_only is None else render_only
    if executor == "serial" and workers is not None and workers > 1:
        executor = "local"
    if executor != "serial" and not rendering:
        _execute(configs, results_dir, progress, executor, workers, address, threads, verbose)
    found: dict[str, Any] = {}  # hash -> served record or None: each config is looked up once
    todo = _count(configs, results_dir, found)
    if progress and todo["to_run"]:
        print(f"{todo['runs']} runs, {todo['stored']} already stored, {todo['to_run']} to run")
    results, missing = [], []
    for cfg in tqdm(configs, desc="runs", unit="run", disable=not progress or todo["to_run"] == 0):
        try:
            key = cfg.hash()
            record = found.get(key)
            quiet = record is not None  # served silently: the plan line counted it
            results.append(run(cfg, results_dir=results_dir, progress=progress and not quiet, served=record,
                               render_only=rendering))
            if not quiet and results[-1].folder is not None:  # stored now: a repeat of it is served silently
                found[key] = store.RunRecord(results[-1].folder)
        except NotRun:  # rendering only: a placeholder whose cells the tables show as "not run"
            results.append(RunResult.not_run(cfg))
            missing.append(cfg)
    if missing:
        print(f"render-only: {len(missing)} of {len(configs)} runs are in no store; their cells read 'not run'")
        for line in near_miss_lines(missing, results_dir):
            print(line)
    return results


NEAR_MISS_LINES = 3  # at most this many "differs only in" lines after a render-only count


def near_miss_lines(missing: Sequence[RunConfig], results_dir: str | os.PathLike | None = None) -> list[str]:
    """For configs no store holds, lines naming a stored run of the same method and seed that differs
    in one or two settings (a setting a caller left out renders "not run" otherwise without a word)."""
    records = store.stored_records(results_dir)
    lines = []
    for cfg in {c.hash(): c for c in missing}.values():
        near = store.near_runs(cfg, records)
        if near:
            lines.append("  " + store.describe_near(cfg, near))
        if len(lines) == NEAR_MISS_LINES:
            break
    return lines


def _execute(configs: Sequence[RunConfig], results_dir, progress: bool, executor: str, workers: int | None,
             address: str | None, threads: int | None, verbose: bool = False) -> None:
    """Train the configs the store lacks on ``executor``; one FedlibError naming the failures."""
    from fedlib.orchestration.executor import FAILED, execute

    outcomes = execute(configs, executor=executor, workers=workers, threads=threads, results_dir=results_dir,
                       address=address, progress=progress, verbose=verbose)
    failed = [o for o in outcomes if o.status == FAILED]
    if failed:
        first = failed[0]
        raise FedlibError(f"{len(failed)} of {len(outcomes)} runs failed on {executor} workers; first: "
                          f"{first.config.hash()} ({first.config.method} on {first.config.dataset}): {first.error}")


ACCURACY_COLUMNS = ("final_accuracy", "best_accuracy", "max_class_accuracy", "mean_class_accuracy",
                    "min_class_accuracy")
DIVERGED = "diverged"  # the worst_class of a diverged run, which has none (the text of its table cells)
SEEDS = "seeds"  # mean_std's mean.attrs key: cell -> (seeds run, seeds declared, seeds diverged)


def run_flags(result: RunResult) -> dict[str, bool]:
    """The run's ``not_run`` (a render-only placeholder) and ``diverged`` flags: where either is
    set, the run's accuracies are no result and every frame shows NaN for them."""
    return {"not_run": bool(result.summary.get("not_run", False)),
            "diverged": bool(result.summary.get("diverged", False))}


def results_frame(results: Iterable[RunResult]) -> pd.DataFrame:
    """One row per run: the config fields that vary, accuracies (in %), the round of the best
    accuracy (counted from 1, as :func:`curves_frame` and the CLI count), the worst class.

    A diverged or not-run run's accuracies are NaN; its worst class is :data:`DIVERGED` or None.
    """
    rows = []
    for result in results:
        row = result.config.hashed_fields()
        row.pop("results_version", None)
        row["method_args"] = ",".join(f"{k}={v}" for k, v in sorted(result.config.method_args.items()))
        flags = run_flags(result)
        diverged, not_run = flags["diverged"], flags["not_run"]
        class_acc = np.asarray(result.class_accuracy or [float("nan")], dtype=float)
        worst = None if not_run or diverged else int(np.argmin(class_acc))
        row.update({
            "hash": result.config.hash(),
            "final_accuracy": 100 * result.final_accuracy,
            "best_accuracy": 100 * result.best_accuracy,
            "best_round": _counted_from_one(result.summary.get("best_round")),
            "max_class_accuracy": 100 * float(class_acc.max()),
            "mean_class_accuracy": 100 * float(class_acc.mean()),
            "min_class_accuracy": 100 * float(class_acc.min()),
            "worst_class": DIVERGED if diverged else None if worst is None else result.class_names[worst],
            "seconds": result.summary.get("train_seconds"),
            "diverged": diverged,
            "not_run": not_run,
        })
        if diverged or not_run:  # a diverged run's accuracies are not results: no table may average them in
            for key in ACCURACY_COLUMNS:
                row[key] = float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


def _counted_from_one(stored_round: int | None) -> int | None:
    """A round as people count it: the store numbers rounds from 0."""
    return int(stored_round) + 1 if isinstance(stored_round, numbers.Integral) else None


def curves_frame(results: Iterable[RunResult], key: str = "accuracy") -> pd.DataFrame:
    """Long table of one metric per round: columns hash, method, seed, round, value."""
    rows = []
    for result in results:
        for entry in result.rounds:
            if key in entry:
                rows.append({"hash": result.config.hash(), "method": result.config.method,
                             "seed": result.config.seed, "round": entry["round"] + 1, key: entry[key]})
    return pd.DataFrame(rows)


def cell_keys(index: str | list[str], columns: str | list[str] | None) -> list[str]:
    """The frame columns that name one table cell: the row key(s), then the column key(s)."""
    keys = [index] if isinstance(index, str) else list(index)
    if columns is not None:
        keys += [columns] if isinstance(columns, str) else list(columns)
    return keys


def flag_column(frame: pd.DataFrame, name: str) -> pd.Series:
    """A run flag column (``diverged``, ``not_run``) as booleans; False where the frame lacks it
    or a row leaves it empty (e.g. a paper-only row added by hand)."""
    if name not in frame.columns:
        return pd.Series(False, index=frame.index)
    return frame[name].eq(True)


def mean_std(frame: pd.DataFrame, index: str | list[str], columns: str | list[str] | None,
             value: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Mean and standard deviation of ``value`` over seeds, laid out as index x columns; the std
    of a cell with one seed is NaN (unknown, not zero), and its text shows the mean alone.

    A cell with a diverged run (``diverged`` column) has NaN mean and std: the mean of its other
    seeds is no result. Runs not in a store (``not_run``) are left out of a cell's mean, and
    ``mean.attrs[SEEDS]`` maps each cell (its row then column labels, as a tuple) to (seeds run,
    seeds declared, seeds diverged), which :func:`format_mean_std` and the paper comparison show.
    """
    keys = cell_keys(index, columns)
    grouped = frame.groupby(keys, sort=False)[value]
    mean, std = grouped.mean(), grouped.std(ddof=0).where(grouped.count() > 1)
    counts = _seed_counts(frame, keys)
    mean, std = mean.mask(counts["diverged"] > 0), std.mask(counts["diverged"] > 0)
    if columns is None:
        mean, std = mean.to_frame(value), std.to_frame(value)
    else:
        cols = [columns] if isinstance(columns, str) else list(columns)
        mean, std = mean.unstack(cols), std.unstack(cols)
    mean.attrs[SEEDS] = _counts_by_cell(counts, (value,) if columns is None else ())
    return mean, std


def _seed_counts(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per cell: the runs in a store (``run``), all its rows (``declared``), the diverged ones."""
    flags = frame[keys].assign(_run=~flag_column(frame, "not_run"), _diverged=flag_column(frame, "diverged"))
    return flags.groupby(keys, sort=False).agg(run=("_run", "sum"), declared=("_run", "size"),
                                               diverged=("_diverged", "sum"))


def _counts_by_cell(counts: pd.DataFrame, tail: tuple) -> dict[tuple, tuple[int, int, int]]:
    """:func:`_seed_counts` as a dict keyed by the cell's labels (plus ``tail``: the one column's
    name where the layout has no column keys)."""
    rows = counts[["run", "declared", "diverged"]].to_numpy()
    return {(*_as_tuple(cell), *tail): tuple(int(n) for n in row) for cell, row in zip(counts.index, rows)}


def _as_tuple(label) -> tuple:
    return label if isinstance(label, tuple) else (label,)


def seed_counts(mean: pd.DataFrame, *labels) -> tuple[int, int, int] | None:
    """(seeds run, seeds declared, seeds diverged) of a :func:`mean_std` cell named by its row
    and column labels; None when unknown (a frame that did not come from mean_std, or whose
    labels were renamed since)."""
    return mean.attrs.get(SEEDS, {}).get(tuple(part for label in labels for part in _as_tuple(label)))


def seed_note(counts: tuple[int, ...] | None) -> str:
    """' (k of n seeds)' for a cell that fewer of its declared seeds ran for; '' otherwise."""
    if counts is None or not 0 < counts[0] < counts[1]:
        return ""
    return f" ({counts[0]} of {counts[1]} seeds)"


def seed_notes(mean: pd.DataFrame) -> pd.DataFrame:
    """:func:`seed_note` of every cell of a :func:`mean_std` mean, laid out as it."""
    notes = pd.DataFrame("", index=mean.index, columns=mean.columns, dtype=object)
    for row in mean.index:
        for column in mean.columns:
            notes.at[row, column] = seed_note(seed_counts(mean, row, column))
    return notes


def format_mean_std(mean: pd.DataFrame, std: pd.DataFrame, digits: int = 2,
                    mark_best: bool = True) -> pd.DataFrame:
    """'mean ± std' strings ('mean' where the std is unknown: one seed); the best mean of each
    column is wrapped in ** (Markdown bold). A NaN mean (no run, or one diverged) reads '-' and
    never counts as best; a cell that fewer seeds ran for than declared competes with the mean
    of its stored seeds and says so: '97.75 (1 of 3 seeds)'."""
    text = mean.copy().astype(object)
    notes = seed_notes(mean)
    for column in mean.columns:
        best = mean[column].max()
        for row in mean.index:
            m, s = mean.at[row, column], std.at[row, column]
            if pd.isna(m):
                text.at[row, column] = "-"
                continue
            cell = f"{m:.{digits}f}" if pd.isna(s) else f"{m:.{digits}f} ± {s:.{digits}f}"
            text.at[row, column] = (f"**{cell}**" if mark_best and m == best else cell) + notes.at[row, column]
    return text
