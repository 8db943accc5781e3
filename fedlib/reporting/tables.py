"""What every table notebook shares: the paper's metric, the paper layout, paper vs ours.

A table notebook builds its grid with :mod:`fedlib.paper.grids`, prints the plan and saves its tables
with :mod:`fedlib.reporting.report`, calls ``experiments.run_all``, turns the results into a frame with
:func:`table_frame` (one row per run, with a ``setting`` column in the papers' vocabulary such as
``beta=0.05`` or ``s=2``), and then

- :func:`paper_layout`      -- mean ± std over seeds, best per column in bold, as the paper lays it out;
- :func:`compare_with_paper` -- ours, the paper's number and the difference side by side.

PKD's tables report class-wise Max / Ave / Min (:func:`class_metric_frame`) and, in Tables 9-10,
the computation in units U needed to reach a minimum class accuracy, counted from the work each
round logged (:mod:`fedlib.reporting.cost_units`, whose names are importable from here); FedLMD's
Table 3 adds a speedup over FedAvg read from the stored curves (:func:`speedup_frame`).

The paper's numbers come from ``fedlib/reporting/paper_results`` through :func:`paper_numbers`; a notebook
never types them in.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np
import pandas as pd

from fedlib.core.config import RunConfig
from fedlib.engine.engine import MAX_REPORTED_GROUPS, RunResult, load_run_dataset
from fedlib.errors import FedlibError, one_of
from fedlib.orchestration import experiments
from fedlib.orchestration.experiments import flag_column, run_flags, seed_note
from fedlib.reporting.cost_units import (  # noqa: F401 - PKD's cost in U, importable from here
    COST_CURVES, EXPERT_OUTPUTS, TARGET_TOLERANCE, cost_frame, cost_to_reach, round_cost_units)
from fedlib.reporting.settings import setting_label, setting_words  # noqa: F401

PAPER_COLUMNS = ["paper", "table", "method", "dataset", "setting", "value", "std"]

# How each paper reports accuracy, as the results_frame column that matches it. FedVLS/FedED,
# FedLMD and FedCSD report the best test accuracy over rounds; PKD the final round's class-wise
# accuracies (Max / Ave / Min, selected with the setting "metric=max|ave|min").
PAPER_METRIC = {"feded": "best_accuracy", "fedvls": "best_accuracy", "fedlmd": "best_accuracy",
                "fedcsd": "best_accuracy", "pkd": "final class-wise accuracy"}
PKD_METRICS = {"max": "max_class_accuracy", "ave": "mean_class_accuracy", "min": "min_class_accuracy"}

# Names the papers use for a method that fedlib registers under another name.
METHOD_ALIASES = {"feded": "fedvls"}
NEVER = "never"  # how a table shows an infinite cost (the paper's '-': target not reached)


# ---------------------------------------------------------------------- our numbers
def table_frame(results: Sequence[RunResult], labels: dict[str, str] | None = None) -> pd.DataFrame:
    """``experiments.results_frame`` plus ``setting`` and ``label`` columns.

    ``labels`` maps a config hash to the row name the paper uses (e.g. an ablation row such as
    "w/o mask"); runs without one are labelled by their method name.
    """
    frame = experiments.results_frame(results)
    frame["setting"] = [setting_label(r.config) for r in results]
    labels = labels or {}
    frame["label"] = [labels.get(r.config.hash(), r.config.method) for r in results]
    return frame


def metric_column(paper: str, setting: str | None = None) -> str:
    """The results_frame column that follows ``paper``'s evaluation convention."""
    if paper not in PAPER_METRIC:
        raise one_of("paper", paper, PAPER_METRIC)
    if paper != "pkd":
        return PAPER_METRIC[paper]
    name = (setting or "metric=min").split("=")[-1]
    if name not in PKD_METRICS:
        raise FedlibError(f"PKD metric must be one of max, ave, min (setting 'metric=<name>'), got {setting!r}")
    return PKD_METRICS[name]


def best_within_rounds(results: Sequence[RunResult], budgets: Sequence[int]) -> pd.DataFrame:
    """Best test accuracy (%) within the first N rounds of each stored curve, one row per (run, N).

    This is how a shorter budget reads under the best-over-rounds convention (FedED Table 4):
    the runs are not repeated, their stored curves are cut at round N. The ``setting`` column
    gains ``;round=N`` as in ``fedlib/reporting/paper_results``; ``not_run`` and ``diverged`` carry the
    run's flags, so :func:`paper_layout` shows those cells as such. A diverged run's best is NaN
    at every budget, also one it reached before diverging: the run is no result.
    """
    rows = []
    for result in results:
        flags = run_flags(result)
        curve = result.curve("accuracy")  # indexed by 0-based round
        for budget in budgets:
            if budget > result.config.rounds:
                raise FedlibError(f"budget {budget} exceeds the run's {result.config.rounds} rounds; "
                                  f"pick budgets <= rounds")
            within = curve[curve.index < budget]
            usable = len(within) > 0 and not any(flags.values())
            rows.append({"hash": result.config.hash(), "label": result.config.method,
                         "dataset": result.config.dataset, "seed": result.config.seed, "round": budget,
                         "setting": f"{setting_label(result.config)};round={budget}",
                         "best_accuracy": 100 * float(within.max()) if usable else float("nan"), **flags})
    return pd.DataFrame(rows)


def group_accuracy_frame(results: Sequence[RunResult], key: str = "domain", at: str = "final") -> pd.DataFrame:
    """Accuracy (%) of each run's global model on every group's test split (Office-Caltech-10's
    domains), from the ``group_accuracy`` the engine logs, plus their mean as ``<key>=average``.

    ``at="final"`` reads the last evaluated round; ``at="best"`` the evaluated round whose mean
    over the groups is highest (best over rounds, every group read at that one round). One row per
    run and group, with the setting ``partition=...;domain=<name>`` of ``fedlib/reporting/paper_results``.
    Data without named groups count as one group, ``all``, read from the overall accuracy.
    ``not_run`` and ``diverged`` carry the run's flags; such a run's accuracies are NaN.
    """
    if at not in ("final", "best"):
        raise one_of("reading", at, ("final", "best"))
    rows = []
    for result in results:
        cfg, flags = result.config, run_flags(result)
        values = _unread_groups(cfg) if any(flags.values()) else _group_values(result, at)
        rows += [{"hash": cfg.hash(), "label": cfg.method, "dataset": cfg.dataset, "seed": cfg.seed,
                  "setting": f"{setting_label(cfg)};{key}={name}", "accuracy": 100 * value, **flags}
                 for name, value in values.items()]
    return pd.DataFrame(rows)


def _group_values(result: RunResult, at: str) -> dict[str, float]:
    """A run's accuracy per group and their mean (``average``), at its final or best evaluated round."""
    evaluated = [r for r in result.rounds if "accuracy" in r]
    chosen = max(evaluated, key=_group_mean) if at == "best" else evaluated[-1]
    names = load_run_dataset(result.config).group_names if "group_accuracy" in chosen else None
    values = dict(zip(names, chosen["group_accuracy"])) if names else {"all": chosen["accuracy"]}
    values["average"] = float(np.mean(list(values.values())))
    return values


def _unread_groups(cfg: RunConfig) -> dict[str, float]:
    """NaN for every group and their average, for a run that diverged or is in no store: the
    groups named as a stored run's would be, or the average alone when the data cannot load."""
    try:
        names = load_run_dataset(cfg).group_names
    except (FedlibError, OSError):
        return {"average": float("nan")}
    names = names if names and len(names) <= MAX_REPORTED_GROUPS else ["all"]
    return {name: float("nan") for name in [*names, "average"]}


def _group_mean(record: dict) -> float:
    """A round's mean accuracy over its groups (its overall accuracy when it has none)."""
    return float(np.mean(record.get("group_accuracy") or [record["accuracy"]]))


def class_metric_frame(frame: pd.DataFrame, extra_setting: dict[str, str] | None = None) -> pd.DataFrame:
    """PKD's reporting: one row per (run, metric) with ``metric=max|ave|min`` in the setting.

    ``frame`` is a :func:`table_frame`; the ``value`` column holds the final global model's
    max / mean / min class-wise accuracy (%). ``extra_setting`` maps a run hash to pairs the
    paper's setting carries beyond the partition (``clients=10``, ``model=vgg9``), appended
    before the metric.
    """
    rows = []
    for _, run_row in frame.iterrows():
        extra = (extra_setting or {}).get(run_row["hash"], "")
        for metric, column in PKD_METRICS.items():
            setting = ";".join(part for part in (run_row["setting"], extra, f"metric={metric}") if part)
            rows.append({**run_row.to_dict(), "setting": setting, "metric": metric, "value": run_row[column]})
    return pd.DataFrame(rows)


def speedup_frame(results: Sequence[RunResult], reference: str = "fedavg") -> pd.DataFrame:
    """FedLMD Table 3's speedup: rounds ``reference`` needs to reach its best accuracy, divided
    by the rounds a run needs to reach that accuracy; NaN where it never does (the paper's
    "Failed").

    Runs are paired with the ``reference`` run of the same config apart from method and its
    arguments (same data, partition, budget and seed). One row per run: hash, label, dataset,
    seed, setting (with ``;metric=speedup``), rounds_to_target, speedup, and the flags
    ``diverged`` and ``not_run`` of the speedup: set when the run or its reference diverged or
    is in no store, and the speedup is then NaN (a diverged reference sets no target).
    """
    references = {_peer_key(r.config): r for r in results if r.config.method == reference}
    rows = []
    for result in results:
        peer = references.get(_peer_key(result.config))
        if peer is None:
            raise FedlibError(f"no {reference} run with the same data, partition, budget and seed as "
                              f"{result.config.method} ({result.config.hash()}); add {reference} to the grid")
        own, theirs = run_flags(result), run_flags(peer)
        flags = {name: own[name] or theirs[name] for name in own}
        reference_rounds, rounds = (None, None) if any(flags.values()) else _speedup_rounds(result, peer)
        rows.append({"hash": result.config.hash(), "label": result.config.method,
                     "dataset": result.config.dataset, "seed": result.config.seed,
                     "setting": f"{setting_label(result.config)};metric=speedup", "rounds_to_target": rounds,
                     "speedup": reference_rounds / rounds if rounds else float("nan"), **flags})
    return pd.DataFrame(rows)


def _speedup_rounds(result: RunResult, peer: RunResult) -> tuple[int | None, int | None]:
    """Rounds ``peer`` needs to reach its best accuracy, and rounds ``result`` needs to reach it."""
    target_curve = peer.curve("accuracy")
    target = target_curve.max()
    return _rounds_to_reach(target_curve, target), _rounds_to_reach(result.curve("accuracy"), target)


def _peer_key(cfg: RunConfig) -> str:
    return cfg.replace(method="fedavg", method_args={}).hash()


def _rounds_to_reach(curve: pd.Series, target: float) -> int | None:
    """1-based round at which ``curve`` (indexed by 0-based round) first reaches ``target``."""
    reached = curve[curve >= target - 1e-12]
    return int(reached.index[0]) + 1 if len(reached) else None


# ---------------------------------------------------------------------- the paper's layout
DIVERGED = experiments.DIVERGED  # a cell one of whose runs diverged: no number is shown
NOT_RUN = "not run"  # a cell none of whose runs is in a store (render-only mode)
SEED_COLUMNS = ("seeds_run", "seeds_declared", "seeds_diverged")  # compare_with_paper: the runs behind a cell


def most_frequent(values: pd.Series) -> str:
    """The most frequent of a cell's values over its seeds (e.g. the worst class), every one of them
    joined by " / " when several are equally frequent (seeds 0-2 with three different worst classes
    give all three); :data:`DIVERGED` when one of its runs diverged (results_frame gives it that worst
    class), :data:`NOT_RUN` when none of its runs is stored (render-only mode leaves their values empty)."""
    if values.eq(DIVERGED).any():
        return DIVERGED
    present = values.dropna()
    return " / ".join(map(str, present.mode())) if len(present) else NOT_RUN


def leaders(values: pd.Series) -> list:
    """Every label of ``values`` that holds its maximum, in the series' order (NaN ignored; [] when all
    are NaN). Unlike ``idxmax``, a tie names every method in it, not the first one listed."""
    present = values.dropna()
    if present.empty:
        return []
    return list(present.index[np.isclose(present.to_numpy(dtype=float), present.max(), rtol=0, atol=1e-9)])


def best_text(values: pd.Series, digits: int = 2, name=str) -> str:
    """The best of ``values`` in words: "fedntd (24.20)", "fedavg, pkd tied (65.90)", "all 9 tied
    (0.00)", or "-" when nothing has a value. ``name`` turns a label into the text shown."""
    top = leaders(values)
    if not top:
        return "-"
    value = f"({values[top[0]]:.{digits}f})"
    if len(top) == 1:
        return f"{name(top[0])} {value}"
    if len(top) == len(values):  # "all" only when every label has a value
        return f"all {len(top)} tied {value}"
    return f"{', '.join(name(label) for label in top)} tied {value}"


def paper_layout(frame: pd.DataFrame, value: str, index: str = "label",
                 columns: str | list[str] | None = ("dataset", "setting"), digits: int = 2,
                 row_order: Sequence[str] | None = None, mark_best: bool = True, show_std: bool = True
                 ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Mean, std over seeds and the 'mean ± std' text table (best per column in bold unless
    ``mark_best`` is False; the mean alone unless ``show_std``; an infinite mean -- a cost target
    never reached -- reads "never").

    Rows keep the order of ``row_order`` (the paper's order) when given, else first appearance.
    A cell with a diverged run has a NaN mean and reads "diverged"; one none of whose runs is
    stored reads "not run"; one only some of whose runs are stored shows their mean with
    "(k of n seeds)" (:func:`fedlib.orchestration.experiments.mean_std`).
    """
    columns = list(columns) if isinstance(columns, (list, tuple)) else columns
    if value not in frame.columns:
        raise FedlibError(f"no column {value!r} in the results frame; columns: {sorted(frame.columns)}")
    mean, std = experiments.mean_std(frame, index, columns, value)
    mean.index.name = std.index.name = "method"
    if row_order is not None:
        order = [r for r in row_order if r in mean.index]
        mean, std = mean.loc[order], std.loc[order]
    shown_std = std if show_std else pd.DataFrame(np.nan, index=std.index, columns=std.columns)
    text = experiments.format_mean_std(mean, shown_std, digits=digits, mark_best=mark_best)
    text = text.mask(np.isinf(mean.astype(float)), NEVER + experiments.seed_notes(mean))
    return mean, std, mark_flagged(text, frame, index, columns)


def mark_flagged(text: pd.DataFrame, frame: pd.DataFrame, index: str | list[str] = "label",
                 columns: str | list[str] | None = ("dataset", "setting")) -> pd.DataFrame:
    """``text``, a table laid out from ``frame`` as index x columns, with :data:`NOT_RUN` in the
    cells none of whose runs is stored and :data:`DIVERGED` in those with a diverged run."""
    columns = list(columns) if isinstance(columns, (list, tuple)) else columns
    for flag, label, rule in (("not_run", NOT_RUN, "all"), ("diverged", DIVERGED, "any")):
        if flag_column(frame, flag).any():
            text = text.mask(_flagged_cells(frame, flag, index, columns, text, rule), label)
    return text


def _flagged_cells(frame: pd.DataFrame, flag: str, index, columns, like: pd.DataFrame, rule: str) -> pd.DataFrame:
    """Cells of the paper layout where ``rule`` ("any" or "all") of the runs carry ``flag``."""
    shares = frame[experiments.cell_keys(index, columns)].assign(_share=flag_column(frame, flag).astype(float))
    share, _ = experiments.mean_std(shares, index, columns, "_share")
    if columns is None:
        share.columns = like.columns
    share = share.reindex(index=like.index, columns=like.columns).fillna(0)
    return share > 0 if rule == "any" else share >= 1


# ---------------------------------------------------------------------- the paper's numbers
def paper_numbers(paper: str, table: str | int) -> pd.DataFrame:
    """The numbers ``paper`` reports in ``table``, from ``fedlib/reporting/paper_results`` (long format).

    Columns: paper, table, method, dataset, setting, value, std. An empty frame (with a printed
    note) when that table is not transcribed, so a notebook still renders our side.
    """
    try:
        from fedlib.reporting.paper_numbers import load_paper_results
    except ImportError:
        print("note: fedlib.reporting.paper_numbers is not available; the paper columns stay empty")
        return pd.DataFrame(columns=PAPER_COLUMNS)
    numbers = load_paper_results(paper=paper, table=str(table))
    if numbers.empty:
        print(f"note: no transcribed numbers for {paper} table {table}; the paper columns stay empty")
    return numbers


def setting_into_method(frame: pd.DataFrame, key: str) -> pd.DataFrame:
    """A copy of a paper frame with ``key=value`` moved from ``setting`` into ``method``.

    'fedprox' with 'mu=0.001' in its setting becomes the method 'fedprox (mu 0.001)': one row per
    hyperparameter value, for tables whose columns are one method at several values (PKD
    Table 7's FedProx). Rows without ``key`` are unchanged.
    """
    if "setting" not in frame.columns or "method" not in frame.columns:
        raise FedlibError(f"paper frame lacks a setting or method column; expected {PAPER_COLUMNS}")
    out = frame.copy()
    for i, setting in out["setting"].items():
        pairs = str(setting).split(";")
        moved = [p for p in pairs if p.split("=")[0].strip() == key]
        if moved:
            value = moved[0].split("=", 1)[1].strip()
            out.at[i, "method"] = f"{out.at[i, 'method']} ({key} {value})"
            out.at[i, "setting"] = ";".join(p for p in pairs if p not in moved)
    return out


def compare_with_paper(ours_mean: pd.DataFrame, ours_std: pd.DataFrame, paper_frame: pd.DataFrame,
                       keys: Sequence[str] = ("method", "dataset", "setting"),
                       include_paper_only: bool = False) -> pd.DataFrame:
    """Ours, the paper's value and ``difference = ours - paper``, one row per table cell.

    ``ours_mean``/``ours_std`` are laid out as :func:`paper_layout` returns them (rows x column
    levels); their row index and column levels are matched, in order, to ``keys`` of the
    paper's long frame. Names match loosely (case, '-', '_' and spaces ignored; FedED = FedVLS;
    ``beta=0.50`` = ``beta=0.5``), so the paper's spelling need not be fedlib's.

    ``seeds_run``, ``seeds_declared`` and ``seeds_diverged`` count the runs behind each of our
    cells, as :func:`fedlib.orchestration.experiments.mean_std` recorded them on ``ours_mean`` (empty where it
    did not, e.g. after its labels were renamed): ``ours`` is NaN where a run diverged, and the
    mean of the stored runs where fewer ran than were declared.
    """
    ours = _long(ours_mean, keys, "ours").merge(_long(ours_std, keys, "ours_std"), on=list(keys))
    ours = _with_seed_counts(ours, ours_mean, keys)
    missing = [k for k in [*keys, "value"] if k not in paper_frame.columns]
    if missing:
        raise FedlibError(f"paper frame lacks column(s) {missing}; expected {PAPER_COLUMNS}")
    paper = paper_frame.reindex(columns=[*keys, "value", "std"])  # drops the 'paper' name column
    paper = paper.rename(columns={"value": "paper", "std": "paper_std"})
    for frame in (ours, paper):
        frame["_key"] = [tuple(_normalise(v) for v in row) for row in frame[list(keys)].itertuples(index=False)]
    merged = ours.merge(paper.drop(columns=list(keys)), on="_key", how="outer" if include_paper_only else "left")
    _fill_keys_from_paper(merged, paper, keys)
    merged["difference"] = merged["ours"] - pd.to_numeric(merged["paper"], errors="coerce")
    return merged.drop(columns="_key")[[*keys, "ours", "ours_std", "paper", "paper_std", "difference", *SEED_COLUMNS]]


def without_layout_holes(comparison: pd.DataFrame) -> pd.DataFrame:
    """A :func:`compare_with_paper` frame without the wide layout's holes: rows with neither our
    number, nor the paper's, nor any run behind them. A diverged cell (no number, but runs) stays."""
    counts = comparison.reindex(columns=["seeds_run", "seeds_diverged"])
    ran = counts.fillna(0).gt(0).any(axis=1)
    keep = comparison["ours"].notna() | comparison["paper"].notna() | ran
    return comparison[keep].reset_index(drop=True)


def _with_seed_counts(ours: pd.DataFrame, ours_mean: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """``ours`` (one row per cell) with the :data:`SEED_COLUMNS` of each cell (NA where unknown)."""
    found = [experiments.seed_counts(ours_mean, *cell) for cell in ours[list(keys)].itertuples(index=False, name=None)]
    for position, name in enumerate(SEED_COLUMNS):
        ours[name] = pd.array([counts[position] if counts else pd.NA for counts in found], dtype="Int64")
    return ours


def side_by_side(comparison: pd.DataFrame, index: str = "method",
                 columns: Sequence[str] = ("dataset", "setting"), digits: int = 2) -> pd.DataFrame:
    """The comparison in the paper's layout; each cell reads 'ours / paper (difference)'
    ("never" for an infinite cost: the target was not reached). Ours reads "diverged" or
    "not run" where the :data:`SEED_COLUMNS` say so, and "97.75 (1 of 3 seeds)" where fewer
    seeds ran than were declared."""
    def number(value) -> str:
        return "-" if pd.isna(value) else NEVER if np.isinf(value) else f"{value:.{digits}f}"

    def cell(row) -> str:
        ours = _ours_text(row, number)
        if pd.isna(row["paper"]):
            return f"{ours} / -"
        if not np.isfinite(row["difference"]):  # a cost target never reached on one side or both
            return f"{ours} / {number(row['paper'])}"
        return f"{ours} / {row['paper']:.{digits}f} ({row['difference']:+.{digits}f})"

    text = comparison.assign(cell=comparison.apply(cell, axis=1))
    order = list(dict.fromkeys(text[index]))
    table = text.pivot_table(index=index, columns=list(columns), values="cell", aggfunc="first", sort=False)
    return table.reindex(order)


def _ours_text(row: pd.Series, number) -> str:
    """Our side of a comparison cell: "diverged", "not run", or ``number(ours)`` with its seed note."""
    run, declared, diverged = (row.get(name) for name in SEED_COLUMNS)
    if _known(diverged) and diverged > 0:
        return DIVERGED
    if _known(run) and run == 0:
        return NOT_RUN
    counts = (int(run), int(declared)) if _known(run) and _known(declared) else None
    return number(row["ours"]) + seed_note(counts)


def _known(count) -> bool:
    return count is not None and not pd.isna(count)


def _long(wide: pd.DataFrame, keys: Sequence[str], name: str) -> pd.DataFrame:
    """Rows x column levels -> one row per cell with the columns ``keys`` + ``name``."""
    stacked = wide.stack(list(range(wide.columns.nlevels)), future_stack=True) \
        if isinstance(wide, pd.DataFrame) else wide
    frame = stacked.rename(name).reset_index()
    if frame.shape[1] != len(keys) + 1:
        raise FedlibError(f"our table has {frame.shape[1] - 1} key levels but keys={list(keys)}; "
                          f"pass one key per row/column level")
    frame.columns = [*keys, name]
    return frame


def _fill_keys_from_paper(merged: pd.DataFrame, paper: pd.DataFrame, keys: Sequence[str]) -> None:
    """Paper-only rows (outer join) take their key names from the paper's spelling."""
    lookup = {key: row for key, row in zip(paper["_key"], paper[list(keys)].itertuples(index=False))}
    for i in merged.index[merged[keys[0]].isna()]:
        merged.loc[i, list(keys)] = list(lookup[merged.at[i, "_key"]])


def _normalise(value) -> str:
    """A loose spelling key: 'CIFAR-10' = 'cifar10', 'FedED' = 'fedvls', and settings compare as
    sets of key=value pairs with numbers normalised ('beta=0.50;partition=x' = 'partition=x;beta=0.5')."""
    text = str(value).lower()
    if "=" in text:
        pairs = sorted(_normalise_pair(item) for item in re.split(r"[;,]", text) if item.strip())
        return ";".join(pairs)
    text = re.sub(r"[^a-z0-9.]", "", text)
    return METHOD_ALIASES.get(text, text)


def _normalise_pair(item: str) -> str:
    key, _, raw = item.partition("=")
    key, raw = key.strip(), raw.strip()
    try:
        return f"{key}={float(raw):g}"
    except ValueError:
        return f"{key}={raw}"
