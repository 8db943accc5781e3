"""Declared runs: the configs the selected notebooks say they need (each notebook's grid function
called with the parameters it would run with, without executing it), each distinct run once, and
what is done with them without a notebook: the plan (``--plan``), the dry run (``--dry-run``) and
training them on an executor first (``--executor local|ray``)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

from fedlib.paper.reproduce.kernel import fedlib_importable
from fedlib.paper.reproduce.selection import select_notebooks
from fedlib.reporting.notebook import REPO_ROOT

# runner options that never change what a notebook declares: its grid function does not read them
NOT_DECLARING = ("figures_dir", "tables_dir")


class Declarations:
    """The runs each notebook declares (:func:`fedlib.paper.plan.declared_configs`), asked once per
    notebook and parameters: one is made per ``reproduce`` call and passed to everything that needs
    the declared runs (the executor's runs, the plan, render-only's skip reasons)."""

    def __init__(self):
        self._configs: dict[tuple[str, str], list | None] = {}
        self.asked = 0  # notebooks declared: at most one per notebook and parameters

    def configs(self, notebook: Path, parameters: dict) -> list | None:
        """The runs ``notebook`` declares under ``parameters`` (None: a notebook without a grid)."""
        from fedlib.paper.plan import declared_configs

        shown = {name: value for name, value in parameters.items() if name not in NOT_DECLARING}
        key = (str(Path(notebook).resolve()), json.dumps(shown, sort_keys=True, default=str))
        if key not in self._configs:
            self.asked += 1
            with fedlib_importable():
                self._configs[key] = declared_configs(notebook, parameters)
        return self._configs[key]


def execute_declared_runs(profile: str = "smoke", only: str | None = None, *, executor: str = "local",
                          workers: int | None = None, address: str | None = None, threads: int | None = None,
                          notebooks_dir: str | os.PathLike | None = None,
                          profiles_dir: str | os.PathLike | None = None, device: str | None = None,
                          data_dir: str | os.PathLike | None = None, results_dir: str | os.PathLike | None = None,
                          parameters: dict | None = None, verbose: bool = False,
                          declarations: Declarations | None = None) -> list:
    """Train every run the selected notebooks declare in ``profile``, each distinct run once
    however many notebooks declare it, on ``executor`` (:func:`fedlib.orchestration.executor.execute`: local
    worker processes or Ray), so the notebooks then render from the store. Runs whose dataset is
    missing here are left to the notebooks (which skip them); ``verbose`` adds a line per finished
    run; ``declarations``: the call's :class:`Declarations`. Returns the outcomes."""
    from fedlib.datasets.data import missing_dataset_message
    from fedlib.orchestration.executor import execute

    runs, store_dir = notebook_runs(profile, only, notebooks_dir=notebooks_dir, profiles_dir=profiles_dir,
                                    device=device, data_dir=data_dir, results_dir=results_dir, parameters=parameters,
                                    declarations=declarations)
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
                  parameters: dict | None = None, progress: bool = True,
                  declarations: Declarations | None = None) -> tuple[list, str]:
    """Every distinct run the selected notebooks declare in ``profile`` (those of
    :data:`fedlib.paper.grids.HOOK_TRAINED` left to their notebooks), and the results store the notebooks
    will read them from."""
    from fedlib.paper.grids import HOOK_TRAINED

    notebooks, profiles, overrides, root = select_notebooks(profile, only, notebooks_dir, profiles_dir, device,
                                                            data_dir, results_dir, None, None, parameters=parameters)
    grids = declared_grids(notebooks, profiles, overrides, progress=progress, declarations=declarations)
    runs = declared_runs({stem: configs for stem, configs in grids.items() if stem not in HOOK_TRAINED})
    return [cfg for cfg, _ in runs.values()], overrides.get("results_dir") or str(root / "results")


def plan_notebooks(profile: str = "paper", only: str | None = None, *, probe: bool = True,
                   notebooks_dir: str | os.PathLike | None = None, profiles_dir: str | os.PathLike | None = None,
                   device: str = "auto", data_dir: str | os.PathLike | None = None,
                   results_dir: str | os.PathLike | None = None, parameters: dict | None = None,
                   declarations: Declarations | None = None) -> "pd.DataFrame":
    """The plan of the selected notebooks in ``profile`` (with ``parameters``, the ``-p`` values,
    over it), running nothing but probe rounds.

    Rates come from stored runs, then steady-state probes of this machine (cached, or committed
    for the machine they were measured on: :mod:`fedlib.orchestration.timing`)."""
    notebooks, profiles, overrides, root = select_notebooks(profile, only, notebooks_dir, profiles_dir, device,
                                                            data_dir, results_dir, None, None, parameters=parameters)
    return declared_plan(notebooks, profiles, overrides, probe, root=root, declarations=declarations)


def declared_plan(notebooks: list[Path], profiles: dict, overrides: dict, probe: bool = True,
                  root: Path = REPO_ROOT, declarations: Declarations | None = None) -> "pd.DataFrame":
    """The plan of ``notebooks`` (:func:`fedlib.paper.plan.plan_frame`) from the runs they declare
    under ``overrides``, in the results store they would read."""
    from fedlib.paper.plan import plan_frame  # torch: only when a plan is asked for

    grids = declared_grids(notebooks, profiles, overrides, declarations=declarations)
    results_dir = overrides.get("results_dir") or str(root / "results")  # the notebooks' default
    return plan_frame(grids, results_dir, probe, overrides.get("device", "auto"))


def declared_grids(notebooks: list[Path], profiles: dict, overrides: dict, progress: bool = True,
                   declarations: Declarations | None = None) -> dict[str, list | None]:
    """Notebook stem -> the runs it declares under its profile (None: a notebook without a grid),
    from ``declarations`` (the call's :class:`Declarations`; a new one when None)."""
    from tqdm.auto import tqdm

    declarations = declarations or Declarations()
    grids = {}
    for notebook in tqdm(notebooks, desc="declaring runs", unit="notebook", disable=not progress):
        parameters = {**(profiles[notebook.stem].get(overrides["profile"]) or {}), **overrides}
        grids[notebook.stem] = declarations.configs(notebook, parameters)
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
        notebooks, profiles, overrides, _ = select_notebooks(profile, only, notebooks_dir, profiles_dir, "cpu",
                                                             data_dir, scratch, None, None)
        return declared_runs(declared_grids(notebooks, profiles, overrides))
