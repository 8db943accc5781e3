"""The plan of a reproduction: which runs the table notebooks declare, how many are stored, and
the hours the rest will take, before anything trains.

Every table notebook builds its grid of runs and hands it to ``tables.describe_plan``. To read
that grid without running anything, :func:`declared_configs` executes the notebook's code cells
in order, with the profile's parameters injected after the parameters cell as papermill does,
and stops at the ``describe_plan`` call, whose argument is the grid. Figure notebooks print no
plan and are left out.

Declaring does not need the data: notebooks skip their runs when ``data.missing_dataset_message``
names a missing dataset, and size some grids from the data (every FEMNIST writer a client), so
while declaring, that check reports every dataset present and ``data.load_dataset`` serves a
stand-in of the missing dataset's published shape (:data:`fedlib.data.DATASET_SHAPES`). The plan
then says which runs cannot run here, and why.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path
from typing import Iterator, Sequence

import pandas as pd

from fedlib import data, store, tables
from fedlib.config import RunConfig


PLAN_CALL = "describe_plan("
TOTAL_ROW = "total (shared runs once)"


class _Declared(Exception):
    """Raised by the stand-in for ``tables.describe_plan`` to stop at the grid."""

    def __init__(self, configs: Sequence[RunConfig]):
        super().__init__("grid declared")
        self.configs = list(configs)


def declared_configs(notebook: Path, parameters: dict) -> list[RunConfig] | None:
    """The runs ``notebook`` declares under ``parameters``, whether or not their data are here;
    None if it prints no plan (a figure notebook: nothing of it is executed), [] if its plan
    cell declares nothing."""
    cells = [c for c in json.loads(Path(notebook).read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
    if not any(PLAN_CALL in "".join(c["source"]) for c in cells):
        return None
    namespace: dict = {"__name__": "__fedlib_plan__"}

    def capture(configs, *args, **kwargs):
        raise _Declared(configs)

    with _replaced(tables, "describe_plan", capture), _data_not_needed(), _working_dir(Path(notebook).parent), \
            _no_windows(), contextlib.redirect_stdout(io.StringIO()):
        try:
            for index, cell in enumerate(cells):
                source = "".join(cell["source"])
                exec(compile(source, f"{Path(notebook).name} cell {index}", "exec"), namespace)  # noqa: S102
                if "parameters" in cell.get("metadata", {}).get("tags", []):
                    namespace.update(parameters)
                if PLAN_CALL in source:  # the plan cell ran without a grid: nothing to run
                    return []
        except _Declared as declared:
            return declared.configs
    return []


@contextlib.contextmanager
def _data_not_needed() -> Iterator[None]:
    """While declaring: every dataset reads as present, and a missing one loads as a small
    stand-in of its published shape (one sample per natural group, so group counts hold)."""

    def load(name, data_dir=None, download=False, **options):
        if missing(name, data_dir, download) is None:
            return real_load(name, data_dir=data_dir, download=download, **options)
        shape = data.dataset_shape(name, **options)
        size = max(shape.groups, shape.num_classes)
        return data.stand_in_dataset(name, size, shape.num_classes, **options)

    missing, real_load = data.missing_dataset_message, data.load_dataset
    with _replaced(data, "missing_dataset_message", lambda *args, **kwargs: None), \
            _replaced(data, "dataset_available", lambda *args, **kwargs: True), _replaced(data, "load_dataset", load):
        yield


# ---------------------------------------------------------------------- the plan table
def plan_frame(grids: dict[str, list[RunConfig] | None], results_dir: str | os.PathLike | None,
               probe: bool = True, device: str = "auto", dry_run_csv: str | os.PathLike | None = None,
               progress: bool = True) -> pd.DataFrame:
    """One row per notebook (runs, stored, to run, runs whose data are missing here, estimated
    hours) and a total row over the union of their runs (a run shared by notebooks counts once).

    Every run's hours come from one set of rates, so the total is the sum over the union: at
    least any row, at most their sum. ``frame.attrs`` holds the unit, the device, the reasons
    runs cannot run here and where the rates came from.
    """
    from fedlib import timing

    union = {c.hash(): c for configs in grids.values() for c in configs or []}
    to_run = [c for c in union.values() if not store.is_stored(c, results_dir)]
    probe = probe and not tables.render_only()
    rates = timing.plan_rates(list(union.values()), results_dir, device, probe, dry_run_csv, progress)
    rows = [_row(name, configs, results_dir, rates, device) for name, configs in grids.items() if configs is not None]
    total = _row(TOTAL_ROW, list(union.values()), results_dir, rates, device)
    frame = pd.DataFrame(rows + [total])
    frame.attrs.update(unit=timing.hours_unit(device), device=timing.device_label(device),
                       no_data=missing_reasons(to_run), sources=rates.sources(to_run), probes=rates.probes_run,
                       unknown=total.pop("unknown"))
    return frame.drop(columns="unknown")


def _row(name: str, configs: list[RunConfig], results_dir, rates, device: str) -> dict:
    plan = tables.estimate_plan(configs, results_dir, rates=rates, device=device)
    return {"notebook": name, "runs": plan["runs"], "stored": plan["stored"], "to run": plan["to_run"],
            "no data here": sum(plan["no_data"].values()), "hours": plan["hours"], "unknown": plan["unknown"]}


def missing_reasons(configs: Sequence[RunConfig]) -> dict[str, str]:
    """Dataset -> why its runs cannot run here: '<n> runs: cifar100 missing in /data (...)'."""
    counts: dict[tuple, int] = {}
    for cfg in configs:
        counts[(cfg.dataset, cfg.data_dir)] = counts.get((cfg.dataset, cfg.data_dir), 0) + 1
    reasons = {}
    for (dataset, data_dir), count in sorted(counts.items(), key=lambda item: str(item[0])):
        if data.missing_dataset_message(dataset, data_dir) is not None:
            reasons[dataset] = f"{count} run(s): {dataset} missing in {_data_folder(data_dir)}"
    return reasons


def _data_folder(data_dir: str | None) -> str:
    if data_dir:
        return str(data_dir)
    if os.environ.get("FEDLIB_DATA"):
        return f"$FEDLIB_DATA ({os.environ['FEDLIB_DATA']})"
    return "the fedlib data cache (set FEDLIB_DATA or --data)"


def format_plan(frame: pd.DataFrame, profile: str, device: str) -> str:
    """The plan as a text table: what the hours count and where, then why runs cannot run here."""
    unit = frame.attrs.get("unit", "hours")
    shown = frame.rename(columns={"hours": unit})
    text = shown.to_string(index=False, formatters={unit: "{:,.2f}".format})
    lines = [f"plan for the {profile!r} profile: hours of training still to do, estimated for "
             f"{frame.attrs.get('device', device)} (--device {device}), in {unit}", text]
    for dataset, reason in frame.attrs.get("no_data", {}).items():
        lines.append(f"cannot run here: {reason}; estimated from a stand-in of its shape")
    if frame.attrs.get("unknown"):
        lines.append(f"{frame.attrs['unknown']} run(s) have no time estimate (no stored run, no probe)")
    sources = ", ".join(f"{n} from {source}" for source, n in sorted(frame.attrs.get("sources", {}).items()))
    if sources:
        lines.append(f"seconds per image of the (dataset, model, method) kinds: {sources}; "
                     f"{frame.attrs.get('probes', 0)} probe(s) run now")
    return "\n".join(lines)


@contextlib.contextmanager
def _replaced(owner, name: str, value) -> Iterator[None]:
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


@contextlib.contextmanager
def _working_dir(folder: Path) -> Iterator[None]:
    """Run inside the notebook's folder, as papermill does (relative paths mean the same)."""
    previous = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(previous)


@contextlib.contextmanager
def _no_windows() -> Iterator[None]:
    """Plotting code before the plan (styles, imports) must not open windows."""
    import matplotlib

    backend = matplotlib.get_backend()
    matplotlib.use("Agg", force=True)
    try:
        yield
    finally:
        matplotlib.use(backend, force=True)
