"""The PKD grids (Tables 1-10 and the loss-normalisation pilot): FedAvg, baselines and PKD.

Each function takes a notebook's parameters (``fedlib.reporting.notebook.apply_profile``) and returns its
runs; the parameters cell of the notebook says what each parameter means. Notebooks filling
several paper tables get :class:`TableRun` rows, which say the table and row of each run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from fedlib.core.config import RunConfig
from fedlib.datasets import data
from fedlib.orchestration import experiments
from fedlib.paper.grids.base import distinct, method_grid, run_config

SHARED = ("rounds", "local_epochs", "batch_size", "lr", "momentum", "max_train_samples", "max_test_samples")
SETTING_ONLY = ("table", "targets")  # keys of a setting that are no RunConfig field


@dataclass(frozen=True)
class TableRun:
    """One run of a notebook that fills several paper tables."""

    table: int  # the paper table it fills
    label: str  # its row there
    extra_setting: str  # the pairs the paper's setting adds to the partition ("clients=10;model=vgg9")
    config: RunConfig


def loss_normalisation(p: Mapping) -> dict:
    """PKD's KD-loss scale from ``pkd_normalise`` / ``pkd_t_squared`` (the paper profiles: the
    pilot's choice), given only where it differs from PKD's defaults, so other runs keep their hash."""
    chosen = {"normalise": p.get("pkd_normalise", "batch"), "t_squared": bool(p.get("pkd_t_squared", False))}
    return {} if chosen == {"normalise": "batch", "t_squared": False} else chosen


def student_init(p: Mapping) -> dict:
    """PKD's ``student_init`` from ``pkd_student_init`` (the KD stage from the warmed-up model, "warm",
    or from the run's initial weights, "fresh"), given only where it is not the default "warm"."""
    chosen = p.get("pkd_student_init", "warm")
    return {} if chosen == "warm" else {"student_init": chosen}


def pkd_args(p: Mapping, lam: float, **more) -> dict:
    """PKD's arguments: warm-up and expert rounds, temperature, ``lam``, the loss normalisation
    (:func:`loss_normalisation`), the KD stage's start (:func:`student_init`) and ``more``."""
    return {"warmup_rounds": p["warmup_rounds"], "expert_rounds": p["expert_rounds"], "T": p["temperature"],
            "lam": lam, **loss_normalisation(p), **student_init(p), **more}


def _table_pkd_args(p: Mapping, dataset: str) -> dict:
    """PKD's arguments on ``dataset`` in Tables 1-4, 6-7, 9-10 (the same set as the PKD figure
    notebooks, so their stored runs are reused), with the weak-class groups pinned for it, if any."""
    groups = {"groups": p["pkd_groups"][dataset]} if dataset in p["pkd_groups"] else {}
    return pkd_args(p, p["pkd_lam"][dataset], **groups)


def setting_base(p: Mapping, setting: Mapping) -> RunConfig:
    """The base of one column setting of Tables 1-4, 6-7, 9-10: the shared fields and the
    network of its dataset, overridden by the setting's own fields (clients, model, ...)."""
    fields = {k: v for k, v in setting.items() if k not in SETTING_ONLY}
    return run_config(p, *SHARED, "clients", "classes_per_client",
                      **{"model": p["models"][fields["dataset"]], **fields})


# ---------------------------------------------------------------------- Tables 1-4
def table1_4_runs(p: Mapping) -> list[TableRun]:
    """Tables 1-4: every method x seed on each setting; the network joins the paper's setting
    where the setting names one (Table 2)."""
    runs = []
    for setting in p["settings"]:
        base = setting_base(p, setting)
        for cfg in method_grid(base, p["methods"], {"pkd": _table_pkd_args(p, base.dataset)}, seed=p["seeds"]):
            extra = f"clients={cfg.clients}" + (f";model={base.model}" if "model" in setting else "")
            runs.append(TableRun(setting["table"], cfg.method, extra, cfg))
    return runs


def table1_4_class_accuracy(p: Mapping) -> list[RunConfig]:
    """The runs of :func:`table1_4_runs`."""
    return [run.config for run in table1_4_runs(p)]


# ---------------------------------------------------------------------- Tables 6-7 and 9-10
def table_rows_runs(p: Mapping) -> list[TableRun]:
    """Each table's rows (``table_rows``) on its setting: a row's config changes (``rows``) x seed;
    a row fedlib does not implement (None) has no runs."""
    table_rows = {int(table): labels for table, labels in p["table_rows"].items()}  # papermill passes keys as text
    runs = []
    for setting in p["settings"]:
        base = setting_base(p, setting)
        for label in table_rows[setting["table"]]:
            if p["rows"][label] is None:  # not implemented: the paper's row only
                continue
            changes = dict(p["rows"][label])
            args = _table_pkd_args(p, base.dataset) if changes["method"] == "pkd" else changes.pop("method_args", {})
            for cfg in experiments.grid(base.replace(**changes, method_args=args), seed=p["seeds"]):
                runs.append(TableRun(setting["table"], label, f"clients={cfg.clients}", cfg))
    return runs


def table6_7_baselines(p: Mapping) -> list[RunConfig]:
    """Tables 6-7 (baselines against PKD): the runs of :func:`table_rows_runs`."""
    return [run.config for run in table_rows_runs(p)]


def table9_10_cost(p: Mapping) -> list[RunConfig]:
    """Tables 9-10 (the cost to reach a minimum class accuracy): the runs of :func:`table_rows_runs`."""
    return [run.config for run in table_rows_runs(p)]


# ---------------------------------------------------------------------- Tables 5 and 8
def table5_femnist(p: Mapping) -> list[RunConfig]:
    """Table 5: every method x client fraction x seed on FEMNIST; every writer a client when
    ``clients`` is None (the paper); no runs when the data are missing here."""
    dataset, options = p["dataset"], p["dataset_options"]
    if data.missing_dataset_message(dataset, p["data_dir"]):
        return []
    clients = p["clients"]
    if clients is None:  # every writer of the training set, as in the paper
        clients = len(np.unique(data.load_dataset(dataset, data_dir=p["data_dir"], **options).train_groups))
    base = run_config(p, *SHARED, "dataset", "model", "partition", "beta", clients=clients, dataset_options=options)
    return method_grid(base, p["methods"], {"pkd": pkd_args(p, p["pkd_lam"])}, participation=p["fractions"],
                       seed=p["seeds"])


def table8_runs(p: Mapping) -> list[TableRun]:
    """Table 8: per seed, FedAvg and PKD with each number G of weak-class groups given an expert;
    none when the data are missing here."""
    if data.missing_dataset_message(p["dataset"], p["data_dir"]):
        return []
    base = run_config(p, *SHARED, "dataset", "model", "clients", partition="balanced")
    clients, runs = p["clients"], []
    for seed in p["seeds"]:
        runs.append(TableRun(8, "fedavg", f"clients={clients}", base.replace(method="fedavg", seed=seed)))
        for groups in p["max_groups"]:
            pkd = base.replace(method="pkd", method_args=pkd_args(p, p["pkd_lam"], max_groups=groups), seed=seed)
            runs.append(TableRun(8, f"pkd G={groups}", f"clients={clients};max_groups={groups}", pkd))
    return runs


def table8_cifar100(p: Mapping) -> list[RunConfig]:
    """The runs of :func:`table8_runs`."""
    return [run.config for run in table8_runs(p)]


# ---------------------------------------------------------------------- the pilot
def variant_name(variant: Mapping) -> str:
    """'pkd fired T^2' style label of one loss normalisation of the pilot."""
    return f"pkd {variant['normalise']}" + (" T^2" if variant["t_squared"] else "")


def pilot_runs(p: Mapping) -> dict[tuple[str, int], RunConfig]:
    """(variant name, seed) -> run: FedAvg and PKD with each loss normalisation (``variants``), on a
    balanced partition, scored on a held-out 10 % of the training set."""
    base = run_config(p, "dataset", "model", "clients", "rounds", "local_epochs", "batch_size", "lr", "momentum",
                      "max_train_samples", partition="balanced", dataset_options={"split": "holdout_10"})
    args = pkd_args(p, p["lam"], groups=p["groups"])
    return {(name, seed): cfg for seed in p["seeds"] for name, cfg in
            [("fedavg", base.replace(method="fedavg", seed=seed))] +
            [(variant_name(v), base.replace(method="pkd", method_args={**args, **v}, seed=seed))
             for v in p["variants"]]}


def pilot_loss_normalisation(p: Mapping) -> list[RunConfig]:
    """The runs of :func:`pilot_runs`."""
    return list(pilot_runs(p).values())


# ---------------------------------------------------------------------- figure notebooks
FIGURE_SHARED = ("dataset", "clients", "local_epochs", "batch_size", "lr", "momentum", "seed", "max_train_samples",
                 "max_test_samples")


def figure_run(p: Mapping, *shared: str, **fields) -> RunConfig:
    """A run of a PKD figure notebook (one seed): the parameters of ``FIGURE_SHARED`` and ``shared``,
    ``fields`` over them (a field given needs no parameter), in the notebook's results store (as
    the notebooks built their runs)."""
    names = [name for name in (*FIGURE_SHARED, *shared) if name not in fields]
    return run_config(p, *names, results_dir=p["results_dir"], **fields)


def centralised(cfg: RunConfig) -> RunConfig:
    """One client holding all training data (iid), same rounds and local epochs as ``cfg``."""
    return cfg.replace(clients=1, partition="iid", participation=1.0)


def fig2_runs(p: Mapping) -> dict[tuple[str, str], list[RunConfig]]:
    """Fig. 2a, (network, paradigm) -> FedAvg runs, one per seed (``seeds``): per network
    (``models``), centralised (one client holding all the data, same epochs) and federated on
    each of ``partitions``."""
    # one seed for the base; experiments.grid below gives each paradigm's run every seed of ``seeds``
    base = figure_run(p, "rounds", "classes_per_client", method="fedavg", seed=p["seeds"][0])
    runs = {}
    for model in p["models"]:
        federated = base.replace(model=model)
        paradigms = {"centralised": centralised(federated),
                     **{f"FL {partition}": federated.replace(partition=partition) for partition in p["partitions"]}}
        runs.update({(model, paradigm): experiments.grid(cfg, seed=p["seeds"]) for paradigm, cfg in paradigms.items()})
    return runs


def fig2_class_gap(p: Mapping) -> list[RunConfig]:
    """Fig. 2a (class accuracy minus its mean, averaged over seeds): the runs of :func:`fig2_runs`."""
    return [cfg for seeded in fig2_runs(p).values() for cfg in seeded]


def fig3_6_9_runs(p: Mapping) -> dict[tuple[str, str], RunConfig]:
    """Figs. 3, 6 and 9, (panel, method) -> run: FedAvg and PKD on each of ``partitions`` (the panel
    is the partition's name), then, for Fig. 3 only, on the balanced partition with each client
    count of ``fig3_clients`` (panel "balanced, <n> clients"). PKD with ``lam``, the loss
    normalisation and the weak-class groups pinned for the dataset, if any."""
    base = figure_run(p, "model", "rounds", "classes_per_client")
    groups = {"groups": p["pkd_groups"][p["dataset"]]} if p["dataset"] in p["pkd_groups"] else {}
    method_args = {"fedavg": {}, "pkd": pkd_args(p, p["lam"], **groups)}
    panels = {partition: base.replace(partition=partition) for partition in p["partitions"]}
    panels.update({f"balanced, {n} clients": base.replace(partition="balanced", clients=n) for n in p["fig3_clients"]})
    return {(panel, method): cfg.replace(method=method, method_args=args)
            for panel, cfg in panels.items() for method, args in method_args.items()}


def fig3_6_9_class_accuracy_rounds(p: Mapping) -> list[RunConfig]:
    """Figs. 3, 6 and 9 (class accuracy per round, FedAvg vs PKD): the runs of :func:`fig3_6_9_runs`."""
    return list(fig3_6_9_runs(p).values())


def fig4_5_7_runs(p: Mapping) -> dict[str, RunConfig]:
    """Figs. 4, 5 and 7, role -> FedAvg run: "trained" (``rounds`` rounds), whose final model
    Figs. 4 and 5 read, and "warm-up" (``warmup_rounds`` rounds), which Fig. 7 and the discovery
    step follow round by round. The two are the same config when the round counts are equal
    (:func:`fig4_5_7_weak_class_discovery` then declares it once)."""
    base = figure_run(p, "model", "partition", method="fedavg")
    return {"trained": base.replace(rounds=p["rounds"]), "warm-up": base.replace(rounds=p["warmup_rounds"])}


def fig4_5_7_weak_class_discovery(p: Mapping) -> list[RunConfig]:
    """Figs. 4, 5 and 7 (weak-class discovery): the distinct runs of :func:`fig4_5_7_runs`.

    Not covered: the per-round class statistics behind Fig. 7 and the discovery step, which
    ``class_gap.track_class_statistics`` records by training the warm-up run with a hook (unless
    cached beside the store; it stores the run when the store lacks it), and the test-set
    predictions and t-SNE of Figs. 4 and 5, computed from the trained run's stored model.
    """
    return distinct(list(fig4_5_7_runs(p).values()))


def fig11_runs(p: Mapping) -> dict[str, RunConfig]:
    """Fig. 11, panel title -> PKD run: (a) ``clients`` class-balanced clients, (b) Dir(``beta``)
    over ``dirichlet_clients`` clients."""
    base = figure_run(p, "model", "rounds", "classes_per_client", method="pkd", method_args=pkd_args(p, p["lam"]))
    return {f"(a) balanced, {p['clients']} clients": base.replace(partition="balanced"),
            f"(b) Dir({p['beta']}), {p['dirichlet_clients']} clients":
                base.replace(partition="dirichlet", beta=p["beta"], clients=p["dirichlet_clients"])}


def fig11_expert_activation(p: Mapping) -> list[RunConfig]:
    """Fig. 11 (how often PKD's experts fire): the runs of :func:`fig11_runs`."""
    return list(fig11_runs(p).values())


# ---------------------------------------------------------------------- the KD-stage readings
READINGS = {  # label -> PKD arguments over the shared ones; "warm batch T^2" is the paper profiles' reading
    "warm batch T^2": {"normalise": "batch", "t_squared": True},
    "(a) fresh batch T^2": {"student_init": "fresh", "normalise": "batch", "t_squared": True},
    "(b) fresh fired T^2": {"student_init": "fresh", "normalise": "fired", "t_squared": True},
    "(c) warm fired T^2": {"normalise": "fired", "t_squared": True},
}


def readings_runs(p: Mapping) -> dict[tuple[str, int], RunConfig]:
    """(label, seed) -> run of the KD-stage readings experiment: FedAvg and PKD under each reading
    of ``readings`` at ``seed``, and FedAvg with each of ``confirm_readings`` at ``confirm_seed``.

    The runs share PKD Table 1's setting (balanced clients, the pinned ``groups``). At the seed
    ``table1_seed``, FedAvg and the "warm batch T^2" reading are PKD Table 1's stored runs
    (``table1_rounds`` rounds; their first ``rounds`` rounds are what a ``rounds``-round run gives,
    as nothing in either depends on the total), so they are not trained twice."""
    base = run_config(p, "dataset", "model", "clients", "local_epochs", "batch_size", "lr", "momentum",
                      "max_train_samples", "max_test_samples", partition="balanced", classes_per_client=1)
    shared = pkd_args(p, p["lam"], groups=p["groups"])

    def rounds_of(label: str, seed: int) -> int:
        from_table1 = label in ("fedavg", "warm batch T^2") and seed == p["table1_seed"]
        return p["table1_rounds"] if from_table1 and p["table1_rounds"] else p["rounds"]

    def run(label: str, seed: int) -> RunConfig:
        cfg = base.replace(rounds=rounds_of(label, seed), seed=seed)
        if label == "fedavg":
            return cfg.replace(method="fedavg")
        args = {k: v for k, v in shared.items() if k not in ("normalise", "t_squared", "student_init")}
        return cfg.replace(method="pkd", method_args={**args, **READINGS[label]})

    wanted = [("fedavg", p["seed"])] + [(label, p["seed"]) for label in p["readings"]]
    if p["confirm_readings"]:
        wanted += [("fedavg", p["confirm_seed"])] + [(label, p["confirm_seed"]) for label in p["confirm_readings"]]
    return {key: run(*key) for key in wanted}


def kd_stage_readings(p: Mapping) -> list[RunConfig]:
    """The runs of :func:`readings_runs`."""
    return list(readings_runs(p).values())
