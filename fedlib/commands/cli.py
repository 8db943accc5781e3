"""Command line: ``fedlib run`` runs one experiment; ``list``, ``show`` and ``export`` read the store.

Accuracies are printed in % (two decimals) and rounds are counted from 1; ``run --json`` and
``show --json`` print the store's own values (fractions, 0-based round indices).
Bad input exits with status 2 and one line on stderr, never a traceback.

At about 570 lines it stays one module: one ``argparse`` parser and one short function per
subcommand; the store's displays live in :mod:`fedlib.commands.listing`, the export in
:mod:`fedlib.commands.export`.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import warnings
from typing import Any, Sequence

from fedlib.errors import FedlibError, explain
from fedlib.folders import check_environment, user_folder

# ``fedlib run``'s defaults where they depart from RunConfig's (which stay as they are: they key the
# runs the notebooks store): the setting the papers share, so a first run learns.
PAPER_DEFAULTS = {"local_epochs": 5, "momentum": 0.9, "weight_decay": 1e-5}
CHANCE_FACTOR = 1.5  # a final accuracy <= 1.5 / classes counts as chance level


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line (exit status 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise FedlibError(f"{self.prog}: {message} (see --help)")


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Appends '(default: X)' to an option's help unless the default is None, False or empty."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        unset = default is None or default is False or default == [] or default is argparse.SUPPRESS
        if "%(default)" in text or unset or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


def _names(values) -> str:
    return ", ".join(values)


def _cores() -> int:
    from fedlib.orchestration.resources import available_cores

    return available_cores()


def _add_data_arguments(p: argparse.ArgumentParser) -> None:
    from fedlib import models
    from fedlib.datasets import data, partition
    from fedlib.datasets.augment import AUGMENTATIONS

    p.add_argument("--dataset", default="fashion_mnist", help=f"one of {_names(data.DATASETS)}; fashion_mnist "
                   "as in PKD (digits and synthetic need no files)")
    p.add_argument("--model", default="lenet5", help=f"one of {_names(models.MODELS)}; lenet5 as PKD uses on "
                   "(Fashion-)MNIST")
    p.add_argument("--partition", default="dirichlet", help=f"one of {_names(partition.PARTITIONS)}; dirichlet, "
                   "the label skew all four papers use")
    p.add_argument("--beta", type=float, default=0.5, help="Dirichlet concentration; 0.5 appears in all four papers "
                   "(smaller is more skewed)")
    p.add_argument("--clients", type=int, default=10, help="clients K; 10 as in FedVLS and FedCSD (FedLMD: 100)")
    p.add_argument("--participation", type=float, default=1.0,
                   help="fraction of clients per round; all, as in FedVLS and FedCSD (FedLMD: 0.1)")
    p.add_argument("--shards-per-client", type=int, default=2, help="shards partition: shards s per client")
    p.add_argument("--classes-per-client", type=int, default=2,
                   help="quantity and pathological partitions: classes per client (FedVLS's s)")
    p.add_argument("--quantity-split", default="symmetric",
                   help=f"quantity partition: one of {_names(partition.QUANTITY_SPLITS)} (official: the FedVLS "
                        "code's cut of each class)")
    p.add_argument("--global-balance", action="store_true",
                   help="cut every class to the smallest class's count before partitioning (PKD's global class "
                        "balance); not with the natural partition")
    p.add_argument("--min-client-size", type=int, default=10,
                   help="dirichlet: redraw until every client has this many samples")
    p.add_argument("--dataset-split", default=None,
                   help=f"re-split train/test with the run's seed: one of {_names(data.SPLITS)} (default: the "
                        "dataset's own split)")
    p.add_argument("--no-standardise", action="store_true",
                   help="feed pixels / 255 without standardising them (dataset option standardise: false)")
    p.add_argument("--max-train-samples", type=int, default=None,
                   help="stratified subset of the training set (default: all of it)")
    p.add_argument("--max-test-samples", type=int, default=None, help="subset of the test set (default: all of it)")
    p.add_argument("--augmentation", default="auto", help=f"one of {_names(AUGMENTATIONS)}, or auto: none on grey "
                   "and toy images, crop_flip on colour images")


def _add_training_arguments(p: argparse.ArgumentParser) -> None:
    from fedlib.core.registry import method_names

    p.add_argument("--method", default="fedavg", help=f"one of {_names(method_names())}, or several joined by '+' "
                   "(fedlmd+fedprox); fedlib methods lists their arguments")
    p.add_argument("--method-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="a hyperparameter of the method (repeatable; default: the paper's value)")
    p.add_argument("--rounds", type=int, default=20,
                   help="communication rounds; 20 is a CPU-sized budget (the papers run 50 to 200)")
    p.add_argument("--local-epochs", type=int, default=PAPER_DEFAULTS["local_epochs"],
                   help="local epochs E per round; 5 as in FedVLS (MNIST), FedLMD, FedNTD, PKD and FedCSD")
    p.add_argument("--batch-size", type=int, default=50, help="local batch size; 50 as in PKD and FedLMD "
                   "(FedVLS, FedCSD, FedNTD: 64)")
    p.add_argument("--drop-last", action="store_true", help="drop each local epoch's last partial batch")
    p.add_argument("--lr", type=float, default=0.01, help="local SGD learning rate; 0.01 as in FedVLS, FedLMD, "
                   "FedNTD and PKD (FedCSD: 0.1)")
    p.add_argument("--lr-decay", type=float, default=1.0, help="per-round learning-rate factor (FedLMD: 0.99)")
    p.add_argument("--momentum", type=float, default=PAPER_DEFAULTS["momentum"],
                   help="local SGD momentum; 0.9 as in FedVLS, FedLMD, FedNTD and FedCSD (PKD: 0)")
    p.add_argument("--weight-decay", type=float, default=PAPER_DEFAULTS["weight_decay"],
                   help="local SGD weight decay; 1e-5 as in FedVLS, FedLMD, FedNTD and FedCSD")
    p.add_argument("--eval-every", type=int, default=1, help="evaluate on the test set every this many rounds")
    p.add_argument("--seed", type=int, default=0, help="seeds the partition, the model and every client's data order")


def _add_machine_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N, or auto (cuda when available)")
    p.add_argument("--backend", default=None, help="local training: auto (threads on a CPU; on a GPU the fastest "
                   "path verified there, else sequential), threads, stacked, graphed (CUDA graphs) or sequential (the "
                   "reference loop; the others match it to float rounding and share its stored runs) (default: $FEDLIB_BACKEND, else auto)")
    p.add_argument("--threads", type=int, default=None, help="intra-op CPU threads (default: $FEDLIB_THREADS, else "
                   f"the cores this process may use, {_cores()} here, so runs never oversubscribe them)")
    p.add_argument("--precision", default="fp32", help="fp32, or bf16 autocast of the local forward passes")
    p.add_argument("--channels-last", action="store_true", help="NHWC memory layout for images and convs")
    p.add_argument("--nondeterministic", action="store_true", help="on CUDA, allow the faster non-deterministic "
                   "kernels: repeat runs then differ in the last bits (meta.json records it; default: "
                   "$FEDLIB_DETERMINISTIC, else deterministic)")
    p.add_argument("--data", default=None, help="dataset folder (default: $FEDLIB_DATA)")
    p.add_argument("--download", action="store_true", help="allow torchvision to download datasets")
    p.add_argument("--results", default=None, help="results store (default: $FEDLIB_RESULTS, else ./results)")
    p.add_argument("--no-store", action="store_true", help="neither read nor write the results store")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line (fractions, "
                   "0-based rounds, as stored)")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no store messages")


_RUN_DESCRIPTION = """\
Run one federated experiment, or serve it from the results store when it is there.

Defaults that the papers share: E=5 local epochs, SGD lr 0.01 with momentum 0.9 and weight decay 1e-5
(RunConfig's Python defaults stay E=1, momentum 0, no weight decay). A run is checkpointed after every
round: rerun the same command after a Ctrl-C or a crash and it resumes. Accuracies are in %, rounds
are counted from 1."""


_MAIN_DESCRIPTION = """\
fedlib run trains one federated experiment (or serves it from the results store); sweep trains a
grid of them side by side; list, show and export read the store; migrate renames run folders stored
under an old config hash. Accuracies are printed in % and
rounds counted from 1; --json prints the store's own values (fractions, 0-based round indices).
fedlib COMMAND --help describes each command."""


_MIGRATE_DESCRIPTION = """\
Partition settings a scheme does not read (beta on an iid split, classes_per_client on a dirichlet
one, ...) no longer enter the config hash. A run stored by older code with such a setting off its
default sits under its old hash: this renames its folder to the new one and updates its
summary.json. Runs that now share a hash computed the same thing: the finished one (or the one with
more rounds) keeps it, the others move to .superseded/ in the store. Running it twice changes nothing.

  fedlib migrate                     # ./results (or $FEDLIB_RESULTS)
  fedlib migrate --reference         # reference_results/, e.g. after merging runs from older code"""


_SWEEP_DESCRIPTION = """\
Run a grid of federated experiments: every combination of the --grid values on top of the other
options (the defaults of fedlib run), each distinct run once, runs already stored skipped, the rest
trained side by side; then a summary table. Exit status 1 when a run failed.

  fedlib sweep --dataset digits --model mlp --grid method=fedavg,fedprox --grid seed=0,1,2 --workers 2
  fedlib sweep ... --grid method-arg=mu=0.01,mu=0.1 --executor ray --address auto"""


def _add_sweep_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--grid", action="append", default=[], metavar="OPTION=V1,V2,...",
                   help="an axis of the grid: an option of fedlib run and its values (repeatable)")
    p.add_argument("--executor", choices=("serial", "local", "ray"), default="local",
                   help="serial (this process), local (worker processes) or ray (pip install -e '.[ray]')")
    p.add_argument("--workers", type=int, default=None, help="runs side by side (default: one per available core; "
                   "on a Ray cluster, as many as its resources hold), each with its share of the cores")
    p.add_argument("--address", default=None, help="--executor ray: a running cluster, auto or ray://HOST:PORT "
                   "(default: a local Ray)")
    p.add_argument("--verbose", action="store_true", help="one line per finished run")


def _add_filters(p: argparse.ArgumentParser) -> None:
    from fedlib.commands.listing import STATUSES

    p.add_argument("--results", default=None, help="results store (default: $FEDLIB_RESULTS, else ./results)")
    p.add_argument("--method", default=None, help="runs whose method holds this one (fedlmd also matches "
                   "fedlmd+fedprox)")
    p.add_argument("--dataset", default=None, help="runs on this dataset")
    p.add_argument("--model", default=None, help="runs with this model")
    p.add_argument("--status", default=None, help=f"runs with this status: {_names(STATUSES)}")


def _build_parser() -> _Parser:
    from fedlib.commands.listing import DEFAULT_SORT, SORT_COLUMNS

    parser = _Parser(prog="fedlib", description=_MAIN_DESCRIPTION, formatter_class=_HelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="run one federated experiment", description=_RUN_DESCRIPTION,
                         formatter_class=_HelpFormatter)
    for add in (_add_data_arguments, _add_training_arguments, _add_machine_arguments):
        add(run)
    sweep = sub.add_parser("sweep", help="run a grid of experiments side by side (local workers or Ray)",
                           description=_SWEEP_DESCRIPTION, formatter_class=_HelpFormatter)
    for add in (_add_data_arguments, _add_training_arguments, _add_machine_arguments, _add_sweep_arguments):
        add(sweep)
    sweep.set_defaults(parser=sweep)
    listing = sub.add_parser("list", help="a table of the runs in the results store", formatter_class=_HelpFormatter)
    _add_filters(listing)
    listing.add_argument("--sort", default=DEFAULT_SORT, help=f"column to sort by: {_names(SORT_COLUMNS)}; size, "
                         "final, best and updated sort largest/newest first, the others ascending")
    show = sub.add_parser("show", help="one stored run: settings, provenance, accuracies, curve",
                          formatter_class=_HelpFormatter)
    show.add_argument("hash", help="the run's config hash, or a prefix of it")
    show.add_argument("--results", default=None, help="results store (default: $FEDLIB_RESULTS, else ./results; "
                      "the reference store is searched next)")
    show.add_argument("--every", type=int, default=None, help="rows of the accuracy table every this many rounds "
                      "(default: about ten rows)")
    show.add_argument("--json", action="store_true", help="the raw config, meta and summary as JSON")
    export = sub.add_parser("export", help="write the store's runs as TensorBoard logs", formatter_class=_HelpFormatter)
    export.add_argument("--to", default="tensorboard", choices=["tensorboard"], help="the format")
    export.add_argument("--out", required=True, help="folder for the logs (then: tensorboard --logdir OUT)")
    _add_filters(export)
    sub.add_parser("methods", help="list the registered methods and their arguments")
    migrate = sub.add_parser("migrate", help="rename run folders stored under their old config hash",
                             description=_MIGRATE_DESCRIPTION, formatter_class=_HelpFormatter)
    migrate.add_argument("--results", "--results-dir", dest="results", default=None,
                         help="results store (default: $FEDLIB_RESULTS, else ./results)")
    migrate.add_argument("--reference", action="store_true",
                         help="migrate the reference store ($FEDLIB_REFERENCE, else reference_results/) instead")
    migrate.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")
    return parser


def _method_args(pairs: list[str]) -> dict[str, str]:
    args = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise FedlibError(f"--method-arg expects KEY=VALUE, got {pair!r}")
        if key.strip() in args:
            raise FedlibError(f"--method-arg {key.strip()} is given twice ({args[key.strip()]!r} and {value.strip()!r})")
        args[key.strip()] = value.strip()
    return args


def config_from_args(ns: argparse.Namespace):
    """The RunConfig an argument namespace describes (validated)."""
    from fedlib.core.config import RunConfig
    from fedlib.core.registry import method_class, resolve_hparams

    raw = _method_args(ns.method_arg)
    typed = resolve_hparams(method_class(ns.method), raw, ns.dataset)
    method_args = {k: typed[k] for k in raw}  # store only what the user set, typed
    return RunConfig(
        dataset=ns.dataset, partition=ns.partition, beta=ns.beta, clients=ns.clients,
        participation=ns.participation, shards_per_client=ns.shards_per_client,
        classes_per_client=ns.classes_per_client, quantity_split=ns.quantity_split, global_balance=ns.global_balance,
        min_client_size=ns.min_client_size, max_train_samples=ns.max_train_samples,
        dataset_options={**({"split": ns.dataset_split} if ns.dataset_split else {}),
                         **({"standardise": False} if ns.no_standardise else {})},
        max_test_samples=ns.max_test_samples, augmentation=ns.augmentation, method=ns.method,
        method_args=method_args, model=ns.model, rounds=ns.rounds, local_epochs=ns.local_epochs,
        batch_size=ns.batch_size, drop_last=ns.drop_last, lr=ns.lr, lr_decay=ns.lr_decay, momentum=ns.momentum,
        weight_decay=ns.weight_decay, eval_every=ns.eval_every, seed=ns.seed, device=ns.device,
        data_dir=ns.data, results_dir=ns.results, download=ns.download,
        precision=ns.precision, channels_last=ns.channels_last, **({"backend": ns.backend} if ns.backend else {}),
        **({"deterministic": False} if ns.nondeterministic else {}))


# options of fedlib sweep that say where or how runs happen, not what they compute: a grid over one
# would collapse to one run per point of the other axes
NOT_A_RUN = {
    **{dest: "it says where a run happens, not what it computes (no part of the config hash)"
       for dest in ("device", "data", "results", "download", "backend", "channels_last", "threads")},
    **{dest: "it is an option of the sweep itself, not of a run"
       for dest in ("executor", "workers", "address", "verbose", "quiet", "json", "no_store")},
}


def given_options(parser: argparse.ArgumentParser, argv: Sequence[str]) -> set[str]:
    """The destinations of the options ``argv`` gives ``parser`` (``--rounds 5``, ``--rounds=5``, or
    an abbreviation argparse accepts, ``--round 5``)."""
    strings = {s: a.dest for a in parser._actions for s in a.option_strings}
    given = set()
    for token in argv:
        if token == "--":
            break
        name = token.split("=", 1)[0]
        if not name.startswith("-"):
            continue
        matches = [name] if name in strings else [s for s in strings if name.startswith("--") and s.startswith(name)]
        if len(matches) == 1:
            given.add(strings[matches[0]])
    return given


def grid_namespaces(ns: argparse.Namespace, argv: Sequence[str] = ()) -> list[argparse.Namespace]:
    """One namespace per combination of the ``--grid OPTION=V1,V2`` values (typed as the option is).
    An option that ``argv`` (the command line) also gives outside the grid is an error: the grid
    would override it without a word."""
    import itertools

    actions = {a.dest: a for a in ns.parser._actions if a.option_strings}
    given = given_options(ns.parser, argv)
    axes = []
    for pair in ns.grid:
        option, sep, values = pair.partition("=")
        dest = option.strip().lstrip("-").replace("-", "_")
        action = actions.get(dest)
        items = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not items or action is None or action.nargs == 0 or dest in ("grid", "parser"):
            raise FedlibError(f"--grid expects OPTION=V1,V2,... with an option of fedlib run that takes a value, "
                              f"got {pair!r}")
        if dest in NOT_A_RUN:
            raise FedlibError(f"--grid {option.strip()}: {NOT_A_RUN[dest]}; a grid varies what a run computes "
                              "(give the option once, outside --grid)")
        if dest in given and dest != "method_arg":  # --method-arg adds to the given ones (a key twice is refused)
            raise FedlibError(f"--grid {option.strip()} and {action.option_strings[-1]} both set {dest}; give it "
                              "in one place")
        try:
            axes.append((dest, [action.type(v) if action.type else v for v in items]))
        except ValueError:
            raise FedlibError(f"--grid {pair}: a value is not of the option's type") from None
    namespaces = []
    for values in itertools.product(*(v for _, v in axes)):
        variant = argparse.Namespace(**vars(ns))
        for (dest, _), value in zip(axes, values):
            setattr(variant, dest, [*ns.method_arg, value] if dest == "method_arg" else value)
        namespaces.append(variant)
    return namespaces


def _cmd_sweep(ns: argparse.Namespace, argv: Sequence[str] = ()) -> int:
    from fedlib.orchestration.executor import FAILED, execute

    if ns.no_store:
        raise FedlibError("fedlib sweep trains into the results store; leave out --no-store")
    if ns.workers is not None and ns.workers < 1:
        raise FedlibError(f"--workers must be >= 1, got {ns.workers}")
    configs = [config_from_args(variant) for variant in grid_namespaces(ns, argv)]
    outcomes = execute(configs, executor=ns.executor, workers=ns.workers, threads=ns.threads, results_dir=ns.results,
                       address=ns.address, progress=not ns.quiet, verbose=ns.verbose)
    if ns.json:
        print(json.dumps([{"config_hash": o.config.hash(), "status": o.status, "attempts": o.attempts,
                           "best_accuracy": o.best_accuracy, "error": o.error} for o in outcomes]))
    return 1 if any(o.status == FAILED for o in outcomes) else 0


def result_json(result) -> dict[str, Any]:
    """The machine-readable summary printed by ``run --json`` (the store's fractions and 0-based rounds)."""
    return {
        "config": result.config.to_dict(),
        "config_hash": result.config.hash(),
        "final_accuracy": result.summary["final_accuracy"],  # as measured, also for a diverged run (see "diverged")
        "best_accuracy": result.summary["best_accuracy"],
        "best_round": result.summary.get("best_round"),
        "per_round": [{"round": r["round"], "accuracy": r["accuracy"]} for r in result.rounds if "accuracy" in r],
        "class_accuracy": result.summary["class_accuracy"],
        "class_names": result.class_names,
        "store": str(result.folder) if result.folder else None,
        "diverged": bool(result.summary.get("diverged", False)),
    }


# ====================================================================== run
def _cmd_run(ns: argparse.Namespace, argv: Sequence[str]) -> int:
    from fedlib.engine.engine import run
    from fedlib.orchestration.resources import apply_thread_budget

    cfg = config_from_args(ns)
    apply_thread_budget(ns.threads)
    try:
        result = run(cfg, progress=not ns.quiet, use_store=not ns.no_store)
    except KeyboardInterrupt:
        print(interrupted_line(cfg, ns.no_store, argv), file=sys.stderr)
        return 130
    if ns.json:
        print(json.dumps(result_json(result)))
    else:
        print("\n".join(run_summary_lines(result)))
    hint = chance_hint(result)
    if hint:
        print(hint, file=sys.stderr if ns.json else sys.stdout)
    return 0


def run_summary_lines(result) -> list[str]:
    """What ``fedlib run`` prints after a run: accuracies in %, the best round counted from 1."""
    from fedlib.commands.listing import partition_label, percent

    cfg, summary, names = result.config, result.summary, result.class_names
    best_round = summary.get("best_round")
    best_at = f" (round {best_round + 1} of {cfg.rounds})" if isinstance(best_round, int) else ""
    lines = [f"{cfg.method} on {cfg.dataset} with {cfg.model}, {partition_label(cfg)}, {cfg.rounds} rounds, "
             f"seed {cfg.seed}",
             f"final accuracy {percent(summary['final_accuracy'])}   best {percent(summary['best_accuracy'])}{best_at}"]
    if summary.get("diverged"):
        lines.append("diverged: non-finite weights or test loss; these accuracies are not results")
    if names:
        per_class = summary["class_accuracy"]  # as measured: the line above says when they are no result
        worst = min(range(len(names)), key=lambda c: per_class[c])
        lines.append(f"worst class: {names[worst]} {percent(per_class[worst])}")
    if result.folder:
        lines.append(f"stored in {result.folder} (fedlib show {cfg.hash()})")
    return lines


def chance_hint(result) -> str | None:
    """One line when the final accuracy is at chance level (<= 1.5 / classes), saying what to raise."""
    from fedlib.commands.listing import percent

    classes = len(result.class_names)
    final = result.final_accuracy
    if not classes or not isinstance(final, float) or final != final or final > CHANCE_FACTOR / classes:
        return None
    cfg = result.config
    samples = f", --max-train-samples ({cfg.max_train_samples})" if cfg.max_train_samples else ""
    return (f"hint: {percent(final)} is chance level for {classes} classes (<= {percent(CHANCE_FACTOR / classes)}): "
            f"the model learned nothing; raise --rounds ({cfg.rounds}){samples}, --local-epochs ({cfg.local_epochs}) "
            f"or --lr ({cfg.lr:g})")


def interrupted_line(cfg, no_store: bool, argv: Sequence[str]) -> str:
    """The one line a Ctrl-C leaves: where the run was checkpointed and the command that resumes it."""
    from fedlib import store

    command = command_line(argv)
    if no_store:
        return f"interrupted; nothing was kept (--no-store); rerun to start again: {command}"
    record = store.RunRecord(store.run_dir(cfg))
    done = record.saved_round()
    if not done:
        return f"interrupted before round 1 was checkpointed; rerun to start again: {command}"
    return (f"interrupted; checkpointed at round {done} of {cfg.rounds} in {record.folder}; to resume from round "
            f"{min(done + 1, cfg.rounds)}, rerun the same command: {command}")


def command_line(argv: Sequence[str]) -> str:
    """The command as the user can type it again: ``python -m fedlib ...`` or ``fedlib ...``."""
    script = os.path.normpath(sys.argv[0]).split(os.sep) if sys.argv and sys.argv[0] else []
    if script[-2:] == ["fedlib", "__main__.py"]:
        return shlex.join([sys.executable, "-m", "fedlib", *argv])
    return shlex.join(["fedlib", *argv])


# ====================================================================== list, show, export
def _filters(ns: argparse.Namespace) -> dict[str, str]:
    """The filters given on the command line, checked."""
    from fedlib.commands.listing import check_filters

    check_filters(ns.method, ns.dataset, ns.model, ns.status)
    return {k: getattr(ns, k) for k in ("method", "dataset", "model", "status") if getattr(ns, k) is not None}


def _cmd_list(ns: argparse.Namespace) -> int:
    from fedlib import store
    from fedlib.commands import listing

    filters = _filters(ns)
    root = store.results_root(ns.results)
    if ns.sort not in listing.SORT_COLUMNS:
        raise FedlibError(f"unknown sort column {ns.sort!r}; valid sort columns: {_names(listing.SORT_COLUMNS)}")
    runs = listing.stored_runs(ns.results)
    if not runs:
        print(listing.empty_store_line(root))
        return 0
    chosen = listing.select(runs, **filters)
    if not chosen:
        described = " ".join(f"{k}={v}" for k, v in filters.items())
        print(f"no runs match {described} in {root} ({len(runs)} runs there)")
        return 0
    print("\n".join(listing.list_lines(listing.sort_runs(chosen, ns.sort), len(runs), root, ns.sort, filters)))
    return 0


def _cmd_show(ns: argparse.Namespace) -> int:
    from fedlib.commands import listing

    if ns.every is not None and ns.every < 1:
        raise FedlibError(f"--every must be >= 1 (a row every that many rounds), got {ns.every}")
    run = listing.find_run(ns.hash, ns.results)
    if ns.json:
        if run.config is None:
            raise FedlibError(f"stored run {run.record.folder} is corrupt ({run.problem})")
        out = {"config": run.config.to_dict(), "meta": listing.readable_meta(run.record), "summary": run.summary,
               "status": run.status, **({"problem": run.problem} if run.problem else {})}
        print(json.dumps(out, indent=2))
        return 0
    print("\n".join(listing.show_lines(run, ns.every)))
    return 0


def _cmd_export(ns: argparse.Namespace) -> int:
    from fedlib import store
    from fedlib.commands import export, listing

    filters = _filters(ns)
    export.summary_api()  # the missing package is reported before anything is read
    runs = listing.select(listing.stored_runs(ns.results), **filters)
    readable = listing.sound(runs)
    if not readable:
        print(f"nothing to export: no sound run in {store.results_root(ns.results)}"
              + (" matches the filters" if filters else ""))
        return 0
    written = export.export_tensorboard(readable, ns.out)
    skipped = len(runs) - len(readable)
    note = f"; {skipped} damaged or corrupt run{'s' if skipped != 1 else ''} skipped" if skipped else ""
    count = f"{len(written)} run{'s' if len(written) != 1 else ''}"
    print(f"exported {count} to {ns.out}{note}; view them with: tensorboard --logdir {shlex.quote(ns.out)}")
    return 0


def _cmd_migrate(ns: argparse.Namespace) -> int:
    from fedlib import store

    root = (store.reference_root() or store.REFERENCE_RESULTS) if ns.reference else store.results_root(ns.results)
    if not root.is_dir():
        raise FedlibError(f"no results store at {root}")
    lines = store.migrate_hashes(root, dry_run=ns.dry_run).lines()
    print("\n".join(lines[:-1] + [("dry run, nothing changed: " if ns.dry_run else "") + lines[-1]]))
    return 0


def _cmd_methods(ns: argparse.Namespace) -> int:
    from fedlib.core.registry import get_class, method_names

    for name in method_names(include_aliases=False):
        klass = get_class(name)
        args = ", ".join(f"{k}={v}" for k, v in klass.defaults.items()) or "-"
        print(f"{name:14s} {args}   [{klass.paper}]")
    return 0


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """A warning as ``Category: message``, without the source line Python prints under it."""
    return f"{category.__name__}: {message}\n"


def _check_folders(ns: argparse.Namespace) -> None:
    """An empty folder option (``--results ''``) names no folder: one line, not the default; a
    leading ``~`` is the home folder (:func:`fedlib.folders.user_folder`)."""
    for name in ("results", "data", "out"):
        value = getattr(ns, name, None)
        if value is not None:
            setattr(ns, name, str(user_folder(value, f"--{name}", has_default=name != "out")))
    data = getattr(ns, "data", None)
    if data is not None and not os.path.isdir(data):
        raise FedlibError(f"--data {data}: no such folder")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status. Warnings print on one line while it runs (the
    previous format comes back afterwards, for a caller in the same process)."""
    previous = warnings.formatwarning
    warnings.formatwarning = _one_line_warning
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    finally:
        warnings.formatwarning = previous


def _main(argv: list[str]) -> int:
    try:
        ns = _build_parser().parse_args(argv)
        check_environment()
        _check_folders(ns)
        if ns.command in ("run", "sweep"):
            from fedlib.orchestration import environment  # torch: not on the path of fedlib list

            with environment.applied(os.environ):  # the command line is an edge: the modes are read here, once
                return (_cmd_run if ns.command == "run" else _cmd_sweep)(ns, argv)
        handler = {"sweep": _cmd_sweep, "list": _cmd_list, "show": _cmd_show, "export": _cmd_export,
                   "methods": _cmd_methods, "migrate": _cmd_migrate}[ns.command]
        return handler(ns)
    except FedlibError as exc:
        print(f"error: {explain(exc)}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (fedlib list | head): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as exc:  # --results on a file or an unwritable folder, a full disk, ...
        print(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - a known third-party input error becomes one line
        line = explain(exc)
        if line is None:
            raise  # not an input error fedlib knows: a bug, keep its traceback
        print(f"error: {line}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
