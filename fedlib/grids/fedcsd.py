"""The FedCSD grids (Tables I-IV): label skew, the ablation, the mask, and Office-Caltech-10.

Each function takes a notebook's parameters (``fedlib.notebook.apply_profile``) and returns its
runs; the parameters cell of the notebook says what each parameter means.
"""

from __future__ import annotations

from typing import Mapping

from fedlib import data
from fedlib.config import RunConfig
from fedlib.grids.base import method_grid, run_config

SHARED = ("clients", "rounds", "local_epochs", "batch_size", "lr", "momentum", "weight_decay", "max_train_samples",
          "max_test_samples")
# Table III: the switches of each variant besides the full method (base: none of the three components)
ABLATION_FLAGS = {"base": {"use_similarity": False, "use_mask": False, "use_tma": False},
                  "no_similarity": {"use_similarity": False}, "no_mask": {"use_mask": False},
                  "no_tma": {"use_tma": False}}


def csd_args(p: Mapping) -> dict:
    """FedCSD's arguments, always all three (as in the FedCSD figure notebooks)."""
    return {"mu": p["mu"], "tau": p["tau"], "alpha": p["alpha"]}


def dataset_base(p: Mapping, dataset: str) -> RunConfig:
    """The base of the label-skew tables on ``dataset``: its network and loader options."""
    return run_config(p, *SHARED, dataset=dataset, dataset_options=p["dataset_options"].get(dataset, {}),
                      model=p["models"][dataset], partition="dirichlet")


def table1_label_skew(p: Mapping) -> list[RunConfig]:
    """Table I: every method x Dirichlet beta x seed on each dataset."""
    args = {**p["method_args"], "fedcsd": csd_args(p)}
    return [c for dataset, values in p["betas"].items()
            for c in method_grid(dataset_base(p, dataset), p["methods"], args, beta=values, seed=p["seeds"])]


def table3_ablation(p: Mapping) -> dict[str, list[RunConfig]]:
    """Table III, row -> runs (one per seed): each variant, then FedAvg and the full method."""
    base, args, seeds = dataset_base(p, p["ablation_dataset"]).replace(beta=p["ablation_beta"]), csd_args(p), p["seeds"]
    rows = {name: [base.replace(method="fedcsd", method_args={**args, **ABLATION_FLAGS[name]}, seed=s) for s in seeds]
            for name in p["ablations"]}
    rows["fedavg"] = [base.replace(method="fedavg", seed=s) for s in seeds]
    rows["fedcsd"] = [base.replace(method="fedcsd", method_args=args, seed=s) for s in seeds]
    return rows


def table4_mask(p: Mapping) -> dict[str, list[RunConfig]]:
    """Table IV, mask type -> runs: the hard and the adaptive mask at each beta and seed."""
    base, args = dataset_base(p, p["ablation_dataset"]), csd_args(p)
    return {mask: [base.replace(method="fedcsd", beta=b, seed=s,
                                method_args={**args, "mask_type": mask} if mask == "hard" else args)
                   for b in p["mask_betas"] for s in p["seeds"]] for mask in ("hard", "adaptive")}


def table1_3_4_label_skew(p: Mapping) -> list[RunConfig]:
    """Tables I, III and IV together (identical configs of the three are one run when trained)."""
    groups = (*table3_ablation(p).values(), *table4_mask(p).values())
    return table1_label_skew(p) + [c for group in groups for c in group]


def table2_office_caltech(p: Mapping) -> list[RunConfig]:
    """Table II: every method x seed on Office-Caltech-10 (one client per domain); none when
    the data are missing here (the notebook then shows the paper's numbers only)."""
    if data.missing_dataset_message(p["dataset"], p["data_dir"]):
        return []
    base = run_config(p, *SHARED, "dataset", "model", "partition", "beta")
    # mu and tau passed explicitly: on office_caltech10 they equal FedCSD's per-dataset defaults (same run)
    return method_grid(base, p["methods"], {**p["method_args"], "fedcsd": csd_args(p)}, seed=p["seeds"])
