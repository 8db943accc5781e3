"""The notebooks' paper-vs-ours cells keep the seed counts of their cells (seeds run, declared,
diverged) and keep a diverged cell the paper has no number for.

Each test runs one notebook cell's own source on runs made up here (nothing trains, no store):
the objects the cell reads from earlier cells are given to it, ``report.show`` is a no-op.
"""

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from fedlib.core.config import RunConfig
from fedlib.engine.engine import RunResult
from fedlib.orchestration import experiments
from fedlib.reporting import tables

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
BASE = RunConfig(dataset="digits", model="mlp", clients=2, rounds=2, device="cpu")
REPORT = SimpleNamespace(show=lambda *args, **kwargs: None, describe_plan=lambda *args, **kwargs: None)


def cell_source(notebook: str, snippet: str) -> str:
    """The source of the one code cell of ``notebook`` that contains ``snippet``."""
    cells = json.loads((NOTEBOOKS / f"{notebook}.ipynb").read_text(encoding="utf-8"))["cells"]
    found = [c for c in cells if c["cell_type"] == "code" and snippet in "".join(c["source"])]
    assert len(found) == 1, f"{notebook}: {len(found)} code cells contain {snippet!r}"
    return "".join(found[0]["source"])


def run_cell(notebook: str, snippet: str, **names) -> dict:
    """Execute the cell holding ``snippet`` with ``names`` as its globals; the globals after it."""
    namespace = {"pd": pd, "tables": tables, "experiments": experiments, "report": REPORT, **names}
    exec(compile(cell_source(notebook, snippet), f"{notebook}.ipynb", "exec"), namespace)
    return namespace


def runs(cfg: RunConfig, bests: list[float], diverged=()) -> list[RunResult]:
    """One finished run per seed of ``cfg`` (a two-round curve rising to its best accuracy);
    the seeds in ``diverged`` diverged."""
    results = []
    for seed, best in enumerate(bests):
        curve = [best / 2, best]
        rounds = [{"round": i, "accuracy": a, "clients": [0, 1], "class_accuracy": [a / 2, a]}
                  for i, a in enumerate(curve)]
        summary = {"final_accuracy": best, "best_accuracy": best, "best_round": 1, "class_accuracy": [best / 2, best],
                   "class_names": ["a", "b"], "rounds_run": 2, "diverged": seed in diverged}
        results.append(RunResult(cfg.replace(seed=seed), rounds, summary))
    return results


SETTING = tables.setting_label(BASE)


def counts(comparison: pd.DataFrame, method: str, setting: str = SETTING) -> tuple:
    """(seeds run, declared, diverged) of the comparison row of ``method`` and ``setting``."""
    row = comparison[(comparison["method"] == method) & (comparison["setting"] == setting)]
    assert len(row) == 1, row
    return tuple(int(row.iloc[0][name]) for name in tables.SEED_COLUMNS)


def test_fedlmd_accuracy_and_speedup_cells_keep_their_seed_counts_through_the_concat():
    results = runs(BASE, [0.6, 0.7, 0.8]) + runs(BASE.replace(method="fedlmd"), [0.7, 0.8, 0.9], diverged=(2,))
    frame = tables.table_frame(results)
    mean, std, _ = tables.paper_layout(frame, "best_accuracy")
    speed_mean, speed_std, _ = tables.paper_layout(tables.speedup_frame(results), "speedup")
    comparison = run_cell("fedlmd_table3_partitions", "pd.concat([mean, speed_mean]", mean=mean, std=std,
                          speed_mean=speed_mean, speed_std=speed_std)["comparison"]
    assert counts(comparison, "fedavg") == (3, 3, 0) and counts(comparison, "fedlmd") == (3, 3, 1)
    assert counts(comparison, "fedlmd", f"{SETTING};metric=speedup") == (3, 3, 1)
    assert comparison.loc[comparison["method"] == "fedlmd", "ours"].isna().all()


def test_fedvls_seed_counts_follow_the_backbone_renamed_to_the_papers_column():
    results = runs(BASE.replace(method="fedvls"), [0.7, 0.8, 0.9], diverged=(1,)) \
        + runs(BASE.replace(method="fedvls", model="cnn2"), [0.5, 0.6, 0.7])
    frame = tables.table_frame(results)
    frame["backbone"] = frame["model"]
    paper3 = pd.DataFrame({"method": ["fedvls"], "dataset": ["digits"], "setting": [f"{SETTING};model=mobilenetv2"],
                           "value": [60.0], "std": [float("nan")]})  # the paper's backbone in its setting
    names = run_cell("fedvls_table3_backbones", "tables.compare_with_paper(", frame=frame, metric="best_accuracy",
                     methods=["fedvls"], paper_backbone={"cnn2": "mobilenetv2"},
                     tables=SimpleNamespace(**{**vars(tables), "paper_numbers": lambda *args: paper3.copy()}))
    comparison = names["comparison3"].set_index("backbone")
    assert tuple(comparison.loc["mobilenetv2", list(tables.SEED_COLUMNS)]) == (3, 3, 0)
    assert comparison.loc["mobilenetv2", "paper"] == 60.0
    assert tuple(comparison.loc["mlp", list(tables.SEED_COLUMNS)]) == (3, 3, 1)


def test_fedcsd_keeps_a_diverged_cell_the_paper_has_no_number_for():
    results = runs(BASE, [0.6, 0.7]) + runs(BASE.replace(method="fedcsd"), [0.7, 0.8], diverged=(0,))
    names = run_cell("fedcsd_table1_3_4_label_skew", "comparison1 = tables.without_layout_holes(",
                     compare_as={}, metric="best_accuracy", methods=["fedavg", "fedcsd"],
                     table1=[r.config for r in results], by_hash={r.config.hash(): r for r in results})
    comparison = names["comparison1"]  # the paper's Table I has no digits column
    assert set(comparison["method"]) == {"fedavg", "fedcsd"} and comparison["paper"].isna().all()
    assert counts(comparison, "fedcsd") == (2, 2, 1)


def test_pkd_table8_keeps_a_diverged_cell_the_paper_has_no_number_for():
    results = runs(BASE.replace(partition="balanced"), [0.6, 0.7], diverged=(1,))
    long = tables.class_metric_frame(tables.table_frame(results))
    comparison = run_cell("pkd_table8_cifar100", "tables.compare_with_paper(", configs=[BASE], long=long,
                          compare_as={}, row_order=["fedavg"])["comparison"]
    ours = comparison[comparison["dataset"] == "digits"]
    assert len(ours) == 3 and ours["ours"].isna().all()  # Max, Ave and Min: diverged, no paper number
    assert counts(ours, "fedavg", f"{tables.setting_label(BASE.replace(partition='balanced'))};metric=min") == (2, 2, 1)
