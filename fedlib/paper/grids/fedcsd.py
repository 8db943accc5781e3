"""The FedCSD grids (Tables I-IV): label skew, the ablation, the mask, and Office-Caltech-10.

Each function takes a notebook's parameters (``fedlib.reporting.notebook.apply_profile``) and returns its
runs; the parameters cell of the notebook says what each parameter means.
"""

from __future__ import annotations

from typing import Mapping

from fedlib.core.config import RunConfig
from fedlib.datasets import data
from fedlib.paper.grids.base import method_grid, run_config

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


# ---------------------------------------------------------------------- figure notebooks
def figure_base(p: Mapping, *shared: str, **fields) -> RunConfig:
    """The base of the figure notebooks: their dataset with its loader options (``dataset_options``
    maps a dataset to them, as in Table I), network, local training and subsets under the paper's
    label skew, in their results store; ``shared`` and ``fields`` as in ``run_config`` (the rounds
    among them: Fig. 1 names its rounds ``pretrain_rounds``)."""
    local_training = [name for name in SHARED if name != "rounds"]
    return run_config(p, *local_training, "dataset", "model", "results_dir", *shared, partition="dirichlet",
                      dataset_options=p["dataset_options"].get(p["dataset"], {}), **fields)


def fig1_drift(p: Mapping) -> list[RunConfig]:
    """Fig. 1 (local models drift from the global model in logit space): the FedAvg run that trains
    the starting global model. Not covered: the drift study itself (``fedlib.analysis.drift.drift_study``,
    every client's local epochs from that model under the three local objectives), which the
    notebook computes from the stored run."""
    return [figure_base(p, "beta", "seed", rounds=p["pretrain_rounds"], method="fedavg")]


def drift_variants(p: Mapping) -> dict[str, tuple[str, dict]]:
    """Fig. 1's local objectives, label -> (method, method_args): cross-entropy alone, with logit
    distillation (``logit_mu``, ``logit_tau``) and with feature distillation (``feature_mu``)."""
    return {"CE": ("fedavg", {}),
            "CE + logit KD": ("fedavg_kd", {"beta": p["logit_mu"], "tau": p["logit_tau"]}),
            "CE + feature KD": ("feature_kd", {"mu": p["feature_mu"]})}


def fig3_fig4_sweeps(p: Mapping) -> dict[str, list[RunConfig]]:
    """Figs. 3 and 4, hyperparameter (mu, tau, alpha) -> FedCSD runs (value x seed) that change it
    alone around the defaults, then "fedavg" -> the reference runs (one per seed). All three
    arguments are always given, so a setting two sweeps share is one run."""
    base, defaults, seeds = figure_base(p, "rounds", "beta"), csd_args(p), p["seeds"]
    sweeps = {name: [base.replace(method="fedcsd", method_args={**defaults, name: value}, seed=s)
                     for value in p[values] for s in seeds]
              for name, values in (("mu", "mus"), ("tau", "taus"), ("alpha", "alphas"))}
    return {**sweeps, "fedavg": [base.replace(method="fedavg", seed=s) for s in seeds]}


def fig3_fig4_sensitivity(p: Mapping) -> list[RunConfig]:
    """Figs. 3 and 4 (sensitivity to mu, tau and alpha): the three sweeps' FedCSD runs, then FedAvg's."""
    return [c for runs in fig3_fig4_sweeps(p).values() for c in runs]


def fig5_mask_filter(p: Mapping) -> list[RunConfig]:
    """Fig. 5 (share of soft labels the adaptive mask filters, round by round): one FedCSD run per
    dataset and Dirichlet beta (``betas`` maps a dataset to its betas, ``models`` to its network,
    as in Table I); the notebook reads the rate from the runs' per-round metrics."""
    runs = []
    for dataset, values in p["betas"].items():
        base = figure_base({**p, "dataset": dataset, "model": p["models"][dataset]}, "rounds", "seed")
        runs += method_grid(base, ["fedcsd"], {"fedcsd": csd_args(p)}, beta=values)
    return runs


def fig7_tsne(p: Mapping) -> list[RunConfig]:
    """Fig. 7 (t-SNE of global and local features): the FedAvg run, then the FedCSD run, same data
    and budget. Not covered: client ``local_client``'s two local updates from FedCSD's global model
    (``fedlib.analysis.drift.local_update``) and the t-SNE embeddings, which the notebook computes from the
    stored runs."""
    base = figure_base(p, "rounds", "beta", "seed")
    return [base.replace(method="fedavg"), base.replace(method="fedcsd", method_args=csd_args(p))]
