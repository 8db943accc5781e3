"""No number of a diverged or missing run reaches a table: derived frames, seed means, exports."""

import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from fedlib.commands import export
from fedlib.commands.listing import StoredRun
from fedlib.core.config import RunConfig
from fedlib.engine.engine import RunResult
from fedlib.orchestration import experiments
from fedlib.reporting import tables

BASE = RunConfig(dataset="digits", model="mlp", clients=2, rounds=4, device="cpu")
SHORT_PKD = {"warmup_rounds": 2, "expert_rounds": 1}  # a PKD run of BASE's 4 rounds that reaches its KD stage
CELL = ("digits", "partition=dirichlet;beta=0.5")


def finished(cfg: RunConfig, curve: list[float], diverged: bool = False, **per_round) -> RunResult:
    """A finished run without training; ``per_round`` adds a metric list to the rounds."""
    rounds = [{"round": i, "accuracy": a, "clients": [0, 1], "local_samples": 10,
               "class_accuracy": [a / 2, a]} for i, a in enumerate(curve)]
    for key, values in per_round.items():
        for record, value in zip(rounds, values):
            record[key] = value
    summary = {"final_accuracy": curve[-1], "best_accuracy": max(curve), "best_round": curve.index(max(curve)),
               "class_accuracy": [curve[-1] / 2, curve[-1]], "class_names": ["a", "b"], "rounds_run": len(curve),
               "partition_counts": [[3, 2], [5, 0]], "diverged": diverged}
    return RunResult(cfg, rounds, summary)


def seeds(method: str, curves: list[list[float]], diverged=(), missing=()) -> list[RunResult]:
    """One run per curve (seed = position); seeds in ``missing`` are render-only placeholders."""
    configs = [BASE.replace(method=method, seed=seed) for seed in range(len(curves))]
    return [RunResult.not_run(cfg) if cfg.seed in missing else finished(cfg, curve, cfg.seed in diverged)
            for cfg, curve in zip(configs, curves)]


def one_paper_cell(method: str, value: float, setting: str = CELL[1]) -> pd.DataFrame:
    return pd.DataFrame({"method": [method], "dataset": ["digits"], "setting": [setting], "value": [value],
                         "std": [float("nan")]})


# ---------------------------------------------------------------------- seeds of a cell
def test_a_cell_with_one_diverged_seed_has_no_mean_and_reads_diverged_beside_the_paper():
    frame = tables.table_frame(seeds("fedavg", [[0.5, 0.6], [0.5, 0.7], [0.5, 0.8]], diverged=(1,)))
    mean, std, text = tables.paper_layout(frame, "best_accuracy")
    assert math.isnan(mean.loc["fedavg", CELL]) and math.isnan(std.loc["fedavg", CELL])
    assert text.loc["fedavg", CELL] == tables.DIVERGED
    comparison = tables.compare_with_paper(mean, std, one_paper_cell("fedavg", 70.0))
    row = comparison.iloc[0]
    assert math.isnan(row["ours"]) and math.isnan(row["difference"])
    assert (row["seeds_run"], row["seeds_declared"], row["seeds_diverged"]) == (3, 3, 1)
    assert tables.side_by_side(comparison).loc["fedavg", CELL] == "diverged / 70.00"


def test_a_cell_with_seeds_not_run_shows_the_stored_mean_and_how_many_seeds():
    frame = tables.table_frame(seeds("fedavg", [[0.5, 0.9775]] * 3, missing=(1, 2)))
    mean, std, text = tables.paper_layout(frame, "best_accuracy")
    assert mean.loc["fedavg", CELL] == pytest.approx(97.75)
    assert text.loc["fedavg", CELL] == "**97.75** (1 of 3 seeds)"
    comparison = tables.compare_with_paper(mean, std, one_paper_cell("fedavg", 98.0))
    assert (comparison.at[0, "seeds_run"], comparison.at[0, "seeds_declared"]) == (1, 3)
    assert tables.side_by_side(comparison).loc["fedavg", CELL] == "97.75 (1 of 3 seeds) / 98.00 (-0.25)"


def test_complete_cells_read_as_before_and_no_seed_runs_reads_not_run_beside_the_paper():
    frame = tables.table_frame(seeds("fedavg", [[0.6], [0.7]]) + seeds("fedvls", [[0.8], [0.9]], missing=(0, 1)))
    mean, std, text = tables.paper_layout(frame, "best_accuracy")
    assert text.loc["fedavg", CELL] == "**65.00 ± 5.00**" and text.loc["fedvls", CELL] == tables.NOT_RUN
    paper = pd.concat([one_paper_cell("fedavg", 60.0), one_paper_cell("fedvls", 75.0)])
    side = tables.side_by_side(tables.compare_with_paper(mean, std, paper))
    assert side.loc["fedavg", CELL] == "65.00 / 60.00 (+5.00)" and side.loc["fedvls", CELL] == "not run / 75.00"


def test_layout_holes_go_but_a_diverged_cell_and_a_paper_only_cell_stay():
    frame = tables.table_frame(seeds("fedavg", [[0.6]]) + seeds("fedvls", [[0.8]], diverged=(0,)))
    frame.loc[frame["label"] == "fedavg", "setting"] = "partition=shards"  # two settings: two holes in the layout
    mean, std, _ = tables.paper_layout(frame, "best_accuracy")
    paper = one_paper_cell("fedprox", 50.0)
    comparison = tables.compare_with_paper(mean, std, paper, include_paper_only=True)
    assert len(comparison) == 5  # 2 methods x 2 settings + the paper-only row
    kept = tables.without_layout_holes(comparison)
    assert sorted(zip(kept["method"], kept["setting"])) == sorted([
        ("fedavg", "partition=shards"), ("fedvls", CELL[1]), ("fedprox", CELL[1])])
    assert list(kept.index) == [0, 1, 2]


def test_bold_skips_a_diverged_cell_and_a_partly_run_cell_competes_with_its_note():
    frame = tables.table_frame(seeds("fedavg", [[0.9], [0.95]], diverged=(0,)) + seeds("fedvls", [[0.7], [0.8]])
                               + seeds("fedprox", [[0.85], [0.1]], missing=(1,)))
    _, _, text = tables.paper_layout(frame, "best_accuracy")
    assert text[CELL].to_dict() == {"fedavg": "diverged", "fedvls": "75.00 ± 5.00",
                                    "fedprox": "**85.00** (1 of 2 seeds)"}


def test_mean_std_without_flag_columns_is_unchanged():
    frame = pd.DataFrame({"m": ["a", "a", "b"], "c": [1, 1, 1], "v": [1.0, float("nan"), 5.0]})
    mean, std = experiments.mean_std(frame, "m", "c", "v")
    assert mean.loc["a", 1] == 1.0 and math.isnan(std.loc["a", 1])  # a NaN value without a flag: skipped as before
    assert experiments.seed_counts(mean, "a", 1) == (2, 2, 0)


# ---------------------------------------------------------------------- derived frames
def test_best_within_rounds_gives_a_diverged_run_no_best_at_any_budget():
    frame = tables.best_within_rounds(seeds("fedavg", [[0.1, 0.5, 0.9], [0.2, 0.6, float("nan")]], diverged=(1,)),
                                      [2, 3])
    diverged = frame[frame["seed"] == 1]
    assert diverged["best_accuracy"].isna().all() and diverged["diverged"].all()
    assert frame[frame["seed"] == 0]["best_accuracy"].tolist() == pytest.approx([50.0, 90.0])
    mean, std, _ = tables.paper_layout(frame, "best_accuracy")
    assert mean.isna().all().all()  # the other seed's best is no cell mean


def test_group_accuracy_frame_masks_diverged_runs_and_names_a_missing_runs_groups(monkeypatch):
    monkeypatch.setattr(tables, "load_run_dataset", lambda cfg: SimpleNamespace(group_names=["amazon", "dslr"]))
    stored = finished(BASE, [0.2, 0.5], group_accuracy=[[0.1, 0.3], [0.4, 0.6]])
    broken = finished(BASE.replace(method="fedprox"), [0.2, 0.5], diverged=True,
                      group_accuracy=[[0.1, 0.3], [0.4, 0.6]])
    missing = RunResult.not_run(BASE.replace(method="fedcsd"))
    frame = tables.group_accuracy_frame([stored, broken, missing], at="best")
    assert {"diverged", "not_run"} <= set(frame.columns)
    assert frame[frame["label"] != "fedavg"]["accuracy"].isna().all()
    _, _, text = tables.paper_layout(frame, "accuracy")
    assert set(text.loc["fedprox"]) == {tables.DIVERGED} and set(text.loc["fedcsd"]) == {tables.NOT_RUN}
    assert len(text.columns) == 3  # amazon, dslr, average


def test_a_diverged_fedavg_sets_no_speedup_target():
    fedavg = finished(BASE, [0.2, 0.4, 0.9], diverged=True)
    fast = finished(BASE.replace(method="fedntd"), [0.3, 0.6, 0.7])
    other_seed = [finished(BASE.replace(seed=1), [0.2, 0.6]),
                  finished(BASE.replace(method="fedntd", seed=1), [0.6, 0.7])]
    frame = tables.speedup_frame([fedavg, fast, *other_seed])
    first = frame[frame["seed"] == 0].set_index("label")
    assert first["speedup"].isna().all() and first["diverged"].all()
    assert frame[frame["seed"] == 1].set_index("label").at["fedntd", "speedup"] == 2.0
    _, _, text = tables.paper_layout(frame, "speedup")
    assert set(text.iloc[:, 0]) == {tables.DIVERGED}


def test_costs_of_diverged_and_missing_runs_are_masked_and_do_not_crash():
    stored = finished(BASE, [0.3, 0.8])
    broken = finished(BASE.replace(method="focal"), [0.3, 0.8], diverged=True)
    missing = RunResult.not_run(BASE.replace(method="pkd", method_args=SHORT_PKD))
    assert tables.round_cost_units(missing).empty
    frame = tables.cost_frame([stored, broken, missing], [10, 30])
    assert frame.set_index("label")["value"].isna().groupby(level=0).all().to_dict() == \
        {"fedavg": False, "focal": True, "pkd": True}
    _, _, text = tables.paper_layout(frame, "value", mark_best=False)
    assert set(text.loc["focal"]) == {tables.DIVERGED} and set(text.loc["pkd"]) == {tables.NOT_RUN}
    assert text.loc["fedavg"].tolist() == ["1.00", "2.00"]  # min class accuracy 15 %, then 40 %; 1 U a round


def test_the_pkd_cost_tables_combined_frame_keeps_the_flags():
    broken = finished(BASE.replace(method="focal"), [0.3, 0.8], diverged=True)
    costs = tables.cost_frame([broken], [10])
    final = tables.class_metric_frame(tables.table_frame([broken]))
    combined = pd.concat([costs, final[costs.columns.intersection(final.columns)]], ignore_index=True)
    hand_added = pd.DataFrame([{"label": "feature_augmentation", "dataset": "digits", "setting": "s",
                                "value": math.nan}])
    _, _, text = tables.paper_layout(pd.concat([combined, hand_added], ignore_index=True), "value", mark_best=False)
    assert set(text.loc["focal"].drop(("digits", "s"))) == {tables.DIVERGED}
    assert text.loc["feature_augmentation", ("digits", "s")] == "-"  # a row without flags is not flagged


# ---------------------------------------------------------------------- worst class
def test_a_diverged_runs_accuracies_read_nan_wherever_a_notebook_takes_them():
    """Notebooks read RunResult's accuracies directly (class-gap bars, spreads): a diverged run's
    constant prediction (one class 100 %, the rest 0) must never reach them as numbers."""
    from fedlib.measures import metrics

    [ok, broken] = seeds("fedavg", [[0.5, 0.9], [0.5, 0.9]], diverged=(1,))
    assert not ok.diverged and ok.final_accuracy == 0.9 and ok.class_accuracy == [0.45, 0.9]
    assert broken.diverged
    assert math.isnan(broken.final_accuracy) and math.isnan(broken.best_accuracy)
    assert len(broken.class_accuracy) == 2 and all(math.isnan(a) for a in broken.class_accuracy)
    assert broken.summary["final_accuracy"] == 0.9  # what the run measured stays in the store's summary
    spread = metrics.accuracy_spread(broken.class_accuracy)
    assert math.isnan(spread["spread"]) and spread["worst_class"] is None
    assert metrics.accuracy_spread([0.2, float("nan"), 0.9])["worst_class"] == 0


def test_a_diverged_run_has_no_worst_class_and_its_cell_reads_diverged():
    frame = tables.table_frame(seeds("fedavg", [[0.5, 0.9]] * 3, diverged=(2,)))
    assert frame["worst_class"].tolist() == ["a", "a", tables.DIVERGED]
    assert tables.most_frequent(frame["worst_class"]) == tables.DIVERGED
    assert tables.most_frequent(frame["worst_class"].iloc[:2]) == "a"


# ---------------------------------------------------------------------- TensorBoard export
@dataclass
class FakeRecord:
    folder: Path
    rounds: list = field(default_factory=list)

    def read_rounds(self):
        return self.rounds

    def finished_at(self):
        return 1.0e9

    def last_modified(self):
        return 1.0e9

    def read_meta(self):
        return {}


def exported(run: StoredRun, out: Path) -> tuple[dict, dict]:
    """(scalar tag -> values, hparam name -> value) of the exported run."""
    from tensorboardX.proto import event_pb2, plugin_hparams_pb2

    found, hparams = {}, {}
    for path in sorted((out / export.run_path(run)).glob("events.out.tfevents.*")):
        data, offset = path.read_bytes(), 0
        while offset < len(data):
            (length,) = struct.unpack_from("<Q", data, offset)
            event = event_pb2.Event.FromString(data[offset + 12: offset + 12 + length])
            offset += 12 + length + 4
            for value in event.summary.value:
                if value.WhichOneof("value") == "simple_value":
                    found.setdefault(value.tag, []).append(value.simple_value)
                elif value.tag == "_hparams_/session_start_info":
                    info = plugin_hparams_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
                    hparams = dict(info.session_start_info.hparams)
    return found, hparams


@pytest.mark.parametrize("diverged", [False, True])
def test_export_flags_a_diverged_run_and_gives_it_no_accuracy_metric(tmp_path, diverged):
    pytest.importorskip("tensorboardX")
    result = finished(BASE, [0.2, 0.5], diverged=diverged)
    summary = {**result.summary, "method_hparams": {}}
    run = StoredRun(FakeRecord(tmp_path / "store" / BASE.hash(), result.rounds), "done", BASE, summary, 2)
    export.export_tensorboard([run], tmp_path / "tb")
    scalars, hparams = exported(run, tmp_path / "tb")
    assert scalars[export.DIVERGED_TAG] == [float(diverged)] and hparams["diverged"].bool_value == diverged
    assert (export.FINAL_TAG in scalars) == (export.BEST_TAG in scalars) == (not diverged)
    assert ("accuracy/test" in scalars) == ("class_accuracy/00_a" in scalars) == (not diverged)
    if not diverged:
        assert scalars[export.FINAL_TAG] == [pytest.approx(50.0)]
