"""The grids of the PKD figure notebooks (fedlib.grids.pkd), under the notebooks' own profiles."""

import pytest

from fedlib.config import RunConfig
from fedlib.grids import pkd
from tests.helpers import differing_fields, notebook_parameters

PROFILES = ["smoke", "quick", "paper"]


@pytest.mark.parametrize("profile", PROFILES)
def test_fig2_trains_each_network_centralised_and_on_each_partition_with_one_budget(profile, tmp_path):
    params = notebook_parameters("pkd_fig2_class_gap", profile, tmp_path)
    runs = pkd.fig2_runs(params)
    paradigms = ["centralised"] + [f"FL {p}" for p in params["partitions"]]
    assert list(runs) == [(m, p) for m in params["models"] for p in paradigms]
    assert pkd.fig2_class_gap(params) == list(runs.values())
    for model in params["models"]:
        central = runs[(model, "centralised")]
        assert (central.method, central.model, central.clients, central.partition) == ("fedavg", model, 1, "iid")
        for partition in params["partitions"]:
            federated = runs[(model, f"FL {partition}")]
            assert (federated.partition, federated.clients) == (partition, params["clients"])
            # same rounds, epochs and optimiser: only who holds the data differs
            assert differing_fields(federated, central) <= {"partition", "clients", "classes_per_client"}
    if profile == "quick":  # the notebook says its FL balanced LeNet-5 run is Fig. 3's FedAvg run
        fig3 = pkd.fig3_6_9_runs(notebook_parameters("pkd_fig3_6_9_class_accuracy_rounds", profile, tmp_path))
        assert runs[("lenet5", "FL balanced")].hash() == fig3[("balanced", "fedavg")].hash()
    if profile == "paper":
        assert (params["dataset"], params["models"]) == ("fashion_mnist", ["lenet5", "convnet_s", "vgg9"])


@pytest.mark.parametrize("profile", PROFILES)
def test_figs_3_6_9_compare_fedavg_and_pkd_on_one_run_per_partition(profile, tmp_path):
    params = notebook_parameters("pkd_fig3_6_9_class_accuracy_rounds", profile, tmp_path)
    runs = pkd.fig3_6_9_runs(params)
    assert list(runs) == [(p, m) for p in params["partitions"] for m in ("fedavg", "pkd")]
    for partition in params["partitions"]:
        fedavg, ours = runs[(partition, "fedavg")], runs[(partition, "pkd")]
        assert differing_fields(fedavg, ours) == {"method", "method_args"}
        assert ours.method_args["warmup_rounds"] < ours.rounds, "PKD's experts get rounds to act"
    if profile == "paper":  # the paper's groups pinned, the pilot's loss normalisation
        args = runs[("balanced", "pkd")].method_args
        assert (args["groups"], args["normalise"], args["t_squared"]) == ([[0, 6], [2, 4, 6]], "batch", True)


@pytest.mark.parametrize("profile", PROFILES)
def test_figs_4_5_7_warm_up_is_one_fedavg_run_of_the_warmup_rounds(profile, tmp_path):
    params = notebook_parameters("pkd_fig4_5_7_weak_class_discovery", profile, tmp_path)
    [warmup] = pkd.fig4_5_7_weak_class_discovery(params)
    assert (warmup.method, warmup.partition, warmup.rounds) == ("fedavg", "balanced", params["warmup_rounds"])
    assert (warmup.dataset, warmup.model) == (("digits", "mlp") if profile == "smoke" else ("fashion_mnist", "lenet5"))


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
