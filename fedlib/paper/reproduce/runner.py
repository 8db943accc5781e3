"""The papermill runner: each selected notebook executed in its own kernel with the parameters the
runner passes (the notebook applies its profile itself), the executed copy kept, a failing
notebook noted and the others run on; in render-only mode a notebook whose runs no store holds is
skipped. papermill is imported only where a notebook runs."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from fedlib.errors import FedlibError, one_line
from fedlib.folders import user_folder
from fedlib.paper.reproduce.declared import Declarations, declared_plan
from fedlib.paper.reproduce.kernel import QUIET_KERNEL, check_kernel, default_kernel, fedlib_importable, publishing_env
from fedlib.paper.reproduce.output_index import index_outputs
from fedlib.paper.reproduce.selection import (STANDARD_PROFILES, declared_parameters, find_notebooks, select_notebooks,
                                              user_parameters)
from fedlib.reporting.notebook import REPO_ROOT


@dataclass
class NotebookRun:
    """What happened to one notebook."""

    stem: str
    status: str  # "ok", "FAILED", or "skipped" (render-only with its runs not stored, or no such profile)
    seconds: float
    output_path: Path
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def failed(self) -> bool:
        return self.status == "FAILED"


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
    declarations: Declarations | None = None,
) -> list[NotebookRun]:
    """Execute the selected notebooks in ``profile``; never stops at a failing notebook.

    Each notebook gets the profile's name, ``parameters`` and the options given (None: the
    notebook's default) and applies its profile itself. Figures and tables go to
    ``output/<profile>/`` unless ``publish``, which writes the committed ``figures/`` and
    ``tables/`` (or the folders given) and records each file in their ``index.json``. Executed
    notebooks go to ``output/<profile>/``. With ``show_plan`` the plan of the notebooks
    (:mod:`fedlib.paper.plan`) is printed first; ``report`` is called with each finished run. Raises
    ``declarations`` (the call's :class:`~fedlib.paper.reproduce.declared.Declarations`) holds the
    runs the notebooks declare, asked once per notebook for the plan and render-only's skips. Raises
    :class:`FedlibError` for bad options (unknown profile, kernel or parameter, a pattern
    matching nothing, a committed folder without ``publish``).
    """
    notebooks, profiles, overrides, root = select_notebooks(profile, only, notebooks_dir, profiles_dir, device,
                                                            data_dir, results_dir, figures_dir, tables_dir,
                                                            publish=publish, parameters=parameters)
    given_out = user_folder(out_dir, "--out")
    out_dir = given_out or root / "output" / profile
    check_out_folder(out_dir, Path(notebooks_dir) if notebooks_dir else root / "notebooks")
    kernel = kernel or default_kernel()
    check_kernel(kernel)
    out_dir.mkdir(parents=True, exist_ok=True)
    declarations = declarations or Declarations()
    if show_plan:
        from fedlib.paper.plan import format_plan

        frame = declared_plan(notebooks, profiles, overrides, root=root, declarations=declarations)
        print(format_plan(frame, profile, device or "auto"), flush=True)
    all_stems = [nb.stem for nb in find_notebooks(notebooks[0].parent)] if notebooks else []
    runs = []
    with publishing_env(publish):
        for notebook in notebooks:
            entry = profiles[notebook.stem].get(profile)
            started = time.time()
            lacking = profile not in profiles[notebook.stem] and profile not in STANDARD_PROFILES
            skip = (f"it has no {profile} profile (profiles/{notebook.stem}.yaml)" if lacking
                    else render_skip_reason(notebook, entry, overrides, root, declarations))
            if skip:
                runs.append(NotebookRun(notebook.stem, "skipped", 0.0, out_dir / notebook.name, skip))
            else:
                folder = out_dir if given_out or publish else executed_folder(notebook, overrides, out_dir, root)
                folder.mkdir(parents=True, exist_ok=True)
                runs.append(_run_one(notebook, entry, overrides, folder, kernel, log_output))
            if runs[-1].ok and publish:
                for folder, kind in ((overrides["figures_dir"], "figure"), (overrides["tables_dir"], "table")):
                    index_outputs(Path(folder), kind, notebook.stem, profile, started, all_stems,
                                  parameters=user_parameters(overrides))
            if report is not None:
                report(runs[-1])
    return runs


def executed_folder(notebook: Path, overrides: dict, out_dir: Path, root: Path = REPO_ROOT) -> Path:
    """Where the executed copy of ``notebook`` goes when no ``--out`` is given: ``out_dir``
    (``output/<profile>/``), or beside it, ``output/<profile>-edited/``, where the ``-p`` values
    change a setting of the profile: no run of the profile, whose figures go there too
    (:mod:`fedlib.reporting.edited_runs`), so that it never replaces the profile's executed copy."""
    from fedlib.reporting.notebook import cell_defaults, resolve_parameters

    try:
        profile = resolve_parameters(notebook.stem, cell_defaults(notebook), overrides, root).get("profile")
    except FedlibError:
        return out_dir  # the notebook's kernel says what is wrong, in its run's line
    return out_dir.with_name(f"{profile}-edited") if getattr(profile, "edits", None) else out_dir


def check_out_folder(out_dir: Path, notebooks_dir: Path) -> None:
    """Refuse an ``--out`` folder that is, lies inside or holds the notebooks folder (``notebooks_dir``
    or this checkout's): executed copies there would overwrite or sit among the committed notebooks,
    as writing the committed figures/ and tables/ needs --publish (reporting.notebook.check_unpublished)."""
    out = Path(out_dir).resolve()
    for folder in {Path(notebooks_dir).resolve(), (REPO_ROOT / "notebooks").resolve()}:
        if out == folder or folder in out.parents or out in folder.parents:
            where = "is" if out == folder else "lies inside" if folder in out.parents else "holds"
            raise FedlibError(f"--out {out_dir} {where} the notebooks folder {folder}; executed notebooks go "
                              "elsewhere (leave --out out for output/<profile>/)")


def render_skip_reason(notebook: Path, entry: dict | None, overrides: dict, root: Path = REPO_ROOT,
                       declarations: Declarations | None = None) -> str | None:
    """Why render-only mode leaves ``notebook`` out (None: render it, and always outside that mode).

    A table notebook renders when a store holds at least one of its runs (the others read "not
    run"); a figure notebook (``*_fig*``) needs every run it declares; a notebook that trains
    without a grid function (``getting_started``) has nothing to render from. ``declarations``: the
    call's :class:`~fedlib.paper.reproduce.declared.Declarations` (a new one when None)."""
    from fedlib import store
    from fedlib.engine.engine import render_only
    from fedlib.paper import grids
    from fedlib.paper.plan import code_mentions

    if not render_only():
        return None
    if grids.grid_for(notebook.stem) is None:
        trains = code_mentions(notebook, "run_all(")
        return "render-only: it trains its own runs (no grid function)" if trains else None
    declared = (declarations or Declarations()).configs(notebook, {**(entry or {}), **overrides})
    configs = {cfg.hash(): cfg for cfg in declared}
    results_dir = overrides.get("results_dir") or str(root / "results")
    stored = sum(state.stored for state in store.run_states(configs.values(), results_dir).values())
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
        with fedlib_importable():
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
    return one_line(f"{ename}: {error.evalue}" if ename else error, 160)


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
    skipped_note = f"; {skipped} skipped (the note says why)" if skipped else ""
    if failed:
        lines.append(f"{len(failed)} of {len(runs)} notebooks failed: {', '.join(failed)}{skipped_note}")
    elif skipped:
        lines.append(f"{len(runs) - skipped} of {len(runs)} notebooks ran{skipped_note}")
    else:
        lines.append(f"all {len(runs)} notebooks ran")
    return "\n".join(lines)
