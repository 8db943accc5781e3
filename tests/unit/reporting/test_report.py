"""fedlib.reporting.report: a notebook's plan (runs, stored, hours), its settings table, showing and saving tables."""

import shutil
from pathlib import Path

import pandas as pd
import pytest

from fedlib import store
from fedlib.core.config import RunConfig
from fedlib.orchestration import timing
from fedlib.reporting import report

BASE = RunConfig(dataset="digits", model="mlp", clients=2, rounds=4, device="cpu")


def store_result(cfg: RunConfig, results_dir, seconds: float) -> None:
    record = store.RunRecord(store.run_dir(cfg, results_dir))
    record.write_config(cfg)
    record.write_summary({"train_seconds": seconds, "rounds_run": cfg.rounds})


@pytest.fixture
def fake_probes(tmp_path, monkeypatch):
    """Probes answer 0.01 s per image at once (their cache in a temporary FEDLIB_CACHE); the
    list records the kinds probed."""
    probed = []

    def probe(cfg, device="auto", clients=timing.PROBE_CLIENTS):
        probed.append(timing.cost_key(cfg))
        return 0.01

    monkeypatch.setenv("FEDLIB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(timing, "COMMITTED_RATES", tmp_path / "none.json")  # this machine's committed rates stay out
    monkeypatch.setattr(timing, "probe_seconds_per_image", probe)
    monkeypatch.setattr(timing, "probe_eval_seconds_per_image", lambda cfg, device="auto": 0.0)  # evaluation free
    return probed


# ---------------------------------------------------------------------- the plan
def test_plan_estimates_hours_from_stored_seconds_per_round(tmp_path, capsys):
    configs = [BASE.replace(method=m, seed=s) for m in ("fedavg", "fedprox") for s in (0, 1)]
    store_result(configs[0], tmp_path, seconds=40.0)  # fedavg: 10 s per round
    store_result(configs[2], tmp_path, seconds=80.0)  # fedprox: 20 s per round
    plan = report.describe_plan(configs, tmp_path, probe=False)
    assert (plan["runs"], plan["stored"], plan["to_run"]) == (4, 2, 2)
    assert plan["hours"] == pytest.approx((4 * 10 + 4 * 20) / 3600)
    out = capsys.readouterr().out
    assert "2 to run" in out and "CPU-hours on cpu (" in out


def test_the_plan_is_labelled_with_the_threads_the_runs_will_use(tmp_path, monkeypatch):
    import torch

    before = torch.get_num_threads()
    from fedlib.orchestration import environment

    environment.apply({"FEDLIB_THREADS": "1"})  # as a notebook's set-up reads $FEDLIB_THREADS=1
    try:
        plan = report.estimate_plan([BASE], tmp_path, probe=False)
    finally:
        torch.set_num_threads(before)
    assert plan["device"].startswith("cpu (1 thread, ")


def test_plan_counts_a_run_declared_twice_once(tmp_path, fake_probes):
    configs = [BASE.replace(seed=s) for s in (0, 1)]
    plan = report.estimate_plan(configs + configs, tmp_path)
    assert (plan["runs"], plan["stored"], plan["to_run"]) == (2, 0, 2)


def test_plan_with_nothing_stored_probes_fedavg_on_the_datas_shape(tmp_path, fake_probes):
    plan = report.describe_plan([BASE.replace(rounds=3, seed=s) for s in (0, 1)], tmp_path)
    assert fake_probes == [("digits", "mlp", "fedavg")], "one probe for the kind, not one per run"
    assert plan["hours"] == pytest.approx(2 * 3 * timing.images_per_round(BASE) * 0.01 / 3600)


def test_plan_scales_the_measured_time_by_each_configs_work(tmp_path, fake_probes):
    stored = BASE.replace(method="fedavg")
    store_result(stored, tmp_path, seconds=40.0)  # 10 s per round at 1 epoch, full participation
    longer = BASE.replace(method="fedprox", local_epochs=3)  # 3x the work; as costly per image as FedAvg here
    fewer = BASE.replace(method="fedavg", participation=0.5, seed=1)  # half the clients per round
    plan = report.describe_plan([stored, longer, fewer], tmp_path)
    assert plan["hours"] == pytest.approx((4 * 30 + 4 * 5) / 3600)
    assert ("digits", "mlp", "fedavg") not in fake_probes, "FedAvg on digits/mlp is measured by the stored run"


def test_plan_probes_each_unmeasured_model_once(tmp_path, fake_probes):
    store_result(BASE, tmp_path, seconds=4.0)  # the mlp is measured: 1 s per round
    cnn = RunConfig(dataset="digits", model="lenet5", clients=2, rounds=4, device="cpu")
    plan = report.describe_plan([BASE, cnn, cnn.replace(seed=1), BASE.replace(seed=1)], tmp_path)
    assert fake_probes == [("digits", "lenet5", "fedavg")], "only the model without stored runs is probed, once"
    assert plan["hours"] == pytest.approx((2 * 4 * timing.images_per_round(cnn) * 0.01 + 4 * 1.0) / 3600)


# ---------------------------------------------------------------------- settings, showing, saving
def test_settings_frame_lists_each_setting_in_order_with_its_value():
    frame = report.settings_frame({"dataset / model": "digits / mlp", "seeds": 3, "betas": [0.1, 0.5]})
    assert list(frame.columns) == ["setting", "value"]
    assert frame["setting"].tolist() == ["dataset / model", "seeds", "betas"]
    assert frame["value"].tolist() == ["digits / mlp", 3, [0.1, 0.5]]


def test_markdown_flattens_column_levels_and_leaves_missing_cells_empty():
    frame = pd.DataFrame({("cifar10", "beta=0.1"): ["**70.50**", None]}, index=pd.Index(["fedvls", "fedavg"],
                                                                                      name="method"))
    lines = report.markdown(frame).splitlines()
    assert lines[0].startswith("| method") and lines[0].endswith("| CIFAR-10 / beta=0.1 |")
    assert lines[2:] == ["| FedVLS | **70.50** |", "| FedAvg |  |"]


def test_markdown_names_methods_datasets_and_settings_in_words_and_leaves_numbers():
    frame = pd.DataFrame({"method": ["fedavg_kd", "fedprox (mu 0.001)"], "dataset": ["fashion_mnist"] * 2,
                          "setting": ["partition=dirichlet;beta=0.05;metric=min", "partition=balanced"],
                          "ours": [70.5, 61.0], "note": ["fedavg", "x"]})
    lines = report.markdown(frame.set_index("method")).splitlines()
    assert lines[2] == "| FedAvg + KD | Fashion-MNIST | Dir(β=0.05), metric=min | 70.5 | fedavg |"
    assert lines[3] == "| fedprox (mu 0.001) | Fashion-MNIST | balanced | 61.0 | x |"  # free text stays


def test_save_tables_writes_csv_and_markdown_rounded_to_digits(tmp_path, capsys):
    frame = pd.DataFrame({"accuracy": [70.4567, 61.0]}, index=pd.Index(["fedvls", "fedavg"], name="method"))
    paths = report.save_tables({"demo": frame, "raw": frame}, tmp_path / "out", digits=None) + \
        report.save_tables({"rounded": frame}, tmp_path / "out")
    assert sorted(p.name for p in paths) == ["demo.csv", "demo.md", "raw.csv", "raw.md", "rounded.csv", "rounded.md"]
    assert "| FedVLS | 70.46 |" in (tmp_path / "out" / "rounded.md").read_text()
    assert pd.read_csv(tmp_path / "out" / "raw.csv", index_col=0).loc["fedvls", "accuracy"] == 70.4567
    assert "saved: " in capsys.readouterr().out


def test_saved_paths_inside_the_repository_are_shown_relative_to_the_working_folder(tmp_path, monkeypatch, capsys):
    from fedlib.reporting.notebook import REPO_ROOT

    folder = REPO_ROOT / "output" / "test_report_paths"
    monkeypatch.chdir(REPO_ROOT / "notebooks")
    try:
        paths = report.save_tables({"demo": pd.DataFrame({"a": [1.0]})}, folder)
        assert paths == [Path("../output/test_report_paths/demo.csv"), Path("../output/test_report_paths/demo.md")]
        assert all(p.exists() for p in paths) and str(REPO_ROOT) not in capsys.readouterr().out
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    outside = report.save_tables({"demo": pd.DataFrame({"a": [1.0]})}, tmp_path)
    assert outside[0] == tmp_path / "demo.csv", "a folder outside the repository stays as given"
