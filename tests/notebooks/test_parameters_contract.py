"""Profiles are a contract and every notebook parameter has the kind its parameters cell declares:
a profile the file does not define, a bad profile YAML, a scalar where a list belongs, an empty
list, a value given twice or an unknown name inside a list stop with one line."""

import json
from pathlib import Path

import pytest

from fedlib.errors import FedlibError
from fedlib.paper.plan import notebook_parameters
from fedlib.reporting.notebook import REPO_ROOT, apply_profile, load_profiles
from fedlib.reporting.parameters import check_parameters

PARAMETERS = """\
profile = "smoke"
results_dir = "results"
figures_dir = None
tables_dir = None
dataset = "digits"
datasets = ["digits", "synthetic"]
methods = ["fedavg"]
rounds = {"digits": 3}
lr = 0.01
clients = 10
seeds = [0, 1]
"""


def probe_repo(root: Path, profiles: str | None) -> Path:
    """A repository with notebooks/probe.ipynb (only a parameters cell) and, unless None, profiles/probe.yaml."""
    cell = {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": PARAMETERS, "outputs": [],
            "execution_count": None}
    (root / "notebooks").mkdir(parents=True)
    (root / "notebooks" / "probe.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4,
                                                                 "nbformat_minor": 5}))
    (root / "profiles").mkdir()
    if profiles is not None:
        (root / "profiles" / "probe.yaml").write_text(profiles)
    return root


def namespace(**values) -> dict:
    """The parameters cell run as a script would, then ``values`` over it."""
    scope: dict = {}
    exec(PARAMETERS, scope)  # noqa: S102 - the probe's own literals
    return {**scope, **values}


@pytest.mark.parametrize("profiles", [None, "", "# only a comment\n"])
def test_a_profile_the_file_does_not_define_stops_with_one_line(tmp_path, monkeypatch, profiles):
    monkeypatch.chdir(probe_repo(tmp_path, profiles))
    with pytest.raises(FedlibError) as caught:
        apply_profile("probe", namespace(profile="quick"))
    assert "profile 'quick' asked for, but profiles/probe.yaml defines no profile" in str(caught.value)
    assert "\n" not in str(caught.value)
    assert apply_profile("probe", namespace(profile=None))["lr"] == 0.01, "profile None runs the cell as written"


def test_an_undefined_profile_name_lists_the_defined_ones(tmp_path, monkeypatch):
    monkeypatch.chdir(probe_repo(tmp_path, "smoke: {}\npaper: {lr: 0.1}\n"))
    with pytest.raises(FedlibError, match="unknown profile 'quick'; valid profiles: paper, smoke"):
        apply_profile("probe", namespace(profile="quick"))


@pytest.mark.parametrize("text, says", [
    ("quick:\n  lr: 0.1\n  lr: 0.2\n", "key 'lr' is given twice (lines 2 and 3)"),
    ("quick:\n\tlr: 0.1\n", "indent with spaces, not tabs"),
    ("quick: {lr: 0.1\n", "invalid YAML"),
    ("quick:\n  seeds: 3\n", "parameter seeds takes a list like [0, 1], got 3 (int)"),
    ("quick:\n  rounds: 5\n", "parameter rounds takes a mapping"),
    ("quick:\n  clients: 2.5\n", "parameter clients takes a whole number, got 2.5"),
    ("quick:\n  nosuch: 1\n", "sets nosuch, which the parameters cell of probe does not declare"),
    ("quick: [1, 2]\n", "profile 'quick' must be a mapping of parameters"),
])
def test_a_bad_profile_yaml_is_one_line(tmp_path, monkeypatch, text, says):
    monkeypatch.chdir(probe_repo(tmp_path, text))
    with pytest.raises(FedlibError) as caught:
        apply_profile("probe", namespace(profile="quick"))
    assert says in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("name, value, says", [
    ("seeds", 3, "parameter seeds takes a list like [0, 1], got 3 (int)"),
    ("seeds", [], "parameter seeds is an empty list"),
    ("seeds", [0, 0], "parameter seeds lists 0 twice"),
    ("seeds", [0, 1.5], "takes a list of whole numbers"),
    ("datasets", ["digits", "nosuch"], "unknown dataset 'nosuch'"),
    ("methods", ["fedavg", "nosuch"], "unknown method 'nosuch'"),
    ("dataset", "nosuch", "unknown dataset 'nosuch'"),
    ("lr", "fast", "parameter lr takes a number, got 'fast'"),
    ("rounds", 5, "parameter rounds takes a mapping"),
    ("rounds", {"digits": "many"}, "parameter rounds['digits'] takes a whole number"),
])
def test_a_parameter_of_the_wrong_kind_is_one_line(name, value, says):
    declared = namespace()
    with pytest.raises(FedlibError) as caught:
        check_parameters("probe", declared, {**declared, name: value})
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_none_and_whole_numbers_for_floats_are_accepted():
    declared = namespace()
    check_parameters("probe", declared, {**declared, "clients": None, "lr": 1, "seeds": [3]})


def test_reproduce_declares_runs_only_from_parameters_of_the_declared_kinds():
    notebook = REPO_ROOT / "notebooks" / "getting_started.ipynb"
    with pytest.raises(FedlibError, match="parameter seeds lists 0 twice"):
        notebook_parameters(notebook, {"seeds": [0, 0]})
    with pytest.raises(FedlibError, match="parameter seeds takes a list"):
        notebook_parameters(notebook, {"seeds": 3})


def test_every_committed_profile_passes_the_contract():
    from fedlib.reporting.notebook import cell_defaults

    for notebook in sorted((REPO_ROOT / "notebooks").glob("*.ipynb")):
        declared = cell_defaults(notebook)
        for values in load_profiles(REPO_ROOT / "profiles", notebook.stem).values():
            check_parameters(notebook.stem, declared, {**declared, **values})


@pytest.mark.notebook
@pytest.mark.parametrize("profiles, parameters, says", [
    ("# nothing here yet\n", {"profile": "quick"}, "profile 'quick' asked for, but profiles/probe.yaml defines no profile"),
    ("quick: {}\n", {"profile": "quick", "seeds": 3}, "parameter seeds takes a list"),
    ("quick: {}\n", {"profile": "quick", "seeds": "[]"}, "parameter seeds is an empty list"),
])
def test_papermill_stops_with_one_line(tmp_path, profiles, parameters, says):
    papermill = pytest.importorskip("papermill")
    nbformat = pytest.importorskip("nbformat")
    repo = probe_repo(tmp_path / "repo", profiles)
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_code_cell(PARAMETERS, metadata={"tags": ["parameters"]}),
                      nbformat.v4.new_code_cell('from fedlib.reporting.notebook import apply_profile\n'
                                                'apply_profile("probe", globals())')]
    nbformat.write(notebook, repo / "notebooks" / "probe.ipynb")
    with pytest.raises(papermill.PapermillExecutionError) as error:
        papermill.execute_notebook(str(repo / "notebooks" / "probe.ipynb"), str(tmp_path / "out.ipynb"),
                                   kernel_name="python3", cwd=str(repo), parameters=parameters, progress_bar=False)
    assert error.value.ename == "FedlibError" and says in error.value.evalue
    assert error.value.traceback == [f"FedlibError: {error.value.evalue}"]
