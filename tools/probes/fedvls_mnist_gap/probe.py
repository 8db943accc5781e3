"""Short fedlib runs of FedAvg / FedVLS(official) on MNIST Dir(beta) under settings closer to the
FedVLS authors' code. Changes nothing in fedlib: the engine reads the data this probe hands it
(``engine.run(cfg, source=...)``, a :class:`fedlib.datasets.sources.DataSource`); no results store.

usage: probe.py METHOD SETTING ROUNDS [BETA [METHOD_ARGS_JSON]]
  SETTING: fedlib   fedlib's defaults (standard split, fedlib seed-0 partition, 0.1307/0.3081)
           norm     as fedlib, but inputs normalised with mean 0.5, std 0.5 (authors)
           authors  authors' pooled 75/25 split + their seed-1 partition + 0.5/0.5 + drop_last,
                    scored on the held-out 25 %
           authpart authors' split and partition, fedlib normalisation, no drop_last

The authors' partition travels with their data: their training pool is ordered client by client
(each client's samples in the order their script lists them) and each sample's client is its group,
so the ``natural`` partition (one client per group) gives every client exactly the authors' samples
in the authors' order. That data is not fedlib's MNIST split, so it carries its own name
(:data:`AUTHORS_NAME`), and the engine's full-size check, which knows only fedlib's splits, passes it.
"""
import argparse
import dataclasses
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fedlib.core.config import RunConfig  # noqa: E402
from fedlib.datasets.dataset import Dataset  # noqa: E402
from fedlib.datasets.sources import FILES, DataSource  # noqa: E402
from fedlib.engine import engine  # noqa: E402
from authors_partition import authors_partition  # noqa: E402

SETTINGS = ("fedlib", "norm", "authors", "authpart")
AUTHORS_NAME = "mnist (FedVLS authors' 75/25 split)"


@dataclasses.dataclass(frozen=True)
class ProbeData(DataSource):
    """The MNIST files as ``setting`` reads them (``beta``: the authors' Dirichlet concentration)."""

    setting: str
    beta: float

    real = False  # a probe's data: never stored nor served

    def load(self, name: str, data_dir=None, download: bool = False, **options) -> Dataset:
        data = FILES.load(name, data_dir=data_dir, download=download, **options)
        if self.setting in ("authors", "authpart"):
            data = authors_data(data, self.beta)
        if self.setting in ("norm", "authors"):
            data = dataclasses.replace(data, mean=(0.5,), std=(0.5,))
        return data

    def describe(self) -> str:
        return f"MNIST as the probe's {self.setting!r} setting reads it"


def authors_data(data: Dataset, beta: float) -> Dataset:
    """Train and test pooled and split 75/25 as the authors' script does; the training pool ordered
    client by client, each sample's group its client (the authors' seed-1 Dirichlet partition)."""
    idx_train, idx_test, batches, _, _ = authors_partition(beta)
    x = torch.cat([data.train_x, data.test_x])
    y = torch.cat([data.train_y, data.test_y])
    order = torch.from_numpy(idx_train[np.concatenate([np.asarray(b, dtype=np.int64) for b in batches])]).long()
    test = torch.from_numpy(idx_test).long()
    clients = np.repeat(np.arange(len(batches)), [len(b) for b in batches])
    return dataclasses.replace(data, name=AUTHORS_NAME, train_x=x[order], train_y=y[order], test_x=x[test],
                               test_y=y[test], train_groups=clients, test_groups=None, group_names=None,
                               fingerprint=None)


def probe_config(method: str, setting: str, rounds: int, beta: float, args: dict) -> RunConfig:
    """The run: MNIST, MLP, 10 clients all taking part, 5 local epochs, the authors' optimiser."""
    authors_split = setting in ("authors", "authpart")
    return RunConfig(dataset="mnist", model="mlp", method=method, method_args=args,
                     partition="natural" if authors_split else "dirichlet", beta=beta,
                     clients=10, participation=1.0, rounds=rounds, local_epochs=5, batch_size=64, lr=0.01,
                     momentum=0.9, weight_decay=1e-5, seed=0, device="cpu", backend="sequential",
                     drop_last=(setting == "authors"), data_dir=os.environ.get("FEDLIB_DATA"))


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("method", help="fedavg or fedvls (any fedlib method)")
    parser.add_argument("setting", choices=SETTINGS, help="whose data, split, partition and normalisation")
    parser.add_argument("rounds", type=int, help="communication rounds (about 10 CPU seconds each)")
    parser.add_argument("beta", type=float, nargs="?", default=0.05, help="Dirichlet concentration (0.05)")
    parser.add_argument("method_args", nargs="?", default="{}", help="JSON method arguments, e.g. '{\"lam\": 0.1}'")
    return parser.parse_args(argv)


def main(argv: list[str]) -> None:
    options = parse(argv)
    torch.set_num_threads(1)
    args = {"fedvls": {"lam": 0.1, "variant": "official"}}.get(options.method, {})
    args.update(json.loads(options.method_args))
    cfg = probe_config(options.method, options.setting, options.rounds, options.beta, args)
    start = time.process_time()
    result = engine.run(cfg, use_store=False, progress=False, source=ProbeData(options.setting, options.beta))
    accs = [round(100 * r["accuracy"], 2) for r in result.rounds]
    print(json.dumps({"method": options.method, "args": args, "setting": options.setting, "beta": options.beta,
                      "rounds": options.rounds, "acc": accs, "best": max(accs),
                      "cpu_s": round(time.process_time() - start, 1), "counts": result.summary["partition_counts"]}))


if __name__ == "__main__":
    main(sys.argv[1:])
