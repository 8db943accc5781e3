"""Train the runs a table notebook declares at full scale, one after another, and publish each
finished run to the committed reference store (reference_results/), committing it at once.

    .venv/bin/python tools/reference_runs.py fedvls_table1_4_dirichlet --profile paper \\
        --where dataset=mnist seed=0 beta=0.05 --methods fedavg,fedvls --commit

Runs already in either store are skipped; a killed run resumes from its checkpoint in results/, or
from its parked copy in parked/ (tools/park_run.py) when results/ has none as far along.
Run it under nohup: it is meant to run for hours. Torch's intra-op threads follow the thread
budget of ``fedlib run`` (``--threads``, else ``$FEDLIB_THREADS``, else this machine's cores):
two of these processes side by side should get ``--threads 1`` each, or their OpenMP threads
oversubscribe the cores (a PKD expert stage took 52 min instead of an estimated 5 that way). Resume a
run with the thread count it started with (``cpu_threads`` in its meta.json): another count
sums floats in another order.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fedlib import store  # noqa: E402
from fedlib.engine import engine  # noqa: E402
from fedlib.errors import FedlibError  # noqa: E402
from fedlib.orchestration import environment  # noqa: E402
from fedlib.orchestration.resources import apply_thread_budget  # noqa: E402
from fedlib.paper.plan import declared_configs  # noqa: E402
from fedlib.paper.reproduce import build_overrides, load_profiles  # noqa: E402
from tools.park_run import restore  # noqa: E402


def selected_configs(notebook: str, profile: str, where: dict[str, str], methods: list[str] | None,
                     overrides: dict) -> list:
    """The notebook's declared configs under ``profile`` (plus ``overrides``), filtered."""
    path = ROOT / "notebooks" / f"{notebook}.ipynb"
    profiles = load_profiles(ROOT / "profiles", notebook)
    if profile not in profiles:
        raise FedlibError(f"{notebook} has no {profile!r} profile; it has {sorted(profiles)}")
    parameters = {**profiles[profile], **build_overrides(profile, "cpu", None, ROOT / "results", ROOT / "figures",
                                                         ROOT / "tables"), **overrides}
    configs = declared_configs(path, parameters) or []
    unknown = sorted(key for key in where if configs and not key.startswith("method_args.")
                     and not hasattr(configs[0], key))
    if unknown:
        raise FedlibError(f"--where {', '.join(unknown)}: not a run field; use fields such as dataset, partition, "
                          "beta, clients, model, method, seed or method_args.NAME")
    keep = []
    for cfg in configs:
        if methods and cfg.method not in methods:
            continue
        if all(str(field_value(cfg, key)) == value for key, value in where.items()):
            keep.append(cfg)
    if methods:  # in the order asked for
        keep.sort(key=lambda c: methods.index(c.method))
    return list({c.hash(): c for c in keep}.values())


def field_value(cfg, key: str):
    """A run field, or one of its method's arguments named ``method_args.NAME`` (None when unset)."""
    if key.startswith("method_args."):
        return dict(cfg.method_args or {}).get(key.split(".", 1)[1])
    return getattr(cfg, key)


def resume_threads(folder: Path, threads: int) -> int:
    """The torch thread count to train the run of ``folder`` under: the one it started with when it
    has a checkpoint (another count sums floats in another order), else ``threads``."""
    if not (folder / store.CHECKPOINT_FILE).exists() or not (folder / "meta.json").exists():
        return threads
    started = store.RunRecord(folder).read_meta().get("environment", {}).get("cpu_threads")
    if isinstance(started, int) and started != threads:
        print(f"resuming {folder.name} with the {started} torch threads it started with", flush=True)
        return apply_thread_budget(started)
    return threads


def commit(folder: Path, message: str) -> None:
    """git add + commit one published run, retrying while another commit holds the index."""
    for _ in range(30):
        add = subprocess.run(["git", "add", str(folder)], cwd=ROOT, capture_output=True, text=True)
        done = add.returncode == 0 and subprocess.run(
            ["git", "commit", "-q", "-m", message, "--", str(folder)], cwd=ROOT, capture_output=True,
            text=True).returncode == 0
        if done:
            return
        time.sleep(10)
    print(f"could not commit {folder}; commit it by hand", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook")
    parser.add_argument("--profile", default="paper")
    parser.add_argument("--where", nargs="*", default=[], help="FIELD=VALUE filters on the declared configs")
    parser.add_argument("--methods", help="comma-separated methods, run in this order")
    parser.add_argument("--param", nargs="*", default=[], help="NAME=PYTHON_VALUE notebook parameter overrides")
    parser.add_argument("--backend", default="threads")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda on a GPU machine (then --backend auto)")
    parser.add_argument("--channels-last", action="store_true",
                        help="channels-last memory layout (a location field: the same stored run, float-rounding close; "
                             "1.15x faster for cnn2 on one CPU core, benchmarks/RESULTS-cpu.md)")
    parser.add_argument("--results", default=str(ROOT / "results"), help="the working store to train in")
    parser.add_argument("--no-publish", action="store_true",
                        help="train into --results only (a GPU copy without git: publish its runs here later)")
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: $FEDLIB_THREADS, else the cores)")
    parser.add_argument("--commit", action="store_true", help="git-commit each published run")
    parser.add_argument("--dry-run", action="store_true", help="list the selected runs, train nothing")
    parser.add_argument("--force", action="store_true",
                        help="train and publish from uncommitted fedlib/ code (the reference store refuses it otherwise)")
    args = parser.parse_args(argv)
    environment.apply(os.environ)  # a tool's main is an edge: $FEDLIB_THREADS, $FEDLIB_DETERMINISTIC, ...
    import ast

    where = dict(item.split("=", 1) for item in args.where)
    overrides = {k: ast.literal_eval(v) for k, v in (item.split("=", 1) for item in args.param)}
    methods = args.methods.split(",") if args.methods else None
    configs = selected_configs(args.notebook, args.profile, where, methods, overrides)
    revision = store.code_revision()
    if not args.dry_run and not args.force and not store.is_clean_revision(revision):
        raise FedlibError(f"fedlib/ has uncommitted changes (code revision {revision}): commit them first, "
                          "or pass --force; the reference store takes only runs of committed code")
    threads = apply_thread_budget(args.threads)
    print(f"{len(configs)} runs selected, {threads} torch threads", flush=True)
    for cfg in configs:
        cfg = cfg.replace(device=args.device, backend=args.backend, results_dir=args.results,
                          channels_last=args.channels_last)
        label = f"{cfg.hash()} {cfg.method} {cfg.dataset} {cfg.partition} beta={cfg.beta} seed={cfg.seed}"
        if store.reference_record(cfg) is not None:
            print(f"in the reference store: {label}", flush=True)
            continue
        if args.dry_run:
            print(f"to run: {label}", flush=True)
            continue
        if restore(cfg.hash(), Path(args.results)):
            print(f"restored from parked/ (tools/park_run.py): {label}", flush=True)
        if args.threads is None:
            threads = resume_threads(Path(args.results) / cfg.hash(), threads)
        started = time.time()
        result = engine.run(cfg, progress=False)
        print(f"done in {time.time() - started:.0f} s: {label} best={result.best_accuracy:.4f} "
              f"final={result.final_accuracy:.4f}", flush=True)
        if args.no_publish:
            continue
        folder = store.publish(store.RunRecord(result.folder), force=args.force)
        if args.commit:
            commit(folder, f"reference store: {cfg.method} {cfg.dataset} {cfg.partition} beta={cfg.beta} "
                           f"seed={cfg.seed} ({args.notebook}, {args.profile} profile), "
                           + ("diverged" if result.diverged else f"best {100 * result.best_accuracy:.2f} %"))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except FedlibError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
