"""What each Try-it prompt shows (issue 44): the lesson profile's ``try_it`` list holds, per prompt, the
folded "what you should see" (``see``) and the figures in it that a stored run gives (``numbers``, as in a
lesson's ``outcome``: tests/notebooks/test_lesson_outcomes.py). The runs are the lesson's declared runs
with the prompt's edits passed over the profile, and they come from the committed store only
(``tools/lesson_store.py --only NOTEBOOK --try-it N`` builds them)."""

import functools
import sys
from pathlib import Path

import pytest
import yaml

from tests.notebooks.test_lesson_outcomes import LESSONS, declared_runs, number_in, numbers_unlike_the_runs

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tools.try_it import ASSIGNMENT, PROMPTS, SEE, cell_text  # noqa: E402

OUTCOMES = {(stem, number): entry for stem, section in LESSONS.items()
            for number, entry in enumerate(section.get("try_it") or [], 1) if entry}
WRITTEN = 111  # Try-it outcomes written: every prompt's (issue 44)
each_outcome = pytest.mark.parametrize("stem,number", sorted(OUTCOMES))


def edits(stem: str, number: int) -> dict:
    return {name: yaml.safe_load(value) for name, value in ASSIGNMENT.findall(PROMPTS[stem][0][number - 1])}


def test_outcomes_are_written_for_prompts_that_exist():
    assert len(OUTCOMES) >= WRITTEN, f"{len(OUTCOMES)} Try-it outcomes, {WRITTEN} were written: a try_it list went missing"
    unanswered = [f"{stem} {n}" for stem, (prompts, _) in PROMPTS.items() for n in range(1, len(prompts) + 1)
                  if (stem, n) not in OUTCOMES]
    assert not unanswered, f"Try-it prompts without a checked outcome: {', '.join(unanswered)}"
    silent = [f"{stem} {n}" for stem, (prompts, _) in PROMPTS.items() for n, prompt in enumerate(prompts, 1)
              if not ASSIGNMENT.findall(prompt)]
    assert not silent, f"Try-it prompts that set no parameter (a Try-it build cannot run them): {', '.join(silent)}"
    for (stem, number) in OUTCOMES:
        assert stem in PROMPTS and number <= len(PROMPTS[stem][0]), f"{stem}: try_it entry {number} has no prompt"


@each_outcome
def test_the_outcome_is_folded_under_its_prompt(stem, number):
    text = cell_text(stem)
    prompt_line = f"{number}. {PROMPTS[stem][0][number - 1]}"
    assert prompt_line in text
    after = text.split(prompt_line, 1)[1].splitlines()[1]
    assert SEE in after and " ".join(OUTCOMES[stem, number]["see"].split())[:40] in after


@each_outcome
def test_every_number_of_the_outcome_is_in_its_text_and_the_stored_runs(stem, number, tmp_path, render_only):
    entry = OUTCOMES[stem, number]
    numbers = entry.get("numbers") or []
    assert numbers, f"{stem} Try-it {number}: an outcome declares the figures a run gives, so that a test checks them"
    see = " ".join(entry["see"].split())
    for item in numbers:
        assert number_in(see, item["value"]), f"{stem} Try-it {number}: {item['value']} is not a figure of its text"
    drawn = [item for item in numbers if "partition" in item]  # a lesson that trains nothing: its partitions
    if drawn:
        wrong = partition_numbers_unlike(stem, drawn, edits(stem, number), tmp_path)
        assert not wrong, f"{stem} Try-it {number}: the outcome's numbers differ from the partitions drawn: " + "; ".join(wrong)
    updated = [item for item in numbers if "update" in item]  # a local-update lesson: its cached updates
    if updated:
        wrong = update_numbers_unlike(stem, updated, edits(stem, number), tmp_path)
        assert not wrong, f"{stem} Try-it {number}: the outcome's numbers differ from the stored local updates: " + "; ".join(wrong)
    drifted = [item for item in numbers if "drift" in item]  # FedCSD Fig. 1: its cached drift study
    if drifted:
        wrong = drift_numbers_unlike(stem, drifted, edits(stem, number), tmp_path)
        assert not wrong, f"{stem} Try-it {number}: the outcome's numbers differ from the stored drift study: " + "; ".join(wrong)
    embedded = [item for item in numbers if "tsne" in item]  # FedCSD Fig. 7: the panels' features, from committed models
    if embedded:
        wrong = tsne_numbers_unlike(stem, embedded, edits(stem, number), tmp_path)
        assert not wrong, f"{stem} Try-it {number}: the outcome differs from the committed models' features: " + "; ".join(wrong)
    discovered = [item for item in numbers if "discovery" in item]  # PKD Figs. 4-7: the weak-class discovery
    if discovered:
        wrong = discovery_numbers_unlike(stem, discovered, edits(stem, number), tmp_path)
        assert not wrong, f"{stem} Try-it {number}: the outcome differs from the discovery on the stored statistics: " + "; ".join(wrong)
    configs = declared_runs(stem, tmp_path, edits(stem, number))
    wrong = numbers_unlike_the_runs([item for item in numbers if not {"partition", "update", "drift", "discovery", "tsne"} & set(item)],
                                    configs, f"{stem} Try-it {number}")
    assert not wrong, f"{stem} Try-it {number}: the outcome's numbers differ from the committed runs: " + "; ".join(wrong)


def lesson_given(stem: str, prompt_edits: dict, item: dict, tmp_path: Path) -> dict:
    """The values a lesson's notebook runs with under a prompt's edits and an outcome entry's own ``params``
    (stores and output folders under ``tmp_path``), before the notebook's cell fills in the rest."""
    from fedlib.paper.reproduce import build_overrides
    from fedlib.reporting.notebook import load_profiles

    overrides = build_overrides("lesson", "cpu", None, tmp_path / "results", tmp_path / "f", tmp_path / "t")
    return {**load_profiles(ROOT / "profiles", stem)["lesson"], **overrides, **prompt_edits, **item.get("params", {})}


def lesson_parameters(stem: str, prompt_edits: dict, item: dict, tmp_path: Path) -> dict:
    """:func:`lesson_given`, resolved by the notebook's parameters cell."""
    from fedlib.paper.plan import notebook_parameters

    return notebook_parameters(ROOT / "notebooks" / f"{stem}.ipynb", lesson_given(stem, prompt_edits, item, tmp_path))


# ------------------------------------------------------------------ the partitions of a lesson that trains nothing
PARTITION_METRICS = {  # name -> per-client summary (vacant classes, size) -> value
    "vacant_mean": lambda vacant, size: float(vacant.mean()),
    "vacant_cells": lambda vacant, size: int(vacant.sum()),
    "vacant_min": lambda vacant, size: int(vacant.min()),
    "vacant_max": lambda vacant, size: int(vacant.max()),
    "size_min": lambda vacant, size: int(size.min()),
    "size_max": lambda vacant, size: int(size.max()),
}


def partition_numbers_unlike(stem: str, numbers: list[dict], prompt_edits: dict, tmp_path: Path) -> list[str]:
    """The numbers (value, metric, ``partition``: dirichlet or quantity, optional ``params`` over the prompt's
    edits) that the partition the notebook draws does not give; drawn from the training labels as the notebook
    draws them (fedvls_fig3_partitions)."""
    from fedlib.datasets.data import load_dataset
    from fedlib.datasets.partition import make_partition
    from fedlib.errors import FedlibError
    from tests.notebooks.test_lesson_outcomes import same_as_printed

    wrong = []
    for item in numbers:
        p = lesson_parameters(stem, prompt_edits, item, tmp_path)
        try:
            data = load_dataset(p["dataset"], data_dir=p["data_dir"], download=False)
        except FedlibError as error:
            pytest.skip(f"{p['dataset']} is not on disk: {error}")
        options = ({"beta": p["beta"]} if item["partition"] == "dirichlet" else
                   {"classes_per_client": p["classes_per_client"], "quantity_split": p["quantity_split"]})
        summary = make_partition(item["partition"], data.train_y.numpy(), p["clients"], data.num_classes, p["seed"],
                                 **options).summary()
        value = PARTITION_METRICS[item["metric"]](summary["vacant_classes"].map(len), summary["size"])
        if not same_as_printed(value, item["value"]):
            wrong.append(f"{item['value']} ({item['metric']} of the {item['partition']} partition"
                         f"{', ' + str(item['params']) if item.get('params') else ''}): drawn {value}")
    return wrong


# ------------------------------------------------------------------ the local updates of FedVLS Figs. 1, 2 and 4
def _role_mean(result, role: str, which: str) -> float:
    from fedlib.analysis.local_update import accuracy_by_role

    return 100 * accuracy_by_role(result)[role][which]


def _confusion_share(result, argument: str, shown: int) -> float:
    """``<role>:<own|majority>``: of the shown client's test samples of its ``role`` classes, the % its local model
    predicts as their own label, or as one of the client's majority classes (mean over the role's classes)."""
    role, target = argument.split(":")
    roles = result.roles(shown)
    assert roles[role], f"client {shown} has no {role} classes"
    confusion = result.local_confusion[shown]
    shares = [confusion[c, c] if target == "own" else confusion[c, roles["majority"]].sum() for c in roles[role]]
    return 100 * float(sum(shares) / len(shares))


UPDATE_METRICS = {  # name -> (LocalUpdateResult, argument, the client shown) -> value in %
    "role": lambda result, argument, _: _role_mean(result, *argument.split(":")),  # role@<role>:<global|local>
    "aggregated": lambda result, _, __: 100 * result.aggregated_accuracy,
    "global": lambda result, _, __: 100 * result.global_accuracy,
    "mean_local": lambda result, _, __: 100 * float(result.local_accuracy.mean()),
    "shown_local": lambda result, _, shown: 100 * float(result.local_accuracy[shown]),
    "shown_classes": lambda result, role, shown: len(result.roles(shown)[role]),  # shown_classes@<role>
    "confusion": _confusion_share,  # confusion@<role>:<own|majority>
    "shown_client": lambda result, _, shown: shown,
}


def _update_configs(stem: str, p: dict, global_cfg) -> dict:
    from fedlib.paper.grids import fedvls

    if stem == "fedvls_fig1_fig4_local_update":
        return fedvls.local_update_panels(p, global_cfg)
    return {"FedLC": fedvls.confusion_update(p, global_cfg)}


def update_numbers_unlike(stem: str, numbers: list[dict], prompt_edits: dict, tmp_path: Path) -> list[str]:
    """The numbers (value, metric, ``update``: the panel, optional ``params`` over the prompt's edits) that the
    committed local-update caches do not give. A cache the reference store lacks is an error: nothing trains."""
    from fedlib.analysis.local_update import cache_path, local_update, telling_client
    from fedlib.orchestration import experiments
    from fedlib.paper.grids import fedvls
    from tests.notebooks.test_lesson_outcomes import same_as_printed

    wrong = []
    for item in numbers:
        p = lesson_parameters(stem, prompt_edits, item, tmp_path)
        global_cfg = fedvls.local_update_global_model(p)
        [trained] = experiments.run_all([global_cfg], results_dir=p["results_dir"], progress=False, render_only=True)
        assert not trained.summary.get("not_run"), f"{stem}: the global model {global_cfg.hash()} is not committed"
        cfg = _update_configs(stem, p, global_cfg)[item["update"]]
        state = trained.global_state()
        path = cache_path(cfg, state, round_index=p["rounds"], results_dir=p["results_dir"])
        assert path.is_file(), f"{stem}: the {item['update']} local update is not committed ({path.name})"
        result = local_update(cfg, state, round_index=p["rounds"], results_dir=p["results_dir"])  # reads the file
        name, _, argument = item["metric"].partition("@")
        shown = telling_client(result.class_counts) if p.get("client", -1) < 0 else p["client"]  # as the notebooks
        value = UPDATE_METRICS[name](result, argument, shown)
        if not same_as_printed(value, item["value"]):
            wrong.append(f"{item['value']} ({item['metric']} of {item['update']}"
                         f"{', ' + str(item['params']) if item.get('params') else ''}): stored {value:.4f}")
    return wrong


# ------------------------------------------------------------------ FedCSD Fig. 1's drift study
def drift_numbers_unlike(stem: str, numbers: list[dict], prompt_edits: dict, tmp_path: Path) -> list[str]:
    """The numbers (value, metric ``<column>@<epoch>`` of :func:`fedlib.analysis.drift.drift_curves`, accuracies in
    %, ``drift``: the variant's label, optional ``params``) that the committed drift study does not give."""
    from fedlib.analysis import drift
    from fedlib.orchestration import experiments
    from fedlib.paper.grids import fedcsd
    from tests.notebooks.test_lesson_outcomes import same_as_printed

    wrong = []
    for item in numbers:
        p = lesson_parameters(stem, prompt_edits, item, tmp_path)
        [pretrained] = experiments.run_all(fedcsd.fig1_drift(p), results_dir=p["results_dir"], progress=False,
                                           render_only=True)
        assert not pretrained.summary.get("not_run"), f"{stem}: the pre-training run is not committed"
        variants = fedcsd.drift_variants(p)
        clients = list(range(pretrained.config.clients))
        path = drift.cache_path(pretrained, p["drift_epochs"], variants, clients, p["results_dir"])
        assert path.is_file(), f"{stem}: the drift study is not committed ({path.name})"
        curves = drift.drift_curves(drift.drift_study(pretrained, p["drift_epochs"], variants, results_dir=p["results_dir"],
                                                      progress=False))
        column, _, epoch = item["metric"].partition("@")
        value = float(curves.loc[(item["drift"], int(epoch)), column])
        value = 100 * value if column.endswith("accuracy") else value
        if not same_as_printed(value, item["value"]):
            wrong.append(f"{item['value']} ({item['metric']} of {item['drift']}"
                         f"{', ' + str(item['params']) if item.get('params') else ''}): stored {value:.4f}")
    return wrong


# ------------------------------------------------------------------ PKD's weak-class discovery (Figs. 4-7)
def _discovery(p: dict) -> dict:
    """The notebook's discovery on the committed class statistics of the warm-up run: the weak pairs and groups."""
    import torch

    from fedlib import store
    from fedlib.analysis import class_gap
    from fedlib.measures import weak_classes
    from fedlib.paper.grids import pkd

    warmup = pkd.fig4_5_7_runs(p)["warm-up"]
    path = store.analysis_cache(p["results_dir"], class_gap.ANALYSIS_FOLDER, f"{warmup.hash()}-class-statistics.json")
    assert path.is_file(), f"the warm-up run's class statistics are not committed ({path.name})"
    tracked = class_gap.track_class_statistics(warmup, results_dir=p["results_dir"])  # reads the file
    confusion, distance = (torch.as_tensor(tracked[key][-1]) for key in ("confusion", "feature_distance"))
    edges = weak_classes.weak_pairs(confusion, distance, p["confusion_ratio"], p["distance_quantile"])
    groups = weak_classes.discover_groups(confusion, distance, confusion_ratio=p["confusion_ratio"],
                                          distance_quantile=p["distance_quantile"], grouping=p["grouping"],
                                          max_groups=p["max_groups"] or None,
                                          class_accuracy=torch.as_tensor(tracked["class_accuracy"][-1]))
    return {"weak_pairs": int(edges.sum()) // 2, "group_count": len(groups), "groups": groups}


def discovery_numbers_unlike(stem: str, numbers: list[dict], prompt_edits: dict, tmp_path: Path) -> list[str]:
    """The numbers (``weak_pairs``, ``group_count``) and group lists (``groups``: 'A + B; C + D + E', class names in
    the discovered order) that the discovery on the committed class statistics does not give."""
    from fedlib.datasets.catalogue import dataset_info
    from tests.notebooks.test_lesson_outcomes import same_as_printed

    wrong = []
    for item in numbers:
        p = lesson_parameters(stem, prompt_edits, item, tmp_path)
        found = _discovery(p)
        if item["metric"] == "groups":
            names = dataset_info(p["dataset"]).classes
            value = "; ".join(" + ".join(names[c] for c in group) for group in found["groups"])
            same = value == item["value"]
        else:
            value = found[item["metric"]]
            same = same_as_printed(value, item["value"])
        if not same:
            wrong.append(f"{item['value']} ({item['metric']}"
                         f"{', ' + str(item['params']) if item.get('params') else ''}): discovered {value}")
    return wrong


# ------------------------------------------------------------------ FedCSD Fig. 7's panels
TSNE_PANELS = ("(a) global, FedAvg", "(b) global, FedCSD", "(c) local, CE only", "(d) local, full FedCSD loss")


@functools.lru_cache(maxsize=8)
def _tsne_panel(stem: str, given: str, panel: str, tmp: str) -> dict:
    """Test accuracy (%) and silhouette of one panel's test features, as the notebook computes them: the
    committed global models, or one local update of ``local_client`` from FedCSD's (nothing is trained but that
    local update); the silhouette over the t-SNE sample the notebook draws."""
    import numpy as np
    from sklearn.metrics import silhouette_score

    from fedlib.analysis import drift
    from fedlib.engine.engine import prepare
    from fedlib.errors import FedlibError
    from fedlib.measures import metrics
    from fedlib.orchestration import experiments
    from fedlib.paper.grids import fedcsd
    from fedlib.paper.plan import notebook_parameters

    p = notebook_parameters(ROOT / "notebooks" / f"{stem}.ipynb", yaml.safe_load(given))
    configs = fedcsd.fig7_tsne(p)
    fedavg_run, fedcsd_run = experiments.run_all(configs, results_dir=tmp, progress=False, render_only=True)
    assert not (fedavg_run.summary.get("not_run") or fedcsd_run.summary.get("not_run")), f"{stem}: runs not committed"
    try:
        server, _ = prepare(configs[1])
    except FedlibError as error:  # the panels are computed from the test images
        pytest.skip(f"{configs[1].dataset} is not on disk: {error}")
    data = server.data
    model = {0: lambda: fedavg_run.load_model(str(data.device)), 1: lambda: fedcsd_run.load_model(str(data.device)),
             2: lambda: drift.local_update(fedcsd_run, p["local_client"], method="fedavg"),
             3: lambda: drift.local_update(fedcsd_run, p["local_client"])}[TSNE_PANELS.index(panel)]()
    pred = metrics.predict(model, data.test_batches())
    indices = np.arange(len(pred.labels))  # the sample metrics.tsne_embedding draws
    if len(indices) > p["tsne_samples"]:
        indices = np.sort(np.random.default_rng(p["seed"]).choice(len(indices), size=p["tsne_samples"], replace=False))
    return {"accuracy": 100 * float((pred.predicted == pred.labels).mean()),
            "silhouette": float(silhouette_score(pred.features[indices], pred.labels[indices]))}


def tsne_numbers_unlike(stem: str, numbers: list[dict], prompt_edits: dict, tmp_path: Path) -> list[str]:
    """The numbers (``accuracy`` or ``silhouette`` of panel ``tsne``, optional ``params``) the panels do not give."""
    from tests.notebooks.test_lesson_outcomes import same_as_printed

    wrong = []
    for item in numbers:
        given = {k: (str(v) if isinstance(v, Path) else v) for k, v in lesson_given(stem, prompt_edits, item, tmp_path).items()}
        value = _tsne_panel(stem, yaml.safe_dump(given), item["tsne"], str(tmp_path / "results"))[item["metric"]]
        if not same_as_printed(value, item["value"]):
            wrong.append(f"{item['value']} ({item['metric']} of {item['tsne']}"
                         f"{', ' + str(item['params']) if item.get('params') else ''}): computed {value:.4f}")
    return wrong
