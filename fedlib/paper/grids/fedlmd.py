"""The FedLMD grids (Tables 1-5): methods on CIFAR-10 under Dirichlet label skew, partial participation.

Each function takes a notebook's parameters (``fedlib.reporting.notebook.apply_profile``) and returns its
runs; the parameters cell of the notebook says what each parameter means.
"""

from __future__ import annotations

from typing import Mapping

from fedlib.core.config import RunConfig
from fedlib.errors import FedlibError
from fedlib.paper.grids.base import method_grid, run_config

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
    """Table 3: every method on each setting (dataset + partition fields), its network per dataset.

    A setting's fields win over the shared parameters: the paper profile gives its Dir(0.05)
    column ``min_client_size`` 2 and every other column the authors' code's 10."""
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


# ---------------------------------------------------------------------- figure notebooks
def figure_base(p: Mapping) -> RunConfig:
    """The base run of the FedLMD figure notebooks: the tables' budget and optimiser on a Dirichlet
    split, in the notebook's results store (as the notebooks built their runs)."""
    return run_config(p, *SHARED, "dataset", "model", "beta", "augmentation", partition="dirichlet",
                      results_dir=p["results_dir"])


def figure_lmd_args(p: Mapping) -> dict:
    """FedLMD's and FedLMD-Tf's tau and beta (as in Tables 1-2, so stored runs are shared).

    No ``variant``, so both take the paper's loss (Eqs. 5 and 7), without the tau^2 factor of the
    authors' code: at tau = 8 (Fig. 9) their distillation is about 64 times weaker than the code's."""
    return {"tau": p["lmd_tau"], "beta": p["lmd_beta"]}


def fig2_runs(p: Mapping) -> dict[str, RunConfig]:
    """Fig. 2, method label -> run: FedAvg and FedLMD on the figure's split, one seed."""
    base = figure_base(p).replace(seed=p["seed"])
    return {"FedAvg": base.replace(method="fedavg"),
            "FedLMD": base.replace(method="fedlmd", method_args=figure_lmd_args(p))}


def fig2_prediction_distribution(p: Mapping) -> list[RunConfig]:
    """Fig. 2 (what the sampled clients hold vs what the global model predicts): the runs of
    :func:`fig2_runs`. The notebook trains them itself with a recording hook
    (``prediction_stats.prediction_history``), so the grid executor leaves them to it."""
    return list(fig2_runs(p).values())


def fig4_kd_variants(p: Mapping) -> list[RunConfig]:
    """Fig. 4 (FedAvg and its local distillation variants): every method x seed, the FedLMD
    methods with :func:`figure_lmd_args`, the others with their defaults."""
    lmd_methods = {m: figure_lmd_args(p) for m in p["methods"] if m.startswith("fedlmd")}
    return method_grid(figure_base(p), p["methods"], lmd_methods, seed=p["seeds"])


def fig7_9_points(p: Mapping) -> dict[tuple, RunConfig]:
    """Figs. 7-9, (figure, knob, value, method) -> run (base seed), one knob varied at a time:
    Fig. 7 each of ``fig7_methods`` at each local epochs E and clients per round, Fig. 8 FedLMD-Tf
    switching to FedLMD at each round, Fig. 9 FedLMD and FedLMD-Tf at each tau and each beta.
    Points that are one run (a knob at its base value, switch 0 or R) share its config."""
    base, lmd_args, both = figure_base(p), figure_lmd_args(p), ("fedlmd", "fedlmd_tf")

    def point(method: str, method_args: dict | None = None, **changes) -> RunConfig:
        args = dict(lmd_args) if method.startswith("fedlmd") else {}
        return base.replace(method=method, method_args={**args, **(method_args or {})}, **changes)

    def switch(round_: int) -> RunConfig:  # 0 is plain FedLMD, R (or more) plain FedLMD-Tf
        if round_ <= 0:
            return point("fedlmd")
        return point("fedlmd_tf") if round_ >= p["rounds"] else point("fedlmd_tf", {"switch_round": round_})

    return {**{("fig7", "E", e, m): point(m, local_epochs=e) for e in p["epochs_grid"] for m in p["fig7_methods"]},
            **{("fig7", "clients per round", n, m): point(m, participation=n / p["clients"])
               for n in p["clients_per_round_grid"] for m in p["fig7_methods"]},
            **{("fig8", "switch round", s, "fedlmd_tf"): switch(s) for s in p["switch_rounds"]},
            **{("fig9", "tau", t, m): point(m, {"tau": t}) for t in p["tau_grid"] for m in both},
            **{("fig9", "beta", b, m): point(m, {"beta": b}) for b in p["beta_grid"] for m in both}}


def fig7_9_sensitivity(p: Mapping) -> list[RunConfig]:
    """Figs. 7, 8, 9 (sensitivity to E, clients per round, switching round, tau, beta): every point
    of :func:`fig7_9_points` x seed, a run shared by points listed once per point."""
    return [cfg.replace(seed=seed) for cfg in fig7_9_points(p).values() for seed in p["seeds"]]


def fig5_light_baselines(p: Mapping) -> list[RunConfig]:
    """Fig. 5 (FedLMD-Tf against the methods that cost a client no more than FedAvg, sharding and
    LDA columns of CIFAR-10): built as Table 3 builds its runs (:func:`table3_partitions`, the same
    parameters), so a method and column that Table 3 declares is Table 3's run."""
    return table3_partitions(p)


def fig6_accuracy_rounds(p: Mapping) -> list[RunConfig]:
    """Fig. 6 (test accuracy per round at several Dirichlet alphas): Table 3's runs of those
    columns, built by :func:`table3_partitions` from the same parameters; the figure reads their
    stored per-round curves."""
    return table3_partitions(p)
