"""Command line: ``python -m fedlib run ...`` runs one experiment; ``list`` / ``show`` read the store.

Bad input exits with status 2 and one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

from fedlib.errors import FedlibError


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line (exit status 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise FedlibError(f"{self.prog}: {message} (see --help)")


def _add_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", default="fashion_mnist")
    p.add_argument("--partition", default="dirichlet",
                   help="iid, dirichlet, shards, quantity, pathological, balanced, natural")
    p.add_argument("--beta", type=float, default=0.5, help="Dirichlet concentration")
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--participation", type=float, default=1.0, help="fraction of clients per round")
    p.add_argument("--shards-per-client", type=int, default=2)
    p.add_argument("--classes-per-client", type=int, default=2)
    p.add_argument("--quantity-split", default="symmetric",
                   help="quantity partition: symmetric, or official (the FedVLS code's cut of each class)")
    p.add_argument("--min-client-size", type=int, default=10, help="dirichlet: redraw until every client has this many")
    p.add_argument("--dataset-split", default=None,
                   help="re-split train/test with the run's seed: standard, pooled_75_25, pooled_75_25_train_eval, "
                        "holdout_10 (test on a held-out tenth of the training set)")
    p.add_argument("--max-train-samples", type=int, default=None, help="stratified subset of the train set")
    p.add_argument("--max-test-samples", type=int, default=None)
    p.add_argument("--augmentation", default="auto")
    p.add_argument("--method", default="fedavg", help="a method name, or several joined by '+'")
    p.add_argument("--method-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="a hyperparameter of the method (repeatable)")
    p.add_argument("--model", default="lenet5")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--local-epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=50)
    p.add_argument("--drop-last", action="store_true", help="drop each local epoch's last partial batch")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--lr-decay", type=float, default=1.0, help="per-round learning-rate factor")
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--eval-every", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto")
    p.add_argument("--backend", default=None,
                   help="local training: sequential, threads, stacked or auto (default: $FEDLIB_BACKEND or sequential)")
    p.add_argument("--precision", default="fp32", help="fp32, or bf16 autocast of the local forward passes")
    p.add_argument("--channels-last", action="store_true", help="NHWC memory layout for images and convs")
    p.add_argument("--data", default=None, help="dataset folder (default: $FEDLIB_DATA)")
    p.add_argument("--download", action="store_true", help="allow torchvision to download datasets")
    p.add_argument("--results", default=None, help="results store (default: $FEDLIB_RESULTS or ./results)")
    p.add_argument("--no-store", action="store_true", help="neither read nor write the results store")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _build_parser() -> _Parser:
    parser = _Parser(prog="fedlib", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_run_arguments(sub.add_parser("run", help="run one federated experiment"))
    listing = sub.add_parser("list", help="list the runs in the results store, with each one's size on disk")
    listing.add_argument("--results", default=None)
    show = sub.add_parser("show", help="print one stored run (by config hash or prefix)")
    show.add_argument("hash")
    show.add_argument("--results", default=None)
    sub.add_parser("methods", help="list the registered methods and their arguments")
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
    from fedlib.algorithms import method_class, resolve_hparams
    from fedlib.config import RunConfig

    raw = _method_args(ns.method_arg)
    typed = resolve_hparams(method_class(ns.method), raw, ns.dataset)
    method_args = {k: typed[k] for k in raw}  # store only what the user set, typed
    return RunConfig(
        dataset=ns.dataset, partition=ns.partition, beta=ns.beta, clients=ns.clients,
        participation=ns.participation, shards_per_client=ns.shards_per_client,
        classes_per_client=ns.classes_per_client, quantity_split=ns.quantity_split,
        min_client_size=ns.min_client_size, max_train_samples=ns.max_train_samples,
        dataset_options={"split": ns.dataset_split} if ns.dataset_split else {},
        max_test_samples=ns.max_test_samples, augmentation=ns.augmentation, method=ns.method,
        method_args=method_args, model=ns.model, rounds=ns.rounds, local_epochs=ns.local_epochs,
        batch_size=ns.batch_size, drop_last=ns.drop_last, lr=ns.lr, lr_decay=ns.lr_decay, momentum=ns.momentum,
        weight_decay=ns.weight_decay, eval_every=ns.eval_every, seed=ns.seed, device=ns.device,
        data_dir=ns.data, results_dir=ns.results, download=ns.download,
        precision=ns.precision, channels_last=ns.channels_last, **({"backend": ns.backend} if ns.backend else {}))


def result_json(result) -> dict[str, Any]:
    """The machine-readable summary printed by ``run --json``."""
    return {
        "config": result.config.to_dict(),
        "config_hash": result.config.hash(),
        "final_accuracy": result.final_accuracy,
        "best_accuracy": result.best_accuracy,
        "best_round": result.summary.get("best_round"),
        "per_round": [{"round": r["round"], "accuracy": r["accuracy"]} for r in result.rounds if "accuracy" in r],
        "class_accuracy": result.class_accuracy,
        "class_names": result.class_names,
        "store": str(result.folder) if result.folder else None,
        "diverged": bool(result.summary.get("diverged", False)),
    }


def _cmd_run(ns: argparse.Namespace) -> int:
    from fedlib.engine import run

    cfg = config_from_args(ns)
    result = run(cfg, progress=not ns.quiet, use_store=not ns.no_store)
    if ns.json:
        print(json.dumps(result_json(result)))
    else:
        names = result.class_names
        print(f"{cfg.method} on {cfg.dataset} ({cfg.partition}), {cfg.rounds} rounds, seed {cfg.seed}")
        print(f"final accuracy {result.final_accuracy:.4f}   best {result.best_accuracy:.4f}"
              f" (round {result.summary.get('best_round')})")
        worst = min(range(len(names)), key=lambda c: result.class_accuracy[c])
        print(f"worst class: {names[worst]} {result.class_accuracy[worst]:.4f}")
        if result.folder:
            print(f"stored in {result.folder}")
    return 0


def _cmd_list(ns: argparse.Namespace) -> int:
    from fedlib import store

    records = store.list_runs(ns.results, complete_only=False)
    sizes = [record.disk_bytes for record in records]
    for record, size in zip(records, sizes):
        status, details = _list_entry(record)
        print(f"{record.folder.name}  {status:8s}  {store.human_bytes(size):>9s}  {details}")
    if records:
        print(f"{len(records)} runs, {store.human_bytes(sum(sizes))} on disk in {store.results_root(ns.results)}")
    return 0


def _list_entry(record) -> tuple[str, str]:
    """One run's status and its config and final accuracy, for ``fedlib list``."""
    try:
        cfg = record.read_config()
        summary = record.read_summary() if record.complete else None
    except (ValueError, KeyError, TypeError, OSError, FedlibError) as exc:
        return "corrupt", f"{type(exc).__name__}: {str(exc).splitlines()[0][:90] if str(exc) else ''}"
    status = "partial" if summary is None else "diverged" if summary.get("diverged") else "done"
    acc = "-" if summary is None else f"{summary['final_accuracy']:.4f}"
    return status, (f"{cfg.method:14s} {cfg.dataset:14s} {cfg.partition:12s}"
                    f" rounds={cfg.rounds:<4d} seed={cfg.seed}  acc={acc}")


def _cmd_show(ns: argparse.Namespace) -> int:
    from fedlib import store

    matches = [r for r in store.list_runs(ns.results, complete_only=False) if r.folder.name.startswith(ns.hash)]
    if len(matches) != 1:
        raise FedlibError(f"{len(matches)} stored runs match {ns.hash!r} in {store.results_root(ns.results)}")
    record = matches[0]
    out = {"config": record.read_config().to_dict(), "meta": record.read_meta(),
           "summary": record.read_summary() if record.complete else None}
    print(json.dumps(out, indent=2))
    return 0


def _cmd_methods(ns: argparse.Namespace) -> int:
    from fedlib.algorithms import get_class, method_names

    for name in method_names(include_aliases=False):
        klass = get_class(name)
        args = ", ".join(f"{k}={v}" for k, v in klass.defaults.items()) or "-"
        print(f"{name:14s} {args}   [{klass.paper}]")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    try:
        ns = _build_parser().parse_args(argv)
        handler = {"run": _cmd_run, "list": _cmd_list, "show": _cmd_show, "methods": _cmd_methods}[ns.command]
        return handler(ns)
    except FedlibError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # --results on a file or an unwritable folder, a full disk, ...
        print(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; rerun the same command to resume from the last checkpoint", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
