"""fedlib.reporting.tables: the papers' settings and metrics, paper layout, paper-vs-ours comparison, costs."""

import math

import pandas as pd
import pytest

from fedlib.core.config import RunConfig
from fedlib.engine.engine import RunResult
from fedlib.errors import FedlibError
from fedlib.orchestration import timing
from fedlib.reporting import tables

BASE = RunConfig(dataset="digits", model="mlp", clients=2, rounds=4, device="cpu")
SHORT_PKD = {"warmup_rounds": 2, "expert_rounds": 1}  # a PKD run of BASE's 4 rounds that reaches its KD stage


def fake_result(cfg: RunConfig, curve: list[float], class_accuracy=(0.5, 1.0)) -> RunResult:
    """A finished run without training: per-round accuracies and a summary."""
    rounds = [{"round": i, "accuracy": a} for i, a in enumerate(curve)]
    summary = {"final_accuracy": curve[-1], "best_accuracy": max(curve), "best_round": curve.index(max(curve)),
               "class_accuracy": list(class_accuracy), "class_names": ["a", "b"][:len(class_accuracy)],
               "train_seconds": 8.0, "rounds_run": len(curve)}
    return RunResult(cfg, rounds, summary)


def test_setting_label_names_partitions_as_the_papers_do():
    assert tables.setting_label(BASE.replace(partition="dirichlet", beta=0.05)) == "partition=dirichlet;beta=0.05"
    assert tables.setting_label(BASE.replace(partition="shards", shards_per_client=3)) == "partition=shards;s=3"
    assert tables.setting_label(BASE.replace(partition="quantity", classes_per_client=2)) == "partition=quantity;s=2"
    assert tables.setting_label(BASE.replace(partition="iid")) == "partition=iid"


def test_metric_column_follows_each_papers_convention():
    assert tables.metric_column("fedlmd") == "best_accuracy"
    assert tables.metric_column("pkd", "metric=min") == "min_class_accuracy"
    assert tables.metric_column("pkd", "metric=ave") == "mean_class_accuracy"
    with pytest.raises(FedlibError, match="unknown paper"):
        tables.metric_column("fedxyz")
    with pytest.raises(FedlibError, match="max, ave, min"):
        tables.metric_column("pkd", "metric=median")


def test_best_within_rounds_cuts_the_stored_curve():
    result = fake_result(BASE, [0.1, 0.5, 0.3, 0.9])
    frame = tables.best_within_rounds([result], [2, 3, 4])
    assert frame["best_accuracy"].tolist() == pytest.approx([50.0, 50.0, 90.0])
    assert frame["setting"].iloc[0] == "partition=dirichlet;beta=0.5;round=2"
    with pytest.raises(FedlibError, match="exceeds"):
        tables.best_within_rounds([result], [5])


def test_best_within_rounds_marks_runs_no_store_holds_as_not_run():
    stored = fake_result(BASE, [0.1, 0.5, 0.3, 0.9])
    missing = RunResult.not_run(BASE.replace(method="fedvls"))
    frame = tables.best_within_rounds([stored, missing], [2, 4])
    _, _, text = tables.paper_layout(frame, "best_accuracy", row_order=["fedavg", "fedvls"])
    assert (text.loc["fedvls"] == tables.NOT_RUN).all()
    assert not text.loc["fedavg"].isin([tables.NOT_RUN]).any()


def layout_from_fake_runs():
    results = [fake_result(BASE.replace(method=m, beta=b, seed=s), [acc + s / 100])
               for m, acc in (("fedavg", 0.6), ("fedvls", 0.7)) for b in (0.1, 0.5) for s in (0, 1)]
    frame = tables.table_frame(results)
    return tables.paper_layout(frame, "best_accuracy", row_order=["fedvls", "fedavg"])


def test_paper_layout_means_over_seeds_and_marks_the_best():
    mean, std, text = layout_from_fake_runs()
    assert list(mean.index) == ["fedvls", "fedavg"]
    assert mean.loc["fedavg", ("digits", "partition=dirichlet;beta=0.1")] == pytest.approx(60.5)
    assert std.loc["fedavg", ("digits", "partition=dirichlet;beta=0.1")] == pytest.approx(0.5)
    assert text.loc["fedvls", ("digits", "partition=dirichlet;beta=0.5")] == "**70.50 ± 0.50**"
    assert text.loc["fedavg", ("digits", "partition=dirichlet;beta=0.5")] == "60.50 ± 0.50"


def test_paper_layout_without_std_shows_the_mean_alone_and_keeps_the_std_frame():
    frame = tables.table_frame([fake_result(BASE.replace(seed=s), [0.6 + s / 100]) for s in (0, 1)])
    mean, std, text = tables.paper_layout(frame, "best_accuracy", digits=1, mark_best=False, show_std=False)
    assert text.iloc[0, 0] == "60.5" and std.iloc[0, 0] == pytest.approx(0.5)


def test_compare_with_paper_matches_loose_spellings_and_subtracts():
    mean, std, _ = layout_from_fake_runs()
    paper = pd.DataFrame({"paper": "feded", "table": "1", "method": ["FedED", "FedAvg", "FedAvg"],
                          "dataset": ["Digits", "digits", "cifar10"],
                          "setting": ["beta=0.10;partition=dirichlet", "partition=dirichlet;beta=0.5", "partition=dirichlet;beta=0.5"],
                          "value": [75.0, 58.0, 91.0], "std": [0.2, 0.1, 0.5]})
    comparison = tables.compare_with_paper(mean, std, paper)
    row = comparison.set_index(["method", "setting"]).loc[("fedvls", "partition=dirichlet;beta=0.1")]
    assert row["paper"] == 75.0 and row["difference"] == pytest.approx(70.5 - 75.0)
    assert len(comparison) == 4 and comparison["paper"].isna().sum() == 2
    outer = tables.compare_with_paper(mean, std, paper, include_paper_only=True)
    assert len(outer) == 5 and outer["dataset"].eq("cifar10").sum() == 1


def test_side_by_side_reads_ours_paper_and_difference():
    mean, std, _ = layout_from_fake_runs()
    paper = pd.DataFrame({"method": ["fedavg"], "dataset": ["digits"], "setting": ["partition=dirichlet;beta=0.1"],
                          "value": [59.0], "std": [float("nan")]})
    table = tables.side_by_side(tables.compare_with_paper(mean, std, paper))
    assert table.loc["fedavg", ("digits", "partition=dirichlet;beta=0.1")] == "60.50 / 59.00 (+1.50)"
    assert table.loc["fedvls", ("digits", "partition=dirichlet;beta=0.1")] == "70.50 / -"


def test_compare_with_paper_rejects_a_malformed_paper_frame():
    mean, std, _ = layout_from_fake_runs()
    with pytest.raises(FedlibError, match="lacks column"):
        tables.compare_with_paper(mean, std, pd.DataFrame({"method": ["fedavg"]}))


def test_class_metric_frame_gives_pkd_max_ave_min_rows():
    cfg = BASE.replace(partition="balanced", method="pkd", method_args=SHORT_PKD)
    frame = tables.table_frame([fake_result(cfg, [0.5, 0.6], class_accuracy=(0.4, 0.8))])
    long = tables.class_metric_frame(frame, {cfg.hash(): "clients=2"})
    assert list(long["setting"]) == [f"partition=balanced;clients=2;metric={m}" for m in ("max", "ave", "min")]
    assert list(long["value"]) == pytest.approx([80.0, 60.0, 40.0])


def test_speedup_divides_reference_rounds_by_rounds_to_reach_its_best():
    fedavg = fake_result(BASE, [0.2, 0.4, 0.5, 0.6])  # best 0.6 at round 4
    fast = fake_result(BASE.replace(method="fedntd"), [0.3, 0.6, 0.7, 0.7])  # reaches 0.6 at round 2
    never = fake_result(BASE.replace(method="fedprox"), [0.1, 0.2, 0.3, 0.5])
    frame = tables.speedup_frame([fedavg, fast, never]).set_index("label")
    assert frame.at["fedavg", "speedup"] == 1.0
    assert frame.at["fedntd", "speedup"] == 2.0
    assert math.isnan(frame.at["fedprox", "speedup"])
    assert frame.at["fedntd", "setting"].endswith(";metric=speedup")


def test_speedup_needs_the_reference_run():
    with pytest.raises(FedlibError, match="no fedavg run"):
        tables.speedup_frame([fake_result(BASE.replace(method="fedntd"), [0.1, 0.2])])


def cost_result(cfg: RunConfig, rounds: list[dict], counts=((3, 2), (5, 0))) -> RunResult:
    """A finished run with per-round metrics as the engine logs them (N = 10 samples here)."""
    summary = {"partition_counts": [list(c) for c in counts], "class_accuracy": rounds[-1]["class_accuracy"],
               "class_names": ["a", "b"], "final_accuracy": 0.5, "best_accuracy": 0.5}
    return RunResult(cfg, rounds, summary)


def test_round_cost_units_counts_local_passes_and_reads_old_runs_from_their_clients():
    cfg = BASE.replace(local_epochs=2)
    logged = [{"round": 0, "clients": [0, 1], "local_samples": 20, "class_accuracy": [0.1, 0.5]},
              {"round": 1, "clients": [1], "local_samples": 10, "class_accuracy": [0.3, 0.9]}]
    old = [{k: v for k, v in r.items() if k != "local_samples"} for r in logged]  # stored before the metric
    for rounds in (logged, old):
        cost = tables.round_cost_units(cost_result(cfg, rounds))
        assert list(cost["local"]) == pytest.approx([1.0, 0.5])  # client 1 holds half the samples
        assert list(cost["cumulative"]) == pytest.approx([1.0, 1.5])
    with pytest.raises(FedlibError, match="expert_outputs"):
        tables.round_cost_units(cost_result(cfg, logged), expert_outputs="some")


def test_round_cost_units_adds_pkd_experts_and_distillation():
    cfg = BASE.replace(method="pkd", method_args=SHORT_PKD)
    rounds = [{"round": 0, "clients": [0, 1], "local_samples": 10, "class_accuracy": [0.1, 0.5]},
              {"round": 1, "clients": [0, 1], "local_samples": 10, "class_accuracy": [0.3, 0.9],
               "pkd_groups": [[0, 1], [1, 2]], "expert_fired_0": 0.03, "expert_fired_1": 0.06,
               "pkd_expert_cost": 1.5}]
    fired = tables.round_cost_units(cost_result(cfg, rounds))
    assert list(fired["total"]) == pytest.approx([1.0, 1.0 + 1.5 + 0.09 / 3])  # Eq. 4, Eq. 5 + 6
    every = tables.round_cost_units(cost_result(cfg, rounds), expert_outputs="all")
    assert every["total"].iloc[1] == pytest.approx(1.0 + 1.5 + 2 / 3)  # two experts on every sample


def test_pkd_cost_counted_from_a_real_run_matches_pkds_own_accounting():
    from fedlib.engine.engine import run

    cfg = RunConfig(dataset="synthetic", model="mlp", partition="iid", clients=3, rounds=3, local_epochs=1,
                    batch_size=16, max_train_samples=200, max_test_samples=50, method="pkd", device="cpu",
                    method_args={"warmup_rounds": 1, "expert_rounds": 1, "groups": [[1, 3], [3, 5, 7]]})
    result = run(cfg, use_store=False, progress=False)
    cost = tables.round_cost_units(result)
    assert list(cost["total"]) == pytest.approx([r["cost_units"] for r in result.rounds])
    assert cost["cumulative"].iloc[-1] == pytest.approx(result.rounds[-1]["cost_units_total"])


def test_cost_to_reach_reads_the_first_round_at_the_target():
    rounds = [{"round": i, "clients": [0, 1], "local_samples": 10, "class_accuracy": acc}
              for i, acc in enumerate([[0.1, 0.5], [0.3, 0.9], [0.2, 0.8]])]
    result = cost_result(BASE, rounds)  # min class accuracy 10, 30, 20 %; 1 U per round
    assert tables.cost_to_reach(result, [10, 20, 30, 40]) == {10: 1.0, 20: 2.0, 30: 2.0, 40: math.inf}
    assert tables.cost_to_reach(result, [60], curve="mean_class_accuracy") == {60: 2.0}
    assert tables.cost_to_reach(result, [10, 20], from_round=2) == {10: 3.0, 20: 3.0}  # PKD stage only
    with pytest.raises(FedlibError, match="curve"):
        tables.cost_to_reach(result, [10], curve="max")
    float32 = cost_result(BASE, [{"round": 0, "clients": [0, 1], "local_samples": 10,
                                  "class_accuracy": [0.07999999821186066, 0.5]}])  # 8 % as float32 stores it
    assert tables.cost_to_reach(float32, [8]) == {8: 1.0}


def test_cost_frame_names_targets_after_the_papers_columns():
    rounds = [{"round": 0, "clients": [0, 1], "local_samples": 10, "class_accuracy": [0.1, 0.5]}]
    result = cost_result(BASE.replace(partition="balanced"), rounds)
    frame = tables.cost_frame([result], [5, 50], extra_setting={result.config.hash(): "clients=2"},
                              target_names=[40, 70])
    assert list(frame["setting"]) == ["partition=balanced;clients=2;metric=cost_u;target_min=40",
                                      "partition=balanced;clients=2;metric=cost_u;target_min=70"]
    assert list(frame["target"]) == [5, 50] and list(frame["value"]) == [1.0, math.inf]
    later = tables.cost_frame([result], [5], from_round={result.config.hash(): 1})
    assert list(later["value"]) == [math.inf]
    with pytest.raises(FedlibError, match="target_names"):
        tables.cost_frame([result], [5, 50], target_names=[40])


def test_never_reached_costs_read_never_in_the_layout_and_beside_the_paper():
    frame = pd.DataFrame({"label": ["fedavg", "pkd", "focal"], "dataset": ["d"] * 3, "setting": ["t=1"] * 3,
                          "value": [math.inf, 12.0, 3.0]})
    mean, std, text = tables.paper_layout(frame, "value", mark_best=False)
    assert text.loc["fedavg", ("d", "t=1")] == "never"
    assert text.loc["focal", ("d", "t=1")] == "3.00"  # no bold: lower is better here; one seed: no std
    paper = pd.DataFrame({"method": ["fedavg", "pkd", "focal"], "dataset": ["d"] * 3, "setting": ["t=1"] * 3,
                          "value": [math.inf, math.inf, 2.0], "std": [math.nan] * 3})
    table = tables.side_by_side(tables.compare_with_paper(mean, std, paper))
    assert list(table[("d", "t=1")]) == ["never / never", "12.00 / never", "3.00 / 2.00 (+1.00)"]


def test_setting_into_method_splits_one_method_by_its_hyperparameter():
    paper = pd.DataFrame({"method": ["fedprox", "fedprox", "pkd"], "dataset": ["d"] * 3,
                          "setting": ["partition=x;mu=0.001;metric=min", "partition=x;mu=0.002;metric=min",
                                      "partition=x;metric=min"], "value": [1.0, 2.0, 3.0], "std": [math.nan] * 3})
    split = tables.setting_into_method(paper, "mu")
    assert list(split["method"]) == ["fedprox (mu 0.001)", "fedprox (mu 0.002)", "pkd"]
    assert set(split["setting"]) == {"partition=x;metric=min"}
    assert list(paper["method"]) == ["fedprox", "fedprox", "pkd"]  # the input is left as it was
    with pytest.raises(FedlibError, match="lacks"):
        tables.setting_into_method(pd.DataFrame({"value": [1.0]}), "mu")


def test_group_accuracy_frame_reads_each_domain_and_their_mean(monkeypatch):
    from types import SimpleNamespace

    monkeypatch.setattr(tables, "load_run_dataset", lambda cfg: SimpleNamespace(group_names=["amazon", "dslr"]))
    result = fake_result(BASE, [0.2, 0.5])
    result.rounds[-1]["group_accuracy"] = [0.25, 0.75]
    frame = tables.group_accuracy_frame([result]).set_index("setting")["accuracy"]
    assert frame.to_dict() == pytest.approx({"partition=dirichlet;beta=0.5;domain=amazon": 25.0,
                                             "partition=dirichlet;beta=0.5;domain=dslr": 75.0,
                                             "partition=dirichlet;beta=0.5;domain=average": 50.0})
    plain = tables.group_accuracy_frame([fake_result(BASE, [0.2, 0.5])])  # no groups: one, 'all'
    assert list(plain["setting"]) == ["partition=dirichlet;beta=0.5;domain=all",
                                      "partition=dirichlet;beta=0.5;domain=average"]
    assert list(plain["accuracy"]) == pytest.approx([50.0, 50.0])


def test_group_accuracy_frame_at_best_reads_every_domain_in_the_round_of_the_best_mean(monkeypatch):
    from types import SimpleNamespace

    monkeypatch.setattr(tables, "load_run_dataset", lambda cfg: SimpleNamespace(group_names=["amazon", "dslr"]))
    result = fake_result(BASE, [0.2, 0.6, 0.5])
    for record, groups in zip(result.rounds, ([0.1, 0.3], [0.9, 0.3], [0.4, 0.7])):  # means 0.2, 0.6, 0.55
        record["group_accuracy"] = groups
    best = tables.group_accuracy_frame([result], at="best").set_index("setting")["accuracy"]
    assert best.to_dict() == pytest.approx({"partition=dirichlet;beta=0.5;domain=amazon": 90.0,
                                            "partition=dirichlet;beta=0.5;domain=dslr": 30.0,
                                            "partition=dirichlet;beta=0.5;domain=average": 60.0})
    final = tables.group_accuracy_frame([result]).set_index("setting")["accuracy"]
    assert final["partition=dirichlet;beta=0.5;domain=dslr"] == pytest.approx(70.0)  # the last round's
    with pytest.raises(FedlibError, match="unknown reading 'last'; valid readings: best, final"):
        tables.group_accuracy_frame([result], at="last")


def test_a_probe_takes_the_fastest_of_its_clients_at_steady_state_on_a_stand_in(monkeypatch):
    from fedlib.orchestration import dry_run

    calls = []

    def fake_run_one(cfg, **options):
        calls.append((cfg, options))
        images = options["images_per_client"]  # 0.2 s a step, then 0.08 s at steady state; client 0 warms up
        return {"status": "ok", "client_seconds": [9.0, 0.2 if images == 50 else 1.92], "client_images": [images] * 2}

    monkeypatch.setattr(dry_run, "run_one", fake_run_one)
    big = RunConfig(dataset="cifar10", model="cnn2", clients=100, participation=0.1, rounds=100, local_epochs=10,
                    partition="shards", device="cpu")
    rate = timing.probe_seconds_per_image(big, "cpu")
    [(probe, first), (_, steady)] = calls
    assert (probe.clients, probe.participation, probe.partition) == (timing.PROBE_CLIENTS, 1.0, "iid")
    assert first["stand_in"] and first["images_per_client"] == big.batch_size, "one batch first"
    assert steady["images_per_client"] == timing.STEADY_STEPS * big.batch_size, "a short step: again at steady state"
    assert rate == pytest.approx(1.92 / 1200)
    calls.clear()
    monkeypatch.setattr(dry_run, "run_one", lambda cfg, **o: calls.append(o) or
                        {"status": "ok", "client_seconds": [9.0, 3.0], "client_images": [50, 50]})
    assert timing.probe_seconds_per_image(big, "cpu") == pytest.approx(3.0 / 50) and len(calls) == 1, \
        "a step of 3 s is steady already: one probe round"
    assert timing.images_per_round(big) == 0.1 * 10 * 50000


def test_setting_words_reads_a_setting_label_in_words():
    assert tables.setting_words("partition=dirichlet;beta=0.05") == "Dir(β=0.05)"
    assert tables.setting_words("partition=shards;s=2") == "shards, s=2"
    assert tables.setting_words("partition=balanced") == "balanced"


def test_the_best_of_a_column_names_every_method_of_a_tie():
    column = pd.Series({"fedavg": 65.9, "fedprox": 65.9, "fedntd": 60.8, "pkd": math.nan})
    assert tables.leaders(column) == ["fedavg", "fedprox"]  # idxmax would say fedavg alone
    assert tables.best_text(column) == "fedavg, fedprox tied (65.90)"
    assert tables.best_text(column.drop("fedprox")) == "fedavg (65.90)"
    assert tables.best_text(pd.Series({"a": 0.0, "b": 0.0, "c": 0.0})) == "all 3 tied (0.00)"
    assert tables.best_text(pd.Series({"a": math.nan})) == "-" and tables.leaders(pd.Series(dtype=float)) == []
    assert tables.best_text(pd.Series({"a": 1.0, "b": 1.0, "c": math.nan})) == "a, b tied (1.00)"  # c has no value
    assert tables.best_text(column.drop("fedavg"), name=str.upper) == "FEDPROX (65.90)"


def test_the_most_frequent_worst_class_names_every_class_of_a_tie():
    assert tables.most_frequent(pd.Series(["Shirt", "Cat", "Shirt"])) == "Shirt"
    assert tables.most_frequent(pd.Series(["Shirt", "Cat", "Dog"])) == "Cat / Dog / Shirt"  # no class is most frequent
def test_a_cell_of_one_seed_shows_no_std_and_several_seeds_show_theirs():
    frame = pd.DataFrame({"label": ["a", "a", "b"], "dataset": ["d"] * 3, "setting": ["s"] * 3,
                          "value": [1.0, 3.0, 5.0]})
    mean, std, text = tables.paper_layout(frame, "value")
    assert text.loc["a", ("d", "s")] == "2.00 ± 1.00" and text.loc["b", ("d", "s")] == "**5.00**"
    assert math.isnan(std.loc["b", ("d", "s")]), "one seed: the std is unknown, not zero"


def test_tables_mark_diverged_cells_instead_of_showing_a_number():
    frame = pd.DataFrame({"label": ["a", "a", "b"], "dataset": ["d"] * 3, "setting": ["s"] * 3,
                          "seed": [0, 1, 0], "final_accuracy": [float("nan"), 50.0, 60.0],
                          "diverged": [True, False, False]})
    _, _, text = tables.paper_layout(frame, "final_accuracy")
    assert text.loc["a"].tolist() == [tables.DIVERGED]
    assert "60" in text.loc["b"].iloc[0]


def test_results_and_curves_frames_count_rounds_from_one_alike():
    from fedlib.orchestration import experiments

    result = fake_result(BASE, [0.2, 0.6, 0.4, 0.5])  # best in the second round
    frame, curves = experiments.results_frame([result]), experiments.curves_frame([result])
    assert frame.loc[0, "best_round"] == 2
    assert curves.loc[curves.accuracy.idxmax(), "round"] == frame.loc[0, "best_round"]
