"""The paper profiles declare what the papers and their authors' code ran.

Each test reads the runs a table notebook *declares* under its paper profile, as
``tools/reference_runs.py`` and ``reproduce.sh --plan`` do: ``fedlib.paper.plan.declared_configs``
calls the notebook's grid function (``fedlib.paper.grids``) with the profile's parameters, training
nothing. Figure notebooks have no grid; their paper parameters are read from the parameters cell
and the profile instead. The last tests pin the config hashes of the
MNIST and digits runs, which full-scale stored runs are keyed by.
"""

import ast
import functools
import hashlib
import json
from pathlib import Path

import pytest

from fedlib.core.config import RunConfig
from fedlib.paper.plan import declared_configs
from fedlib.paper.reproduce import build_overrides, load_profiles

ROOT = Path(__file__).resolve().parents[3]
FEDVLS_TABLES = ("fedvls_table1_4_dirichlet", "fedvls_table2_quantity", "fedvls_table3_backbones",
                 "fedvls_table5_6_7_ablation")
FEDLMD_TABLES = ("fedlmd_table1_2_kd_variants", "fedlmd_table3_partitions", "fedlmd_table4_architectures",
                 "fedlmd_table5_combinations")
FEDLMD_FIGURES = ("fedlmd_fig2_prediction_distribution", "fedlmd_fig4_kd_variants", "fedlmd_fig5_light_baselines",
                  "fedlmd_fig6_accuracy_rounds", "fedlmd_fig7_9_sensitivity")
# the FedVLS code's --auto_aug (default True): crop + flip + AutoAugment on CIFAR, AutoAugment alone on TinyImageNet
FEDVLS_AUGMENTATION = {"cifar10": "crop_flip_autoaugment", "cifar100": "crop_flip_autoaugment",
                       "tinyimagenet": "autoaugment"}
# FedCSD Sec. V: the loss weights the paper tuned for its baselines
FEDCSD_BASELINES = {"fedprox": {"mu": 0.001}, "moon": {"mu": 1.0, "projection_head": False},
                    "fedgkd": {"gamma": 0.01}, "fedproto": {"lam": 1.0}}


def profile_parameters(stem: str, profile: str = "paper", **overrides) -> dict:
    """The parameters reproduce.sh passes to ``stem`` under ``profile`` (folders as the runner sets them)."""
    folders = build_overrides(profile, "cpu", None, ROOT / "results", ROOT / "figures", ROOT / "tables")
    return {**load_profiles(ROOT / "profiles", stem)[profile], **folders, **overrides}


@functools.lru_cache(maxsize=None)
def declared(stem: str, profile: str = "paper", mnist_eval: str | None = None) -> tuple[RunConfig, ...]:
    overrides = {} if mnist_eval is None else {"mnist_eval": mnist_eval}
    configs = declared_configs(ROOT / "notebooks" / f"{stem}.ipynb", profile_parameters(stem, profile, **overrides))
    assert configs, f"{stem} declares no runs under its {profile} profile"
    return tuple(configs)


def figure_parameters(stem: str, profile: str = "paper") -> dict:
    """A figure notebook's parameters: the parameters cell's literals, then the profile's values."""
    cells = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))["cells"]
    source = "".join(next(c for c in cells if "parameters" in c["metadata"].get("tags", []))["source"])
    defaults = {node.targets[0].id: ast.literal_eval(node.value) for node in ast.parse(source).body}
    return {**defaults, **load_profiles(ROOT / "profiles", stem)[profile]}


def runs_of(configs, *methods: str, dataset: str | None = None) -> list[RunConfig]:
    return [c for c in configs if c.method in methods and (dataset is None or c.dataset == dataset)]


# ---------------------------------------------------------------------- FedVLS
@pytest.mark.parametrize("stem", FEDVLS_TABLES)
def test_fedvls_tables_train_every_method_with_the_authors_augmentation(stem):
    configs = declared(stem)
    for cfg in configs:
        assert cfg.augmentation == FEDVLS_AUGMENTATION.get(cfg.dataset, "auto"), (cfg.method, cfg.dataset)
    assert {c.dataset for c in configs} >= {"cifar10"}
    assert len({c.method for c in configs}) > 1, "baselines too, not only FedVLS"


def test_fedvls_paper_profiles_cover_tinyimagenet_and_grey_mnist():
    augmentations = {(c.dataset, c.augmentation) for stem in FEDVLS_TABLES for c in declared(stem)}
    assert ("tinyimagenet", "autoaugment") in augmentations and ("cifar100", "crop_flip_autoaugment") in augmentations
    assert ("mnist", "auto") in augmentations  # MNIST: no augmentation, and its stored hashes (below) hold


@pytest.mark.parametrize("stem", ["fedvls_fig1_fig4_local_update", "fedvls_fig2_confusion", "fedvls_fig5_convergence",
                                  "fedvls_fig6_sensitivity"])
def test_fedvls_figure_notebooks_train_cifar10_with_autoaugment(stem):
    parameters = figure_parameters(stem)
    assert parameters["dataset"] == "cifar10" and parameters["augmentation"] == "crop_flip_autoaugment"
    method_args = parameters.get("method_args", {})
    if "fedntd" in method_args:
        assert method_args["fedntd"]["teacher_mode"] == "train"
    assert "teacher_mode" not in method_args.get("fedlmd", {})  # FedLMD's code: eval


def test_fedvls_fig3_draws_the_quantity_partition_table2_trains_on():
    """For its seed, the figure's paper profile draws the CIFAR-10 quantity partition of Table 2's
    runs with that seed: the notebook's make_partition call against the engine's (on stand-in labels)."""
    import numpy as np
    import torch
    from types import SimpleNamespace

    from fedlib.datasets.partition import make_partition
    from fedlib.orchestration.dry_run import draw_partition

    figure = figure_parameters("fedvls_fig3_partitions")
    [trained] = [c for c in runs_of(declared("fedvls_table2_quantity"), "fedavg", dataset=figure["dataset"])
                 if c.seed == figure["seed"]]
    assert trained.max_train_samples is None and not trained.dataset_options, "both draw over the full training set"
    labels = np.repeat(np.arange(10), 500)
    drawn = make_partition("quantity", labels, figure["clients"], 10, figure["seed"],
                           classes_per_client=figure["classes_per_client"], quantity_split=figure["quantity_split"])
    stand_in = SimpleNamespace(train_y=torch.from_numpy(labels), num_classes=10, train_groups=None)
    expected = draw_partition(trained, stand_in)
    assert figure["quantity_split"] == "official" and drawn.params == expected.params
    assert all(np.array_equal(a, b) for a, b in zip(drawn.client_indices, expected.client_indices, strict=True))


@pytest.mark.parametrize("stem", FEDVLS_TABLES)
def test_fedvls_tables_run_the_fedntd_teacher_in_train_mode_and_fedlmds_in_eval_mode(stem):
    # the FedVLS code's FedNTD client copies the train-mode global model; that repository has no
    # FedLMD client, and FedLMD's own code distils from an eval-mode copy
    expected = {"fedntd": "train", "fedlmd": "eval"}
    for cfg in runs_of(declared(stem), "fedntd", "fedlmd"):
        assert cfg.resolved_method_args()["teacher_mode"] == expected[cfg.method], (cfg.method, cfg.dataset)
        assert cfg.resolved_method_args()["beta"] == 0.1  # the FedVLS appendix


def test_fedvls_table1_runs_fedntd_and_fedlmd_on_every_dataset():
    configs = declared("fedvls_table1_4_dirichlet")
    for method in ("fedntd", "fedlmd"):
        datasets = {c.dataset for c in runs_of(configs, method)}
        assert datasets == {"mnist", "cifar10", "cifar100", "tinyimagenet"}, method


@pytest.mark.parametrize("stem", FEDLMD_TABLES)
def test_fedlmd_tables_keep_the_fedlmd_codes_eval_mode_teacher(stem):
    for cfg in runs_of(declared(stem), "fedntd", "fedlmd", "fedlmd_tf"):
        assert cfg.resolved_method_args()["teacher_mode"] == "eval"


# ---------------------------------------------------------------------- FedLMD
def test_fedlmd_cinic10_runs_have_no_cutout():
    configs = declared("fedlmd_table3_partitions")
    cinic = [c for c in configs if c.dataset == "cinic10"]
    assert cinic and all(c.augmentation == "reflect_crop_flip" for c in cinic)
    others = {c.augmentation for c in configs if c.dataset != "cinic10"}
    assert others == {"crop_flip_cutout"}  # MNIST, CIFAR-10, CIFAR-100: the code's crop + flip + Cutout(16)


@pytest.mark.parametrize("stem", FEDLMD_TABLES + FEDLMD_FIGURES)
def test_fedlmd_paper_profiles_keep_the_codes_ten_samples_per_client_except_at_alpha_0_05(stem):
    # the authors' code redraws until every client holds >= 10; Dir(0.05) over 100 clients almost never does
    dirichlet = [c for c in declared(stem) if c.partition == "dirichlet"]
    assert dirichlet and {c.clients for c in dirichlet} == {100}
    for cfg in dirichlet:
        assert cfg.min_client_size == (2 if cfg.beta == 0.05 else 10), (cfg.dataset, cfg.beta)


# ---------------------------------------------------------------------- FedCSD
def test_fedcsd_femnist_is_ten_digits_on_moons_simple_cnn():
    femnist = [c for c in declared("fedcsd_table1_3_4_label_skew") if c.dataset == "femnist"]
    assert len({c.method for c in femnist}) == 8 and {c.beta for c in femnist} == {0.01, 0.05, 0.5}
    for cfg in femnist:
        assert cfg.dataset_options == {"digits_only": True} and cfg.model == "simple_cnn", cfg.method


FEDCSD_DEFAULTS = {"mu": 0.001, "tau": 10.0, "alpha": 0.9}


def test_fedcsd_figures_train_the_papers_datasets_on_table_1s_networks():
    # Fig. 1 and Figs. 3-4 "on CIFAR-100", Fig. 5 "on CIFAR-100 and FEMNIST", Fig. 7 "on FEMNIST"
    expected = {"fedcsd_fig1_drift": {"cifar100"}, "fedcsd_fig3_fig4_sensitivity": {"cifar100"},
                "fedcsd_fig5_mask_filter": {"cifar100", "femnist"}, "fedcsd_fig7_tsne": {"femnist"}}
    networks = {"cifar100": ("resnet50", {}), "femnist": ("simple_cnn", {"digits_only": True})}
    for stem, datasets in expected.items():
        configs = declared(stem)
        assert {c.dataset for c in configs} == datasets, stem
        for cfg in configs:
            assert (cfg.model, cfg.dataset_options) == networks[cfg.dataset], (stem, cfg.dataset)


def test_fedcsd_figure_runs_are_table_1_runs_where_the_settings_coincide():
    table1 = declared("fedcsd_table1_3_4_label_skew")
    seed0 = {c.hash() for c in table1 if c.method == "fedcsd" and c.seed == 0 and c.method_args == FEDCSD_DEFAULTS}
    assert {c.hash() for c in declared("fedcsd_fig5_mask_filter")} == seed0, "Table I's seed-0 FedCSD runs"
    hashes = {c.hash() for c in table1}
    for stem in ("fedcsd_fig1_drift", "fedcsd_fig7_tsne"):
        assert {c.hash() for c in declared(stem)} <= hashes, stem
    sweeps = declared("fedcsd_fig3_fig4_sensitivity")
    at_defaults = {c.hash() for c in sweeps if c.method == "fedavg" or c.method_args == FEDCSD_DEFAULTS}
    assert len(at_defaults) == 6 and at_defaults <= hashes, "FedAvg and the defaults, 3 seeds each"


def fedcsd_office_configs(tmp_path) -> list[RunConfig]:
    """Table II's paper runs, with empty domain folders standing in for Office-Caltech-10."""
    for domain in ("amazon", "caltech", "dslr", "webcam"):
        (tmp_path / "office_caltech10" / domain).mkdir(parents=True)
    stem = "fedcsd_table2_office_caltech"
    return declared_configs(ROOT / "notebooks" / f"{stem}.ipynb",
                            profile_parameters(stem, data_dir=str(tmp_path)))


def test_fedcsd_baselines_carry_the_papers_tuned_weights(tmp_path):
    tables = {"label skew": declared("fedcsd_table1_3_4_label_skew"), "office": fedcsd_office_configs(tmp_path)}
    for table, configs in tables.items():
        for method, expected in FEDCSD_BASELINES.items():
            runs = runs_of(configs, method)
            assert runs, (table, method)
            for cfg in runs:
                resolved = cfg.resolved_method_args()
                assert {k: resolved[k] for k in expected} == expected, (table, cfg.method)


# ---------------------------------------------------------------------- stored hashes
# fedvls_table1_4_dirichlet, paper profile, MNIST (real test set), seed 0: (method, beta) -> hash.
# Full-scale runs are stored under these keys (reference_results/); FedNTD and FedLMD left the
# list when their teachers moved to train mode.
MNIST_SEED0_HASHES = {
    ("fedavg", 0.05): "5823eac35622", ("fedavg", 0.1): "26c1424783b7", ("fedavg", 0.5): "5c9ec1f14fe9",
    ("fedconcat", 0.05): "28187ddbf1d0", ("fedconcat", 0.1): "de4f150bdc00", ("fedconcat", 0.5): "5ea705c33833",
    ("fedexp", 0.05): "07841f0bc6d0", ("fedexp", 0.1): "6e3f7e44420a", ("fedexp", 0.5): "2769d12b42e8",
    ("fedgf", 0.05): "e2d398c68e6c", ("fedgf", 0.1): "345aa8385820", ("fedgf", 0.5): "e8f6b5fb0e95",
    ("fedlc", 0.05): "1868088f01e6", ("fedlc", 0.1): "1fd125f3289f", ("fedlc", 0.5): "220f6149b487",
    ("fedmr", 0.05): "fd05ab0d089f", ("fedmr", 0.1): "d812f7240c07", ("fedmr", 0.5): "b984742abbeb",
    ("fedprox", 0.05): "fb221a81ec39", ("fedprox", 0.1): "277f86404e71", ("fedprox", 0.5): "88a23d8b0eeb",
    ("fedrs", 0.05): "0488ef850178", ("fedrs", 0.1): "7f4adee7228c", ("fedrs", 0.5): "083fd2adb11f",
    ("fedsam", 0.05): "d0af3e14a3dd", ("fedsam", 0.1): "69728292bad5", ("fedsam", 0.5): "434a45a6b41f",
    ("fedvls", 0.05): "af111535ac93", ("fedvls", 0.1): "76934f9a6828", ("fedvls", 0.5): "c3b28282e61d",
    ("moon", 0.05): "55da224c7f09", ("moon", 0.1): "08a85a5d0769", ("moon", 0.5): "fa235812cf1f",
}
# stored runs of the authors' MNIST data (mnist_eval="pooled_75_25_train_eval"), seed 0, beta 0.05
POOLED_TRAIN_EVAL_HASHES = {"fedavg": "3b467bc06ec3", "fedvls": "02969cf75244"}
# a digest of every MNIST / digits hash the FedVLS tables declare (FedNTD and FedLMD aside), per
# notebook, profile and MNIST split (see grid_digest); computed from the notebooks before AutoAugment
# and the train-mode teachers entered the paper profiles
GRID_DIGESTS = {
    ("fedvls_table1_4_dirichlet", "paper", "test"): "b08eb12a6dd0",
    ("fedvls_table1_4_dirichlet", "paper", "pooled_75_25"): "1d3a8176cb5e",
    ("fedvls_table1_4_dirichlet", "paper", "pooled_75_25_train_eval"): "0fec3c687942",
    ("fedvls_table1_4_dirichlet", "quick", "test"): "bc9607ecc9ec",
    ("fedvls_table1_4_dirichlet", "smoke", "test"): "7b23b9aceb66",
    ("fedvls_table2_quantity", "smoke", None): "8ec6d2e60006",
    ("fedvls_table3_backbones", "smoke", None): "dd180b9e34ae",
    ("fedvls_table5_6_7_ablation", "smoke", None): "ce92432710d8",
}


def grid_digest(configs) -> str:
    """12 hex digits over the sorted hashes of the MNIST and digits runs other than FedNTD's and FedLMD's."""
    hashes = sorted(c.hash() for c in configs
                    if c.dataset in ("mnist", "digits") and c.method not in ("fedntd", "fedlmd"))
    assert hashes
    return hashlib.sha256(" ".join(hashes).encode()).hexdigest()[:12]


def test_mnist_runs_keep_their_stored_hashes():
    configs = declared("fedvls_table1_4_dirichlet")
    got = {(c.method, c.beta): c.hash() for c in configs if c.dataset == "mnist" and c.seed == 0
           and c.method not in ("fedntd", "fedlmd")}
    assert got == MNIST_SEED0_HASHES
    pooled = declared("fedvls_table1_4_dirichlet", mnist_eval="pooled_75_25_train_eval")
    got = {c.method: c.hash() for c in pooled
           if c.dataset == "mnist" and c.seed == 0 and c.beta == 0.05 and c.method in POOLED_TRAIN_EVAL_HASHES}
    assert got == POOLED_TRAIN_EVAL_HASHES


@pytest.mark.parametrize("stem, profile, mnist_eval", sorted(GRID_DIGESTS, key=str))
def test_every_mnist_and_digits_hash_of_the_fedvls_tables_holds(stem, profile, mnist_eval):
    assert grid_digest(declared(stem, profile, mnist_eval)) == GRID_DIGESTS[stem, profile, mnist_eval]


PKD_PRINTED_GROUPS = {"mnist": [[3, 5, 8], [4, 7, 9]], "fashion_mnist": [[0, 6], [2, 4, 6]], "cifar10": [[2, 3, 4, 5]]}


@pytest.mark.parametrize("stem", ["pkd_table1_4_class_accuracy", "pkd_table6_7_baselines", "pkd_table9_10_cost"])
def test_pkd_table_runs_pin_the_groups_the_paper_prints(stem):
    runs = runs_of(declared(stem), "pkd")
    assert runs and all(c.method_args["groups"] == PKD_PRINTED_GROUPS[c.dataset] for c in runs)
    assert all("groups" not in c.method_args for c in runs_of(declared(stem, "quick"), "pkd")), \
        "the quick profile discovers its groups"


def test_the_pkd_figure_pins_the_same_groups_as_the_tables_it_shares_runs_with():
    parameters = figure_parameters("pkd_fig3_6_9_class_accuracy_rounds")
    assert parameters["pkd_groups"] == PKD_PRINTED_GROUPS, "every dataset's, so -p dataset mnist draws Table 1's runs"
    assert figure_parameters("pkd_fig3_6_9_class_accuracy_rounds", "quick")["pkd_groups"] == {}
