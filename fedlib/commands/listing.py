"""The results store for people: the table of ``fedlib list`` and the summary of ``fedlib show``.

Accuracies are shown in % with two decimals and rounds are counted from 1, as in the progress bar
and the notebooks; the store itself keeps fractions and 0-based round indices (``rounds.jsonl``'s
``"round"``, ``summary.json``'s ``"best_round"``), converted here for display only.

At about 560 lines it stays one module: ``list`` and ``show`` read the same store rows, checks
and display conversions, which would otherwise be split across two files that import each other.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from fedlib import store
from fedlib.core.config import LOCATION_FIELDS, RunConfig, hash_with_unread_settings
from fedlib.errors import FedlibError, one_line, one_of
from fedlib.reporting.settings import partition_words

# damaged: its files read but disagree (an edited config.json, a lost rounds.jsonl line, a broken
# meta.json): what ``fedlib run`` refuses to serve; corrupt: its config.json or summary.json does not read
STATUSES = ("done", "diverged", "partial", "running", "damaged", "corrupt")
# the table's columns, in order (size stays third: scripts read "hash status size ...")
COLUMNS = ("hash", "status", "size", "method", "dataset", "model", "partition", "clients", "rounds", "lr",
           "momentum", "seed", "final", "best", "updated", "other settings")
SORT_COLUMNS = tuple(c for c in COLUMNS if c != "other settings")
DEFAULT_SORT = "updated"
DESCENDING = {"size": ", largest first", "final": ", highest first", "best": ", highest first",
              "updated": ", newest first"}  # the other columns sort ascending
_RIGHT_ALIGNED = ("size", "clients", "rounds", "lr", "momentum", "seed", "final", "best")
MAX_METHOD_WIDTH = 32
MAX_OTHER_WIDTH = 48
# fields the table shows in their own columns (or in "partition"): left out of "other settings"
_SHOWN_FIELDS = ("dataset", "model", "method", "partition", "beta", "shards_per_client", "classes_per_client",
                 "quantity_split", "clients", "rounds", "lr", "momentum", "seed")
# fields the headline of ``fedlib show`` states (method_args with the method)
_HEADLINE_FIELDS = ("dataset", "model", "method", "method_args", "partition", "beta", "shards_per_client",
                    "classes_per_client", "quantity_split", "clients", "participation", "seed")
MAX_SPARK_WIDTH = 60
_SHORT_NAMES = {"local_epochs": "E", "batch_size": "B", "weight_decay": "wd", "participation": "part",
                "max_train_samples": "train_n", "max_test_samples": "test_n", "augmentation": "aug",
                "lr_decay": "lr_decay", "dataset_options": "data", "min_client_size": "min_size"}
_ENGINE_METRICS = ("round", "clients", "accuracy", "loss", "class_accuracy", "group_accuracy", "diverged")
SPARK_BLOCKS = "▁▂▃▄▅▆▇█"
SPARK_ASCII = "_.-:=+*#"


# ====================================================================== reading runs
@dataclass
class StoredRun:
    """One run folder as ``list``, ``show`` and ``export`` see it."""

    record: store.RunRecord
    status: str
    config: RunConfig | None = None
    summary: dict | None = None
    rounds_done: int = 0
    problem: str = ""  # why a corrupt run could not be read, or what is wrong with a damaged one
    shadowed: store.RunRecord | None = None  # a working-store run of this hash the reference run is served before

    @property
    def hash(self) -> str:
        return self.record.folder.name


def read_run(record: store.RunRecord) -> StoredRun:
    """``record``'s config, summary and status; a run whose files do not parse is 'corrupt', one
    whose files disagree, or differ from its seal (an edit after it finished), 'damaged'."""
    tampered = store.seal_problem(record.folder)
    if tampered:
        return StoredRun(record, "damaged", _config_as_written(record), problem=tampered)
    try:
        cfg = record.read_config()
        summary = record.read_summary() if record.complete else None
        if summary is not None and not isinstance(summary, dict):
            raise ValueError("summary.json is not a JSON object")
        done = summary.get("rounds_run", 0) if summary else record.rounds_logged()
    except (ValueError, KeyError, TypeError, OSError, FedlibError) as exc:
        return StoredRun(record, "corrupt", problem=one_line(exc, 160))
    problem = damage(record, cfg, summary)
    status = "damaged" if problem else _status(record, summary)
    return StoredRun(record, status, cfg, summary, int(done or 0), problem=problem or "")


def _config_as_written(record: store.RunRecord) -> RunConfig | None:
    """A damaged run's config.json as it reads now (for showing what the run was), or None."""
    try:
        return RunConfig.from_dict(store.read_json(record.folder / "config.json"))
    except (ValueError, KeyError, TypeError, OSError):
        return None


def damage(record: store.RunRecord, cfg: RunConfig, summary: dict | None) -> str | None:
    """What is wrong with a run whose config.json reads, by the checks ``fedlib run`` makes before
    serving it (``store.inconsistency``), plus a meta.json or rounds.jsonl that does not parse;
    None for a sound run. A folder named by the run's hash before ``fedlib migrate`` is sound."""
    for name, read in (("meta.json", record.read_meta), ("rounds.jsonl", record.read_rounds)):
        try:
            read()
        except (ValueError, OSError) as exc:
            return f"its {name} cannot be read ({one_line(exc, 160)})"
    expected = record.folder.name
    if expected == hash_with_unread_settings(cfg):
        expected = cfg.hash()
    if summary is not None:
        return store.inconsistency(expected, cfg, summary, record.read_rounds())
    if cfg.hash() != expected:
        return f"its config.json hashes to {cfg.hash()}, not {expected}"
    return store.rounds_problem(record.read_rounds())


def _status(record: store.RunRecord, summary: dict | None) -> str:
    if summary is None:
        return "running" if record.in_progress() else "partial"
    return "diverged" if summary.get("diverged") else "done"


def stored_runs(results_dir: str | os.PathLike | None = None) -> list[StoredRun]:
    """Every run folder of the working store, read; a copy of a run under another folder name
    (the same config and metrics as the folder its hash names) is left out, so a run is listed
    and exported once."""
    return without_copies([read_run(record) for record in store.list_runs(results_dir, complete_only=False)])


def sound(runs: Iterable[StoredRun]) -> list[StoredRun]:
    """The runs whose files read and agree (what ``fedlib export`` writes): not damaged, not corrupt."""
    return [run for run in runs if run.config is not None and run.status not in ("damaged", "corrupt")]


def without_copies(runs: list[StoredRun]) -> list[StoredRun]:
    """``runs`` less every damaged run that merely copies another run, the one kept under its hash."""
    by_name = {run.hash: run for run in runs}
    kept = []
    for run in runs:
        original = by_name.get(run.config.hash()) if run.config is not None and run.status == "damaged" else None
        if original is not None and original is not run and _same_run(run, original):
            continue
        kept.append(run)
    return kept


def _same_run(copy: StoredRun, original: StoredRun) -> bool:
    """Whether ``copy`` holds ``original``'s config, summary and per-round metrics."""
    return copy.config == original.config and copy.summary == original.summary and \
        store.same_metrics(copy.record, original.record)


def find_run(prefix: str, results_dir: str | os.PathLike | None = None) -> StoredRun:
    """The one run whose hash starts with ``prefix`` in the working or the read-only reference
    store, from the store that serves it (``store.served_record``): the reference store when it
    holds the run complete, else the working store; one line when none or several hashes match."""
    working_root, reference_root = store.results_root(results_dir), store.reference_root()
    working = _matching(working_root, prefix)
    reference = _matching(reference_root, prefix) if reference_root is not None else {}
    hashes = sorted(set(working) | set(reference))
    if len(hashes) > 1:
        names = ", ".join(hashes[:5]) + (", ..." if len(hashes) > 5 else "")
        raise FedlibError(f"{len(hashes)} stored runs start with {prefix!r} ({names}); give more digits")
    if not hashes:
        where = " or ".join(str(root) for root in [working_root, reference_root] if root is not None)
        raise FedlibError(f"no stored run starts with {prefix!r} in {where} (fedlib list shows the hashes)")
    here, there = working.get(hashes[0]), reference.get(hashes[0])
    if there is None or not there.complete or (here is not None and store.same_folder(here.folder, there.folder)):
        return read_run(here or there)
    return dataclasses.replace(read_run(there), shadowed=here)


def _matching(root: Path, prefix: str) -> dict[str, store.RunRecord]:
    """The run folders of ``root`` whose hash starts with ``prefix``, by hash."""
    return {r.folder.name: r for r in store.list_runs(root, complete_only=False) if r.folder.name.startswith(prefix)}


# ====================================================================== filters and sorting
def check_filters(method: str | None, dataset: str | None, model: str | None, status: str | None) -> None:
    """One line for a filter value that no run can have (an unknown name)."""
    from fedlib import models
    from fedlib.core.registry import method_class
    from fedlib.datasets import data

    if dataset is not None and dataset not in data.DATASETS:
        raise one_of("dataset", dataset, data.DATASETS)
    if model is not None and model not in models.MODELS:
        raise one_of("model", model, models.MODELS)
    if status is not None and status not in STATUSES:
        raise one_of("status", status, STATUSES)
    if method is not None:
        method_class(method)  # an unknown part raises the standard one-line error


def select(runs: Iterable[StoredRun], method: str | None = None, dataset: str | None = None,
           model: str | None = None, status: str | None = None) -> list[StoredRun]:
    """The runs that pass every given filter. ``method`` matches every run whose method holds all
    its parts (``fedlmd`` matches ``fedlmd+fedprox``); a corrupt run passes only ``status``."""
    wanted = _method_parts(method) if method else None
    chosen = []
    for run in runs:
        if status is not None and run.status != status:
            continue
        cfg = run.config
        if cfg is None and (wanted or dataset or model):
            continue
        if cfg is not None and not _config_matches(cfg, wanted, dataset, model):
            continue
        chosen.append(run)
    return chosen


def _config_matches(cfg: RunConfig, wanted: set[str] | None, dataset: str | None, model: str | None) -> bool:
    if wanted is not None and not wanted <= _method_parts(cfg.method):
        return False
    return (dataset is None or cfg.dataset == dataset) and (model is None or cfg.model == model)


def _method_parts(method: str) -> set[str]:
    from fedlib.core.registry import canonical_method

    return set(canonical_method(method).split("+"))


def sort_runs(runs: list[StoredRun], column: str = DEFAULT_SORT) -> list[StoredRun]:
    """``runs`` ordered by a table column: size, accuracies and time largest first, the others
    ascending; runs without a value in that column last."""
    if column not in SORT_COLUMNS:
        raise one_of("sort column", column, SORT_COLUMNS)
    keyed = [(_sort_value(run, column), run) for run in runs]
    present = [pair for pair in keyed if pair[0] is not None]
    present.sort(key=lambda pair: pair[0], reverse=column in DESCENDING)
    return [run for _, run in present] + [run for value, run in keyed if value is None]


def _sort_value(run: StoredRun, column: str) -> Any:
    """The raw (sortable) value of ``column`` for ``run``; None when it has none."""
    if column in ("hash", "status"):
        return run.hash if column == "hash" else STATUSES.index(run.status)
    if column == "size":
        return run.record.disk_bytes
    if column == "updated":
        return run.record.last_modified()
    if column == "rounds":
        return run.rounds_done
    if column in ("final", "best"):
        value = (run.summary or {}).get(f"{column}_accuracy")
        return None if value is None or _is_nan(value) else value
    if run.config is None:
        return None
    return partition_label(run.config) if column == "partition" else getattr(run.config, column)


# ====================================================================== formatting
def percent(value: Any) -> str:
    """A fraction as '12.34%'; '-' when missing, 'nan' when not a number."""
    if value is None:
        return "-"
    return "nan" if _is_nan(value) else f"{100 * value:.2f}%"


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def when(seconds: float | None) -> str:
    """A local time stamp 'YYYY-MM-DD HH:MM' (or 'unknown')."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds)) if seconds else "unknown"


def partition_label(cfg: RunConfig) -> str:
    """The partition and its parameter: 'dirichlet(0.5)', 'shards(s=2)', 'quantity(s=2)' (the compact
    :func:`fedlib.reporting.settings.partition_words`)."""
    return partition_words(cfg.partition, beta=cfg.beta, shards_per_client=cfg.shards_per_client,
                           classes_per_client=cfg.classes_per_client, quantity_split=cfg.quantity_split,
                           compact=True)


def non_default_settings(cfg: RunConfig, leave_out: Iterable[str] = ()) -> dict[str, Any]:
    """The numbers-defining fields whose value differs from RunConfig's default (location fields
    and ``leave_out`` excepted), in field order."""
    defaults = RunConfig()
    skipped = set(LOCATION_FIELDS) | set(leave_out)
    changed = {}
    for item in dataclasses.fields(RunConfig):
        value = getattr(cfg, item.name)
        if item.name not in skipped and value != getattr(defaults, item.name):
            changed[item.name] = value
    return changed


def other_settings(cfg: RunConfig) -> str:
    """The table's last column: settings the other columns do not show, briefly."""
    changed = non_default_settings(cfg, leave_out=_SHOWN_FIELDS + ("method_args",))
    return " ".join(f"{_SHORT_NAMES.get(k, k)}={_brief(v)}" for k, v in changed.items()) or "-"


def method_label(cfg: RunConfig) -> str:
    """The method with the arguments the run set: 'fedprox(mu=0.1)', 'fedlmd+fedprox'."""
    args = ",".join(f"{k}={_brief(v)}" for k, v in cfg.method_args.items())
    return f"{cfg.method}({args})" if args else cfg.method


def _brief(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict):
        return ",".join(f"{k}:{_brief(v)}" for k, v in value.items())
    return str(value)


def truncate(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, ending in '...' when cut."""
    return text if len(text) <= width else text[:max(0, width - 3)] + "..."


def table_row(run: StoredRun) -> dict[str, str]:
    """One run's cells, by column name (a corrupt run: hash, status, size and the problem)."""
    row = {"hash": run.hash, "status": run.status, "size": store.human_bytes(run.record.disk_bytes),
           "updated": when(run.record.last_modified())}
    cfg = run.config
    if cfg is None or run.status == "damaged":
        return {**row, "problem": run.problem}
    summary = run.summary or {}
    done = str(run.rounds_done) if run.rounds_done == cfg.rounds else f"{run.rounds_done}/{cfg.rounds}"
    row.update({"method": truncate(method_label(cfg), MAX_METHOD_WIDTH), "dataset": cfg.dataset, "model": cfg.model,
                "partition": partition_label(cfg), "clients": str(cfg.clients), "rounds": done,
                "lr": f"{cfg.lr:g}", "momentum": f"{cfg.momentum:g}", "seed": str(cfg.seed),
                "final": percent(summary.get("final_accuracy")), "best": percent(summary.get("best_accuracy")),
                "other settings": truncate(other_settings(cfg), MAX_OTHER_WIDTH)})
    return row


def format_table(rows: list[dict[str, str]]) -> list[str]:
    """The header and one line per row, every column as wide as its widest cell."""
    widths = {c: max([len(c)] + [len(r[c]) for r in rows if c in r]) for c in COLUMNS}
    lines = [_line({c: c for c in COLUMNS}, widths)]
    for row in rows:
        if "problem" in row:  # corrupt or damaged: what could be read, then what is wrong
            lines.append(_line({c: row[c] for c in ("hash", "status", "size")}, widths) + "  " + row["problem"])
        else:
            lines.append(_line(row, widths))
    return lines


def _line(cells: dict[str, str], widths: dict[str, int]) -> str:
    columns = [c for c in COLUMNS if c in cells]
    text = [cells[c].rjust(widths[c]) if c in _RIGHT_ALIGNED else cells[c].ljust(widths[c]) for c in columns]
    return "  ".join(text).rstrip()


def list_lines(runs: list[StoredRun], total: int, root: Path, sort: str, filters: dict[str, str]) -> list[str]:
    """``fedlib list``'s output: the table, then one line with the count, disk use and order."""
    rows = [table_row(run) for run in runs]
    size = sum(run.record.disk_bytes for run in runs)
    order = f"sorted by {sort}" + DESCENDING.get(sort, "")
    shown = f"{len(runs)} run{'s' if len(runs) != 1 else ''}"
    if filters:
        chosen = " ".join(f"{k}={v}" for k, v in filters.items())
        shown += f" of {total} ({chosen})"
    return format_table(rows) + [f"{shown}, {store.human_bytes(size)} on disk in {root}; {order}"]


def empty_store_line(root: Path) -> str:
    """What ``fedlib list`` prints when the store holds no run, with a pointer to the reference store."""
    reason = "the folder does not exist" if not root.exists() else "it holds no run folders"
    line = f"no runs in the results store {root} ({reason}; --results DIR or $FEDLIB_RESULTS picks another)"
    reference = store.reference_root()
    if reference is not None and reference.resolve() != root.resolve():
        count = len(store.list_runs(reference))
        if count:
            line += f"; the read-only reference store {reference} holds {count}: fedlib list --results {reference}"
    return line


# ====================================================================== one run in full
def show_lines(run: StoredRun, every: int | None = None) -> list[str]:
    """``fedlib show``'s summary of one run: settings, provenance, accuracies, the curve."""
    if run.config is None:
        raise FedlibError(f"stored run {run.record.folder} is corrupt ({run.problem}); delete the folder to "
                          "recompute it")
    cfg, record = run.config, run.record
    lines = _headline(run) + _settings_lines(run) + [_provenance(run)] + resume_lines(readable_meta(record), cfg.rounds)
    if run.status == "damaged":
        lines.append(f"DAMAGED: {run.problem}; fedlib run would not serve it: delete the folder to recompute it")
    if run.shadowed is not None:
        lines.append(_shadow_line(run))
    rounds = readable_rounds(record)
    if run.summary:
        lines += _accuracy_lines(run.summary, cfg.rounds)
    elif run.status == "partial":
        lines.append("not finished: rerun the command (or notebook) that started it to resume from its checkpoint")
    lines += curve_lines(rounds, every)
    return lines + _other_metrics(rounds)


def readable_meta(record: store.RunRecord) -> dict:
    """meta.json as a dict; {} when it is missing or does not read (the run is then 'damaged')."""
    try:
        meta = record.read_meta()
    except (ValueError, OSError):
        return {}
    return meta if isinstance(meta, dict) else {}


def readable_rounds(record: store.RunRecord) -> list[dict]:
    """rounds.jsonl's rounds; [] when it does not read (the run is then 'damaged')."""
    try:
        rounds = record.read_rounds()
    except (ValueError, OSError):
        return []
    return [r for r in rounds if isinstance(r, dict)]


def _headline(run: StoredRun) -> list[str]:
    cfg = run.config
    size = store.human_bytes(run.record.disk_bytes)
    return [f"run {run.hash}: {run.status}, {run.rounds_done} of {cfg.rounds} rounds ({run.record.folder}, {size})",
            f"  {method_label(cfg)} on {cfg.dataset} with {cfg.model}, {partition_label(cfg)} over {cfg.clients} "
            f"clients ({_per_round(cfg)} per round), seed {cfg.seed}"]


def _per_round(cfg: RunConfig) -> str:
    """'all' or 'k' clients per round (the engine's rounding of participation * clients)."""
    count = max(1, int(round(cfg.participation * cfg.clients)))
    return "all" if count >= cfg.clients else str(count)


def _settings_lines(run: StoredRun) -> list[str]:
    """The settings beyond the headline that differ from RunConfig's defaults, and the method's
    resolved hyperparameters."""
    changed = non_default_settings(run.config, leave_out=_HEADLINE_FIELDS)
    text = ", ".join(f"{k}={_brief(v)}" for k, v in changed.items()) or "none"
    lines = [f"other settings that differ from RunConfig's defaults: {text}"]
    hparams = (run.summary or {}).get("method_hparams") or readable_meta(run.record).get("method_hparams") or {}
    if hparams:
        lines.append("method hyperparameters: " + ", ".join(f"{k}={_brief(v)}" for k, v in sorted(hparams.items())))
    return lines


def _shadow_line(run: StoredRun) -> str:
    """What the working store holds under the hash of the reference run ``run`` (which is served)."""
    same = "the same" if store.same_metrics(run.shadowed, run.record) else "other"
    return (f"the working store's {run.shadowed.folder} holds this hash too, with {same} per-round metrics; not "
            "used: the reference store's run is served")


def revision_label(revision: Any) -> str:
    """A code revision shortened to 12 digits, its '+dirty' kept: 'acac85813fe9 (+dirty)'."""
    commit, _, dirty = str(revision).partition("+")
    return commit[:12] + (f" (+{dirty})" if dirty else "")


def resume_lines(meta: dict, total_rounds: int) -> list[str]:
    """One line per resume of a run (meta.json's ``resumes``; none for runs stored before it existed)."""
    lines = []
    for entry in [e for e in meta.get("resumes") or [] if isinstance(e, dict)]:
        tf32 = f", tf32 {entry['tf32']}" if "tf32" in entry else ""
        lines.append(f"  resumed after round {entry.get('rounds_done', '?')} of {total_rounds}: revision "
                     f"{revision_label(entry.get('code_revision', 'unknown'))}, backend {entry.get('backend', '?')}, "
                     f"{entry.get('cpu_threads', '?')} threads on {entry.get('device', '?')}{tf32}, torch "
                     f"{entry.get('torch', '?')}, host {entry.get('host', '?')}, {entry.get('date', '?')}")
    return lines


def _provenance(run: StoredRun) -> str:
    meta = readable_meta(run.record)
    env = meta.get("environment") or {}
    revision = revision_label(meta.get("code_revision", "unknown"))
    gpu = f" ({env['gpu']})" if env.get("gpu") else ""
    parts = [f"fedlib {meta.get('fedlib_version', '?')}", f"revision {revision}",
             f"device {meta.get('device', '?')}{gpu}", f"backend {meta.get('backend', '?')}",
             f"torch {env.get('torch', '?')}", f"python {env.get('python', '?')}"]
    seconds = (run.summary or {}).get("train_seconds")
    finished = run.record.finished_at()
    timing = (f"finished {when(finished)}" if finished else f"last written {when(run.record.last_modified())}")
    if isinstance(seconds, (int, float)):
        timing += f" after {seconds:.1f} s of training"
    return "provenance: " + ", ".join(parts) + "; " + timing


def _accuracy_lines(summary: dict, total_rounds: int) -> list[str]:
    best_round = summary.get("best_round")
    best_at = f" (round {best_round + 1} of {total_rounds})" if isinstance(best_round, int) else ""
    loss = summary.get("final_loss")
    lines = [f"accuracy: final {percent(summary.get('final_accuracy'))}, best {percent(summary.get('best_accuracy'))}"
             f"{best_at}" + (f", final test loss {loss:.4f}" if isinstance(loss, (int, float)) else "")]
    if summary.get("diverged"):
        lines.append("DIVERGED: non-finite weights or test loss; these accuracies are not results")
    names, accs = summary.get("class_names") or [], summary.get("class_accuracy") or []
    if names and len(names) == len(accs):
        worst = min(range(len(accs)), key=lambda c: accs[c])
        lines.append(f"worst class: {names[worst]} {percent(accs[worst])}")
        lines.append("per-class accuracy (final round):")
        lines += grid([f"{name} {percent(acc)}" for name, acc in zip(names, accs)])
    return lines


def grid(cells: list[str], width: int = 100, indent: str = "  ") -> list[str]:
    """``cells`` laid out in equal-width columns, as many per line as fit in ``width``."""
    cell = max(len(c) for c in cells) + 3
    per_line = max(1, (width - len(indent)) // cell)
    return [indent + "".join(c.ljust(cell) for c in cells[i:i + per_line]).rstrip()
            for i in range(0, len(cells), per_line)]


def curve_lines(rounds: list[dict], every: int | None = None) -> list[str]:
    """The accuracy per evaluated round: a sparkline, then a small table every ``every`` rounds
    (default: about ten rows), the last round always included; rounds counted from 1."""
    evaluated = [r for r in rounds if isinstance(r.get("accuracy"), (int, float))]
    if not evaluated:
        return ["accuracy per round: no evaluated round yet"]
    accs = [r["accuracy"] for r in evaluated]
    first, last = evaluated[0]["round"] + 1, evaluated[-1]["round"] + 1
    spark_step = math.ceil(len(accs) / MAX_SPARK_WIDTH)
    sampled = f", one mark per {spark_step} evaluations" if spark_step > 1 else ""
    lines = [f"accuracy per round: {sparkline(accs[::spark_step])}  (rounds {first}-{last}{sampled}: "
             f"{percent(min(accs))} to {percent(max(accs))})"]
    step = every if every and every > 0 else max(1, math.ceil(len(evaluated) / 10))
    shown = evaluated[::step] + ([evaluated[-1]] if (len(evaluated) - 1) % step else [])
    lines.append(f"  {'round':>5}  {'accuracy':>8}  {'loss':>8}")
    for r in shown:
        loss = r.get("loss")
        loss_text = f"{loss:.4f}" if isinstance(loss, (int, float)) else "-"
        lines.append(f"  {r['round'] + 1:>5}  {percent(r['accuracy']):>8}  {loss_text:>8}")
    return lines


def sparkline(values: list[float], blocks: str | None = None) -> str:
    """One character per value, low to high (Unicode blocks, or ASCII where stdout cannot print them)."""
    blocks = blocks or (SPARK_BLOCKS if _can_print(SPARK_BLOCKS) else SPARK_ASCII)
    finite = [v for v in values if not _is_nan(v)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 0.0)
    span = high - low
    return "".join(" " if _is_nan(v) else blocks[int((v - low) / span * (len(blocks) - 1)) if span else -1]
                   for v in values)


def _can_print(text: str) -> bool:
    encoding = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _other_metrics(rounds: list[dict]) -> list[str]:
    """The last round's numeric metrics besides accuracy and loss (method-specific ones included)."""
    if not rounds:
        return []
    last = rounds[-1]
    values = {k: v for k, v in last.items() if k not in _ENGINE_METRICS and is_number(v)}
    if not values:
        return []
    return ["last round's other metrics: " + ", ".join(f"{k} {v:g}" for k, v in sorted(values.items()))]


def is_number(value: Any) -> bool:
    """A finite or non-finite int or float, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)

