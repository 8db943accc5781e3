"""The cross-paper grid: every paper's method on the same settings, each with its own paper's arguments.

The function takes the notebook's parameters (``fedlib.reporting.notebook.apply_profile``) and returns its
runs; the parameters cell of the notebook says what each parameter means.
"""

from __future__ import annotations

from typing import Mapping

from fedlib.core.config import RunConfig
from fedlib.paper.grids.base import method_grid, run_config


def table(p: Mapping) -> list[RunConfig]:
    """Every method x seed on each setting (dataset + partition fields), PKD's lambda per dataset."""
    configs = []
    for setting in p["settings"]:
        dataset = setting["dataset"]
        base = run_config(p, "clients", "rounds", "local_epochs", "batch_size", "lr", "momentum", "weight_decay",
                          "max_train_samples", "max_test_samples", model=p["models"][dataset], **setting)
        args = {**p["method_args"], "pkd": {**p["method_args"].get("pkd", {}), "lam": p["pkd_lam"][dataset]}}
        configs += method_grid(base, p["methods"], args, seed=p["seeds"])
    return configs
