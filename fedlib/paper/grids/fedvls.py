"""The FedVLS / FedED grids (Tables 1-7): every method on each column, trained as the authors' code.

Each function takes a notebook's parameters (``fedlib.reporting.notebook.apply_profile``) and returns its
runs; the parameters cell of the notebook says what each parameter means.
"""

from __future__ import annotations

from typing import Mapping

from fedlib.core.config import RunConfig
from fedlib.orchestration import experiments
from fedlib.paper.grids.base import distinct, method_grid, run_config

SHARED = ("clients", "batch_size", "lr", "momentum", "max_train_samples", "max_test_samples")


def dataset_base(p: Mapping, dataset: str, **fields) -> RunConfig:
    """The base of a FedVLS table on ``dataset``: its network, budget, weight decay, augmentation."""
    return run_config(p, *SHARED, dataset=dataset, model=p["models"][dataset], rounds=p["rounds"][dataset],
                      local_epochs=p["local_epochs"][dataset], weight_decay=p["weight_decay"][dataset],
                      augmentation=p["augmentation"].get(dataset, "auto"), **fields)


def dataset_args(p: Mapping, dataset: str) -> dict:
    """``method_args`` with FedVLS's lambda for ``dataset``."""
    method_args = p["method_args"]
    return {**method_args, "fedvls": {**method_args.get("fedvls", {}), "lam": p["fedvls_lam"][dataset]}}


def table1_4_dirichlet(p: Mapping) -> list[RunConfig]:
    """Tables 1 and 4: every method x Dirichlet beta x seed on each dataset (Table 4 reads the
    same runs' curves). ``mnist_eval`` other than "test" rebuilds the authors' MNIST data: a pooled
    75/25 split, clients of at least 256 samples, local epochs dropping their last partial batch."""
    code_mnist = {} if p["mnist_eval"] == "test" else {"dataset_options": {"split": p["mnist_eval"]},
                                                       "min_client_size": 256, "drop_last": True}
    configs = []
    for dataset in p["datasets"]:
        base = dataset_base(p, dataset, partition="dirichlet", **(code_mnist if dataset == "mnist" else {}))
        args = dataset_args(p, dataset)
        # FedConcat spends half the run's rounds on its cluster encoders and half on the concatenated classifier
        args["fedconcat"] = {"encoder_rounds": p["rounds"][dataset] // 2, **p["method_args"].get("fedconcat", {})}
        configs += method_grid(base, p["methods"], args, beta=p["betas"], seed=p["seeds"])
    return configs


def table2_quantity(p: Mapping) -> list[RunConfig]:
    """Table 2: every method x seed on each dataset under quantity-based label skew (s classes a client)."""
    configs = []
    for dataset in p["datasets"]:
        base = dataset_base(p, dataset, partition="quantity", classes_per_client=p["classes_per_client"][dataset],
                            quantity_split=p["quantity_split"])
        configs += method_grid(base, p["methods"], dataset_args(p, dataset), seed=p["seeds"])
    return configs


def table3_backbones(p: Mapping) -> list[RunConfig]:
    """Table 3: every method x Dirichlet beta x seed on each backbone network."""
    dataset = p["dataset"]
    configs = []
    for model in p["backbones"]:
        base = run_config(p, *SHARED, "rounds", "local_epochs", "weight_decay", dataset=dataset, model=model,
                          partition="dirichlet", augmentation=p["augmentation"].get(dataset, "auto"))
        configs += method_grid(base, p["methods"], p["method_args"], beta=p["betas"], seed=p["seeds"])
    return configs


# ---------------------------------------------------------------------- Tables 5-7
def ablation_args(p: Mapping, method: str, dataset: str, **fedvls_extra) -> dict:
    """A method's arguments; a combination such as fedvls+fedexp takes those of each part."""
    args = {}
    for part in method.split("+"):
        part_args = p["method_args"].get(part, {})
        if part == "fedvls":
            part_args = {**part_args, "lam": p["fedvls_lam"][dataset], **fedvls_extra}
        args.update(part_args)
    return args


def _ablation_base(p: Mapping, dataset: str) -> RunConfig:
    return dataset_base(p, dataset, partition="dirichlet", beta=p["beta"])


def _fedvls_runs(p: Mapping, dataset: str, **fedvls_extra) -> list[RunConfig]:
    args = ablation_args(p, "fedvls", dataset, **fedvls_extra)
    return experiments.grid(_ablation_base(p, dataset).replace(method="fedvls", method_args=args), seed=p["seeds"])


def table5_ablation(p: Mapping) -> list[RunConfig]:
    """Table 5: FedVLS with its distillation and logit-suppression terms switched on and off."""
    return [cfg for dataset in p["datasets"] for distill, suppress in p["ablation_switches"]
            for cfg in _fedvls_runs(p, dataset, distill=distill, suppress=suppress)]


def table6_combinations(p: Mapping) -> list[RunConfig]:
    """Table 6: FedVLS combined with FedEXP and FedSAM, beside each part alone."""
    methods = p["combination_methods"]
    return [cfg for dataset in p["datasets"]
            for cfg in method_grid(_ablation_base(p, dataset), methods,
                                   {m: ablation_args(p, m, dataset) for m in methods}, seed=p["seeds"])]


def table7_lambda(p: Mapping) -> list[RunConfig]:
    """Table 7: FedVLS at each distillation weight lambda."""
    return [cfg for dataset in p["lam_datasets"] for lam in p["lams"] for cfg in _fedvls_runs(p, dataset, lam=lam)]


def table5_6_7_ablation(p: Mapping) -> list[RunConfig]:
    """Tables 5-7 together, each distinct run once (the full FedVLS run belongs to all three)."""
    return distinct(table5_ablation(p) + table6_combinations(p) + table7_lambda(p))


# ---------------------------------------------------------------------- figure notebooks
def local_update_global_model(p: Mapping) -> RunConfig:
    """The initial global model of FedED Figs. 1, 4 and FedVLS Fig. 2: FedAvg on Dir(beta) for
    ``rounds`` rounds, then broadcast to every client for the local update the figures analyse."""
    return run_config(p, *SHARED, "dataset", "model", "beta", "rounds", "local_epochs", "weight_decay",
                      "augmentation", "seed", partition="dirichlet", results_dir=p["results_dir"])


def fig1_fig4_local_update(p: Mapping) -> list[RunConfig]:
    """FedED Figs. 1 and 4 (class-wise accuracy after one local update): the initial global model,
    the notebook's one stored run. Not covered: the local updates of every client for each panel
    (FedAvg IID / FedAvg / FedLC / FedVLS), computed by ``fedlib.analysis.local_update`` from that model."""
    return [local_update_global_model(p)]


def local_update_panels(p: Mapping, global_cfg: RunConfig) -> dict[str, RunConfig]:
    """FedED Fig. 1 (a)-(d): the local update of every panel, from ``global_cfg``'s model with the same local
    budget (``update_epochs``): FedAvg on IID data, FedAvg, FedLC and FedVLS on the Dirichlet partition."""
    update = global_cfg.replace(local_epochs=p["update_epochs"])
    return {"FedAvg, IID": update.replace(partition="iid"),
            "FedAvg": update,
            "FedLC": update.replace(method="fedlc", method_args={"tau": p["fedlc_tau"]}),
            "FedVLS": update.replace(method="fedvls", method_args={"lam": p["fedvls_lam"],
                                                                   "variant": p["fedvls_variant"]})}


def fig2_confusion(p: Mapping) -> list[RunConfig]:
    """FedVLS Fig. 2 (confusion matrix of one client's FedLC local model): the initial global
    model, the notebook's one stored run (the same as Figs. 1 and 4). Not covered: the FedLC
    local update of every client, computed by ``fedlib.analysis.local_update`` from that model."""
    return [local_update_global_model(p)]


def figure_method_args(p: Mapping) -> dict:
    """``method_args`` with FedVLS's lambda ``fedvls_lam`` (one value: a figure's one dataset)."""
    method_args = p["method_args"]
    return {**method_args, "fedvls": {**method_args.get("fedvls", {}), "lam": p["fedvls_lam"]}}


def confusion_update(p: Mapping, global_cfg: RunConfig) -> RunConfig:
    """FedVLS Fig. 2's local update: FedLC (``fedlc_tau``) for ``update_epochs`` from ``global_cfg``'s model."""
    return global_cfg.replace(method="fedlc", method_args={"tau": p["fedlc_tau"]}, local_epochs=p["update_epochs"])


def fig5_convergence(p: Mapping) -> list[RunConfig]:
    """FedED Fig. 5 / FedVLS Fig. 3 (test accuracy per round): every Dirichlet beta x method x seed."""
    base = run_config(p, *SHARED, "dataset", "model", "rounds", "local_epochs", "weight_decay", "augmentation",
                      partition="dirichlet", results_dir=p["results_dir"])
    method_args = figure_method_args(p)
    return [cfg.replace(method_args=method_args.get(cfg.method, {}))
            for cfg in experiments.grid(base, beta=p["betas"], method=p["methods"], seed=p["seeds"])]


SENSITIVITY_AXES = {"participation": "participations", "local_epochs": "epoch_values", "clients": "client_counts"}


def fig6_settings(p: Mapping) -> dict[tuple, RunConfig]:
    """FedED Fig. 6 / FedVLS Fig. 4, (field, value, method, seed) -> run: one field of
    :data:`SENSITIVITY_AXES` swept at a time around the default point (participation,
    local_epochs, clients), which therefore appears once in every row."""
    base = run_config(p, *SHARED, "dataset", "model", "beta", "participation", "rounds", "local_epochs",
                      "weight_decay", "augmentation", partition="dirichlet", results_dir=p["results_dir"])
    method_args = figure_method_args(p)
    return {(field, getattr(cfg, field), cfg.method, cfg.seed): cfg.replace(method_args=method_args.get(cfg.method, {}))
            for field, values in SENSITIVITY_AXES.items()
            for cfg in experiments.grid(base, **{field: p[values]}, method=p["methods"], seed=p["seeds"])}


def fig6_sensitivity(p: Mapping) -> list[RunConfig]:
    """FedED Fig. 6 / FedVLS Fig. 4 (sensitivity to R, E and N): :func:`fig6_settings`' runs,
    each distinct run once (the default point is one run in all three rows)."""
    return distinct(fig6_settings(p).values())
