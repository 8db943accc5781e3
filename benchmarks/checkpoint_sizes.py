"""Bytes the results store holds for one run of each FedLMD Table 3 method, at the paper's client
count and model (100 clients, the 2-conv CNN ``cnn2``), mid-run and once finished.

    FEDLIB_DATA=/work/shared/datasets python -m benchmarks.checkpoint_sizes --dataset cifar10 \\
        --results /tmp/ckpt_sizes

The run trains 2 rounds on a stratified slice of the data (``--train-samples``, 10 per client)
with every client in round 0, so after round 0 every client holds per-client state: the steady
state of a 200-round run at participation 0.1, where nearly every client has trained once
(0.9^200 of them have not). Sizes depend on the model and the client count only, not on the data
slice. "mid-run" is the folder after round 1 (the resume checkpoint); "finished" after the last
round. Sizes are the files' bytes (``st_size``); per round, a paper-setting checkpoint writes
checkpoint.pt plus the client files of the round's 10 clients.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import torch

from fedlib.core.config import RunConfig
from fedlib.engine import engine

TABLE3_METHODS = ("fedavg", "fedcurv", "fedprox", "fednova", "scaffold", "moon", "fedrs", "fedntd", "fedlmd")
TABLE3_METHOD_ARGS = {"fedlmd": {"tau": 1.0, "beta": 1.0}}  # as notebooks/fedlmd_table3_partitions.ipynb


def folder_bytes(folder: Path, pattern: str = "*") -> int:
    """Bytes of the files under ``folder`` matching ``pattern``."""
    return sum(p.stat().st_size for p in folder.rglob(pattern) if p.is_file())


def measurement_config(dataset: str, method: str, clients: int, train_samples: int) -> RunConfig:
    """The paper's model, clients and local setup on a data slice, every client in round 0."""
    return RunConfig(dataset=dataset, model="cnn2", partition="shards", shards_per_client=2, clients=clients,
                     participation=1.0, rounds=2, local_epochs=1, batch_size=50, lr=0.01, momentum=0.9,
                     weight_decay=1e-5, max_train_samples=train_samples, max_test_samples=200, method=method,
                     method_args=TABLE3_METHOD_ARGS.get(method, {}), device="cpu", backend="sequential", seed=0)


def measure(cfg: RunConfig, results: Path) -> dict[str, int]:
    """Folder bytes after round 1 and after the run, and the files' breakdown."""
    folder = results / cfg.hash()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine.run(cfg, results_dir=results, progress=False, stop_after=1)
        row = {"mid_run": folder_bytes(folder), "checkpoint_pt": folder_bytes(folder, "checkpoint.pt"),
               "client_files": len(list(folder.glob("clients/*.pt"))), "clients_bytes": folder_bytes(folder, "clients/*")}
        engine.run(cfg, results_dir=results, progress=False)
    row.update(finished=folder_bytes(folder), final_pt=folder_bytes(folder, "final.pt"))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="cifar10")
    parser.add_argument("--results", type=Path, required=True, help="a scratch results store")
    parser.add_argument("--methods", default=",".join(TABLE3_METHODS))
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--train-samples", type=int, default=1000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"{args.dataset}, cnn2, {args.clients} clients")
    print(f"{'method':9s} {'mid-run':>15s} {'checkpoint.pt':>14s} {'client files':>22s} {'finished':>13s} {'final.pt':>11s}")
    for method in args.methods.split(","):
        started = time.time()
        r = measure(measurement_config(args.dataset, method, args.clients, args.train_samples), args.results)
        print(f"{method:9s} {r['mid_run']:>15,d} {r['checkpoint_pt']:>14,d} {r['client_files']:>4d} x "
              f"{r['clients_bytes'] // max(r['client_files'], 1):>13,d} {r['finished']:>13,d} {r['final_pt']:>11,d}"
              f"   ({time.time() - started:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
