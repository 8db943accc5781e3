"""fedlib.paper.grids: each table notebook's grid is one function, called by the notebook and by the planner."""

import ast
import json
from pathlib import Path

import pytest

from fedlib.core.config import RunConfig
from fedlib.errors import FedlibError
from fedlib.paper import grids, plan
from fedlib.paper.grids import fedlmd, method_grid, run_config
from fedlib.paper.grids.base import distinct
from fedlib.paper.reproduce import build_overrides, load_profiles

ROOT = Path(__file__).resolve().parents[3]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
BASE = RunConfig(dataset="digits", model="mlp", clients=2, rounds=4, device="cpu")


def code_cells(path: Path) -> list[dict]:
    return [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]


def test_method_grid_gives_each_method_its_own_arguments():
    configs = method_grid(BASE, ["fedavg", "fedntd"], {"fedntd": {"beta": 0.1}}, seed=[0, 1], beta=[0.1, 0.5])
    assert len(configs) == 8
    assert {c.method_args.get("beta") for c in configs if c.method == "fedntd"} == {0.1}
    assert all(c.method_args == {} for c in configs if c.method == "fedavg")


def test_run_config_takes_device_data_folder_and_named_fields_from_the_parameters():
    params = {"device": "cuda", "data_dir": "/data", "clients": 7, "lr": 0.5, "rounds": {"digits": 3}}
    cfg = run_config(params, "clients", "lr", dataset="digits", model="mlp", rounds=params["rounds"]["digits"])
    assert (cfg.device, cfg.data_dir, cfg.clients, cfg.lr, cfg.rounds) == ("cuda", "/data", 7, 0.5, 3)
    assert run_config(params, "clients", clients=4, device="cpu").clients == 4, "fields win over the parameters"
    assert run_config(params, "clients", device="cpu").device == "cpu"


def test_distinct_keeps_each_run_once_where_it_first_appears():
    a, b = BASE.replace(seed=1), BASE.replace(seed=2)
    assert [c.seed for c in distinct([a, b, a.replace(device="cuda"), b])] == [1, 2]


def test_a_paper_column_run_twice_is_one_line():
    params = {"models": ["mlp", "lenet5"], "stands_for": {"mlp": "cnn2", "lenet5": "cnn2"}}
    with pytest.raises(FedlibError, match="stand for the same paper column"):
        fedlmd.table4_architectures(params)


def test_every_notebook_printing_a_plan_has_a_grid_and_every_grid_a_notebook():
    printing = {path.stem for path in NOTEBOOKS if plan.prints_plan(path)}
    assert printing == set(grids.GRIDS), "a table notebook without a grid function, or a grid without a notebook"
    for path in NOTEBOOKS:
        if path.stem not in grids.GRIDS:
            assert plan.declared_configs(path, {}) is None, f"{path.stem} is a figure notebook: it declares nothing"


def runs_up_to_the_plan(path: Path, parameters: dict) -> list[RunConfig]:
    """Execute the notebook's code cells, parameters injected after the parameters cell as papermill
    does, up to its plan call; the configs that call receives."""
    namespace: dict = {"__name__": "__notebook__"}
    for cell in code_cells(path):
        source = "".join(cell["source"])
        for node in ast.parse(source).body:
            calls = [c for c in ast.walk(node)
                     if isinstance(c, ast.Call) and getattr(c.func, "attr", "") == "describe_plan"]
            if calls:
                return eval(compile(ast.Expression(calls[0].args[0]), path.name, "eval"), namespace)  # noqa: S307
            exec(compile(ast.Module([node], []), path.name, "exec"), namespace)  # noqa: S102
        if "parameters" in cell["metadata"].get("tags", []):
            namespace.update(parameters)
    raise AssertionError(f"{path.stem} reaches no plan call")


@pytest.mark.parametrize("stem", sorted(grids.GRIDS))
def test_the_notebook_runs_the_grid_the_planner_declares(stem, tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(ROOT / "notebooks")
    folders = build_overrides("smoke", "cpu", None, tmp_path / "results", tmp_path / "figures", tmp_path / "tables")
    parameters = {**load_profiles(ROOT / "profiles", stem)["smoke"], **folders}
    declared = plan.declared_configs(ROOT / "notebooks" / f"{stem}.ipynb", parameters)
    assert declared, f"{stem} declares runs in its smoke profile"
    assert runs_up_to_the_plan(ROOT / "notebooks" / f"{stem}.ipynb", parameters) == declared


@pytest.mark.parametrize("stem", ["pkd_table1_4_class_accuracy", "pkd_table6_7_baselines", "pkd_table9_10_cost",
                                  "pkd_fig3_6_9_class_accuracy_rounds", "pkd_fig11_expert_activation"])
def test_paper_profile_pkd_runs_use_the_pilots_loss_normalisation(stem, tmp_path):
    overrides = build_overrides("paper", "cpu", None, tmp_path / "r", tmp_path / "f", tmp_path / "t")

    def pkd_runs(profile: str) -> list[RunConfig]:
        parameters = {**load_profiles(ROOT / "profiles", stem)[profile], **overrides}
        return [cfg for cfg in plan.declared_configs(ROOT / "notebooks" / f"{stem}.ipynb", parameters)
                if cfg.method == "pkd"]

    paper = pkd_runs("paper")
    assert paper and all((c.method_args["normalise"], c.method_args["t_squared"]) == ("batch", True) for c in paper)
    assert all("t_squared" not in c.method_args for c in pkd_runs("smoke")), "other profiles keep PKD's defaults"


@pytest.mark.parametrize("stem", sorted(grids.HOOK_TRAINED))
def test_the_executor_leaves_hook_trained_runs_to_their_notebook_but_the_plan_counts_them(stem, tmp_path):
    from fedlib.paper.reproduce import notebook_runs

    overrides = build_overrides("smoke", "cpu", None, tmp_path / "r", tmp_path / "f", tmp_path / "t")
    parameters = {**load_profiles(ROOT / "profiles", stem)["smoke"], **overrides}
    assert plan.declared_configs(ROOT / "notebooks" / f"{stem}.ipynb", parameters), "the plan counts them"
    runs, _ = notebook_runs("smoke", stem, results_dir=tmp_path / "r", progress=False)
    assert runs == [], "trained first without the hook, they would be trained twice"
