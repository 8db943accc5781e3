"""Every notebook in notebooks/: stored clean, parameterised for papermill, with profiles, and
executing end to end in the smoke profile. With no notebooks yet, these parametrise to nothing."""

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from fedlib.paper.reproduce import declared_parameters, run_notebooks
from fedlib.reporting.notebook import PROSE_KEYS
from tools.strip_notebooks import has_outputs
from tools.strip_notebooks import main as strip_main
from tests.helpers import load_notebook

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
REQUIRED_PARAMETERS = {"profile", "device", "data_dir", "results_dir", "figures_dir", "tables_dir"}
STANDARD_PROFILES = {"smoke", "quick", "paper"}

each_notebook = pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])


def parameters_cells(notebook: dict) -> list[dict]:
    return [c for c in notebook["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]


@each_notebook
def test_stored_as_valid_notebook_without_outputs(path: Path):
    notebook = load_notebook(path)
    assert notebook.get("nbformat") == 4, "not an nbformat-4 notebook"
    nbformat = pytest.importorskip("nbformat")
    nbformat.validate(nbformat.reads(path.read_text(encoding="utf-8"), as_version=4))
    assert not has_outputs(notebook), f"run: python tools/strip_notebooks.py {path.name}"


@each_notebook
def test_first_code_cell_is_the_only_parameters_cell(path: Path):
    notebook = load_notebook(path)
    tagged = parameters_cells(notebook)
    assert len(tagged) == 1, f"{len(tagged)} cells tagged 'parameters'; tag exactly one"
    first_code = next(c for c in notebook["cells"] if c["cell_type"] == "code")
    assert tagged[0] is first_code, "the parameters cell must be the first code cell"
    missing = REQUIRED_PARAMETERS - declared_parameters(path)
    assert not missing, f"parameters cell lacks {sorted(missing)}"


# how prose slipped a measured result in before: it named one run's output, then quoted its numbers
DESCRIBES_A_RUN = re.compile(r"(?i)\b(in|from) the committed (quick|paper)[- ]profile|committed quick[- ]profile (figure|run|table)")


@each_notebook
def test_markdown_quotes_no_result_of_a_particular_run(path: Path):
    """A measured number in prose goes stale when the runs are redone and is false in every other
    profile: findings are printed by code from the run that rendered the notebook."""
    for index, cell in enumerate(load_notebook(path)["cells"]):
        text = "".join(cell["source"]) if cell["cell_type"] == "markdown" else ""
        found = DESCRIBES_A_RUN.search(text)
        assert not found, f"markdown cell {index} describes a committed run ({found.group(0)!r}): print it from code"


@each_notebook
def test_profiles_yaml_defines_the_standard_profiles(path: Path):
    profiles_path = ROOT / "profiles" / f"{path.stem}.yaml"
    assert profiles_path.exists(), f"write {profiles_path.relative_to(ROOT)}"
    profiles = yaml.safe_load(profiles_path.read_text()) or {}
    assert STANDARD_PROFILES <= set(profiles), f"missing {sorted(STANDARD_PROFILES - set(profiles))}"
    declared = declared_parameters(path)
    for name, parameters in profiles.items():
        unknown = set(parameters or {}) - declared - set(PROSE_KEYS)  # a note and an outcome are prose, not parameters
        assert not unknown, f"profile {name!r} sets undeclared parameter(s) {sorted(unknown)}"


@each_notebook
def test_papermill_describes_every_parameter(path: Path):
    """What `papermill --help-notebook` prints: every parameter found, each with its comment."""
    papermill = pytest.importorskip("papermill")
    assert "kernelspec" in load_notebook(path)["metadata"], "papermill needs the notebook's kernelspec metadata"
    inferred = papermill.inspect_notebook(str(path))
    declared = declared_parameters(path)
    assert set(inferred) == declared, "papermill cannot parse some parameter lines; keep them literal"
    undocumented = sorted(name for name, info in inferred.items() if not info["help"].strip())
    assert not undocumented, f"add a trailing '# comment' to {undocumented}"


def git_status() -> dict[str, str] | None:
    """What git sees changed in the checkout: path -> its ``git status --porcelain`` code and the
    SHA-1 of its content (so a file already modified that changes again counts); None outside git."""
    try:
        done = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "-z"], cwd=ROOT,
                              capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    status = {}
    for entry in filter(None, done.stdout.decode().split("\0")):
        code, name = entry[:2], entry[3:]
        path = ROOT / name
        status[name] = code + (hashlib.sha1(path.read_bytes()).hexdigest() if path.is_file() else "")
    return status


@pytest.mark.notebook
@each_notebook
def test_executes_in_smoke_profile_and_leaves_the_checkout_as_it_was(path: Path, tmp_path: Path):
    """Figures, tables and the executed copy go where a newcomer's run puts them (the ignored
    output/smoke/); only the results store is a temporary one, so every run trains here."""
    pytest.importorskip("papermill")
    before = git_status()
    [run] = run_notebooks("smoke", path.stem, notebooks_dir=ROOT / "notebooks", results_dir=tmp_path / "results",
                          kernel="python3", log_output=False)
    assert run.ok, f"{run.stem}: {run.note}; executed copy: {run.output_path}"
    assert run.output_path.resolve().is_relative_to(ROOT / "output" / "smoke")
    assert git_status() == before, "a smoke run changed or added files git sees"
    assert run.output_path.exists()


def test_strip_tool_removes_outputs_and_check_reports_them(tmp_path: Path):
    cell = {"cell_type": "code", "metadata": {}, "source": "1 + 1", "execution_count": 3,
            "outputs": [{"output_type": "execute_result", "data": {"text/plain": "2"},
                         "metadata": {}, "execution_count": 3}]}
    path = tmp_path / "dirty.ipynb"
    path.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    assert strip_main(["--check", str(path)]) == 1
    assert has_outputs(load_notebook(path)), "--check must not modify the file"
    assert strip_main([str(path)]) == 0
    stripped = load_notebook(path)["cells"][0]
    assert stripped["outputs"] == [] and stripped["execution_count"] is None
    assert stripped["source"] == "1 + 1"
    assert strip_main(["--check", str(path)]) == 0
