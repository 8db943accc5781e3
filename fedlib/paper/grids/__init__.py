"""The grids of runs the notebooks declare: one function per notebook that trains, one module per paper.

A grid function takes the notebook's parameters (the dict ``fedlib.reporting.notebook.apply_profile``
returns: the parameters cell with the profile and any ``-p`` values applied) and returns the list
of :class:`~fedlib.core.config.RunConfig` the notebook trains. The notebook calls it, and so does the
planner (:func:`fedlib.paper.plan.declared_configs`), which finds it in :data:`GRIDS` by the notebook's
name: what ``reproduce.sh --plan``, the dry run and the grid executor count is what the notebook
runs, with nothing executed but the grid function. Two notebooks have no entry:
``getting_started``, which builds its small grid in the open as a lesson, and
``fedvls_fig3_partitions``, which trains nothing (it draws partitions).

A new notebook that trains adds its function to its paper's module and an entry here.
"""

from __future__ import annotations

from typing import Callable, Mapping

from fedlib.core.config import RunConfig
from fedlib.paper.grids import cross_paper, fedcsd, fedlmd, fedvls, pkd
from fedlib.paper.grids.base import method_grid, run_config

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
    "pkd_kd_stage_readings": pkd.kd_stage_readings,
    "pkd_table1_4_class_accuracy": pkd.table1_4_class_accuracy,
    "pkd_table5_femnist": pkd.table5_femnist,
    "pkd_table6_7_baselines": pkd.table6_7_baselines,
    "pkd_table8_cifar100": pkd.table8_cifar100,
    "pkd_table9_10_cost": pkd.table9_10_cost,
    "fedcsd_fig1_drift": fedcsd.fig1_drift,
    "fedcsd_fig3_fig4_sensitivity": fedcsd.fig3_fig4_sensitivity,
    "fedcsd_fig5_mask_filter": fedcsd.fig5_mask_filter,
    "fedcsd_fig7_tsne": fedcsd.fig7_tsne,
    "fedlmd_fig2_prediction_distribution": fedlmd.fig2_prediction_distribution,
    "fedlmd_fig4_kd_variants": fedlmd.fig4_kd_variants,
    "fedlmd_fig5_light_baselines": fedlmd.fig5_light_baselines,
    "fedlmd_fig6_accuracy_rounds": fedlmd.fig6_accuracy_rounds,
    "fedlmd_fig7_9_sensitivity": fedlmd.fig7_9_sensitivity,
    "fedvls_fig1_fig4_local_update": fedvls.fig1_fig4_local_update,
    "fedvls_fig2_confusion": fedvls.fig2_confusion,
    "fedvls_fig5_convergence": fedvls.fig5_convergence,
    "fedvls_fig6_sensitivity": fedvls.fig6_sensitivity,
    "pkd_fig11_expert_activation": pkd.fig11_expert_activation,
    "pkd_fig2_class_gap": pkd.fig2_class_gap,
    "pkd_fig3_6_9_class_accuracy_rounds": pkd.fig3_6_9_class_accuracy_rounds,
    "pkd_fig4_5_7_weak_class_discovery": pkd.fig4_5_7_weak_class_discovery,
}

# notebooks that train their declared runs themselves, with a recording hook (a run stored without
# the hook's records is trained again beside the store): the plan and the dry run count their runs,
# the grid executor leaves them to the notebook rather than train them twice. pkd_fig4_5_7's hook
# run is its warm-up; its "trained" run is pkd_table1_4's FedAvg run, which that notebook's grid
# (and so the executor) trains
HOOK_TRAINED = frozenset({"fedlmd_fig2_prediction_distribution", "pkd_fig4_5_7_weak_class_discovery"})

__all__ = ["GRIDS", "HOOK_TRAINED", "Grid", "grid_for", "method_grid", "run_config"]


def grid_for(stem: str) -> Grid | None:
    """The grid function of notebook ``stem``; None for a notebook without one (see the module docstring)."""
    return GRIDS.get(stem)
