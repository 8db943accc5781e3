"""fedlib.paper.plan: the runs table notebooks declare, read without training, and the combined plan."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

from fedlib import store
from fedlib.core.config import RunConfig
from fedlib.datasets import data
from fedlib.errors import FedlibError
from fedlib.orchestration import timing
from fedlib.paper import grids, plan
from fedlib.paper.reproduce import main
from fedlib.reporting import report

nbformat = pytest.importorskip("nbformat")

# seconds per image a fake probe reports, by method: KD and SAM methods cost more than FedAvg
FAKE_RATES = {"fedavg": 0.001, "fedntd": 0.002, "fedsam": 0.004}


@pytest.fixture(autouse=True)
def probe_cache(tmp_path, monkeypatch):
    """Probes write their cache under a temporary FEDLIB_CACHE, never the user's."""
    monkeypatch.setenv("FEDLIB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(timing, "COMMITTED_RATES", tmp_path / "none.json")  # this machine's committed rates stay out
    return tmp_path / "cache" / "plan_rates.json"


@pytest.fixture
def fake_probes(monkeypatch):
    """Probes answer at once from FAKE_RATES (x2 on lenet5); the list records what was probed."""
    probed = []

    def probe(cfg, device="auto", clients=timing.PROBE_CLIENTS):
        probed.append(timing.cost_key(cfg))
        return FAKE_RATES[cfg.method] * (2 if cfg.model == "lenet5" else 1)

    monkeypatch.setattr(timing, "probe_seconds_per_image", probe)
    monkeypatch.setattr(timing, "probe_eval_seconds_per_image", lambda cfg, device="auto": 0.0)  # evaluation free
    return probed

PARAMETERS = """\
profile = "smoke"  # parameter set
device = "cpu"  # torch device
data_dir = None  # dataset folder
results_dir = "../results"  # results store
figures_dir = "../figures"  # figures
tables_dir = "../tables"  # tables
seeds = [0]  # one run per seed
"""
PLAN_CELL = "report.describe_plan(configs, results_dir)"


def seed_grid(params: dict) -> list[RunConfig]:
    """A table notebook's grid: one digits run per seed, on the notebook's device."""
    return [RunConfig(dataset="digits", model="mlp", clients=2, rounds=3, seed=s, device=params["device"])
            for s in params["seeds"]]


@pytest.fixture
def registered(monkeypatch):
    """Registers grid functions for notebooks made in a test: ``registered(stem, grid)``."""
    def register(stem, grid):
        monkeypatch.setitem(grids.GRIDS, stem, grid)
    return register


def notebook(folder: Path, stem: str, *cells: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(PARAMETERS, metadata={"tags": ["parameters"]}),
                *[nbformat.v4.new_code_cell(c) for c in cells]]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}.ipynb"
    nbformat.write(nb, path)
    profiles = folder.parent / "profiles" / f"{stem}.yaml"  # the cell's profile must be defined (a contract)
    if not profiles.exists():
        profiles.parent.mkdir(exist_ok=True)
        profiles.write_text("smoke: {}\n")
    return path


def test_the_grid_function_gets_the_notebooks_parameters_and_no_cell_runs(tmp_path, registered):
    registered("table1", seed_grid)
    path = notebook(tmp_path / "notebooks", "table1", "raise RuntimeError('no cell may run')", PLAN_CELL)
    configs = plan.declared_configs(path, {"seeds": [0, 1, 2]})
    assert [c.seed for c in configs] == [0, 1, 2], "the passed parameters win over the parameters cell"
    assert {c.device for c in configs} == {"cpu"}, "the parameters cell gives the rest"


def test_folders_resolve_against_the_notebooks_repository_and_unknown_names_are_ignored(tmp_path, registered):
    seen = {}
    registered("table1", lambda params: seen.update(params) or [])
    path = notebook(tmp_path / "notebooks", "table1", PLAN_CELL)
    assert plan.declared_configs(path, {"data_dir": "data", "unknown": 1}) == []
    assert seen["data_dir"] == str((tmp_path / "data").resolve()) and "unknown" not in seen
    assert seen["results_dir"] == str((tmp_path / "../results").resolve())  # the cell says "../results"


def test_notebooks_without_a_grid_are_not_executed(tmp_path):
    marker = tmp_path / "executed"
    path = notebook(tmp_path / "notebooks", "fig1", f"open({str(marker)!r}, 'w').close()")
    assert plan.declared_configs(path, {}) is None
    assert not marker.exists()


def test_a_notebook_printing_a_plan_without_a_grid_function_is_one_line(tmp_path):
    path = notebook(tmp_path / "notebooks", "table9", PLAN_CELL)
    with pytest.raises(FedlibError, match="table9 prints a plan but has no grid function; add one") as error:
        plan.declared_configs(path, {})
    assert "\n" not in str(error.value)


def test_a_figure_notebook_whose_text_names_the_plan_call_is_still_a_figure_notebook(tmp_path):
    path = notebook(tmp_path / "notebooks", "fig2", "x = 1")
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("Table notebooks call `report.describe_plan(configs)`."))
    nbformat.write(nb, path)
    assert plan.declared_configs(path, {}) is None


def test_a_grid_that_declares_nothing_gives_an_empty_grid(tmp_path, registered):
    registered("table5", lambda params: [])
    path = notebook(tmp_path / "notebooks", "table5", "if configs:\n    " + PLAN_CELL)
    assert plan.declared_configs(path, {}) == []


def test_the_total_counts_shared_runs_once(tmp_path):
    base = RunConfig(dataset="digits", model="mlp", clients=2, rounds=4, device="cpu")
    record = store.RunRecord(store.run_dir(base, tmp_path))
    record.write_config(base)
    record.write_summary({"train_seconds": 8.0, "rounds_run": 4})  # 2 s per round
    grids = {"a": [base, base.replace(seed=1)], "b": [base.replace(seed=1), base.replace(seed=2)], "fig": None}
    frame = plan.plan_frame(grids, tmp_path, probe=False).set_index("notebook")
    assert list(frame.index) == ["a", "b", "total (shared runs once)"]
    assert frame.loc["a", ["runs", "stored", "to run"]].tolist() == [2, 1, 1]
    total = frame.loc["total (shared runs once)"]
    assert total[["runs", "stored", "to run"]].tolist() == [3, 1, 2]
    assert total["hours"] == pytest.approx(2 * 4 * 2.0 / 3600)


def test_reproduce_plan_prints_and_runs_nothing(tmp_path, capsys, registered):
    registered("table1", seed_grid)
    notebook(tmp_path / "notebooks", "table1", PLAN_CELL, "raise RuntimeError('training must not start')")
    (tmp_path / "profiles").mkdir(exist_ok=True)
    (tmp_path / "profiles" / "table1.yaml").write_text("smoke: {}\nquick: {seeds: [0, 1]}\npaper: {}\n")
    status = main(["--notebooks-dir", str(tmp_path / "notebooks"), "--profile", "quick", "--plan",
                   "--results", str(tmp_path / "results")])
    out = capsys.readouterr().out
    assert status == 0
    assert "plan for the 'quick' profile" in out and "table1" in out
    header = next(row for row in out.splitlines() if row.strip().startswith("notebook"))
    assert header.split()[-1] in ("CPU-hours", "GPU-hours"), "the unit heads the hours column"
    line = next(row for row in out.splitlines() if row.strip().startswith("total"))
    assert line.split()[-6:-1] == ["2", "0", "2", "0", "2"], line  # runs, stored, to run, no data here, <= 1 day


def test_the_total_is_the_union_of_the_rows_whatever_order_runs_come_in(tmp_path, fake_probes):
    base = RunConfig(dataset="digits", model="mlp", clients=2, rounds=10, device="cpu")
    cnn = base.replace(model="lenet5")
    # notebook a meets an expensive method of a (dataset, model) first, notebook b a cheap one:
    # the old plan timed each notebook's first run and applied it to the whole group
    grids = {"a": [base.replace(method="fedsam"), base, cnn.replace(method="fedntd")],
             "b": [base.replace(method="fedavg", seed=1), base, cnn], "fig": None}
    frame = plan.plan_frame(grids, tmp_path / "results", device="cpu", progress=False).set_index("notebook")
    hours = frame["hours"]
    union = {c.hash(): c for configs in grids.values() for c in configs or []}
    expected = sum(10 * timing.images_per_round(c) * FAKE_RATES[c.method] * (2 if c.model == "lenet5" else 1)
                   for c in union.values()) / 3600
    assert frame.loc[plan.TOTAL_ROW, "runs"] == len(union) == 5
    assert hours[plan.TOTAL_ROW] == pytest.approx(expected)
    assert hours["a"] + hours["b"] - hours[plan.TOTAL_ROW] == pytest.approx(  # the shared run, counted once
        10 * timing.images_per_round(base) * FAKE_RATES["fedavg"] / 3600)
    assert max(hours["a"], hours["b"]) <= hours[plan.TOTAL_ROW]


def test_probes_are_few_and_cached_between_plans(tmp_path, fake_probes, probe_cache):
    base = RunConfig(dataset="digits", model="mlp", clients=2, rounds=10, device="cpu")
    grids = {"a": [base.replace(method=m, model=net, seed=s) for m in FAKE_RATES for net in ("mlp", "lenet5")
                   for s in (0, 1)]}
    first = plan.plan_frame(grids, tmp_path / "results", device="cpu", progress=False)
    # FedAvg on each (dataset, model); each other method next to FedAvg on the ratio kind, in turn
    ratio_kind = [(*timing.RATIO_KIND, m) for m in ("fedavg", "fedntd", "fedavg", "fedntd",
                                                     "fedavg", "fedsam", "fedavg", "fedsam")]
    assert fake_probes == [("digits", "mlp", "fedavg"), ("digits", "lenet5", "fedavg")] + ratio_kind
    assert first.attrs["probes"] == 6 and probe_cache.exists(), "2 FedAvg rates, 2 evaluations, 2 ratios"
    fake_probes.clear()
    again = plan.plan_frame(grids, tmp_path / "results", device="cpu", progress=False)
    assert fake_probes == [] and again.attrs["probes"] == 0, "the second plan probes nothing"
    assert again["hours"].tolist() == pytest.approx(first["hours"].tolist())


def test_the_plan_adds_each_evaluation_at_the_probed_seconds_per_test_image(tmp_path, fake_probes, monkeypatch):
    monkeypatch.setattr(timing, "probe_eval_seconds_per_image", lambda cfg, device="auto": 0.25)
    cfg = RunConfig(dataset="digits", model="mlp", clients=2, rounds=10, eval_every=5, max_test_samples=40, device="cpu")
    frame = plan.plan_frame({"a": [cfg]}, tmp_path / "results", device="cpu", progress=False)
    train = 10 * timing.images_per_round(cfg) * FAKE_RATES["fedavg"]
    assert frame["hours"].iloc[-1] == pytest.approx((train + 2 * 40 * 0.25) / 3600), "2 evaluations of 40 images"


def test_committed_rates_serve_the_device_they_were_measured_on(tmp_path, fake_probes, monkeypatch):
    committed = tmp_path / "measured_rates.json"
    label = timing.device_label("cpu")
    committed.write_text(json.dumps({"devices": {label: {"rates": {"digits|mlp|fedavg": 0.5},
                                                         "evals": {"digits|mlp": 0.1}},
                                                 "cpu (9 threads, another CPU, x86_64)": {"rates": {"digits|lenet5|fedavg": 9.0}}}}))
    monkeypatch.setattr(timing, "COMMITTED_RATES", committed)
    cfg = RunConfig(dataset="digits", model="mlp", clients=2, rounds=10, max_test_samples=30, device="cpu")
    frame = plan.plan_frame({"a": [cfg]}, tmp_path / "results", device="cpu", progress=False)
    assert fake_probes == [], "the committed rates of this device are used, nothing probed"
    assert frame["hours"].iloc[-1] == pytest.approx((10 * timing.images_per_round(cfg) * 0.5 + 10 * 30 * 0.1) / 3600)
    lenet = cfg.replace(model="lenet5")
    plan.plan_frame({"a": [lenet]}, tmp_path / "results", device="cpu", progress=False)
    assert fake_probes == [("digits", "lenet5", "fedavg")], "another device's rates are not this one's"


def test_real_probes_measure_bundled_data_and_stand_ins_for_missing_data(tmp_path):
    bundled = RunConfig(dataset="synthetic", model="mlp", clients=5, device="cpu")
    missing = RunConfig(dataset="cifar100", model="cnn2", clients=50, partition="shards", data_dir=str(tmp_path))
    assert timing.probe_seconds_per_image(bundled, "cpu") > 0
    assert timing.probe_seconds_per_image(missing, "cpu") > 0, "no data here: timed on a stand-in of its shape"
    assert 0 < timing.probe_eval_seconds_per_image(missing, "cpu", images=300) < 1, "a forward pass: milliseconds"


def mnist_grid(params: dict) -> list[RunConfig]:
    return [RunConfig(dataset="mnist", model="mlp", clients=2, rounds=3, device="cpu", data_dir=params["data_dir"])]


def test_download_lets_the_plan_count_torchvision_datasets_as_available(tmp_path, fake_probes, capsys, registered,
                                                                         monkeypatch):
    monkeypatch.delenv("FEDLIB_DOWNLOAD", raising=False)  # restored (unset) after the test
    registered("table1", mnist_grid)
    notebook(tmp_path / "notebooks", "table1", PLAN_CELL)
    (tmp_path / "profiles").mkdir(exist_ok=True)  # notebook() wrote its smoke profile there
    (tmp_path / "profiles" / "table1.yaml").write_text("smoke: {}\nquick: {}\npaper: {}\n")
    empty = tmp_path / "no_data"
    empty.mkdir()
    options = ["--notebooks-dir", str(tmp_path / "notebooks"), "--profile", "quick", "--plan", "--data", str(empty),
               "--results", str(tmp_path / "results")]
    assert main(options) == 0
    assert "cannot run here: 1 run(s): mnist missing" in capsys.readouterr().out
    assert main([*options, "--download"]) == 0
    assert "cannot run here" not in capsys.readouterr().out
    assert os.environ["FEDLIB_DOWNLOAD"] == "1"  # what the notebooks' kernels inherit


def test_the_plan_counts_the_runs_a_day_of_this_device_affords(tmp_path, fake_probes):
    short = RunConfig(dataset="digits", model="mlp", clients=2, rounds=10, device="cpu")
    long = short.replace(rounds=100_000)  # 1,437 images a round at 1 ms an image: 40 hours
    frame = plan.plan_frame({"a": [short, long]}, tmp_path / "results", device="cpu", progress=False)
    assert timing.images_per_round(long) * 100_000 * FAKE_RATES["fedavg"] / 3600 > 24
    assert frame[plan.DAY_COLUMN].iloc[-1] == 1, "the 10-round run fits a day, the 100,000-round one does not"


def test_a_cpu_plan_adds_the_hours_on_each_gpu_whose_probes_are_committed(tmp_path, fake_probes, monkeypatch):
    committed = tmp_path / "measured_rates.json"
    card = {"rates": {"digits|mlp|fedavg": 0.01}, "evals": {"digits|mlp": 0.001}, "ratios": {"fedntd": 2.0}}
    committed.write_text(json.dumps({"devices": {"NVIDIA Test GPU": card}}))
    monkeypatch.setattr(timing, "COMMITTED_RATES", committed)
    base = RunConfig(dataset="digits", model="mlp", clients=2, rounds=10, max_test_samples=30, device="cpu")
    grids = {"a": [base], "b": [base.replace(method="fedntd"), base.replace(method="fedsam")]}
    frame = plan.plan_frame(grids, tmp_path / "results", device="cpu", progress=False)
    column = plan.gpu_column("NVIDIA Test GPU")
    images, evaluations = 10 * timing.images_per_round(base), 10 * 30 * 0.001
    fedavg = (images * 0.01 + evaluations) / 3600
    ntd, sam = (images * 0.02 + evaluations) / 3600, fedavg  # no ratio for FedSAM on that card: as FedAvg
    assert frame[column].tolist() == pytest.approx([fedavg, ntd + sam, fedavg + ntd + sam])
    assert "'GPU-hours (NVIDIA Test GPU)'" in plan.format_plan(frame, "paper", "cpu")
    assert frame["hours"].iloc[-1] != frame[column].iloc[-1], "the CPU's own hours stay the CPU's"
