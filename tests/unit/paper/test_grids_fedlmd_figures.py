"""The grids of the FedLMD figure notebooks (fedlib.paper.grids.fedlmd), under the notebooks' own profiles."""

import pytest

from fedlib.core.config import RunConfig
from fedlib.paper.grids import fedlmd
from fedlib.reporting.tables import setting_label
from tests.helpers import declared, differing_fields, notebook_parameters

PROFILES = ["smoke", "quick", "paper"]


@pytest.mark.parametrize("profile", PROFILES)
def test_fig4_one_run_per_method_and_seed_the_fedlmd_methods_with_their_tau_and_beta(profile, tmp_path):
    params = notebook_parameters("fedlmd_fig4_kd_variants", profile, tmp_path)
    configs = fedlmd.fig4_kd_variants(params)
    assert [(c.method, c.seed) for c in configs] == [(m, s) for m in params["methods"] for s in params["seeds"]]
    lmd = {"tau": params["lmd_tau"], "beta": params["lmd_beta"]}
    assert all(c.method_args == (lmd if c.method.startswith("fedlmd") else {}) for c in configs)
    if profile != "smoke":  # Tables 1-2 train the same runs: the store serves them to both
        tables = {c.hash() for c in fedlmd.table1_2_kd_variants(notebook_parameters("fedlmd_table1_2_kd_variants", profile,
                                                                             tmp_path))}
        assert {c.hash() for c in configs} <= tables


@pytest.mark.parametrize("profile", PROFILES)
def test_figs_7_9_each_point_moves_one_knob_from_the_base_run(profile, tmp_path):
    params = notebook_parameters("fedlmd_fig7_9_sensitivity", profile, tmp_path)
    points = fedlmd.fig7_9_points(params)
    assert fedlmd.fig7_9_sensitivity(params) == [c.replace(seed=s) for c in points.values() for s in params["seeds"]]
    lmd = fedlmd.figure_lmd_args(params)
    base = fedlmd.figure_base(params)

    def at_base(method: str) -> RunConfig:
        return base.replace(method=method, method_args=lmd if method.startswith("fedlmd") else {})

    knob_fields = {"E": {"local_epochs"}, "clients per round": {"participation"}, "tau": {"method_args"},
                   "beta": {"method_args"}, "switch round": {"method", "method_args"}}
    for (_, knob, value, method), cfg in points.items():
        assert differing_fields(cfg, at_base(method)) <= knob_fields[knob], (knob, value, method)
        if knob == "E":
            assert cfg.local_epochs == value
        elif knob == "clients per round":
            assert round(cfg.participation * cfg.clients) == value
        elif knob in ("tau", "beta"):
            assert cfg.method_args == {**lmd, knob: value}
        elif value <= 0 or value >= params["rounds"]:  # the ends of the switch are plain FedLMD / FedLMD-Tf
            assert cfg == at_base("fedlmd" if value <= 0 else "fedlmd_tf")
        else:
            assert (cfg.method, cfg.method_args) == ("fedlmd_tf", {**lmd, "switch_round": value})
    sweeps = {knob: sorted({k[2] for k in points if k[1] == knob}) for knob in knob_fields}
    assert sweeps == {"E": sorted(params["epochs_grid"]), "clients per round": sorted(params["clients_per_round_grid"]),
                      "tau": sorted(params["tau_grid"]), "beta": sorted(params["beta_grid"]),
                      "switch round": sorted(params["switch_rounds"])}


@pytest.mark.parametrize("profile", PROFILES)
def test_fig2_fedavg_and_fedlmd_differ_only_in_the_method(profile, tmp_path):
    params = notebook_parameters("fedlmd_fig2_prediction_distribution", profile, tmp_path)
    runs = fedlmd.fig2_runs(params)
    assert list(runs) == ["FedAvg", "FedLMD"]
    assert differing_fields(runs["FedAvg"], runs["FedLMD"]) == {"method", "method_args"}
    assert runs["FedLMD"].method_args == {"tau": params["lmd_tau"], "beta": params["lmd_beta"]}
    assert (runs["FedAvg"].partition, runs["FedAvg"].beta, runs["FedAvg"].seed) == ("dirichlet", params["beta"],
                                                                                     params["seed"])
    if profile == "paper":  # FedLMD's setting: 2-conv CNN, 100 clients, 10 per round, Dir(0.05)
        assert (runs["FedAvg"].model, runs["FedAvg"].clients, runs["FedAvg"].participation) == ("cnn2", 100, 0.1)


def cell(cfg: RunConfig) -> tuple:
    """The Table 3 cell a run belongs to, per seed: method, dataset, partition setting, seed."""
    return cfg.method, cfg.dataset, setting_label(cfg), cfg.seed


@pytest.mark.parametrize("profile", ["quick", "paper"])
def test_figs_5_and_6_train_table_3s_run_wherever_table_3_declares_the_cell(profile, tmp_path):
    table3 = {cell(c): c.hash() for c in declared("fedlmd_table3_partitions", profile, tmp_path)}
    for stem in ("fedlmd_fig5_light_baselines", "fedlmd_fig6_accuracy_rounds"):
        shared = [c for c in declared(stem, profile, tmp_path) if cell(c) in table3]
        assert shared, stem
        assert all(c.hash() == table3[cell(c)] for c in shared), stem


def test_figs_5_and_6_paper_profiles_add_only_fedlmd_tf_outside_table_3(tmp_path):
    table3_runs = declared("fedlmd_table3_partitions", "paper", tmp_path)
    table3 = {c.hash() for c in table3_runs}
    assert {c.hash() for c in declared("fedlmd_fig6_accuracy_rounds", "paper", tmp_path)} <= table3
    fig5 = declared("fedlmd_fig5_light_baselines", "paper", tmp_path)
    assert {setting_label(c) for c in fig5} == {setting_label(c) for c in table3_runs if c.dataset == "cifar10"}
    assert {c.method for c in fig5 if c.hash() not in table3} == {"fedlmd_tf"}
    # FedLMD-Tf at Dir(0.05) is the run of Fig. 4 (and Tables 1-2)
    fig4 = {c.hash() for c in declared("fedlmd_fig4_kd_variants", "paper", tmp_path)}
    at_005 = {c.hash() for c in fig5 if c.method == "fedlmd_tf" and c.partition == "dirichlet" and c.beta == 0.05}
    assert len(at_005) == 3 and at_005 <= fig4
