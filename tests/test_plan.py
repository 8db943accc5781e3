"""fedlib.plan: the runs table notebooks declare, read without training, and the combined plan."""

from pathlib import Path

import pytest

from fedlib import plan, store
from fedlib.config import RunConfig
from fedlib.reproduce import main

nbformat = pytest.importorskip("nbformat")

PARAMETERS = """\
profile = "smoke"  # parameter set
device = "cpu"  # torch device
data_dir = None  # dataset folder
results_dir = "../results"  # results store
figures_dir = "../figures"  # figures
tables_dir = "../tables"  # tables
seeds = [0]  # one run per seed
"""

GRID = """\
from fedlib import tables
from fedlib.config import RunConfig
configs = [RunConfig(dataset="digits", model="mlp", clients=2, rounds=3, seed=s, device=device) for s in seeds]
"""


def notebook(folder: Path, stem: str, *cells: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(PARAMETERS, metadata={"tags": ["parameters"]}),
                *[nbformat.v4.new_code_cell(c) for c in cells]]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}.ipynb"
    nbformat.write(nb, path)
    return path


def test_the_grid_is_read_at_the_plan_call_and_nothing_after_runs(tmp_path):
    path = notebook(tmp_path / "notebooks", "table1", GRID, "tables.describe_plan(configs, results_dir)",
                    "raise RuntimeError('training must not start')")
    configs = plan.declared_configs(path, {"seeds": [0, 1, 2]})
    assert [c.seed for c in configs] == [0, 1, 2], "the profile's parameters are injected"


def test_notebooks_without_a_plan_are_not_executed(tmp_path):
    marker = tmp_path / "executed"
    path = notebook(tmp_path / "notebooks", "fig1", f"open({str(marker)!r}, 'w').close()")
    assert plan.declared_configs(path, {}) is None
    assert not marker.exists()


def test_a_plan_cell_that_declares_nothing_gives_an_empty_grid(tmp_path):
    path = notebook(tmp_path / "notebooks", "table5", "configs = []",
                    "if configs:\n    tables.describe_plan(configs)", "raise RuntimeError('not reached')")
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


def test_reproduce_plan_prints_and_runs_nothing(tmp_path, capsys):
    notebook(tmp_path / "notebooks", "table1", GRID, "tables.describe_plan(configs, results_dir)",
             "raise RuntimeError('training must not start')")
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "table1.yaml").write_text("smoke: {}\nquick: {seeds: [0, 1]}\npaper: {}\n")
    status = main(["--notebooks-dir", str(tmp_path / "notebooks"), "--profile", "quick", "--plan",
                   "--results", str(tmp_path / "results")])
    out = capsys.readouterr().out
    assert status == 0
    assert "plan for the 'quick' profile" in out and "table1" in out
    line = next(row for row in out.splitlines() if row.strip().startswith("total"))
    assert line.split()[-4:-1] == ["2", "0", "2"], line
