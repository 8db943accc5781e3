"""Short fedlib runs of FedAvg / FedVLS(official) on MNIST Dir(beta) under settings closer to the
FedVLS authors' code. Patches fedlib only at run time (no source edits); no results store.

usage: probe.py METHOD SETTING ROUNDS [BETA [METHOD_ARGS_JSON]]
  SETTING: fedlib   fedlib's defaults (standard split, fedlib seed-0 partition, 0.1307/0.3081)
           norm     as fedlib, but inputs normalised with mean 0.5, std 0.5 (authors)
           authors  authors' pooled 75/25 split + their seed-1 partition + 0.5/0.5 + drop_last,
                    scored on the held-out 25 %
           authpart authors' split and partition, fedlib normalisation, no drop_last
"""
import dataclasses
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fedlib.engine as engine  # noqa: E402
from fedlib.config import RunConfig  # noqa: E402
from fedlib.partition import Partition  # noqa: E402
from authors_partition import authors_partition  # noqa: E402

method, setting, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
beta = float(sys.argv[4]) if len(sys.argv) > 4 else 0.05
torch.set_num_threads(1)
args = {"fedvls": {"lam": 0.1, "variant": "official"}}.get(method, {})
args.update(json.loads(sys.argv[5]) if len(sys.argv) > 5 else {})
cfg = RunConfig(dataset="mnist", model="mlp", method=method, method_args=args, partition="dirichlet", beta=beta,
                clients=10, participation=1.0, rounds=rounds, local_epochs=5, batch_size=64, lr=0.01,
                momentum=0.9, weight_decay=1e-5, seed=0, device="cpu", backend="sequential",
                drop_last=(setting == "authors"), data_dir=os.environ.get("FEDLIB_DATA"))

original_load = engine.load_run_dataset
original_partition = engine.make_partition
state = {}


def load(cfg_):
    data = original_load(cfg_)
    if setting in ("authors", "authpart"):
        idx_train, idx_test, batches, counts, _ = authors_partition(beta)
        x = torch.cat([data.train_x, data.test_x])
        y = torch.cat([data.train_y, data.test_y])
        tr, te = torch.from_numpy(idx_train).long(), torch.from_numpy(idx_test).long()
        data = dataclasses.replace(data, train_x=x[tr], train_y=y[tr], test_x=x[te], test_y=y[te])
        state["partition"] = Partition([np.asarray(b, dtype=np.int64) for b in batches], counts, "dirichlet", {})
    if setting in ("norm", "authors"):
        data = dataclasses.replace(data, mean=(0.5,), std=(0.5,))
    return data


def partition(*a, **k):
    return state["partition"] if "partition" in state else original_partition(*a, **k)


engine.load_run_dataset = load
engine.make_partition = partition
start = time.process_time()
result = engine.run(cfg, use_store=False, progress=False)
accs = [round(100 * r["accuracy"], 2) for r in result.rounds]
print(json.dumps({"method": method, "args": args, "setting": setting, "beta": beta, "rounds": rounds, "acc": accs,
                  "best": max(accs), "cpu_s": round(time.process_time() - start, 1),
                  "counts": result.summary["partition_counts"]}))
