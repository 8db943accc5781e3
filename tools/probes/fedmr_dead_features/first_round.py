"""Round 0 of FedVLS Table 1's MNIST Dir(0.1) seed-0 cell, logged at every local step.

Usage (from the repository root, one torch thread):
    FEDLIB_DATA=../shared/datasets python3 tools/probes/fedmr_dead_features/first_round.py OUT.jsonl [RUN ...]
    python3 tools/probes/fedmr_dead_features/first_round.py --summary OUT.jsonl

RUN is ``fedmr:DECO`` (FedMR with that decorrelation weight), ``fedavg`` or ``fedvls``; the default is
fedmr:0.001 fedmr:0.1 fedmr:1 fedmr:4 fedavg fedvls. Every run starts from the stored FedMR run
``reference_results/d812f7240c07``'s config (MLP 784-200-200-10, 10 clients, lr 0.01, momentum 0.9, batch 64,
E 5, weight decay 1e-5, Dir(0.1), seed 0), changing only the method and its arguments (FedVLS: the profile's
``variant`` official, ``lam`` 0.1), the rounds (1) and the backend (sequential: the stored runs' one-thread
arithmetic). The engine's own ``prepare`` and ``run_round`` train the round; the method's ``loss`` and
``before_step`` are wrapped on the instance to read, at each local step:

- ``live``: feature units (the 200 ReLU outputs the classifier reads) non-zero for at least one sample of the batch;
- ``deco``: FedMR's intra-class decorrelation loss of the batch's features, unweighted (for every method);
- ``ce``: the cross-entropy of the batch;
- ``grad``: the L2 norm of the whole loss's gradient over all parameters, before the optimiser step.

Writes one JSON line per client (the per-step lists) and one per run (the global model after aggregation: test
accuracy, and the units non-zero for at least one of the 10,000 test images). Stores nothing; no run folder.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from fedlib import store  # noqa: E402
from fedlib.algorithms.fedmr import intra_class_decorrelation  # noqa: E402
from fedlib.datasets.augment import normalize  # noqa: E402
from fedlib.engine.engine import predictor, prepare, run_round  # noqa: E402
from fedlib.engine.evaluation import evaluate  # noqa: E402
from fedlib.measures.metrics import predict  # noqa: E402

STORED_FEDMR = ROOT / "reference_results" / "d812f7240c07"  # FedMR, MNIST Dir(0.1), seed 0: best 9.82 %
DEFAULT_RUNS = ["fedmr:0.001", "fedmr:0.1", "fedmr:1", "fedmr:4", "fedavg", "fedvls"]
METHOD_ARGS = {"fedavg": {}, "fedvls": {"variant": "official", "lam": 0.1}}  # the paper profile's, MNIST


def run_config(run: str):
    """The stored FedMR cell's config with this run's method and arguments, one round, sequential."""
    base = store.RunRecord(STORED_FEDMR).read_config()
    method, _, weight = run.partition(":")
    args = {"deco": float(weight)} if method == "fedmr" else METHOD_ARGS[method]
    return base.replace(method=method, method_args=args, rounds=1, backend="sequential", results_dir=None)


def sig(value: float, digits: int = 5) -> float:
    return float(f"{value:.{digits}g}") if math.isfinite(value) else value


def live_test_units(model, dataset) -> tuple[int, int]:
    """Feature units non-zero for at least one test image (the test set, as live_features.py reads it), and
    the number of units."""
    batches = [(normalize(dataset.test_x[i:i + 1000], dataset.mean, dataset.std), dataset.test_y[i:i + 1000])
               for i in range(0, len(dataset.test_y), 1000)]
    features = predict(model, batches).features
    return int((features > 0).any(0).sum()), int(features.shape[1])


def probe(run: str, out) -> dict:
    cfg = run_config(run)
    server, algorithm = prepare(cfg)
    num_classes = server.data.num_classes
    steps: dict[int, dict[str, list]] = {}
    current = {}  # the client and batch the wrapped loss last saw

    inner_loss, inner_before_step = algorithm.loss, algorithm.before_step

    def loss(out_, labels, ctx, teacher_out):
        value = inner_loss(out_, labels, ctx, teacher_out)
        features = out_.features.detach()
        log = steps.setdefault(ctx.client_id, {"live": [], "deco": [], "ce": [], "grad": []})
        log["live"].append(int((features > 0).any(0).sum()))
        log["deco"].append(sig(float(intra_class_decorrelation(features, labels, num_classes))))
        log["ce"].append(sig(float(F.cross_entropy(out_.logits.detach(), labels))))
        current["client"] = ctx.client_id
        return value

    def before_step(model, ctx):
        squares = [p.grad.detach().pow(2).sum() for p in model.parameters() if p.grad is not None]
        steps[current["client"]]["grad"].append(sig(float(torch.stack(squares).sum().sqrt())))
        inner_before_step(model, ctx)

    algorithm.loss, algorithm.before_step = loss, before_step
    started = time.perf_counter()
    metrics = run_round(server, algorithm)
    model = predictor(algorithm, server)
    metrics.update(evaluate(model, server.data))
    seconds = time.perf_counter() - started
    live, units = live_test_units(model, server.data.dataset)
    for client, log in sorted(steps.items()):
        out.write(json.dumps({"run": run, "client": client, "steps": len(log["live"]), **log}) + "\n")
    record = {"run": run, "config_hash": cfg.hash(), "summary": True, "accuracy": metrics["accuracy"],
              "test_live_units": live, "units": units,
              "local_steps": metrics["local_steps"], "seconds": round(seconds, 1),
              "threads": torch.get_num_threads()}
    out.write(json.dumps(record) + "\n")
    out.flush()
    return record


def median(values: list) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def summarise(path: Path, few: int = 20) -> str:
    """A Markdown table of each run's per-step logs (medians and means over the clients) and its global model."""
    clients: dict[str, list[dict]] = {}
    totals: dict[str, dict] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row.get("summary"):
            totals[row["run"]] = row
        else:
            clients.setdefault(row["run"], []).append(row)
    lines = [f"| run | live units on the batch, step 0 / 20 / 94 / last (median of clients) "
             f"| first step with <= {few} live (median of clients; never: -) "
             "| decorrelation loss, step 0 / last (mean of clients) "
             "| gradient norm, step 0 (mean of clients) / median / max of all steps "
             "| global model after the round: live units on the test set | test accuracy |",
             "|" + "---|" * 7]
    for run, rows in clients.items():
        live = [median([r["live"][min(i, r["steps"] - 1)] for r in rows]) for i in (0, 20, 94, 10 ** 9)]
        dying = [next((i for i, v in enumerate(r["live"]) if v <= few), None) for r in rows]
        died = [i for i in dying if i is not None]
        first = f"{median(died):g} ({len(died)} of {len(rows)} clients)" if len(died) > len(rows) // 2 else "-"
        grads = [g for r in rows for g in r["grad"]]
        total = totals.get(run)
        deco = [sum(r["deco"][i] for r in rows) / len(rows) for i in (0, -1)]
        global_model = (f"{total['test_live_units']} of {total['units']} | {100 * total['accuracy']:.2f} %"
                        if total else "? | ?")
        lines.append(f"| {run} | {' / '.join(f'{v:g}' for v in live)} | {first} | {deco[0]:.3g} / {deco[1]:.3g} "
                     f"| {sum(r['grad'][0] for r in rows) / len(rows):.3g} / {median(grads):.3g} / {max(grads):.3g} "
                     f"| {global_model} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="the JSON-lines file to append to (or read, with --summary)")
    parser.add_argument("runs", nargs="*", default=DEFAULT_RUNS, help="fedmr:DECO, fedavg or fedvls")
    parser.add_argument("--summary", action="store_true", help="print the table of OUT and train nothing")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (the stored runs: 1)")
    args = parser.parse_args()
    if args.summary:
        print(summarise(args.out))
        return
    torch.set_num_threads(args.threads)
    with args.out.open("a") as out:
        for run in args.runs:
            record = probe(run, out)
            print(json.dumps(record), flush=True)
    print(summarise(args.out))


if __name__ == "__main__":
    main()
