"""The plan of a reproduction: which runs the notebooks declare, how many are stored, and the
hours the rest will take, before anything trains.

Every notebook that trains gets its grid of runs from its function in :mod:`fedlib.paper.grids`, called with
the notebook's parameters. :func:`declared_configs` calls the same function with the parameters
the notebook would run with (the parameters cell's literals, the values passed, folders resolved
as ``fedlib.reporting.notebook.apply_profile`` does): nothing of the notebook is executed. The two
notebooks without a grid function (``fedlib.paper.grids``' docstring names them) are left out.

Declaring does not need the data: grids skip their runs when ``data.missing_dataset_message``
names a missing dataset, and size some grids from the data (every FEMNIST writer a client), so
they are declared inside :func:`fedlib.datasets.data.declaring`: that check reports every dataset
present and ``data.load_dataset`` serves a stand-in of the missing dataset's published shape
(:data:`fedlib.datasets.catalogue.CATALOGUE`). The plan then says which runs cannot run here, and why.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Sequence

import pandas as pd

from fedlib import store
from fedlib.core.config import RunConfig
from fedlib.datasets import data
from fedlib.engine.engine import render_only
from fedlib.errors import FedlibError
from fedlib.folders import env_folder
from fedlib.paper import grids
from fedlib.reporting import report
from fedlib.reporting.notebook import cell_defaults, resolve_parameters
from fedlib.reporting.parameters import check_parameters

PLAN_CALL = "describe_plan("  # how a notebook prints the plan of its grid
TOTAL_ROW = "total (shared runs once)"
DAY_COLUMN = "<= 1 day each"  # runs still to do that the plan estimates at a day or less each, on this device


def declared_configs(notebook: Path, parameters: dict) -> list[RunConfig] | None:
    """The runs ``notebook`` declares under ``parameters`` (values passed over its parameters
    cell), whether or not their data are here: its grid function's runs (:mod:`fedlib.paper.grids`);
    None for a notebook without one."""
    notebook = Path(notebook)
    grid = grids.grid_for(notebook.stem)
    if grid is None:
        if prints_plan(notebook):
            raise FedlibError(f"{notebook.stem} prints a plan but has no grid function; add one to "
                              f"fedlib/paper/grids/ and its name to fedlib.paper.grids.GRIDS")
        return None
    with data.declaring():
        return list(grid(notebook_parameters(notebook, parameters)))


def prints_plan(notebook: Path) -> bool:
    """Whether a code cell of ``notebook`` prints the plan of a grid (a notebook with a grid function)."""
    return code_mentions(notebook, PLAN_CALL)


def code_mentions(notebook: Path, text: str) -> bool:
    """Whether any code cell of ``notebook`` contains ``text`` (e.g. a call such as ``"run_all("``)."""
    cells = json.loads(Path(notebook).read_text(encoding="utf-8"))["cells"]
    return any(text in "".join(c["source"]) for c in cells if c["cell_type"] == "code")


def notebook_parameters(notebook: Path, parameters: dict) -> dict:
    """The parameters ``notebook`` runs with when ``parameters`` are passed: its parameters cell's
    values, each passed one instead, folders resolved against its repository (the profile's values
    count only when passed: ``reproduce.sh`` passes them)."""
    notebook = Path(notebook).resolve()
    defaults = cell_defaults(notebook)
    values = {name: parameters.get(name, default) for name, default in defaults.items()}
    resolved = resolve_parameters(notebook.stem, values, values, root=notebook.parent.parent)
    check_parameters(notebook.stem, defaults, resolved)
    return resolved


# ---------------------------------------------------------------------- the plan table
def plan_frame(grids: dict[str, list[RunConfig] | None], results_dir: str | os.PathLike | None,
               probe: bool = True, device: str = "auto",
               progress: bool = True) -> pd.DataFrame:
    """One row per notebook (runs, stored, to run, runs whose data are missing here, estimated
    hours) and a total row over the union of their runs (a run shared by notebooks counts once).

    Every run's hours come from one set of rates, so the total is the sum over the union: at
    least any row, at most their sum. ``frame.attrs`` holds the unit, the device, the reasons
    runs cannot run here and where the rates came from.
    """
    from fedlib.orchestration import resources, timing

    resources.cap_threads()  # probed and labelled at the threads the runs will train with ($FEDLIB_THREADS)
    union = {c.hash(): c for configs in grids.values() for c in configs or []}
    states = store.run_states(union.values(), results_dir)  # the one lookup of each run
    to_run = [c for key, c in union.items() if not states[key].stored]
    probe = probe and not render_only()
    rates = timing.plan_rates(list(union.values()), results_dir, device, probe, progress, states=states)
    rows = [_row(name, configs, results_dir, rates, device, states) for name, configs in grids.items()
            if configs is not None]
    total = _row(TOTAL_ROW, list(union.values()), results_dir, rates, device, states)
    frame = pd.DataFrame(rows + [total])
    if timing.hours_unit(device) == "CPU-hours":
        for card, card_rates in timing.committed_gpu_rates(list(union.values()), results_dir, states).items():
            named = {**{n: c for n, c in grids.items() if c is not None}, TOTAL_ROW: list(union.values())}
            frame[gpu_column(card)] = [_hours(named[name], card_rates, states) for name in frame["notebook"]]
    frame.attrs.update(unit=timing.hours_unit(device), device=timing.device_label(device),
                       no_data=missing_reasons(to_run), sources=rates.sources(to_run), probes=rates.probes_run,
                       unknown=total.pop("unknown"))
    return frame.drop(columns="unknown")


def gpu_column(card: str) -> str:
    """The plan's column of the hours on a GPU whose probes are committed, e.g. 'GPU-hours (NVIDIA H200)'."""
    return f"GPU-hours ({card})"


def _hours(configs: list[RunConfig], rates, states: dict[str, store.RunState]) -> float:
    """Hours of the unstored runs among ``configs`` (``states``: their store states by hash) at
    ``rates`` (runs without a rate left out)."""
    unique = {c.hash(): c for c in configs}
    hours = [report.run_hours(c, rates) for key, c in unique.items() if not states[key].stored]
    return float(sum(h for h in hours if h is not None))


def _row(name: str, configs: list[RunConfig], results_dir, rates, device: str,
         states: dict[str, store.RunState]) -> dict:
    plan = report.estimate_plan(configs, results_dir, rates=rates, device=device, states=states)
    return {"notebook": name, "runs": plan["runs"], "stored": plan["stored"], "to run": plan["to_run"],
            "no data here": sum(plan["no_data"].values()), DAY_COLUMN: plan["within_a_day"], "hours": plan["hours"],
            "unknown": plan["unknown"]}


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
    folder = env_folder("FEDLIB_DATA")
    if folder is not None:
        return f"$FEDLIB_DATA ({folder})"
    return "the fedlib data cache (set FEDLIB_DATA or --data)"


def format_plan(frame: pd.DataFrame, profile: str, device: str) -> str:
    """The plan as a text table: what the hours count and where, then why runs cannot run here."""
    unit = frame.attrs.get("unit", "hours")
    shown = frame.rename(columns={"hours": unit})
    hour_columns = [unit] + [c for c in shown.columns if c.startswith("GPU-hours (")]
    text = shown.to_string(index=False, formatters={c: "{:,.2f}".format for c in hour_columns})
    lines = [f"plan for the {profile!r} profile: hours of training still to do, estimated for "
             f"{frame.attrs.get('device', device)} (--device {device}), in {unit}", text]
    lines.append(f"'{DAY_COLUMN}': runs still to do estimated at 24 {unit} or less each on this device")
    for column in hour_columns[1:]:
        lines.append(f"'{column}': the same runs on that card, from its committed probes (sequential path, one run "
                     f"at a time; a method it has no ratio for counts as FedAvg)")
    for dataset, reason in frame.attrs.get("no_data", {}).items():
        lines.append(f"cannot run here: {reason}; estimated from a stand-in of its shape")
    if frame.attrs.get("unknown"):
        lines.append(f"{frame.attrs['unknown']} run(s) have no time estimate (no stored run, no probe)")
    sources = ", ".join(f"{n} from {source}" for source, n in sorted(frame.attrs.get("sources", {}).items()))
    if sources:
        lines.append(f"seconds per image of the (dataset, model, method) kinds: {sources}; "
                     f"{frame.attrs.get('probes', 0)} probe(s) run now")
    return "\n".join(lines)
