"""The plan of a reproduction: which runs the table notebooks declare, how many are stored, and
the hours the rest will take, before anything trains.

Every table notebook builds its grid of runs and hands it to ``tables.describe_plan``. To read
that grid without running anything, :func:`declared_configs` executes the notebook's code cells
in order, with the profile's parameters injected after the parameters cell as papermill does,
and stops at the ``describe_plan`` call, whose argument is the grid. Figure notebooks print no
plan and are left out.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Iterator, Sequence

import pandas as pd

from fedlib import tables
from fedlib.config import RunConfig


PLAN_CALL = "describe_plan("


class _Declared(Exception):
    """Raised by the stand-in for ``tables.describe_plan`` to stop at the grid."""

    def __init__(self, configs: Sequence[RunConfig]):
        super().__init__("grid declared")
        self.configs = list(configs)


def declared_configs(notebook: Path, parameters: dict) -> list[RunConfig] | None:
    """The runs ``notebook`` declares under ``parameters``; None if it prints no plan (a figure
    notebook: nothing of it is executed), [] if its plan cell declares nothing (missing data)."""
    cells = [c for c in json.loads(Path(notebook).read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
    if not any(PLAN_CALL in "".join(c["source"]) for c in cells):
        return None
    namespace: dict = {"__name__": "__fedlib_plan__"}

    def capture(configs, *args, **kwargs):
        raise _Declared(configs)

    with _replaced(tables, "describe_plan", capture), _working_dir(Path(notebook).parent), _no_windows():
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


def plan_frame(grids: dict[str, list[RunConfig] | None], results_dir: str | os.PathLike | None,
               probe: bool = True) -> pd.DataFrame:
    """One row per notebook (runs, stored, to run, estimated hours) and a total row.

    The total counts a run shared by several notebooks once (the store computes it once).
    """
    rows, everything = [], {}
    for name, configs in grids.items():
        if configs is None:
            continue
        plan = tables.estimate_plan(configs, results_dir, probe)
        rows.append({"notebook": name, "runs": plan["runs"], "stored": plan["stored"],
                     "to run": plan["to_run"], "hours": plan["hours"]})
        everything.update({c.hash(): c for c in configs})
    total = tables.estimate_plan(list(everything.values()), results_dir, probe)
    rows.append({"notebook": "total (shared runs once)", "runs": total["runs"], "stored": total["stored"],
                 "to run": total["to_run"], "hours": total["hours"]})
    return pd.DataFrame(rows)


def format_plan(frame: pd.DataFrame, profile: str, device: str) -> str:
    """The plan as a text table with one line of context."""
    text = frame.to_string(index=False, formatters={"hours": "{:.2f}".format})
    return f"plan for the {profile!r} profile (hours estimated on this machine, device {device}):\n{text}"


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
