"""The grids of the PKD figure notebooks (fedlib.paper.grids.pkd), under the notebooks' own profiles, and
the paper-profile runs they share with the PKD table notebooks (read as the planner declares them)."""

import pytest

from fedlib.core.config import RunConfig
from fedlib.paper.grids import pkd
from tests.helpers import declared, differing_fields, notebook_parameters

PROFILES = ["smoke", "quick", "paper"]


@pytest.mark.parametrize("profile", PROFILES)
def test_fig2_trains_each_network_centralised_and_on_each_partition_with_one_budget(profile, tmp_path):
    params = notebook_parameters("pkd_fig2_class_gap", profile, tmp_path)
    runs = pkd.fig2_runs(params)
    paradigms = ["centralised"] + [f"FL {p}" for p in params["partitions"]]
    assert list(runs) == [(m, p) for m in params["models"] for p in paradigms]
    assert pkd.fig2_class_gap(params) == [cfg for seeded in runs.values() for cfg in seeded]
    for seeded in runs.values():  # one run per seed, nothing else differs
        assert [c.seed for c in seeded] == params["seeds"]
        assert all(differing_fields(seeded[0], c) <= {"seed"} for c in seeded)
    for model in params["models"]:
        central = runs[(model, "centralised")][0]
        assert (central.method, central.model, central.clients, central.partition) == ("fedavg", model, 1, "iid")
        for partition in params["partitions"]:
            federated = runs[(model, f"FL {partition}")][0]
            assert (federated.partition, federated.clients) == (partition, params["clients"])
            # same rounds, epochs and optimiser: only who holds the data differs
            assert differing_fields(federated, central) <= {"partition", "clients", "classes_per_client"}
    if profile == "quick":  # the notebook says its FL balanced LeNet-5 run is Fig. 3's FedAvg run
        fig3 = pkd.fig3_6_9_runs(notebook_parameters("pkd_fig3_6_9_class_accuracy_rounds", profile, tmp_path))
        assert runs[("lenet5", "FL balanced")][0].hash() == fig3[("balanced", "fedavg")].hash()
    if profile == "paper":
        assert (params["dataset"], params["models"]) == ("fashion_mnist", ["lenet5", "convnet_s", "vgg9"])


@pytest.mark.parametrize("profile", PROFILES)
def test_figs_3_6_9_compare_fedavg_and_pkd_on_one_run_per_partition(profile, tmp_path):
    params = notebook_parameters("pkd_fig3_6_9_class_accuracy_rounds", profile, tmp_path)
    runs = pkd.fig3_6_9_runs(params)
    panels = params["partitions"] + [f"balanced, {n} clients" for n in params["fig3_clients"]]
    assert list(runs) == [(p, m) for p in panels for m in ("fedavg", "pkd")]
    for panel in panels:
        fedavg, ours = runs[(panel, "fedavg")], runs[(panel, "pkd")]
        assert differing_fields(fedavg, ours) == {"method", "method_args"}
        assert ours.method_args["warmup_rounds"] < ours.rounds, "PKD's experts get rounds to act"
    if profile == "paper":  # the paper's groups pinned, the pilot's loss normalisation
        args = runs[("balanced", "pkd")].method_args
        assert (args["groups"], args["normalise"], args["t_squared"]) == ([[0, 6], [2, 4, 6]], "batch", True)


@pytest.mark.parametrize("profile", PROFILES)
def test_figs_4_5_7_read_a_trained_fedavg_run_and_track_a_warm_up_run(profile, tmp_path):
    params = notebook_parameters("pkd_fig4_5_7_weak_class_discovery", profile, tmp_path)
    runs = pkd.fig4_5_7_runs(params)
    trained, warmup = runs["trained"], runs["warm-up"]
    assert (warmup.method, warmup.partition, warmup.rounds) == ("fedavg", "balanced", params["warmup_rounds"])
    assert trained.rounds == params["rounds"] and differing_fields(trained, warmup) <= {"rounds"}
    assert (warmup.dataset, warmup.model) == (("digits", "mlp") if profile == "smoke" else ("fashion_mnist", "lenet5"))
    assert pkd.fig4_5_7_weak_class_discovery(params) == list({c.hash(): c for c in runs.values()}.values())
    if profile == "quick":  # the notebook says Figs. 4-5 read Fig. 3's (and Table 1's) quick FedAvg run
        fig3 = pkd.fig3_6_9_runs(notebook_parameters("pkd_fig3_6_9_class_accuracy_rounds", profile, tmp_path))
        assert trained.hash() == fig3[("balanced", "fedavg")].hash()


@pytest.mark.parametrize("profile", ["smoke", "quick"])
def test_fig11_panels_share_pkd_and_the_balanced_run_is_the_fig3_pkd_run(profile, tmp_path):
    params = notebook_parameters("pkd_fig11_expert_activation", profile, tmp_path)
    balanced, dirichlet = pkd.fig11_runs(params).values()
    assert (balanced.partition, balanced.clients) == ("balanced", params["clients"])
    assert (dirichlet.partition, dirichlet.beta, dirichlet.clients) == \
        ("dirichlet", params["beta"], params["dirichlet_clients"])
    assert differing_fields(balanced, dirichlet) <= {"partition", "beta", "clients"}, "one budget and method"
    fig3 = pkd.fig3_6_9_runs(notebook_parameters("pkd_fig3_6_9_class_accuracy_rounds", profile, tmp_path))
    assert balanced.hash() == fig3[("balanced", "pkd")].hash(), "the profiles say panel (a) is Fig. 3's PKD run"


def test_centralised_is_one_iid_client_with_the_same_budget():
    cfg = RunConfig(dataset="digits", model="mlp", partition="balanced", clients=10, rounds=7,
                    local_epochs=3, participation=0.5)
    central = pkd.centralised(cfg)
    assert (central.clients, central.partition, central.participation) == (1, "iid", 1.0)
    assert (central.rounds, central.local_epochs, central.lr) == (7, 3, cfg.lr)
    assert central.hash() != cfg.hash()


# ---------------------------------------------------------------------- paper profiles, shared runs
TABLE1_FMNIST_10_CLIENTS = {"fedavg": "8f104f610687", "pkd": "7de30090475e"}  # stored / training: must not change


def paper_table1_4(tmp_path) -> list[pkd.TableRun]:
    return pkd.table1_4_runs(notebook_parameters("pkd_table1_4_class_accuracy", "paper", tmp_path))


def test_table4_fashion_mnist_runs_table7s_20_clients_and_keeps_10_elsewhere(tmp_path):
    # the paper's Table 4 Fashion-MNIST numbers are Table 7's ("Dir(0.5), #client=20")
    runs = paper_table1_4(tmp_path)
    table4 = {(r.config.dataset, r.config.clients) for r in runs if r.table == 4}
    assert table4 == {("mnist", 10), ("fashion_mnist", 20), ("cifar10", 10)}
    assert {r.config.clients for r in runs if r.table == 1} == {10, 100}
    fmnist = {r.config.hash() for r in runs if r.table == 4 and r.config.dataset == "fashion_mnist"}
    table7 = {c.hash() for c in declared("pkd_table6_7_baselines", "paper", tmp_path)
              if c.partition == "dirichlet" and c.method in ("fedavg", "pkd")}
    assert len(fmnist) == 6 and fmnist == table7, "FedAvg and PKD, 3 seeds: the runs of Tables 7 and 10"
    kept = {r.config.method: r.config.hash() for r in runs if r.table == 1 and r.config.dataset == "fashion_mnist"
            and r.config.clients == 10 and r.config.seed == 0}
    assert kept == TABLE1_FMNIST_10_CLIENTS


def test_figs_4_5_show_table1s_trained_fedavg_model_and_fig7_the_warm_up_rounds_10_to_20(tmp_path):
    params = notebook_parameters("pkd_fig4_5_7_weak_class_discovery", "paper", tmp_path)
    runs = pkd.fig4_5_7_runs(params)
    assert runs["trained"].hash() == TABLE1_FMNIST_10_CLIENTS["fedavg"], "the paper's Fig. 4(c): the trained model"
    assert (runs["warm-up"].rounds, params["fig7_first_round"]) == (20, 10)
    assert {c.hash() for c in declared("pkd_fig4_5_7_weak_class_discovery", "paper", tmp_path)} == \
        {runs["trained"].hash(), runs["warm-up"].hash()}


def test_fig2_paper_profile_averages_five_seeds(tmp_path):
    runs = pkd.fig2_runs(notebook_parameters("pkd_fig2_class_gap", "paper", tmp_path))
    assert all([c.seed for c in seeded] == [0, 1, 2, 3, 4] for seeded in runs.values())
    assert len(declared("pkd_fig2_class_gap", "paper", tmp_path)) == 5 * len(runs)


def test_fig3_paper_profile_adds_table1s_100_client_runs(tmp_path):
    runs = pkd.fig3_6_9_runs(notebook_parameters("pkd_fig3_6_9_class_accuracy_rounds", "paper", tmp_path))
    table1 = {r.config.hash() for r in paper_table1_4(tmp_path) if r.table == 1}
    for method in ("fedavg", "pkd"):
        assert runs[("balanced, 100 clients", method)].clients == 100
        assert runs[("balanced, 100 clients", method)].hash() in table1
        assert runs[("balanced", method)].hash() == TABLE1_FMNIST_10_CLIENTS[method]


# the paper's datasets whose training classes are equal already (6,000 and 5,000 images each)
EQUAL_CLASSES = ("fashion_mnist", "cifar10")
PKD_NOTEBOOKS = ("pkd_table1_4_class_accuracy", "pkd_table6_7_baselines", "pkd_table9_10_cost", "pkd_fig2_class_gap",
                 "pkd_fig3_6_9_class_accuracy_rounds", "pkd_fig11_expert_activation")


def test_pkd_paper_runs_keep_every_class_total_equal(tmp_path):
    """The paper keeps global class balance in every partition but FEMNIST's writers: pathological and
    Dirichlet runs set global_balance where the classes differ (MNIST, Tables 3-4), and only there."""
    configs = [cfg for stem in PKD_NOTEBOOKS for cfg in declared(stem, "paper", tmp_path)]
    split = [cfg for cfg in configs if cfg.partition in ("pathological", "dirichlet")]
    assert all(cfg.global_balance or cfg.dataset in EQUAL_CLASSES for cfg in split)
    assert {(cfg.dataset, cfg.partition) for cfg in split if cfg.global_balance} == {("mnist", "pathological"),
                                                                                     ("mnist", "dirichlet")}
    assert not any(cfg.global_balance for cfg in configs if cfg.partition not in ("pathological", "dirichlet"))


def test_pkd_student_init_fresh_changes_only_pkd_runs_and_warm_keeps_every_hash(tmp_path):
    params = notebook_parameters("pkd_table1_4_class_accuracy", "paper", tmp_path)
    assert params["pkd_student_init"] == "warm"
    warm = {(r.table, r.config.method, r.config.dataset, r.config.clients, r.config.seed): r.config
            for r in pkd.table1_4_runs(params)}
    fresh = {(r.table, r.config.method, r.config.dataset, r.config.clients, r.config.seed): r.config
             for r in pkd.table1_4_runs({**params, "pkd_student_init": "fresh"})}
    assert warm.keys() == fresh.keys()
    for key, cfg in fresh.items():
        if key[1] == "pkd":
            assert cfg.method_args["student_init"] == "fresh" and differing_fields(cfg, warm[key]) == {"method_args"}
        else:
            assert cfg.hash() == warm[key].hash()
    assert all("student_init" not in c.method_args for c in warm.values())  # the stored runs keep their hashes
    assert warm[(1, "pkd", "fashion_mnist", 10, 0)].hash() == TABLE1_FMNIST_10_CLIENTS["pkd"]
