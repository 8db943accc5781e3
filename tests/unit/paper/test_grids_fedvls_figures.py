"""The grids of the FedVLS figure notebooks (fedlib.paper.grids.fedvls), under the notebooks' own profiles."""

import pytest

from fedlib.paper.grids import fedvls
from tests.helpers import declared, notebook_parameters

PROFILES = ["smoke", "quick", "paper"]


@pytest.mark.parametrize("profile", PROFILES)
def test_figs_1_2_4_train_one_fedavg_global_model_the_convergence_figure_shares(profile, tmp_path):
    [fig1] = declared("fedvls_fig1_fig4_local_update", profile, tmp_path)
    [fig2] = declared("fedvls_fig2_confusion", profile, tmp_path)
    assert fig1.hash() == fig2.hash(), "Figs. 1, 4 and 2 analyse the same stored global model"
    assert (fig1.method, fig1.partition, fig1.beta) == ("fedavg", "dirichlet", 0.05)
    if profile != "smoke":  # the profiles say: the FedAvg Dir(0.05) run of fedvls_fig5_convergence, stored once
        assert fig1.hash() in {c.hash() for c in declared("fedvls_fig5_convergence", profile, tmp_path)}
    if profile == "paper":
        assert (fig1.dataset, fig1.model, fig1.rounds, fig1.local_epochs) == ("cifar10", "mobilenetv2", 100, 10)


@pytest.mark.parametrize("profile", PROFILES)
def test_fig5_holds_one_run_per_beta_method_and_seed_with_fedvls_lambda(profile, tmp_path):
    params = notebook_parameters("fedvls_fig5_convergence", profile, tmp_path)
    configs = fedvls.fig5_convergence(params)
    cells = [(c.beta, c.method, c.seed) for c in configs]
    assert len(set(cells)) == len(cells) == len(params["betas"]) * len(params["methods"]) * len(params["seeds"])
    assert len({c.replace(beta=0.5, method="fedavg", seed=0, method_args={}).hash() for c in configs}) == 1, \
        "runs differ only in beta, method, seed and the method's arguments"
    assert all(c.method_args["lam"] == params["fedvls_lam"] for c in configs if c.method == "fedvls")
    if profile == "paper":
        assert {c.model for c in configs} == {"mobilenetv2"} and "fedlmd" in params["methods"]


@pytest.mark.parametrize("profile", PROFILES)
def test_fig6_sweeps_one_field_at_a_time_and_runs_the_default_point_once(profile, tmp_path):
    params = notebook_parameters("fedvls_fig6_sensitivity", profile, tmp_path)
    settings = fedvls.fig6_settings(params)
    default = {field: params[field] for field in fedvls.SENSITIVITY_AXES}
    for (field, value, method, seed), cfg in settings.items():
        assert {f: getattr(cfg, f) for f in default} == {**default, field: value}, "only the swept field moves"
        assert (cfg.method, cfg.seed) == (method, seed)
    per_row = {field: len(params[values]) * len(params["methods"]) * len(params["seeds"])
               for field, values in fedvls.SENSITIVITY_AXES.items()}
    assert len(settings) == sum(per_row.values())
    rows_with_default = sum(params[field] in params[values] for field, values in fedvls.SENSITIVITY_AXES.items())
    shared = (rows_with_default - 1) * len(params["methods"]) * len(params["seeds"]) if rows_with_default else 0
    assert len(fedvls.fig6_sensitivity(params)) == len(settings) - shared
    if profile == "paper":
        assert len(fedvls.fig6_sensitivity(params)) == 10 * 7 * 3, "4 R, 4 E, 4 N values, the default point once"
