"""The grids of the FedCSD figure notebooks (fedlib.paper.grids.fedcsd), under the notebooks' own profiles."""

import pytest

from fedlib.paper.grids import fedcsd
from tests.helpers import differing_fields, notebook_parameters

PROFILES = ["smoke", "quick", "paper"]


def test_figure_base_runs_where_the_notebook_says_under_the_papers_label_skew(tmp_path):
    params = notebook_parameters("fedcsd_fig7_tsne", "quick", tmp_path)
    base = fedcsd.figure_base(params, "rounds", seed=3)
    assert (base.device, base.results_dir, base.data_dir) == ("cpu", str(tmp_path / "results"), params["data_dir"])
    assert (base.partition, base.dataset, base.model, base.rounds, base.seed) == ("dirichlet", "cifar10", "cnn2", 8, 3)
    assert (base.max_train_samples, base.lr) == (3000, 0.02)


@pytest.mark.parametrize("profile", PROFILES)
def test_fig1_pretrains_one_fedavg_global_model_for_the_pretraining_rounds(profile, tmp_path):
    params = notebook_parameters("fedcsd_fig1_drift", profile, tmp_path)
    [pretrain] = fedcsd.fig1_drift(params)
    assert (pretrain.method, pretrain.rounds, pretrain.beta) == ("fedavg", params["pretrain_rounds"], params["beta"])
    assert pretrain.local_epochs == params["local_epochs"] != params["drift_epochs"], \
        "the run trains the pre-training's local epochs; the drift study's are not a run of the grid"
    if profile == "paper":
        assert (pretrain.model, pretrain.rounds, pretrain.local_epochs, pretrain.max_train_samples) == \
            ("resnet50", 100, 5, None)


@pytest.mark.parametrize("profile", PROFILES)
def test_figs_3_4_sweeps_change_one_argument_around_the_defaults(profile, tmp_path):
    params = notebook_parameters("fedcsd_fig3_fig4_sensitivity", profile, tmp_path)
    groups = fedcsd.fig3_fig4_sweeps(params)
    assert list(groups) == ["mu", "tau", "alpha", "fedavg"]
    defaults = {"mu": params["mu"], "tau": params["tau"], "alpha": params["alpha"]}
    for name, values in (("mu", "mus"), ("tau", "taus"), ("alpha", "alphas")):
        cells = [(c.method_args[name], c.seed) for c in groups[name]]
        assert cells == [(v, s) for v in params[values] for s in params["seeds"]], "one run per value per seed"
        for cfg in groups[name]:
            assert cfg.method == "fedcsd" and cfg.method_args == {**defaults, name: cfg.method_args[name]}
            reference = groups["fedavg"][params["seeds"].index(cfg.seed)]
            assert differing_fields(cfg, reference) == {"method", "method_args"}, "FedAvg has the same budget"
    assert [c.seed for c in groups["fedavg"]] == params["seeds"]
    if profile == "paper":
        assert {c.model for group in groups.values() for c in group} == {"resnet50"}
        assert len(params["mus"]) == len(params["taus"]) == len(params["alphas"]) == 4 and len(params["seeds"]) == 3


@pytest.mark.parametrize("profile", PROFILES)
def test_figs_3_4_grid_is_the_sweeps_in_order_with_the_default_setting_one_run(profile, tmp_path):
    params = notebook_parameters("fedcsd_fig3_fig4_sensitivity", profile, tmp_path)
    configs = fedcsd.fig3_fig4_sensitivity(params)
    assert configs == [c for group in fedcsd.fig3_fig4_sweeps(params).values() for c in group]
    assert all(params[name] in params[f"{name}s"] for name in ("mu", "tau", "alpha")), "each sweep holds the defaults"
    values = len(params["mus"]) + len(params["taus"]) + len(params["alphas"])
    # the default setting, in all three sweeps, is one run per seed; then FedAvg's
    assert len({c.hash() for c in configs}) == (values - 2 + 1) * len(params["seeds"])


@pytest.mark.parametrize("profile", PROFILES)
def test_fig5_holds_one_fedcsd_run_per_dataset_and_beta_differing_only_in_beta(profile, tmp_path):
    params = notebook_parameters("fedcsd_fig5_mask_filter", profile, tmp_path)
    configs = fedcsd.fig5_mask_filter(params)
    assert [(c.dataset, c.beta) for c in configs] == [(d, b) for d, values in params["betas"].items() for b in values]
    assert all(c.method == "fedcsd" and c.method_args == fedcsd.csd_args(params) for c in configs)
    for cfg in configs:
        first = next(c for c in configs if c.dataset == cfg.dataset)
        assert differing_fields(first, cfg) <= {"beta"}
        assert (cfg.model, cfg.dataset_options) == (params["models"][cfg.dataset],
                                                     params["dataset_options"].get(cfg.dataset, {}))
    if profile == "paper":  # Table I's betas: the caption gives none
        assert params["betas"] == {"cifar100": [0.01, 0.5, 5.0], "femnist": [0.01, 0.05, 0.5]}


@pytest.mark.parametrize("profile", PROFILES)
def test_fig7_compares_fedavg_and_fedcsd_on_the_same_data_and_budget(profile, tmp_path):
    params = notebook_parameters("fedcsd_fig7_tsne", profile, tmp_path)
    fedavg, fedcsd_run = fedcsd.fig7_tsne(params)
    assert (fedavg.method, fedcsd_run.method) == ("fedavg", "fedcsd")
    assert differing_fields(fedavg, fedcsd_run) == {"method", "method_args"}
    assert fedcsd_run.method_args == {"mu": params["mu"], "tau": params["tau"], "alpha": params["alpha"]}
    if profile != "smoke":  # the profiles say: Fig. 5's FedCSD run at Dir(0.5), stored once
        fig5 = fedcsd.fig5_mask_filter(notebook_parameters("fedcsd_fig5_mask_filter", profile, tmp_path))
        assert fedcsd_run.hash() in {c.hash() for c in fig5}
