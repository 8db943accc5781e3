"""The grids of runs the table notebooks declare: one function per notebook, one module per paper.

A grid function takes the notebook's parameters (the dict ``fedlib.notebook.apply_profile``
returns: the parameters cell with the profile and any ``-p`` values applied) and returns the list
of :class:`~fedlib.config.RunConfig` the notebook runs. The notebook calls it, and so does the
planner (:func:`fedlib.plan.declared_configs`), which finds it in :data:`GRIDS` by the notebook's
name: what ``reproduce.sh --plan``, the dry run and the grid executor count is what the notebook
runs, with nothing executed but the grid function. A figure notebook has no entry.

A new table notebook adds its function to its paper's module and an entry here.
"""

from __future__ import annotations

from typing import Callable, Mapping

from fedlib.config import RunConfig
from fedlib.grids import cross_paper, fedcsd, fedlmd, fedvls, pkd
from fedlib.grids.base import method_grid, run_config

Grid = Callable[[Mapping], list[RunConfig]]

# notebook stem -> its grid function
GRIDS: dict[str, Grid] = {
    "cross_paper_table": cross_paper.table,
    "fedcsd_table1_3_4_label_skew": fedcsd.table1_3_4_label_skew,
    "fedcsd_table2_office_caltech": fedcsd.table2_office_caltech,
    "fedlmd_table1_2_kd_variants": fedlmd.table1_2_kd_variants,
    "fedlmd_table3_partitions": fedlmd.table3_partitions,
    "fedlmd_table4_architectures": fedlmd.table4_architectures,
    "fedlmd_table5_combinations": fedlmd.table5_combinations,
    "fedvls_table1_4_dirichlet": fedvls.table1_4_dirichlet,
    "fedvls_table2_quantity": fedvls.table2_quantity,
    "fedvls_table3_backbones": fedvls.table3_backbones,
    "fedvls_table5_6_7_ablation": fedvls.table5_6_7_ablation,
    "pkd_pilot_loss_normalisation": pkd.pilot_loss_normalisation,
    "pkd_table1_4_class_accuracy": pkd.table1_4_class_accuracy,
    "pkd_table5_femnist": pkd.table5_femnist,
    "pkd_table6_7_baselines": pkd.table6_7_baselines,
    "pkd_table8_cifar100": pkd.table8_cifar100,
    "pkd_table9_10_cost": pkd.table9_10_cost,
}

__all__ = ["GRIDS", "Grid", "grid_for", "method_grid", "run_config"]


def grid_for(stem: str) -> Grid | None:
    """The grid function of notebook ``stem``; None for a notebook without one (a figure notebook)."""
    return GRIDS.get(stem)
