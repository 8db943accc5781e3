"""Execute the paper notebooks with papermill: ``python -m fedlib.paper.reproduce``.

Each ``notebooks/<stem>.ipynb`` is run with the chosen profile's name (smoke, quick or paper)
and the values given on the command line (device, folders, ``-p NAME VALUE``); the notebook
applies ``profiles/<stem>.yaml`` itself (:mod:`fedlib.reporting.notebook`), so papermill, JupyterLab and
this runner run the same settings. The executed copy goes to ``output/<profile>/``, and so do
the figures and tables unless ``--publish`` writes them to the committed ``figures/`` and
``tables/`` (and records what produced each file). A failing notebook does not stop the
others, and the summary names every failure.

Exit status: 0 all ran, 1 some notebook failed, 2 bad options (one line on stderr).

papermill and jupyter are imported inside the functions that need them: importing fedlib must
work where only the training stack is installed (the GPU machines have no jupyter).
"""

from __future__ import annotations

import argparse
import ast
import datetime
import fnmatch
import functools
import json
import logging
import os
import platform
import re
import shlex
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

import yaml

if TYPE_CHECKING:
    import pandas as pd

from fedlib.errors import FedlibError, explain, one_of
from fedlib.reporting.notebook import (PUBLISH_ENV, REPO_ROOT, cell_defaults, check_unpublished, load_profiles,
                                       output_folder, plain_math, repo_path)

STANDARD_PROFILES = ("smoke", "quick", "paper")
# Parameters the runner itself sets; every notebook's parameters cell declares them.
OVERRIDE_NAMES = ("profile", "device", "data_dir", "results_dir", "figures_dir", "tables_dir")
# The kernel's own log stays silent: its "running over TCP without encryption" warning (it listens on
# localhost) and the "KeyboardInterrupt caught in kernel" error that jupyter_client's interrupt before each
# shutdown provokes now and then (4 of 36 notebooks in one smoke run) say nothing about the notebook; a cell
# that fails or a kernel that dies is reported by papermill, in the notebook's line of the summary.
QUIET_KERNEL = ["--IPKernelApp.log_level=CRITICAL"]


@dataclass
class NotebookRun:
    """What happened to one notebook."""

    stem: str
    status: str  # "ok", "FAILED", or "skipped" (render-only: its runs are not stored)
    seconds: float
    output_path: Path
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def failed(self) -> bool:
        return self.status == "FAILED"


def find_notebooks(notebooks_dir: Path, only: str | None = None) -> list[Path]:
    """Notebooks in ``notebooks_dir``, sorted, kept if their stem matches any pattern of ``only``.

    ``only`` holds comma-separated patterns. A pattern equal to a notebook's stem selects just
    that notebook; one with ``*``, ``?`` or ``[`` is a glob on the stems; any other is a
    substring. A pattern that matches nothing is an error (a typo would otherwise reproduce less
    than asked).
    """
    notebooks = sorted(Path(notebooks_dir).glob("*.ipynb"))
    if not notebooks:
        raise FedlibError(f"no notebooks (*.ipynb) in {notebooks_dir}; pass --notebooks-dir DIR")
    if only is None:
        return notebooks
    if not only.strip(" ,"):
        raise FedlibError("--only was given no notebook names; leave it out to run every notebook")
    selected: set[Path] = set()
    for pattern in (p.strip() for p in only.split(",") if p.strip()):
        matches = _matching(notebooks, pattern)
        if not matches:
            stems = ", ".join(nb.stem for nb in notebooks)
            raise FedlibError(f"--only pattern {pattern!r} matches no notebook; notebooks: {stems}")
        selected.update(matches)
    return sorted(selected)


def _matching(notebooks: list[Path], pattern: str) -> list[Path]:
    exact = [nb for nb in notebooks if nb.stem == pattern]
    if exact:
        return exact
    if any(char in pattern for char in "*?["):
        return [nb for nb in notebooks if fnmatch.fnmatchcase(nb.stem, pattern)]
    return [nb for nb in notebooks if pattern in nb.stem]


def default_kernel() -> str:
    """The ``fedlib`` kernel that reproduce.sh registers, else the stock ``python3``."""
    return "fedlib" if "fedlib" in _kernel_names() else "python3"


def _kernel_names() -> set[str]:
    from jupyter_client.kernelspec import KernelSpecManager

    return set(KernelSpecManager().find_kernel_specs())


def _check_kernel(kernel: str) -> None:
    if kernel not in _kernel_names():
        raise one_of("kernel", kernel, _kernel_names())


def _absolute(path: str | os.PathLike | None) -> str | None:
    return None if path is None else str(Path(path).expanduser().resolve())


def build_overrides(
    profile: str,
    device: str | None = None,
    data_dir: str | os.PathLike | None = None,
    results_dir: str | os.PathLike | None = None,
    figures_dir: str | os.PathLike | None = None,
    tables_dir: str | os.PathLike | None = None,
    parameters: dict | None = None,
) -> dict:
    """What the runner passes to every notebook: the profile's name, ``parameters`` (``-p NAME
    VALUE``) and the options given; one left at None is not passed (the notebook's default holds).

    No profile values: the notebook applies its profile itself. Folders given as options become
    absolute, as a relative path on the command line means one relative to where you stand.
    """
    if parameters and "profile" in parameters:
        raise FedlibError("choose the profile with --profile, not -p profile")
    overrides = {"profile": profile, **(parameters or {})}
    if device is not None:
        overrides["device"] = device
    folders = {"data_dir": data_dir, "results_dir": results_dir, "figures_dir": figures_dir, "tables_dir": tables_dir}
    overrides.update({name: _absolute(folder) for name, folder in folders.items() if folder is not None})
    return overrides


def parse_parameters(pairs: Sequence[Sequence[str]] | None) -> dict:
    """``-p NAME VALUE`` pairs as a dict, each VALUE read as YAML (``[0, 1]``, ``{cifar10: 10}``,
    ``0.01``, ``1e-5``, ``null``; anything else stays a string, ``none`` and dates such as
    ``2026-11-23`` included)."""
    parameters = {}
    for name, text in pairs or ():
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as error:
            problem = getattr(error, "problem", None) or "invalid YAML"
            raise FedlibError(f"-p {name} {text!r}: not valid YAML ({problem})") from None
        if isinstance(value, datetime.date):  # a date is no parameter value: keep the text
            value = text
        if isinstance(value, str):  # YAML reads 1e-5 (no dot) as a string; Python does not
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                pass
        parameters[name] = value
    return parameters


def check_parameter_names(notebooks: Sequence[Path], names: Sequence[str]) -> None:
    """Refuse a ``-p`` name some selected notebook does not declare, listing that notebook's parameters."""
    for notebook in notebooks:
        declared = declared_parameters(notebook)
        unknown = sorted(set(names) - declared)
        if unknown:
            raise FedlibError(f"{notebook.stem} has no parameter {', '.join(unknown)}; its parameters: "
                              f"{', '.join(sorted(declared))} (narrow the selection with --only)")


def run_notebooks(
    profile: str = "smoke",
    only: str | None = None,
    *,
    notebooks_dir: str | os.PathLike | None = None,
    profiles_dir: str | os.PathLike | None = None,
    out_dir: str | os.PathLike | None = None,
    device: str | None = None,
    data_dir: str | os.PathLike | None = None,
    results_dir: str | os.PathLike | None = None,
    figures_dir: str | os.PathLike | None = None,
    tables_dir: str | os.PathLike | None = None,
    kernel: str | None = None,
    log_output: bool = True,
    show_plan: bool = False,
    publish: bool = False,
    parameters: dict | None = None,
    report: Callable[[NotebookRun], None] | None = None,
) -> list[NotebookRun]:
    """Execute the selected notebooks in ``profile``; never stops at a failing notebook.

    Each notebook gets the profile's name, ``parameters`` and the options given (None: the
    notebook's default) and applies its profile itself. Figures and tables go to
    ``output/<profile>/`` unless ``publish``, which writes the committed ``figures/`` and
    ``tables/`` (or the folders given) and records each file in their ``index.json``. Executed
    notebooks go to ``output/<profile>/``. With ``show_plan`` the plan of the notebooks
    (:mod:`fedlib.paper.plan`) is printed first; ``report`` is called with each finished run. Raises
    :class:`FedlibError` for bad options (unknown profile, kernel or parameter, a pattern
    matching nothing, a committed folder without ``publish``).
    """
    notebooks, profiles, overrides, root = _selection(profile, only, notebooks_dir, profiles_dir, device,
                                                      data_dir, results_dir, figures_dir, tables_dir,
                                                      publish=publish, parameters=parameters)
    kernel = kernel or default_kernel()
    _check_kernel(kernel)
    out_dir = Path(out_dir or root / "output" / profile)
    out_dir.mkdir(parents=True, exist_ok=True)
    if show_plan:
        from fedlib.paper.plan import format_plan

        frame = _plan(notebooks, profiles, overrides, dry_run_csv=plan_dry_run_csv(root, profile), root=root)
        print(format_plan(frame, profile, device or "auto"), flush=True)
    all_stems = [nb.stem for nb in find_notebooks(notebooks[0].parent)] if notebooks else []
    runs = []
    with _publishing(publish):
        for notebook in notebooks:
            entry = profiles[notebook.stem].get(profile)
            started = time.time()
            skip = render_skip_reason(notebook, entry, overrides, root)
            if skip:
                runs.append(NotebookRun(notebook.stem, "skipped", 0.0, out_dir / notebook.name, skip))
            else:
                runs.append(_run_one(notebook, entry, overrides, out_dir, kernel, log_output))
            if runs[-1].ok and publish:
                for folder, kind in ((overrides["figures_dir"], "figure"), (overrides["tables_dir"], "table")):
                    index_outputs(Path(folder), kind, notebook.stem, profile, started, all_stems,
                                  parameters=user_parameters(overrides))
            if report is not None:
                report(runs[-1])
    return runs


@contextmanager
def _publishing(publish: bool) -> Iterator[None]:
    """Tell the kernels (through the environment they inherit) that writing figures/ and tables/ is asked for."""
    previous = os.environ.pop(PUBLISH_ENV, None)
    if publish:
        os.environ[PUBLISH_ENV] = "1"
    try:
        yield
    finally:
        os.environ.pop(PUBLISH_ENV, None)
        if previous is not None:
            os.environ[PUBLISH_ENV] = previous


def execute_declared_runs(profile: str = "smoke", only: str | None = None, *, executor: str = "local",
                          workers: int | None = None, address: str | None = None, threads: int | None = None,
                          notebooks_dir: str | os.PathLike | None = None,
                          profiles_dir: str | os.PathLike | None = None, device: str | None = None,
                          data_dir: str | os.PathLike | None = None, results_dir: str | os.PathLike | None = None,
                          parameters: dict | None = None, verbose: bool = False) -> list:
    """Train every run the selected notebooks declare in ``profile``, each distinct run once
    however many notebooks declare it, on ``executor`` (:func:`fedlib.orchestration.executor.execute`: local
    worker processes or Ray), so the notebooks then render from the store. Runs whose dataset is
    missing here are left to the notebooks (which skip them); ``verbose`` adds a line per finished
    run. Returns the outcomes."""
    from fedlib.datasets.data import missing_dataset_message
    from fedlib.orchestration.executor import execute

    runs, store_dir = notebook_runs(profile, only, notebooks_dir=notebooks_dir, profiles_dir=profiles_dir,
                                    device=device, data_dir=data_dir, results_dir=results_dir, parameters=parameters)
    here = [cfg for cfg in runs if missing_dataset_message(cfg.dataset, cfg.data_dir, cfg.download) is None]
    if len(here) < len(runs):
        missing = sorted({cfg.dataset for cfg in runs} - {cfg.dataset for cfg in here})
        print(f"{len(runs) - len(here)} declared runs need data missing here ({', '.join(missing)}); "
              "the notebooks skip them", flush=True)
    return execute(here, executor=executor, workers=workers, threads=threads, results_dir=store_dir, address=address,
                   verbose=verbose)


def notebook_runs(profile: str = "smoke", only: str | None = None, *, notebooks_dir: str | os.PathLike | None = None,
                  profiles_dir: str | os.PathLike | None = None, device: str | None = None,
                  data_dir: str | os.PathLike | None = None, results_dir: str | os.PathLike | None = None,
                  parameters: dict | None = None, progress: bool = True) -> tuple[list, str]:
    """Every distinct run the selected notebooks declare in ``profile`` (those of
    :data:`fedlib.paper.grids.HOOK_TRAINED` left to their notebooks), and the results store the notebooks
    will read them from."""
    from fedlib.paper.grids import HOOK_TRAINED

    notebooks, profiles, overrides, root = _selection(profile, only, notebooks_dir, profiles_dir, device, data_dir,
                                                      results_dir, None, None, parameters=parameters)
    grids = declared_grids(notebooks, profiles, overrides, progress=progress)
    runs = declared_runs({stem: configs for stem, configs in grids.items() if stem not in HOOK_TRAINED})
    return [cfg for cfg, _ in runs.values()], overrides.get("results_dir") or str(root / "results")


def plan_notebooks(profile: str = "paper", only: str | None = None, *, probe: bool = True,
                   notebooks_dir: str | os.PathLike | None = None, profiles_dir: str | os.PathLike | None = None,
                   device: str = "auto", data_dir: str | os.PathLike | None = None,
                   results_dir: str | os.PathLike | None = None,
                   dry_run_csv: str | os.PathLike | None = None, parameters: dict | None = None) -> "pd.DataFrame":
    """The plan of the selected notebooks in ``profile`` (with ``parameters``, the ``-p`` values,
    over it), running nothing but probe rounds.

    Seconds per image come from stored runs, then the dry run's CSV (default: :func:`plan_dry_run_csv`,
    this machine's dry run or the committed one), then cached probes."""
    notebooks, profiles, overrides, root = _selection(profile, only, notebooks_dir, profiles_dir, device,
                                                      data_dir, results_dir, None, None, parameters=parameters)
    if dry_run_csv is None:
        dry_run_csv = plan_dry_run_csv(root, profile)
    return _plan(notebooks, profiles, overrides, probe, dry_run_csv, root=root)


def _plan(notebooks: list[Path], profiles: dict, overrides: dict, probe: bool = True,
          dry_run_csv: str | os.PathLike | None = None, root: Path = REPO_ROOT) -> "pd.DataFrame":
    from fedlib.paper.plan import plan_frame  # torch: only when a plan is asked for

    grids = declared_grids(notebooks, profiles, overrides)
    results_dir = overrides.get("results_dir") or str(root / "results")  # the notebooks' default
    return plan_frame(grids, results_dir, probe, overrides.get("device", "auto"), dry_run_csv)


def declared_grids(notebooks: list[Path], profiles: dict, overrides: dict,
                   progress: bool = True) -> dict[str, list | None]:
    """Notebook stem -> the runs it declares under its profile (None: a notebook without a grid)."""
    from tqdm.auto import tqdm

    from fedlib.paper.plan import declared_configs

    grids = {}
    with _fedlib_importable():
        for notebook in tqdm(notebooks, desc="declaring runs", unit="notebook", disable=not progress):
            parameters = {**(profiles[notebook.stem].get(overrides["profile"]) or {}), **overrides}
            grids[notebook.stem] = declared_configs(notebook, parameters)
    return grids


def declared_runs(grids: dict[str, list | None]) -> dict[str, tuple]:
    """Config hash -> (config, the notebooks declaring it): every distinct run once."""
    runs: dict[str, tuple] = {}
    for stem, configs in grids.items():
        for cfg in configs or []:
            runs.setdefault(cfg.hash(), (cfg, []))[1].append(stem)
    return {digest: (cfg, list(dict.fromkeys(stems))) for digest, (cfg, stems) in runs.items()}


def default_dry_run_csv(root: Path, profile: str) -> Path:
    """Where a profile's dry run keeps its rows: ``output/dry_run/<profile>.csv``."""
    return Path(root) / "output" / "dry_run" / f"{profile}.csv"


def plan_dry_run_csv(root: Path, profile: str) -> Path | None:
    """The dry run whose seconds per image a plan reads: this machine's
    (``output/dry_run/<profile>.csv``) when there is one, else the snapshot committed in
    ``benchmarks/dry_run/<profile>.csv`` (so a fresh clone's plan probes only what it lacks), else None."""
    for path in (default_dry_run_csv(root, profile), Path(root) / "benchmarks" / "dry_run" / f"{profile}.csv"):
        if path.exists():
            return path
    return None


def dry_run_notebooks(profile: str = "paper", only: str | None = None, *,
                      notebooks_dir: str | os.PathLike | None = None,
                      profiles_dir: str | os.PathLike | None = None, data_dir: str | os.PathLike | None = None,
                      csv_path: str | os.PathLike | None = None, jobs: int = 1, limit: int | None = None,
                      retry_errors: bool = False, every_seed: bool = False) -> tuple["pd.DataFrame", Path,
                                                                                      "pd.DataFrame"]:
    """Dry-run every distinct config the selected notebooks declare in ``profile``
    (:func:`fedlib.orchestration.dry_run.dry_run`; configs differing only in their seed share a row unless
    ``every_seed``), after drawing every declared partition over the full training set
    (:func:`fedlib.orchestration.partition_check.check_partitions`, rows beside the CSV as
    ``<name>_partitions.csv``); returns the dry run's rows, their CSV, and the partitions' rows."""
    from fedlib.orchestration.dry_run import dry_run
    from fedlib.orchestration.partition_check import check_partitions

    runs = declared_profile_runs(profile, only, notebooks_dir=notebooks_dir, profiles_dir=profiles_dir,
                                 data_dir=data_dir)
    root = Path(notebooks_dir or REPO_ROOT / "notebooks").resolve().parent
    csv_path = Path(csv_path or default_dry_run_csv(root, profile))
    partitions = check_partitions(runs, csv_path.with_name(f"{csv_path.stem}_partitions.csv"))
    frame = dry_run(runs, csv_path, jobs=jobs, limit=limit, retry_errors=retry_errors, every_seed=every_seed)
    return frame, csv_path, partitions


def declared_profile_runs(profile: str = "paper", only: str | None = None, *,
                          notebooks_dir: str | os.PathLike | None = None,
                          profiles_dir: str | os.PathLike | None = None,
                          data_dir: str | os.PathLike | None = None) -> dict:
    """hash -> (config, notebooks declaring it) for every distinct run the selected notebooks
    declare in ``profile``, as the dry run sees them (on the CPU, in a scratch store)."""
    with tempfile.TemporaryDirectory(prefix="fedlib-dry-run-results-") as scratch:
        notebooks, profiles, overrides, _ = _selection(profile, only, notebooks_dir, profiles_dir, "cpu",
                                                       data_dir, scratch, None, None)
        return declared_runs(declared_grids(notebooks, profiles, overrides))


def _selection(profile, only, notebooks_dir, profiles_dir, device, data_dir, results_dir, figures_dir,
               tables_dir, publish=False, parameters=None) -> tuple[list[Path], dict, dict, Path]:
    """The notebooks, their profiles and the parameters the runner passes, options checked.

    Publishing writes the committed ``figures/`` and ``tables/`` unless other folders are given;
    otherwise a folder inside them is refused (their index must say what produced each file)."""
    notebooks_dir = Path(notebooks_dir or REPO_ROOT / "notebooks").resolve()
    root = notebooks_dir.parent
    notebooks = find_notebooks(notebooks_dir, only)
    profiles = {nb.stem: load_profiles(Path(profiles_dir or root / "profiles"), nb.stem) for nb in notebooks}
    _check_profile(profile, profiles)
    check_parameter_names(notebooks, list(parameters or {}))
    if publish:  # -p figures_dir (relative: against the repository) counts as --figures
        given = {name: repo_path(value, root) for name, value in (parameters or {}).items()
                 if name in ("figures_dir", "tables_dir") and value}
        figures_dir = figures_dir or given.get("figures_dir") or root / "figures"
        tables_dir = tables_dir or given.get("tables_dir") or root / "tables"
    overrides = build_overrides(profile, device, data_dir, results_dir, figures_dir, tables_dir, parameters)
    check_unpublished(overrides, root, publishing=publish)
    return notebooks, profiles, overrides, root


def user_parameters(overrides: dict) -> dict:
    """The ``-p NAME VALUE`` parameters among the runner's ``overrides`` (not the profile, device or folders)."""
    return {name: value for name, value in overrides.items() if name not in OVERRIDE_NAMES}


def index_outputs(folder: Path, kind: str, stem: str, profile: str, since: float,
                  all_stems: Sequence[str] = (), parameters: dict | None = None) -> None:
    """Record which notebook, profile, parameters over the profile (``-p``), hardware and date
    produced each output written since ``since``.

    The record lives in ``<folder>/index.json`` and is rendered as ``<folder>/README.md``. A file
    named after another notebook of ``all_stems`` (its stem a longer prefix of the file name)
    belongs to that notebook and is left alone.
    """
    if not folder.is_dir():
        return
    index_path = folder / "index.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {}
    # notebooks name their outputs after their paper and kind (pkd_table*, fedvls_fig*), which keeps a file
    # written meanwhile by a notebook of another family (run side by side) out of this notebook's entry
    family = _family(stem)
    fresh = [p for p in sorted(folder.iterdir()) if p.suffix in (".png", ".csv")
             and p.name.startswith(family) and p.stat().st_mtime >= since - 1
             and _owner(p.name, all_stems) in (None, stem)]
    stamp = datetime.date.today().isoformat()
    for path in fresh:
        index[path.name] = {"notebook": f"notebooks/{stem}.ipynb", "profile": profile,
                            "hardware": _hardware(), "date": stamp}
        if parameters:
            index[path.name]["parameters"] = parameters
    if not fresh:
        return
    index_path.write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    render_index(folder, kind)


def render_index(folder: Path, kind: str) -> None:
    """Write ``<folder>/README.md`` from ``<folder>/index.json``."""
    index = json.loads((folder / "index.json").read_text())
    title = "Figures" if kind == "figure" else "Tables"
    lines = [f"# {title}", "", publish_note(folder, kind, index), "",
             f"| {kind} | notebook | profile | parameters over the profile | hardware | date |",
             "|---|---|---|---|---|---|"]
    for name, row in sorted(index.items()):
        lines.append(f"| [{name}]({name}) | {row['notebook']} | {row['profile']} | {_parameters_text(row)} |"
                     f" {row['hardware']} | {row['date']} |")
    (folder / "README.md").write_text("\n".join(lines) + "\n")


def _parameters_text(row: dict) -> str:
    """A published file's ``-p`` parameters as the command line gives them, or "none"."""
    parameters = row.get("parameters") or {}
    return ", ".join(f"`-p {name} {_shell_value(value)}`" for name, value in parameters.items()) or "none"


def _shell_value(value) -> str:
    """``value`` as one shell word that :func:`parse_parameters` reads back to it: a string bare
    only where YAML reads it as that string (``yes`` and ``0.5`` are quoted), quotes inside kept."""
    text = value if isinstance(value, str) and _reads_as(value, value) else json.dumps(value)
    return text if re.fullmatch(r"[\w.+-]+", text) else shlex.quote(text)


def _reads_as(text: str, value) -> bool:
    """Whether ``-p NAME text`` gives ``value`` (False where it is no valid YAML)."""
    try:
        return parse_parameters([("name", text)])["name"] == value
    except FedlibError:
        return False


def publish_note(folder: Path, kind: str, index: dict) -> str:
    """How the files of a published ``folder`` are regenerated: the command, and that runs without
    ``--publish`` leave it alone."""
    kinds = f"{kind}s"
    profiles = sorted({row["profile"] for row in index.values()})
    command = ["./reproduce.sh", f"--profile {profiles[0]}" if len(profiles) == 1 else "--profile PROFILE"]
    # a render-only publication regenerates from a clone only where the runs are committed: the reference
    # store holds paper-profile runs; a quick-profile render needs the runs trained again, so say nothing
    if os.environ.get("FEDLIB_RENDER_ONLY", "") not in ("", "0") and profiles == ["paper"]:
        command.append("--render-only")
    command += ["--publish", *_folder_options(Path(folder).resolve(), kinds)]
    how = f"`{' '.join(command)}`"
    if len(profiles) > 1 or any(row.get("parameters") for row in index.values()):
        how += " with each file's profile and parameters below"
    return (f"Only a publishing run writes the {kinds} here: {how} regenerates them (add `--only NOTEBOOK` for "
            f"one notebook's) and records below the notebook, profile, parameters, hardware and date of each. Runs without "
            f"`--publish` write to `output/<profile>/{kinds}/` instead.")


def _folder_options(folder: Path, kinds: str) -> list[str]:
    """The --figures/--tables options that publish into ``folder``: none for the committed folder
    itself, both for a subfolder (figures/paper goes with tables/paper), else ``folder`` as given."""
    committed = REPO_ROOT / kinds
    if folder == committed:
        return []
    if committed in folder.parents:
        name = folder.relative_to(committed).as_posix()
        return [f"--figures figures/{name}", f"--tables tables/{name}"]
    return [f"--{kinds} {folder}"]


def _owner(filename: str, stems: Sequence[str]) -> str | None:
    """The notebook stem that ``filename`` is named after (the longest prefix match), if any."""
    matches = [s for s in stems if filename.startswith(s + "_") or filename.startswith(s + ".")]
    return max(matches, key=len) if matches else None


def _family(stem: str) -> str:
    """'pkd_table1_4_class_accuracy' -> 'pkd_table'; a stem without fig/table token is its own family."""
    parts = stem.split("_")
    for i, part in enumerate(parts):
        for kind in ("fig", "table"):
            if part.startswith(kind):
                return "_".join(parts[:i] + [kind])
    return stem


def _hardware() -> str:
    """One line naming the device notebooks ran on (GPU name, else CPU cores)."""
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    return f"CPU, {os.cpu_count()} cores ({platform.machine()})"


def _check_profile(profile: str, profiles: dict[str, dict]) -> None:
    known = set(STANDARD_PROFILES).union(*(set(p) for p in profiles.values()))
    if profile not in known:
        raise one_of("profile", profile, known)


def render_skip_reason(notebook: Path, entry: dict | None, overrides: dict, root: Path = REPO_ROOT) -> str | None:
    """Why render-only mode leaves ``notebook`` out (None: render it, and always outside that mode).

    A table notebook renders when a store holds at least one of its runs (the others read "not
    run"); a figure notebook (``*_fig*``) needs every run it declares; a notebook that trains
    without a grid function (``getting_started``) has nothing to render from."""
    from fedlib.core import store
    from fedlib.core.engine import render_only
    from fedlib.paper import grids
    from fedlib.paper.plan import code_mentions, declared_configs

    if not render_only():
        return None
    if grids.grid_for(notebook.stem) is None:
        trains = code_mentions(notebook, "run_all(")
        return "render-only: it trains its own runs (no grid function)" if trains else None
    with _fedlib_importable():
        configs = {cfg.hash(): cfg for cfg in declared_configs(notebook, {**(entry or {}), **overrides})}
    results_dir = overrides.get("results_dir") or str(root / "results")
    stored = sum(store.is_stored(cfg, results_dir) for cfg in configs.values())
    runs = f"{len(configs)} run{'s' if len(configs) != 1 else ''}"
    if stored == 0:
        return f"render-only: no store holds any of its {runs}"
    if "_fig" in notebook.stem and stored < len(configs):
        return f"render-only: the figure needs all its {runs}; {stored} stored"
    return None


def _run_one(
    notebook: Path, entry: dict | None, overrides: dict, out_dir: Path, kernel: str, log_output: bool
) -> NotebookRun:
    """Execute one notebook; any error becomes a FAILED run with a one-line note.

    Only ``overrides`` are passed (the profile's name among them): the notebook applies its
    profile entry itself, so ``entry`` serves only to note that there is none."""
    import papermill

    output_path = out_dir / notebook.name
    note = "" if entry is not None else f"no {overrides['profile']!r} entry in its profile yaml"
    started = time.perf_counter()
    try:
        _check_parameters(notebook, {**(entry or {}), **overrides})  # the profile's names too, though not passed
        with _fedlib_importable():
            papermill.execute_notebook(
                str(notebook), str(output_path), parameters=portable_parameters(overrides, notebook),
                kernel_name=kernel,
                cwd=str(notebook.parent), progress_bar=False, log_output=log_output,
                extra_arguments=QUIET_KERNEL,
            )
    except Exception as error:  # noqa: BLE001 -- report it and go on with the next notebook
        failure = _describe(error)
        return NotebookRun(notebook.stem, "FAILED", time.perf_counter() - started, output_path,
                           f"{note}; {failure}" if note else failure)
    return NotebookRun(notebook.stem, "ok", time.perf_counter() - started, output_path, note)


def portable_parameters(parameters: dict, notebook: Path) -> dict:
    """``parameters`` as injected into ``notebook``: a folder (``*_dir``) inside its repository is
    written relative to the repository, so the executed copy names no folder of the machine that ran
    it. The kernel resolves it back (``fedlib.reporting.notebook.apply_profile`` reads folders against the
    repository holding ``notebooks/<stem>.ipynb``); a folder elsewhere stays absolute."""
    root = Path(notebook).resolve().parent.parent
    if Path(notebook).resolve().parent != root / "notebooks":  # the kernel would not find this root
        return dict(parameters)
    portable = dict(parameters)
    for name, value in parameters.items():
        if name.endswith("_dir") and isinstance(value, (str, os.PathLike)) and Path(value).is_absolute():
            try:
                portable[name] = Path(value).resolve().relative_to(root).as_posix()
            except ValueError:
                pass  # outside the repository: only an absolute path names it
    return portable


def declared_parameters(notebook: Path) -> set[str]:
    """Names assigned at top level of the notebook's cell tagged ``parameters`` (empty if none).

    Read with :mod:`ast` rather than papermill's inspector, which insists on kernelspec metadata
    even when the kernel is given on the command line.
    """
    cells = json.loads(Path(notebook).read_text(encoding="utf-8")).get("cells", [])
    tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if not tagged:
        return set()
    source = tagged[0]["source"]
    names = set()
    for node in ast.parse(source if isinstance(source, str) else "".join(source)).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        names.update(target.id for target in targets if isinstance(target, ast.Name))
    return names


def _check_parameters(notebook: Path, parameters: dict) -> None:
    """Refuse parameters the notebook does not declare: papermill would only warn, and the
    notebook would silently run with its default instead of the asked-for value."""
    declared = declared_parameters(notebook)
    if not declared:
        raise FedlibError(f"{notebook.name} has no code cell tagged 'parameters'; tag its first code cell")
    unknown = sorted(set(parameters) - declared)
    if unknown:
        raise FedlibError(
            f"parameter(s) {', '.join(unknown)} not declared in the parameters cell of "
            f"{notebook.name}; declared: {', '.join(sorted(declared))}"
        )


def _describe(error: Exception) -> str:
    """One line naming what went wrong inside (or before) the notebook."""
    ename = getattr(error, "ename", None)  # papermill's execution error carries the cell's error
    text = f"{ename}: {error.evalue}" if ename else f"{type(error).__name__}: {error}"
    first_line = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    return first_line[:160]


@contextmanager
def _fedlib_importable() -> Iterator[None]:
    """Put this checkout first on the kernel's PYTHONPATH (the kernel inherits our environment),
    so notebooks import the fedlib beside them even when it is not pip-installed."""
    previous = os.environ.get("PYTHONPATH")
    parts = [str(REPO_ROOT)] + ([previous] if previous else [])
    os.environ["PYTHONPATH"] = os.pathsep.join(parts)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = previous


def format_run(run: NotebookRun, width: int) -> str:
    """One line: notebook, status, seconds, note."""
    return f"{run.stem:<{width}}  {run.status:<6}  {run.seconds:7.1f}  {run.note}".rstrip()


def format_summary(runs: Sequence[NotebookRun]) -> str:
    """A plain-text table: notebook, status, seconds, note; the last line counts the failures
    (and the notebooks render-only mode skipped)."""
    width = max([len("notebook")] + [len(run.stem) for run in runs])
    lines = [f"{'notebook':<{width}}  status  seconds  note"]
    lines += [format_run(run, width) for run in runs]
    failed = [run.stem for run in runs if run.failed]
    skipped = sum(run.status == "skipped" for run in runs)
    skipped_note = f"; {skipped} skipped in render-only mode (the note says why)" if skipped else ""
    if failed:
        lines.append(f"{len(failed)} of {len(runs)} notebooks failed: {', '.join(failed)}{skipped_note}")
    elif skipped:
        lines.append(f"{len(runs) - skipped} of {len(runs)} notebooks ran{skipped_note}")
    else:
        lines.append(f"all {len(runs)} notebooks ran")
    return "\n".join(lines)


def format_listing(notebooks_dir: Path, profiles_dir: Path, only: str | None = None) -> str:
    """Per notebook: its title (the paper's figure or table), then one line per profile with the
    datasets it reads and the cost note its yaml gives. Reads files only: no torch, nothing runs."""
    blocks = ["notebook: paper figure or table\n  profile  datasets it reads (digits, synthetic: no files)"
              "  # cost, as profiles/<notebook>.yaml notes it"]
    for notebook in find_notebooks(notebooks_dir, only):
        profiles = load_profiles(profiles_dir, notebook.stem)
        notes = _profile_notes(Path(profiles_dir) / f"{notebook.stem}.yaml")
        defaults = _literal_parameters(notebook)
        lines = [f"{notebook.stem}: {_title(notebook)}"]
        width = max([len(name) for name in profiles] + [0])
        for name, values in profiles.items():
            data = ", ".join(_datasets({**defaults, **values})) or "-"
            lines.append(f"  {name:<{width}}  {data}" + (f"  # {notes[name]}" if notes.get(name) else ""))
        blocks.append("\n".join(lines if profiles else lines + ["  (no profiles yaml)"]))
    return "\n".join(blocks)


def _title(notebook: Path) -> str:
    """The first markdown heading of ``notebook``, without its '#', its ``$\\mu$`` math as plain μ."""
    for cell in json.loads(notebook.read_text(encoding="utf-8")).get("cells", []):
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("#"):
                    return plain_math(line.lstrip("#").strip())
    return "(no title)"


def _literal_parameters(notebook: Path) -> dict:
    """The parameters cell's literal values; empty when the notebook has no such cell."""
    try:
        return cell_defaults(notebook)
    except FedlibError:
        return {}


def _profile_notes(path: Path) -> dict[str, str]:
    """Profile name -> the comment on its line in the yaml (``quick:  # CPU, ~5 min``), with the
    comment-only lines that continue it right below."""
    if not path.exists():
        return {}
    notes, last = {}, None
    for line in path.read_text().splitlines():
        match = re.match(r"([A-Za-z_][\w-]*):\s*#\s*(.*)$", line)
        more = re.match(r"\s+#\s*(.*)$", line)
        if match:
            last = match.group(1)
            notes[last] = match.group(2).strip()
        elif more and last is not None:
            notes[last] += " " + more.group(1).strip()
        else:
            last = None
    return notes


@functools.cache
def _dataset_names() -> tuple[str, ...]:
    """fedlib.datasets.data.DATASETS, read once from its source (the listing imports no torch)."""
    tree = ast.parse((Path(__file__).parents[1] / "datasets" / "data.py").read_text(encoding="utf-8"))
    assignment = next(node for node in tree.body if isinstance(node, ast.Assign)
                      and any(getattr(t, "id", None) == "DATASETS" for t in node.targets))
    return tuple(ast.literal_eval(assignment.value))


PER_DATASET_GRIDS = ("betas",)  # parameters whose keys are the datasets a notebook trains: {cifar100: [0.5], ...}


def _datasets(value, key: str = "") -> list[str]:
    """The dataset names in a notebook's parameters: strings held under a key naming a dataset,
    and the keys of a per-dataset grid (:data:`PER_DATASET_GRIDS`; lookup tables such as
    ``models: {cifar10: cnn2, ...}`` name datasets a profile may not read, and do not count)."""
    if isinstance(value, dict):
        found = [str(k) for k in value if key in PER_DATASET_GRIDS and str(k) in _dataset_names()]
        found += [name for k, v in value.items() for name in _datasets(v, str(k))]
    elif isinstance(value, (list, tuple)):
        found = [name for item in value for name in _datasets(item, key)]
    else:
        found = [value] if isinstance(value, str) and "dataset" in key else []
    return list(dict.fromkeys(found))


def build_parser() -> argparse.ArgumentParser:
    """The command-line options of ``python -m fedlib.paper.reproduce`` (and reproduce.sh)."""
    parser = argparse.ArgumentParser(
        prog="python -m fedlib.paper.reproduce",
        description="Execute the paper notebooks with papermill and summarise what ran.",
    )
    parser.add_argument("--profile", default="smoke", help="smoke (CPU, seconds), quick or paper; default smoke")
    parser.add_argument("--only", help="comma-separated notebook names, substrings or globs")
    parser.add_argument("--device", help="auto, cpu, cuda, cuda:1, ...; default the notebook's (auto)")
    parser.add_argument("--data", help="dataset folder (default: the notebook's, i.e. $FEDLIB_DATA or the cache)")
    parser.add_argument("--download", action="store_true",
                        help="let torchvision download the datasets that are missing (sets FEDLIB_DOWNLOAD=1 for "
                             "the notebooks); default: only the dataset folder and the cache are read")
    parser.add_argument("--results", help="results cache folder; default results/")
    parser.add_argument("--figures", help="where figures are written; default output/<profile>/figures "
                                          "(with --publish: figures/)")
    parser.add_argument("--tables", help="where tables are written; default output/<profile>/tables "
                                         "(with --publish: tables/)")
    parser.add_argument("--publish", action="store_true",
                        help="write the committed figures/ and tables/ (or --figures/--tables) and record in their "
                             "index.json the notebook, profile, hardware and date of each file")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"), dest="parameters",
                        help="set one notebook parameter, VALUE read as YAML (e.g. -p seeds '[0, 1]'); repeatable; "
                             "it wins over the profile")
    parser.add_argument("--verbose", action="store_true", help="stream the cells' output (default: one line per "
                                                               "notebook)")
    parser.add_argument("--out", help="where executed notebooks go; default output/<profile>/")
    parser.add_argument("--kernel", help="Jupyter kernel; default 'fedlib' if registered, else 'python3'")
    parser.add_argument("--list", action="store_true",
                        help="list the notebooks: paper figure or table, data and cost of each profile; run nothing")
    parser.add_argument("--plan", action="store_true",
                        help="print the notebooks' plan (runs, stored, runs whose data are missing here and "
                             "why, estimated CPU- or GPU-hours on --device) and stop; always printed first for "
                             "--profile paper")
    parser.add_argument("--dry-run", action="store_true",
                        help="run one round of every distinct config the notebooks declare, on a small slice "
                             "of its data (a stand-in where the data are missing), on the CPU; store nothing; rows "
                             "go to --dry-run-csv as they finish, and configs already there are skipped")
    parser.add_argument("--dry-run-csv", help="the dry run's CSV; default output/dry_run/<profile>.csv (the plan "
                                              "reads its seconds per image)")
    parser.add_argument("--jobs", type=int, default=1, help="dry run: worker processes; default 1")
    parser.add_argument("--limit", type=int, help="dry run: at most this many configs not yet in the CSV, "
                                                  "spread over (dataset, model, method)")
    parser.add_argument("--retry-errors", action="store_true", help="dry run: run again the configs whose row "
                                                                    "says error")
    parser.add_argument("--every-seed", action="store_true",
                        help="dry run: one row per seed too (default: configs that differ only in their seed share "
                             "a row; every seed's partition is drawn over the full data either way)")
    parser.add_argument("--executor", choices=("serial", "local", "ray"), default="serial",
                        help="serial: each notebook trains its own runs, one after another (default); local or ray: "
                             "first train every run the selected notebooks declare (each distinct run once) "
                             "on --workers local processes or as Ray tasks, then render the notebooks from the "
                             "store; --workers N > 1 alone means local")
    parser.add_argument("--workers", type=int, default=None,
                        help="runs side by side (default: one per available core; on a Ray cluster, as many as its "
                             "resources hold), each with its share of the cores")
    parser.add_argument("--address", help="--executor ray: the Ray cluster to use, 'auto' (the one `ray start` "
                                          "runs here) or ray://HOST:PORT; default: a local Ray for this call")
    parser.add_argument("--threads", type=int, help="intra-op CPU threads per run (default: $FEDLIB_THREADS, else "
                                                    "the available cores / --workers; 1 per run on a Ray cluster)")
    parser.add_argument("--render-only", action="store_true",
                        help="train nothing: every run comes from results/ or the committed reference_results/; "
                             "cells no store holds read 'not run'")
    parser.add_argument("--notebooks-dir", help="notebook folder; default notebooks/ of this checkout")
    parser.add_argument("--profiles-dir", help="profile yaml folder for --list, --plan and --dry-run; default "
                                               "profiles/ beside the notebooks (which the notebooks read)")
    return parser


def _dry_run_main(args: argparse.Namespace, notebooks_dir: Path, profiles_dir: Path) -> int:
    """``--dry-run``: the table, the summary and the errors; status 1 when a config failed."""
    from fedlib.orchestration.dry_run import format_dry_run
    from fedlib.orchestration.partition_check import format_partitions

    if args.limit is not None and args.limit < 0:
        raise FedlibError(f"--limit must be >= 0, got {args.limit}")
    if _parameters(args):  # the dry run's rows stand for the profile's configs: a -p value would be ignored
        raise FedlibError("--dry-run times the configs the profile declares; drop -p (or use --plan, which applies it)")
    frame, csv_path, partitions = dry_run_notebooks(
        args.profile, args.only, notebooks_dir=notebooks_dir, profiles_dir=profiles_dir, data_dir=args.data,
        csv_path=args.dry_run_csv, jobs=args.jobs, limit=args.limit, retry_errors=args.retry_errors,
        every_seed=args.every_seed)
    print(format_dry_run(frame, csv_path))
    print(format_partitions(partitions))
    return 0 if (frame["status"] == "ok").all() and not (partitions["status"] == "error").any() else 1


def _execute_main(args: argparse.Namespace, notebooks_dir: Path, profiles_dir: Path) -> None:
    """``--executor local|ray`` / ``--workers N``: the declared runs first, on the executor."""
    if args.workers is not None and args.workers < 1:
        raise FedlibError(f"--workers must be >= 1, got {args.workers}")
    executor = "local" if args.executor == "serial" else args.executor
    if executor == "ray":  # a missing Ray is said before the grids are declared
        from fedlib.orchestration.executor import import_ray

        import_ray()
    execute_declared_runs(args.profile, args.only, executor=executor, workers=args.workers, address=args.address,
                          threads=args.threads, notebooks_dir=notebooks_dir, profiles_dir=profiles_dir,
                          device=args.device, data_dir=args.data, results_dir=args.results,
                          parameters=_parameters(args), verbose=args.verbose)


def _parameters(args: argparse.Namespace) -> dict | None:
    """The ``-p NAME VALUE`` parameters of the command line, where this runner has them."""
    pairs = getattr(args, "parameters", None)
    return parse_parameters(pairs) if pairs else None


def _check_options(args: argparse.Namespace) -> None:
    """Counts below 1 and empty folders are one line, whatever else is asked (``--workers 0`` with
    the serial executor used to pass unread)."""
    for name in ("workers", "jobs"):
        value = getattr(args, name, None)
        if value is not None and value < 1:
            raise FedlibError(f"--{name} must be >= 1, got {value}")
    if getattr(args, "threads", None) is not None:
        from fedlib.orchestration.resources import check_threads

        check_threads(args.threads)
    for name in ("data", "results", "figures", "tables", "out"):
        value = getattr(args, name, None)
        if value is not None and not str(value).strip():
            raise FedlibError(f"--{name} {value!r} names no folder; give a folder, or leave --{name} out for the default")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0 ok, 1 a notebook or dry-run config failed, 2 bad options)."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    if args.render_only:  # inherited by the kernels papermill starts
        os.environ["FEDLIB_RENDER_ONLY"] = "1"
    if args.download:  # read by fedlib.datasets.data, here and in the kernels
        os.environ["FEDLIB_DOWNLOAD"] = "1"
    notebooks_dir = Path(args.notebooks_dir or REPO_ROOT / "notebooks").resolve()
    profiles_dir = Path(args.profiles_dir or notebooks_dir.parent / "profiles")
    try:
        _check_options(args)
        if args.data is not None and not Path(args.data).is_dir():
            raise FedlibError(f"--data {args.data}: no such folder")
        if args.list:
            print(format_listing(notebooks_dir, profiles_dir, args.only))
            return 0
        if args.dry_run:
            return _dry_run_main(args, notebooks_dir, profiles_dir)
        if args.plan:
            frame = plan_notebooks(args.profile, args.only, notebooks_dir=notebooks_dir, profiles_dir=profiles_dir,
                                   device=args.device, data_dir=args.data, results_dir=args.results,
                                   dry_run_csv=args.dry_run_csv, parameters=_parameters(args))
            from fedlib.paper.plan import format_plan

            print(format_plan(frame, args.profile, args.device or "auto"))
            return 0
        if (args.executor != "serial" or (args.workers or 1) > 1) and not args.render_only:
            _execute_main(args, notebooks_dir, profiles_dir)
        width = max(len(nb.stem) for nb in find_notebooks(notebooks_dir, args.only))
        runs = run_notebooks(
            args.profile, args.only, notebooks_dir=notebooks_dir, profiles_dir=profiles_dir,
            out_dir=args.out, device=args.device, data_dir=args.data, results_dir=args.results,
            figures_dir=args.figures, tables_dir=args.tables, kernel=args.kernel,
            show_plan=args.profile == "paper" and not args.render_only, publish=args.publish,
            parameters=_parameters(args), log_output=args.verbose,
            report=lambda run: print(format_run(run, width), flush=True),
        )
    except FedlibError as error:
        print(f"error: {explain(error)}", file=sys.stderr)
        return 2
    except OSError as error:  # an unwritable --out, --results, ...: one line, not a traceback
        print(f"error: {error.strerror or error}: {error.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: finished runs are stored, the run in progress has its checkpoint
        print("\ninterrupted: run the same command again to go on (stored runs are reused, an interrupted run "
              "resumes from its last checkpoint)", file=sys.stderr)
        return 130
    summary = format_summary(runs)
    print(summary if args.verbose else summary.splitlines()[-1])
    if runs:
        print(f"executed notebooks in {_shown(runs[0].output_path.parent)}")
        print(_written_to(args, notebooks_dir.parent))
    return 1 if any(run.failed for run in runs) else 0


def _written_to(args: argparse.Namespace, root: Path) -> str:
    """Where this run's figures and tables went (the -p folders aside)."""
    folders = []
    for kind, given in (("figures", args.figures), ("tables", args.tables)):
        default = root / kind if args.publish else output_folder(root, args.profile, kind)
        folders.append(f"{kind} in {_shown(Path(given).resolve() if given else default)}")
    return ", ".join(folders) + (" (published: index.json updated)" if args.publish else "")


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when inside it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    sys.exit(main())
