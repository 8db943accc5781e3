"""What a notebook reports about its runs: the plan of its grid, its settings, its saved tables.

A notebook builds its grid with :mod:`fedlib.paper.grids`, then

- :func:`describe_plan`   -- prints runs, stored, to run and the estimated hours (:func:`estimate_plan`);
- :func:`settings_frame`  -- the settings it runs, one row each;
- :func:`show`            -- a frame as Markdown;
- :func:`save_tables`     -- CSV + Markdown into its tables folder.

The paper's layout and paper-vs-ours comparison are :mod:`fedlib.reporting.tables`; the plan of several
notebooks at once (``reproduce.sh --plan``) is :mod:`fedlib.paper.plan`, built on :func:`estimate_plan`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import pandas as pd

from fedlib import store
from fedlib.core.config import RunConfig
from fedlib.engine.engine import render_only
from fedlib.reporting.notebook import shown_path


# ---------------------------------------------------------------------- the plan
def describe_plan(configs: Sequence[RunConfig], results_dir: str | os.PathLike | None = None,
                  probe: bool = True) -> dict:
    """Print and return the plan (:func:`estimate_plan`): runs, stored, to run, estimated hours."""
    plan = estimate_plan(configs, results_dir, probe)
    print(f"plan: {plan['runs']} runs, {plan['stored']} stored, {plan['to_run']} to run; estimated "
          f"{plan['hours']:.2f} {plan['unit']} on {plan['device']}{_plan_caveats(plan)}")
    return plan


def _plan_caveats(plan: dict) -> str:
    notes = [f"{n} run(s) of {dataset}: data missing here" for dataset, n in sorted(plan["no_data"].items())]
    notes += [f"{plan['unknown']} run(s) without a time estimate"] if plan["unknown"] else []
    return f" ({'; '.join(notes)})" if notes else ""


def estimate_plan(configs: Sequence[RunConfig], results_dir: str | os.PathLike | None = None,
                  probe: bool = True, *, rates=None, device: str | None = None,
                  states: dict[str, store.RunState] | None = None) -> dict:
    """The plan: runs, how many are stored, and the hours still to compute on ``device``.

    A run's hours are its rounds x (the images one round trains x the seconds per training image
    of its (dataset, model, method) + its test images x the seconds per test image of one
    evaluation) on this device (:mod:`fedlib.orchestration.timing`: stored runs, else steady-state
    probes on a stand-in of the data's shape, cached or committed; here a method whose cost relative
    to FedAvg no probe has measured yet counts as FedAvg, which keeps a notebook's plan to one
    probe per (dataset, model); ``reproduce.sh --plan`` measures them). Pass one ``rates`` to
    several plans and every run counts the same hours in each, so a plan of a union adds up its parts.
    Runs whose data are missing here are counted (and estimated) all the same, and listed by
    dataset in ``no_data``. ``states``: each config's :func:`fedlib.store.run_state` by hash, when
    the caller asked already (a plan of several notebooks); else each distinct config is asked once.
    """
    from fedlib.orchestration import resources, timing

    resources.cap_threads()  # probed and labelled at the threads the runs will train with ($FEDLIB_THREADS)
    device = device or _common_device(configs)
    unique = list({c.hash(): c for c in configs}.values())
    states = store.run_states(unique, results_dir) if states is None else states
    missing = [c for c in unique if not states[c.hash()].stored]
    if rates is None:
        probe = probe and not render_only()  # rendering only: nothing trains, not even a probe round
        rates = timing.plan_rates(unique, results_dir, device, probe, probe_ratios=False, states=states)
    hours = [run_hours(c, rates) for c in missing]
    known = [h for h in hours if h is not None]
    return {"runs": len(unique), "stored": len(unique) - len(missing), "to_run": len(missing),
            "hours": float(sum(known)), "unknown": len(hours) - len(known),
            "within_a_day": sum(h <= DAY_HOURS for h in known), "unit": timing.hours_unit(device),
            "device": timing.device_label(device), "no_data": _no_data(missing), "rates": rates,
            "probes": rates.probes_run}


DAY_HOURS = 24  # a run the plan estimates at no more than this many hours fits a day of this device


def run_hours(cfg: RunConfig, rates) -> float | None:
    """Hours ``cfg`` will train and evaluate (:meth:`fedlib.orchestration.timing.Rates.run_seconds`;
    None: no rate)."""
    seconds = rates.run_seconds(cfg)
    return None if seconds is None else seconds / 3600


def _common_device(configs: Sequence[RunConfig]) -> str:
    devices = {c.device for c in configs}
    return devices.pop() if len(devices) == 1 else "auto"


def _no_data(configs: Iterable[RunConfig]) -> dict[str, int]:
    """Runs whose dataset is missing here, counted by dataset."""
    from fedlib.datasets.data import missing_dataset_message

    counts: dict[str, int] = {}
    absent: dict[tuple, bool] = {}  # one look at the disk per dataset and folder
    for cfg in configs:
        where = (cfg.dataset, cfg.data_dir, cfg.download)
        if where not in absent:
            absent[where] = missing_dataset_message(*where) is not None
        if absent[where]:
            counts[cfg.dataset] = counts.get(cfg.dataset, 0) + 1
    return counts


# ---------------------------------------------------------------------- the settings
def settings_frame(settings: Mapping[str, object]) -> pd.DataFrame:
    """The settings a notebook runs as a table: one row per ``setting -> value``, in order."""
    return pd.DataFrame({"setting": list(settings), "value": list(settings.values())})


# ---------------------------------------------------------------------- showing and saving
# Columns whose cells name a method, dataset, model or setting: shown in words in Markdown.
NAMED_COLUMNS = ("method", "label", "dataset", "model", "setting")


def markdown(frame: pd.DataFrame) -> str:
    """``frame`` as a GitHub Markdown table (bold marks render; no 'tabulate' package needed), its
    identifiers in words: row names, column headers and the cells of :data:`NAMED_COLUMNS`
    (``fedavg_kd`` -> ``FedAvg + KD``, ``partition=dirichlet;beta=0.05`` -> ``Dir(β=0.05)``). The
    CSV beside it keeps the identifiers, for tools."""
    flat = frame.reset_index()
    header = [words(c) if not isinstance(c, tuple) else " / ".join(map(words, c)) for c in flat.columns]
    named = [str(c) in NAMED_COLUMNS or i < frame.index.nlevels for i, c in enumerate(flat.columns)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for _, row in flat.iterrows():
        cells = ("" if pd.isna(v) else words(v) if is_named else str(v) for v, is_named in zip(row.tolist(), named))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def words(identifier) -> str:
    """An identifier of a table as a reader writes it: a setting such as
    ``partition=dirichlet;beta=0.05`` as ``Dir(β=0.05)``, a method, dataset or model by its display
    name; anything else unchanged."""
    from fedlib.reporting.plots import display_name
    from fedlib.reporting.tables import setting_words

    text = str(identifier)
    if "partition=" in text:
        return setting_words(text)
    return display_name(text)


def show(frame: pd.DataFrame) -> None:
    """Display ``frame`` as Markdown in a notebook (printed elsewhere)."""
    try:
        from IPython.display import Markdown, display
    except ImportError:
        print(markdown(frame))
        return
    display(Markdown(markdown(frame)))


def save_tables(tables: Mapping[str, pd.DataFrame], tables_dir: str | os.PathLike = "tables",
                digits: int | None = 2) -> list[Path]:
    """Write every named table as ``<tables_dir>/<name>.csv`` and ``.md`` (numbers rounded to
    ``digits``; None keeps them as they are) and print where; returns the paths."""
    folder = Path(tables_dir)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, frame in tables.items():
        shown = frame if digits is None else frame.round(digits)
        csv_path, md_path = folder / f"{name}.csv", folder / f"{name}.md"
        shown.to_csv(csv_path)
        md_path.write_text(markdown(shown) + "\n")
        paths += [csv_path, md_path]
    paths = [shown_path(path) for path in paths]
    print("saved: " + ", ".join(str(p) for p in paths))
    return paths
