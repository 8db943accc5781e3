"""Regenerate the full-scale tables of README.md ("What reproduces at full scale") from the
committed paper-profile tables, so that no number there is typed by hand.

    .venv/bin/python tools/full_scale_readme.py           # print the generated blocks
    .venv/bin/python tools/full_scale_readme.py --write   # rewrite them in README.md
    .venv/bin/python tools/full_scale_readme.py --check   # exit 1 when README.md is stale

Sources: ``tables/paper/fedvls_table1_vs_paper.csv`` (FedED/FedVLS Table 1, MNIST column),
``tables/paper/pkd_table1_vs_paper.csv`` and ``pkd_table1_4_worst_class.csv`` (PKD Table 1),
``tables/paper/fedlmd_table3_vs_paper.csv`` (FedLMD Table 3, the columns run). They
hold means and std over seeds but not how many seeds went into a cell: the seed count comes from
the runs of the notebook's paper-profile grid (with the ``-p`` parameters ``tables/paper/index.json``
records for the table) that the reference store (``reference_results/``) holds. A cell with a diverged
run has no number (the committed table holds NaN, as ``fedlib.orchestration.experiments.mean_std`` leaves it) and
its verdict reads "diverged (k of n seeds)". A cell whose stored runs disagree with the committed
table (a run added, the table not republished) stops the tool: republish the tables first. Only
the lines between a block's markers ``<!-- full-scale:NAME begin -->`` and
``<!-- full-scale:NAME end -->`` are rewritten.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fedlib.paper.grids import fedlmd, fedvls, pkd  # noqa: E402
from fedlib.paper.plan import notebook_parameters  # noqa: E402
from fedlib.reporting.intervals import BEATS, TRAILS, Difference, seed_mean  # noqa: E402
from fedlib.reporting.notebook import load_profiles  # noqa: E402
from fedlib.reporting.paper_numbers import RESULTS_DIR, parse_setting  # noqa: E402
from fedlib.reporting.plots import display_name  # noqa: E402
from fedlib.reporting.settings import setting_words  # noqa: E402
from fedlib.reporting.tables import DIVERGED, NOT_RUN, setting_label  # noqa: E402
from fedlib.store import RunRecord  # noqa: E402

README = ROOT / "README.md"
TABLES = ROOT / "tables" / "paper"
STORE = ROOT / "reference_results"
FEDVLS_NOTEBOOK, PKD_NOTEBOOK = "fedvls_table1_4_dirichlet", "pkd_table1_4_class_accuracy"
FEDLMD_NOTEBOOK = "fedlmd_table3_partitions"
SOURCES = {FEDVLS_NOTEBOOK: "fedvls_table1_vs_paper.csv", PKD_NOTEBOOK: "pkd_table1_vs_paper.csv",
           FEDLMD_NOTEBOOK: "fedlmd_table3_vs_paper.csv"}
NOT_IN_PAPER = "not in the paper's table"
TOLERANCE = 1.5  # points beyond the paper's std within which a cell counts as reproduced
BASELINE = "fedavg"
REPRODUCED, ORDERING, NOT_REPRODUCED = "reproduced", "ordering reproduced, values differ", "not reproduced"
ORDERING_UNDECIDED = "not reproduced; ordering undecided by the seeds"
NO_BASELINE = "values differ; ordering not checked (FedAvg not run)"
FEDAVG_DIVERGED = "values differ; ordering not checked (FedAvg diverged)"
RULE = (f"Verdicts are computed by `tools/full_scale_readme.py` from the numbers shown: **{REPRODUCED}** when "
        f"|ours - paper| <= the paper's std (0 where it gives none) + {TOLERANCE}; otherwise **{ORDERING}** "
        f"when the method stands on the same side of FedAvg (better, worse or level) in ours as in the paper, in that "
        f"column, ours read from the seeds (the 95 % bootstrap interval of our difference to FedAvg lies wholly on "
        f"that side; where it holds zero, and always with one seed, **{ORDERING_UNDECIDED}**); "
        f"otherwise **{NOT_REPRODUCED}** (FedAvg itself, outside the tolerance, is {NOT_REPRODUCED}). "
        f"A cell with a diverged seed shows no number and reads **diverged**.")
REPUBLISH = ("republish it (./reproduce.sh --profile paper --render-only --publish --figures figures/paper "
             "--tables tables/paper --only {notebook}), then run tools/full_scale_readme.py --write")


class StaleTable(Exception):
    """A committed table disagrees with the reference store, or README.md with the tables (or a
    cell's declared runs are not one config per seed)."""


@dataclass
class Cell:
    """One cell of a paper table: the paper's number and ours (PKD: the Min), with the seeds behind ours."""

    method: str
    column: str  # the paper's column, e.g. "Dir(β=0.05)" or "MNIST, 10 clients"
    paper: float
    paper_std: float | None
    ours: float | None
    ours_std: float | None
    seeds: tuple[int, ...] = ()  # the stored, not diverged runs behind ours
    diverged: tuple[int, ...] = ()
    paper_text: str = ""
    ours_text: str = ""
    verdict: str = ""
    values: tuple[float, ...] = ()  # ours, one value per seed in ``seeds`` (points): the ordering's interval


# ---------------------------------------------------------------------- the rule
def verdict(ours, paper: float, paper_std: float | None = None, fedavg: tuple | None = None) -> str:
    """The verdict on one table cell: ``ours`` is every seed's value (a number: one seed's).

    - "reproduced" when |mean of ours - paper| <= paper_std (0 when the paper gives none) + TOLERANCE,
      on the numbers as the table shows them (2 decimals);
    - else "ordering reproduced, values differ" when the method stands on the same side of FedAvg
      (better, worse or level) in ours as in the paper; ``fedavg`` is (our FedAvg's seeds, the
      paper's FedAvg) in the same column. Our side is read from the seeds: the bootstrap interval of
      our difference to FedAvg (:class:`fedlib.reporting.intervals.Difference`) lies wholly above or
      below zero. Where it holds zero, or a side has one seed, the ordering is undecided (unless the
      paper has the two level, which an interval holding zero agrees with);
    - else "not reproduced". FedAvg itself (``fedavg`` None) has no ordering to keep: outside the
      tolerance it is "not reproduced". Where our FedAvg is not run (``fedavg[0]`` None) the
      ordering cannot be checked, and the verdict says so.

    PKD's cells pass their Min (the worst class's accuracy).
    """
    if abs(round(seed_mean(ours) - paper, 2)) <= round((paper_std or 0.0) + TOLERANCE, 2):
        return REPRODUCED
    if fedavg is None:
        return NOT_REPRODUCED
    ours_fedavg, paper_fedavg = fedavg
    if ours_fedavg is None:
        return NO_BASELINE
    paper_side = _side(paper, paper_fedavg)
    outcome = Difference.of(ours, ours_fedavg).outcome
    ours_side = {BEATS: 1, TRAILS: -1}.get(outcome)
    if ours_side is None:
        return ORDERING if paper_side == 0 else ORDERING_UNDECIDED
    return ORDERING if ours_side == paper_side else NOT_REPRODUCED


def _side(value: float, fedavg: float) -> int:
    """-1, 0 or 1: worse than, level with or better than FedAvg, at the table's 2 decimals."""
    difference = round(value - fedavg, 2)
    return (difference > 0) - (difference < 0)


def judge(cells: list[Cell]) -> None:
    """Set every run cell's verdict, against FedAvg of its column; a cell with a diverged seed
    has no number to judge: its verdict is :func:`diverged_verdict`."""
    fedavg = {c.column: c for c in cells if c.method == BASELINE}
    for cell in cells:
        if cell.diverged:
            cell.verdict = diverged_verdict(cell)
            continue
        if cell.ours is None:
            continue
        base = fedavg.get(cell.column)
        pair = None if cell.method == BASELINE else (_seed_values(base) if base else None,
                                                     base.paper if base else math.nan)
        cell.verdict = verdict(_seed_values(cell), cell.paper, cell.paper_std, pair)
        if cell.verdict == NO_BASELINE and base is not None and base.diverged:
            cell.verdict = FEDAVG_DIVERGED


def _seed_values(cell: Cell) -> tuple[float, ...] | float | None:
    """A cell's values per seed for :func:`verdict` (its mean where they were not read; None: not run)."""
    if cell.ours is None:
        return None
    return cell.values or cell.ours


def diverged_verdict(cell: Cell) -> str:
    """'diverged (k of n seeds)': k of the cell's n stored runs diverged."""
    stored = len(cell.seeds) + len(cell.diverged)
    return f"diverged ({len(cell.diverged)} of {stored} seed{'s' * (stored > 1)})"


# ---------------------------------------------------------------------- the runs behind a cell
def declared_runs(notebook: str) -> dict[tuple[str, str, str], list]:
    """The notebook's paper-profile configs, with the ``-p`` parameters its committed table was
    published with (``tables/paper/index.json``), by table cell: (method, dataset, setting) as the
    committed CSV spells them (PKD: Table 1 only, the setting without its metric)."""
    profile = {**load_profiles(ROOT / "profiles", notebook)["paper"], "profile": "paper",
               **published_parameters(SOURCES[notebook])}
    params = notebook_parameters(ROOT / "notebooks" / f"{notebook}.ipynb", profile)
    if notebook in (FEDVLS_NOTEBOOK, FEDLMD_NOTEBOOK):
        grid = fedvls.table1_4_dirichlet if notebook == FEDVLS_NOTEBOOK else fedlmd.table3_partitions
        keyed = [((c.method, c.dataset, setting_label(c)), c) for c in grid(params)]
    else:
        keyed = [((r.label, r.config.dataset, f"{setting_label(r.config)};{r.extra_setting}"), r.config)
                 for r in pkd.table1_4_runs(params) if r.table == 1]
    runs: dict[tuple[str, str, str], list] = {}
    for key, cfg in keyed:
        runs.setdefault(key, []).append(cfg)
    for key, configs in runs.items():
        seeds = [cfg.seed for cfg in configs]
        if len(set(seeds)) < len(seeds):  # two variants of one seed: their mean is no mean over seeds
            raise StaleTable(f"{notebook}: the cell {' '.join(key)} holds {len(configs)} configs of seeds "
                             f"{seeds}; this tool counts a cell's configs as its seeds")
    return runs


def published_parameters(table: str) -> dict:
    """The ``-p`` parameters over the profile that the committed ``table`` was published with."""
    index = TABLES / "index.json"
    entry = json.loads(index.read_text()).get(table, {}) if index.exists() else {}
    return entry.get("parameters") or {}


def stored_summaries(configs: list) -> list[dict]:
    """The summaries of ``configs``' complete runs in the reference store, each with its seed."""
    records = [(cfg, RunRecord(STORE / cfg.hash())) for cfg in configs]
    return [{**record.read_summary(), "seed": cfg.seed} for cfg, record in records if record.complete]


def check_cell(where: str, ours: float | None, ours_std: float | None, values: list[float],
               notebook: str, diverged: int = 0) -> None:
    """Raise :class:`StaleTable` when a committed cell's mean / std over seeds (population std,
    as ``fedlib.orchestration.experiments.mean_std``) differs from its runs in the reference store: ``values``
    from the runs that did not diverge, ``diverged`` the number that did. A cell with a diverged
    run has no mean and no std (NaN in the table)."""
    mean = statistics.fmean(values) if values and not diverged else None
    std = statistics.pstdev(values) if len(values) > 1 and not diverged else None
    if not (_same(ours, mean) and _same(ours_std, std)):
        expected = f"{DIVERGED} ({diverged} diverged)" if diverged else _mean_std(mean, std)
        raise StaleTable(f"{where}: the committed table says {_mean_std(ours, ours_std)}, its "
                         f"{len(values) + diverged} run(s) in reference_results/ give {expected}; "
                         + REPUBLISH.format(notebook=notebook))


def _same(a: float | None, b: float | None) -> bool:
    """Equal up to the committed tables' rounding to 2 decimals (both absent counts as equal)."""
    return (a is None and b is None) or (a is not None and b is not None and abs(a - b) <= 0.0051)


def _mean_std(mean: float | None, std: float | None) -> str:
    return NOT_RUN if mean is None else f"{mean:.2f}" + ("" if std is None else f" ± {std:.2f}")


def _number(value) -> float | None:
    return None if pd.isna(value) else float(value)


# ---------------------------------------------------------------------- FedVLS Table 1
def fedvls_cells() -> list[Cell]:
    """FedED/FedVLS Table 1, MNIST column: one cell per (method, beta), in the CSV's order."""
    frame = pd.read_csv(TABLES / SOURCES[FEDVLS_NOTEBOOK])
    frame = frame[frame["dataset"] == "mnist"]
    runs = declared_runs(FEDVLS_NOTEBOOK)
    cells = []
    for row in frame.itertuples(index=False):
        summaries = stored_summaries(runs.get((row.method, row.dataset, row.setting), []))
        kept = [s for s in summaries if not s.get("diverged")]
        ours, ours_std = _number(row.ours), _number(row.ours_std)
        check_cell(f"fedvls_table1_vs_paper.csv, {row.method} {row.setting}", ours, ours_std,
                   [100 * s["best_accuracy"] for s in kept], FEDVLS_NOTEBOOK, len(summaries) - len(kept))
        cell = Cell(row.method, setting_words(row.setting), float(row.paper), _number(row.paper_std), ours, ours_std,
                    tuple(s["seed"] for s in kept), tuple(s["seed"] for s in summaries if s.get("diverged")),
                    values=tuple(100 * s["best_accuracy"] for s in kept))
        cell.paper_text = _mean_std(cell.paper, cell.paper_std)
        cell.ours_text = ours_text(cell, _mean_std(ours, ours_std))
        cells.append(cell)
    judge(cells)
    return sorted(cells, key=_column_order(cells))


def _column_order(cells: list[Cell]) -> Callable[[Cell], tuple[int, int]]:
    """Rows grouped by column (the CSV's column order), the CSV's method order within."""
    columns = list(dict.fromkeys(c.column for c in cells))
    methods = list(dict.fromkeys(c.method for c in cells))
    return lambda c: (columns.index(c.column), methods.index(c.method))


def ours_text(cell: Cell, numbers: str) -> str:
    """Our numbers with the seeds behind them: the seed count when more than one, the seed when
    it is not seed 0; "diverged (seed s)" instead of numbers where a seed diverged."""
    if cell.diverged:
        return f"{DIVERGED} (seed {_seeds(cell.diverged)})"
    if cell.ours is None:
        return NOT_RUN
    notes = [f"{len(cell.seeds)} seeds"] if len(cell.seeds) > 1 else [] if cell.seeds == (0,) else \
        [f"seed {_seeds(cell.seeds)}"]
    return numbers + (f" ({'; '.join(notes)})" if notes else "")


def _seeds(seeds: tuple[int, ...]) -> str:
    return ", ".join(str(s) for s in seeds)


def fedvls_block() -> str:
    """The README's FedVLS Table 1 block: the rule, the seeds, the table, the cells not run."""
    cells = fedvls_cells()
    run = [c for c in cells if c.ours is not None or c.diverged]
    lines = [RULE, "", seeds_line(run, FEDVLS_NOTEBOOK), "",
             "| cell | paper | ours | diff | verdict |", "|---|---|---|---|---|"]
    for c in run:
        lines.append(f"| {display_name(c.method)} {c.column} | {c.paper_text} | {c.ours_text} | {_diff(c)} | {c.verdict} |")
    missing = not_run_line([c for c in cells if c not in run], [c.column for c in cells], "every β")
    return "\n".join(lines + (["", missing] if missing else []))


def _diff(cell: Cell) -> str:
    return "" if cell.ours is None else f"{cell.ours - cell.paper:+.2f}"


def seeds_line(cells: list[Cell], notebook: str) -> str:
    """How many seeds stand behind the ours numbers, per group of cells (says so when they mix),
    how many cells diverged, and the seeds the notebook's paper profile declares."""
    groups = Counter(c.seeds for c in cells if c.ours is not None)
    if not groups:
        line = "Ours: no cell has a number."
    elif len(groups) == 1:
        line = f"Ours: each cell with a number is {_runs_behind(next(iter(groups)))}."
    else:
        parts = [f"{n} cell{'s' * (n > 1)} {_runs_behind(seeds)}" for seeds, n in groups.items()]
        line = "Ours mixes seed counts, so compare cells with care: " + "; ".join(parts) + "."
    diverged = sum(1 for c in cells if c.diverged)
    if diverged:
        line += f" {diverged} cell{'s' * (diverged > 1)} with a diverged seed show{'s' * (diverged == 1)} no number."
    declared = sorted({cfg.seed for configs in declared_runs(notebook).values() for cfg in configs})
    return line + f" The paper profile declares seeds {_seeds(tuple(declared))} for every cell."


def _runs_behind(seeds: tuple[int, ...]) -> str:
    if not seeds:
        return "without a run that did not diverge"
    if len(seeds) == 1:
        return f"one run (seed {seeds[0]})"
    return f"the mean ± population std over {len(seeds)} seeds ({_seeds(seeds)})"


def not_run_line(cells: list[Cell], columns: list[str], every: str,
                 label: Callable[[str], str] = str) -> str:
    """One line naming ``cells`` (those without an ours number), methods with the same gaps
    together; a method missing from all of the table's ``columns`` reads ``every``; ``label``
    writes a column as the line names it."""
    gaps: dict[str, list[str]] = {}
    for cell in cells:
        gaps.setdefault(cell.method, []).append(label(cell.column))
    groups: dict[tuple[str, ...], list[str]] = {}
    for method, missing in gaps.items():
        groups.setdefault(tuple(missing), []).append(display_name(method))
    columns = [label(column) for column in columns]
    parts = [f"{', '.join(methods)} at " + (every if set(missing) == set(columns) and len(set(columns)) > 1
                                             else ", ".join(missing))
             for missing, methods in groups.items()]
    return f"Not run: {'; '.join(parts)}." if parts else ""


# ---------------------------------------------------------------------- PKD Table 1
PKD_METRICS = ("max", "ave", "min")


def pkd_cells() -> list[Cell]:
    """PKD Table 1: one cell per (method, dataset, clients), Max / Ave / Min and the worst class;
    the verdict reads the Min."""
    frame = pd.read_csv(TABLES / SOURCES[PKD_NOTEBOOK])
    frame["cell"] = frame["setting"].str.replace(r";metric=\w+$", "", regex=True)
    frame["metric"] = frame["setting"].str.extract(r"metric=(\w+)$", expand=False)
    worst = pd.read_csv(TABLES / "pkd_table1_4_worst_class.csv", dtype={"ours": str, "paper": str},
                        keep_default_na=False).query("table == 1")  # class names ("9", not 9.0); "" if none
    worst = {(r.label, r.dataset, r.setting): r for r in worst.itertuples(index=False)}
    runs = declared_runs(PKD_NOTEBOOK)
    cells = []
    for (method, dataset, setting), rows in frame.groupby(["method", "dataset", "cell"], sort=False):
        rows = rows.set_index("metric").loc[list(PKD_METRICS)]
        summaries = stored_summaries(runs.get((method, dataset, setting), []))
        kept = [s for s in summaries if not s.get("diverged")]
        check_pkd(f"pkd_table1_vs_paper.csv, {method} {dataset} {setting}", rows, kept, len(summaries) - len(kept))
        column = f"{display_name(dataset)}, {parse_setting(setting)['clients']} clients"
        cell = Cell(method, column, float(rows.at["min", "paper"]), _number(rows.at["min", "paper_std"]),
                    _number(rows.at["min", "ours"]), _number(rows.at["min", "ours_std"]),
                    tuple(s["seed"] for s in kept), tuple(s["seed"] for s in summaries if s.get("diverged")),
                    values=tuple(100 * min(s["class_accuracy"]) for s in kept))
        found = worst.get((method, dataset, setting))
        cell.paper_text = _class_text(rows["paper"], None, found.paper if found else None)
        numbers = _class_text(rows["ours"], cell.ours_std, found.ours if found else None)
        cell.ours_text = ours_text(cell, numbers)
        cells.append(cell)
    judge(cells)
    return sorted(cells, key=_column_order(cells))


def check_pkd(where: str, rows: pd.DataFrame, summaries: list[dict], diverged: int = 0) -> None:
    """:func:`check_cell` on each of Max / Ave / Min (the final model's class-wise accuracy) of
    the runs that did not diverge (``summaries``); ``diverged`` runs that did."""
    reduce = {"max": max, "ave": statistics.fmean, "min": min}
    for metric in PKD_METRICS:
        values = [100 * reduce[metric](s["class_accuracy"]) for s in summaries]
        check_cell(f"{where}, {metric}", _number(rows.at[metric, "ours"]), _number(rows.at[metric, "ours_std"]),
                   values, PKD_NOTEBOOK, diverged)


def _class_text(values: pd.Series, min_std: float | None, worst: str | None) -> str:
    """'Max / Ave / Min[ ± std], worst C' (the std of the Min only: the number the verdict reads)."""
    if values.isna().any():
        return NOT_RUN
    text = " / ".join(f"{values[m]:.2f}" for m in PKD_METRICS) + ("" if min_std is None else f" ± {min_std:.2f}")
    return text + (f", worst {worst}" if worst and worst != NOT_RUN else "")


def _setting_text(column: str) -> str:
    """'MNIST, 10 clients' as 'MNIST (10 clients)': a comma-free name for a list."""
    dataset, clients = column.split(", ", 1)
    return f"{dataset} ({clients})"


def pkd_block() -> str:
    """The README's PKD Table 1 block: the seeds, the table of the cells run, the cells not run."""
    cells = pkd_cells()
    run = [c for c in cells if c.ours is not None or c.diverged]
    lines = ["Verdicts as for FedVLS above, on Min (the worst class's accuracy); the paper gives no std.",
             "", seeds_line(run, PKD_NOTEBOOK) if run else "Ours: no cell run yet.", "",
             "| cell | paper Max / Ave / Min | ours Max / Ave / Min | diff (Min) | verdict |",
             "|---|---|---|---|---|"]
    for c in run:
        lines.append(f"| {display_name(c.method)}, {c.column} | {c.paper_text} | {c.ours_text} | {_diff(c)} "
                     f"| {c.verdict} |")
    missing = not_run_line([c for c in cells if c not in run], [c.column for c in cells], "every setting",
                           label=_setting_text)
    return "\n".join(lines + (["", missing] if missing else []))


# ---------------------------------------------------------------------- FedLMD Table 3
SPEEDUP = ";metric=speedup"


def fedlmd_cells() -> list[Cell]:
    """FedLMD Table 3, the columns the committed table holds: best accuracy (the verdict's number)
    with the speedup over FedAvg beside it, one cell per (method, column)."""
    frame = pd.read_csv(TABLES / SOURCES[FEDLMD_NOTEBOOK])
    is_speedup = frame["setting"].str.endswith(SPEEDUP)
    speedups = {(r.method, r.dataset, r.setting[:-len(SPEEDUP)]): r for r in frame[is_speedup].itertuples(index=False)}
    runs = declared_runs(FEDLMD_NOTEBOOK)
    cells = []
    for row in frame[~is_speedup].itertuples(index=False):
        summaries = stored_summaries(runs.get((row.method, row.dataset, row.setting), []))
        kept = [s for s in summaries if not s.get("diverged")]
        ours, ours_std = _number(row.ours), _number(row.ours_std)
        check_cell(f"fedlmd_table3_vs_paper.csv, {row.method} {row.dataset} {row.setting}", ours, ours_std,
                   [100 * s["best_accuracy"] for s in kept], FEDLMD_NOTEBOOK, len(summaries) - len(kept))
        column = f"{display_name(row.dataset)}, {setting_words(row.setting)}"
        cell = Cell(row.method, column, _number(row.paper), _number(row.paper_std), ours, ours_std,
                    tuple(s["seed"] for s in kept), tuple(s["seed"] for s in summaries if s.get("diverged")),
                    values=tuple(100 * s["best_accuracy"] for s in kept))
        speed = speedups.get((row.method, row.dataset, row.setting))
        cell.paper_text = NOT_IN_PAPER if cell.paper is None else \
            _mean_std(cell.paper, cell.paper_std) + _speedup_text(speed.paper if speed else None)
        cell.ours_text = ours_text(cell, _mean_std(ours, ours_std) + _speedup_text(speed.ours if speed else None))
        cells.append(cell)
    judge([c for c in cells if c.paper is not None])
    for cell in cells:
        cell.verdict = cell.verdict or (NOT_IN_PAPER if cell.paper is None else "")
    return sorted(cells, key=_column_order(cells))


def _speedup_text(value) -> str:
    return "" if value is None or pd.isna(value) else f" ({float(value):.2f}x)"


def fedlmd_block() -> str:
    """The README's FedLMD Table 3 block: the seeds, the run cells, what is not run."""
    cells = fedlmd_cells()
    paper = pd.read_csv(RESULTS_DIR / "fedlmd_table3.csv")
    paper = paper[~paper["setting"].str.contains("metric=")]
    columns = {f"{display_name(d)}, {setting_words(s)}" for d, s in zip(paper["dataset"], paper["setting"])}
    missing = sorted(columns - {c.column for c in cells})
    lines = ["Verdicts as for FedVLS above, on the best test accuracy over rounds; beside it in brackets the speedup "
             "(rounds FedAvg needs for its best accuracy / rounds the method needs to reach it). The paper gives no std.",
             "", seeds_line([c for c in cells if c.ours is not None], FEDLMD_NOTEBOOK).replace(
                 "The paper profile declares", "The committed table was rendered (`-p` parameters in "
                 "tables/paper/index.json) for the runs made, with"), "",
             "| cell | paper | ours | diff | verdict |", "|---|---|---|---|---|"]
    for c in (c for c in cells if c.ours is not None):
        diff = "" if c.paper is None else f"{c.ours - c.paper:+.2f}"
        lines.append(f"| {display_name(c.method)}, {c.column} | {c.paper_text} | {c.ours_text} | {diff} | {c.verdict} |")
    run_methods = {c.method for c in cells}
    others = [display_name(m) for m in dict.fromkeys(paper["method"]) if m not in run_methods]
    not_run = [f"{len(missing)} of the paper's {len(columns)} columns ({'; '.join(missing)})"] if missing else []
    not_run += [", ".join(others) + " in every column"] if others else []
    not_yet = [f"{display_name(c.method)} at {c.column}" for c in cells if c.ours is None]
    not_run += ["in the columns run, " + ", ".join(not_yet)] if not_yet else []
    return "\n".join(lines + (["", "Not run: " + "; ".join(not_run) + "."] if not_run else []))


# ---------------------------------------------------------------------- the README
BLOCKS = {"fedvls_table1": ("tables/paper/fedvls_table1_vs_paper.csv", fedvls_block),
          "pkd_table1": ("tables/paper/pkd_table1_vs_paper.csv", pkd_block),
          "fedlmd_table3": ("tables/paper/fedlmd_table3_vs_paper.csv", fedlmd_block)}


def markers(name: str) -> tuple[str, str]:
    """The lines that open and close a generated block of the README."""
    return f"<!-- full-scale:{name} begin -->", f"<!-- full-scale:{name} end -->"


def generated(name: str, body: str) -> str:
    """A block's lines between its markers: a do-not-edit note and the body."""
    source = BLOCKS[name][0]
    return f"<!-- generated by tools/full_scale_readme.py from {source}: edit the tool, not these lines -->\n{body}"


def block_of(text: str, name: str) -> str:
    """What ``text`` holds between the markers of block ``name`` (without the marker lines)."""
    begin, end = markers(name)
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise StaleTable(f"README.md must hold the markers {begin} and {end} once each, in that order")
    return text[text.index(begin) + len(begin):text.index(end)].strip("\n")


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with block ``name`` holding ``body`` between its markers."""
    begin, end = markers(name)
    block_of(text, name)  # the markers are there, once each
    return text[:text.index(begin) + len(begin)] + f"\n{body}\n" + text[text.index(end):]


def render() -> dict[str, str]:
    """Every block's generated lines, by name."""
    return {name: generated(name, build()) for name, (_, build) in BLOCKS.items()}


def stale_block(text: str, blocks: dict[str, str]) -> str | None:
    """The name of the first block of ``text`` that differs from ``blocks``; None when all agree."""
    return next((name for name, body in blocks.items() if block_of(text, name) != body), None)


def check(readme: Path = README, blocks: dict[str, str] | None = None) -> str | None:
    """None when ``readme`` is up to date, else a one-line message naming the first stale block."""
    name = stale_block(readme.read_text(encoding="utf-8"), blocks or render())
    if name is None:
        return None
    return (f"{readme.name} is stale: its {name} table differs from {BLOCKS[name][0]}; run "
            f".venv/bin/python tools/full_scale_readme.py --write")


def write(readme: Path = README, blocks: dict[str, str] | None = None) -> bool:
    """Rewrite the generated blocks of ``readme``; whether anything changed."""
    text = readme.read_text(encoding="utf-8")
    updated = text
    for name, body in (blocks or render()).items():
        updated = replace_block(updated, name, body)
    if updated != text:
        readme.write_text(updated, encoding="utf-8")
    return updated != text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help="rewrite the generated blocks of README.md")
    action.add_argument("--check", action="store_true", help="exit 1 when README.md is stale")
    parser.add_argument("--readme", type=Path, default=README, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        if args.check:
            message = check(args.readme)
            print(message or f"{args.readme.name}: the full-scale tables are up to date")
            return 1 if message else 0
        if args.write:
            print(f"{args.readme.name}: " + ("rewritten" if write(args.readme) else "already up to date"))
            return 0
        print("\n\n".join(f"{markers(n)[0]}\n{body}\n{markers(n)[1]}" for n, body in render().items()))
        return 0
    except StaleTable as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
