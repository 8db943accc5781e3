"""The command line of ``python -m fedlib.paper.reproduce`` (and reproduce.sh): its options, and
``main``, which lists, plans, dry-runs, trains the declared runs on an executor and runs the
notebooks as asked, and turns a bad option into one line and exit status 2."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Sequence

from fedlib.errors import FedlibError, explain
from fedlib.folders import check_environment
from fedlib.paper.reproduce.declared import Declarations, dry_run_notebooks, execute_declared_runs, plan_notebooks
from fedlib.paper.reproduce.notebook_listing import format_listing
from fedlib.paper.reproduce.runner import format_run, format_summary, run_notebooks
from fedlib.paper.reproduce.selection import find_notebooks, parse_parameters
from fedlib.reporting.edited_runs import EditedProfile
from fedlib.reporting.notebook import REPO_ROOT, output_folder


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
    parser.add_argument("--dry-run-csv", help="the dry run's CSV; default output/dry_run/<profile>.csv")
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


def _execute_main(args: argparse.Namespace, notebooks_dir: Path, profiles_dir: Path,
                  declarations: Declarations) -> None:
    """``--executor local|ray`` / ``--workers N``: the declared runs first, on the executor
    (``declarations``: the call's, which the plan and the notebooks' run then reuse)."""
    if args.workers is not None and args.workers < 1:
        raise FedlibError(f"--workers must be >= 1, got {args.workers}")
    executor = "local" if args.executor == "serial" else args.executor
    if executor == "ray":  # a missing Ray is said before the grids are declared
        from fedlib.orchestration.executor import import_ray

        import_ray()
    execute_declared_runs(args.profile, args.only, executor=executor, workers=args.workers, address=args.address,
                          threads=args.threads, notebooks_dir=notebooks_dir, profiles_dir=profiles_dir,
                          device=args.device, data_dir=args.data, results_dir=args.results,
                          parameters=_parameters(args), verbose=args.verbose, declarations=declarations)


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
    if args.render_only:  # inherited by the kernels papermill starts, whose set-up reads it (notebook.apply_profile)
        os.environ["FEDLIB_RENDER_ONLY"] = "1"
    if args.download:  # read below for this process, and by the kernels' set-up
        os.environ["FEDLIB_DOWNLOAD"] = "1"
    notebooks_dir = Path(args.notebooks_dir or REPO_ROOT / "notebooks").resolve()
    profiles_dir = Path(args.profiles_dir or notebooks_dir.parent / "profiles")
    modes = ExitStack()  # the modes found, put back at the end (a caller in the same process)
    declarations = Declarations()  # each notebook's runs declared once in this call, whoever asks
    try:
        check_environment()
        _check_options(args)
        if args.threads is not None:  # the kernels' runs train with it (their set-up reads it)
            from fedlib.orchestration.resources import THREADS_ENV

            os.environ[THREADS_ENV] = str(args.threads)
        if args.data is not None and not Path(args.data).is_dir():
            raise FedlibError(f"--data {args.data}: no such folder")
        if args.list:
            print(format_listing(notebooks_dir, profiles_dir, args.only))
            return 0
        from fedlib.orchestration import environment  # torch: not on --list's path

        # an edge: the modes (render-only, download, threads, run defaults) read once for this process;
        # the kernels inherit the variables and read them in their set-up (reporting.notebook.apply_profile)
        modes.enter_context(environment.applied(os.environ))
        if args.dry_run:
            return _dry_run_main(args, notebooks_dir, profiles_dir)
        if args.plan:
            frame = plan_notebooks(args.profile, args.only, notebooks_dir=notebooks_dir, profiles_dir=profiles_dir,
                                   device=args.device, data_dir=args.data, results_dir=args.results,
                                   parameters=_parameters(args), declarations=declarations)
            from fedlib.paper.plan import format_plan

            print(format_plan(frame, args.profile, args.device or "auto"))
            return 0
        if (args.executor != "serial" or (args.workers or 1) > 1) and not args.render_only:
            _execute_main(args, notebooks_dir, profiles_dir, declarations)
        width = max(len(nb.stem) for nb in find_notebooks(notebooks_dir, args.only))
        runs = run_notebooks(
            args.profile, args.only, notebooks_dir=notebooks_dir, profiles_dir=profiles_dir,
            out_dir=args.out, device=args.device, data_dir=args.data, results_dir=args.results,
            figures_dir=args.figures, tables_dir=args.tables, kernel=args.kernel,
            show_plan=args.profile == "paper" and not args.render_only, publish=args.publish,
            parameters=_parameters(args), log_output=args.verbose,
            report=lambda run: print(format_run(run, width), flush=True), declarations=declarations,
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
    finally:
        modes.close()
    summary = format_summary(runs)
    print(summary if args.verbose else summary.splitlines()[-1])
    if runs:
        print(f"executed notebooks in {_shown(runs[0].output_path.parent)}")
        print(_written_to(args, notebooks_dir.parent))
    return 1 if any(run.failed for run in runs) else 0


def _written_to(args: argparse.Namespace, root: Path) -> str:
    """Where this run's figures and tables went (the -p folders aside): a notebook whose settings
    -p changed is no run of the profile and writes beside it (reporting.notebook.EditedProfile)."""
    folders = []
    settings = [name for name in _parameters(args) or {} if not name.endswith("_dir")]
    profile = EditedProfile(args.profile, dict.fromkeys(settings)) if settings and not args.publish else args.profile
    for kind, given in (("figures", args.figures), ("tables", args.tables)):
        default = root / kind if args.publish else output_folder(root, profile, kind)
        folders.append(f"{kind} in {_shown(Path(given).resolve() if given else default)}")
    edited = f" (where -p changed a setting of profile {args.profile}; else in output/{args.profile}/)"
    return ", ".join(folders) + (" (published: index.json updated)" if args.publish else edited if settings else "")


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when inside it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
