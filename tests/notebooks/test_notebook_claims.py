"""The notebooks' claim cells read every seed of the runs they compare: with several seeds a clear
lead holds and prints its interval, an overlap is undecided, a diverged seed gives no verdict.

Each test runs one notebook cell's own source on runs made up here (nothing trains, no store), as
``test_notebook_seed_counts`` does; the profiles shipped run one seed, so only this shows the cells'
verdicts at several.
"""

from fedlib.reporting import claims, plots, tables
from tests.notebooks.test_notebook_seed_counts import BASE, run_cell, runs


def light_baselines(bests: dict[str, list[float]], diverged: dict[str, tuple] | None = None) -> str:
    """What FedLMD Fig. 5's claim cell prints for runs of each method with these best accuracies."""
    diverged = diverged or {}
    results = [r for method, values in bests.items()
               for r in runs(BASE.replace(method=method), values, diverged=diverged.get(method, ()))]
    frame = tables.table_frame(results)
    mean, _, _ = tables.paper_layout(frame, "best_accuracy", row_order=list(bests))
    names = run_cell("fedlmd_fig5_light_baselines", "FedLMD-Tf is the best light method", claims=claims,
                     plots=plots, frame=frame, metric="best_accuracy", mean=mean, profile="test",
                     column_label={tables.setting_label(BASE): "the setting"})
    return names["verdicts"][0]


def test_a_lead_clear_of_every_seed_holds_and_prints_its_interval():
    verdict = light_baselines({"fedavg": [0.70, 0.71, 0.72], "fedrs": [0.60, 0.61, 0.62],
                               "fedlmd_tf": [0.80, 0.81, 0.82]})
    assert verdict.holds is True
    assert "against FedAvg: +10.00 points [" in verdict.numbers and verdict.numbers.endswith("3 seeds each: beats")


def test_an_overlapping_lead_is_undecided():
    verdict = light_baselines({"fedavg": [0.70, 0.75, 0.80], "fedlmd_tf": [0.72, 0.78, 0.79]})
    assert verdict.undecided and verdict.numbers.endswith("3 seeds each: undecided")


def test_a_diverged_seed_gives_no_verdict():
    verdict = light_baselines({"fedavg": [0.70, 0.71, 0.72], "fedlmd_tf": [0.80, 0.81, 0.82]},
                              diverged={"fedavg": (1,)})
    assert verdict.holds is None and not verdict.undecided and verdict.reason == claims.MISSING
