"""The FedLMD grids (Tables 1-5): methods on CIFAR-10 under Dirichlet label skew, partial participation.

Each function takes a notebook's parameters (``fedlib.notebook.apply_profile``) and returns its
runs; the parameters cell of the notebook says what each parameter means.
"""

from __future__ import annotations

from typing import Mapping

from fedlib.config import RunConfig
from fedlib.errors import FedlibError
from fedlib.grids.base import method_grid, run_config

# the budget and optimiser every FedLMD table shares
SHARED = ("clients", "participation", "min_client_size", "rounds", "local_epochs", "batch_size", "lr", "lr_decay",
          "momentum", "weight_decay", "max_train_samples", "max_test_samples")


def table1_2_kd_variants(p: Mapping) -> list[RunConfig]:
    """Tables 1 and 2: the KD variants and the teacher-free methods, FedAvg run once for both."""
    methods = list(dict.fromkeys(p["table1_methods"] + p["table2_methods"]))
    base = run_config(p, *SHARED, "dataset", "model", "beta", "augmentation", partition="dirichlet")
    # the same arguments as the FedLMD figure notebooks, so their stored runs are reused
    lmd_args = {"tau": p["lmd_tau"], "beta": p["lmd_beta"]}
    method_args = {"fedlmd": lmd_args, "fedlmd_tf": lmd_args, "label_smoothing": {"smoothing": p["smoothing"]}}
    return method_grid(base, methods, method_args, seed=p["seeds"])


def table3_partitions(p: Mapping) -> list[RunConfig]:
    """Table 3: every method on each setting (dataset + partition fields), its network per dataset."""
    configs = []
    for setting in p["settings"]:
        preset = p["dataset_augmentation"].get(setting["dataset"], p["augmentation"])
        base = run_config(p, *SHARED, model=p["models"][setting["dataset"]], augmentation=preset, **setting)
        configs += method_grid(base, p["methods"], p["method_args"], seed=p["seeds"])
    return configs


def table4_architectures(p: Mapping) -> list[RunConfig]:
    """Table 4: every method on each network, one network per paper column (``stands_for``)."""
    columns = [p["stands_for"][m] for m in p["models"]]
    if len(set(columns)) < len(columns):
        raise FedlibError(f"two of models={p['models']} stand for the same paper column; run one network per column")
    configs = []
    for model in p["models"]:
        base = run_config(p, *SHARED, "dataset", "beta", "augmentation", model=model, partition="dirichlet")
        configs += method_grid(base, p["methods"], p["method_args"], seed=p["seeds"])
    return configs


def combination_args(p: Mapping) -> dict[str, dict]:
    """Each method's arguments: a combination "a+b" takes those of a and of b (their names never clash)."""
    return {m: {k: v for part in m.split("+") for k, v in p["part_args"].get(part, {}).items()} for m in p["methods"]}


def table5_combinations(p: Mapping) -> list[RunConfig]:
    """Table 5: FedLMD combined with FedProx and FedAvgM."""
    base = run_config(p, *SHARED, "dataset", "model", "beta", "augmentation", partition="dirichlet")
    return method_grid(base, p["methods"], combination_args(p), seed=p["seeds"])
