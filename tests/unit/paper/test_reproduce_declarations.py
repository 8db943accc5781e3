"""One declaration pass per reproduce call (issue 46): the runs a notebook declares are computed
once, however many steps of the call need them (the executor's runs, the plan, the notebooks' run)."""

import collections

from fedlib.paper import plan
from fedlib.paper.reproduce import runner
from fedlib.paper.reproduce.declared import Declarations

STEM = "pkd_table1_4_class_accuracy"


def _counted(monkeypatch) -> collections.Counter:
    """Calls to plan.declared_configs per notebook stem, wherever they come from."""
    calls = collections.Counter()
    original = plan.declared_configs

    def counting(notebook, parameters):
        calls[notebook.stem] += 1
        return original(notebook, parameters)

    monkeypatch.setattr(plan, "declared_configs", counting)
    return calls


def test_execute_plan_and_run_declare_each_notebook_once(tmp_path, monkeypatch, capsys):
    from fedlib.orchestration import executor
    from fedlib.paper import reproduce

    calls = _counted(monkeypatch)
    handed = []
    monkeypatch.setattr(executor, "execute", lambda configs, **kwargs: handed.extend(configs) or [])
    monkeypatch.setattr(plan, "plan_frame", lambda grids, *args, **kwargs: grids)  # no probe rounds
    monkeypatch.setattr(plan, "format_plan", lambda frame, *args: f"plan of {sorted(frame)}")
    monkeypatch.setattr(runner, "check_kernel", lambda kernel: None)
    monkeypatch.setattr(runner, "_run_one", lambda notebook, entry, overrides, folder, *rest:
                        runner.NotebookRun(notebook.stem, "ok", 0.0, folder / notebook.name, ""))
    code = reproduce.main(["--profile", "paper", "--only", STEM, "--executor", "local", "--workers", "1",
                           "--kernel", "python3", "--out", str(tmp_path / "out"), "--results", str(tmp_path / "r")])
    assert code == 0, capsys.readouterr()
    assert f"plan of ['{STEM}']" in capsys.readouterr().out
    assert handed, "the executor got the declared runs"
    assert calls == {STEM: 1}  # before issue 46: twice (the executor's runs, then the plan)


def test_declarations_ask_once_per_notebook_and_parameters_and_ignore_output_folders(monkeypatch):
    from fedlib.reporting.notebook import REPO_ROOT

    calls = _counted(monkeypatch)
    notebook = REPO_ROOT / "notebooks" / f"{STEM}.ipynb"
    declarations = Declarations()
    first = declarations.configs(notebook, {"profile": "smoke", "figures_dir": "a"})
    assert declarations.configs(notebook, {"profile": "smoke", "figures_dir": "b"}) is first
    declarations.configs(notebook, {"profile": "quick"})
    assert calls == {STEM: 2} and declarations.asked == 2
