"""The course's exercise notebooks: shipped, each says what is left to write; with the answer key
(teaching/answers/) in its exercise cell, each passes its check and draws its comparison."""

import json
from pathlib import Path

import pytest

from tests.helpers import load_notebook
from tools.strip_notebooks import has_outputs

ROOT = Path(__file__).resolve().parents[2]
EXERCISES = sorted((ROOT / "notebooks" / "exercises").glob("*_exercise.ipynb"))
each_exercise = pytest.mark.parametrize("path", EXERCISES, ids=[p.stem for p in EXERCISES])


def answer_for(path: Path) -> Path:
    return ROOT / "teaching" / "answers" / f"{path.stem.removesuffix('_exercise')}.py"


def exercise_cells(notebook: dict) -> list[dict]:
    return [c for c in notebook["cells"] if "exercise" in c.get("metadata", {}).get("tags", [])]


def execute(notebook: dict, tmp_path: Path) -> list[str]:
    """Execute ``notebook`` where the exercises live, its check on two rounds; every cell's printed
    text, in order."""
    papermill = pytest.importorskip("papermill")
    source = tmp_path / "in.ipynb"
    source.write_text(json.dumps(notebook), encoding="utf-8")
    done = papermill.execute_notebook(str(source), str(tmp_path / "out.ipynb"), kernel_name="python3",
                                      cwd=str(ROOT / "notebooks" / "exercises"), progress_bar=False,
                                      parameters={"rounds": 2})
    return ["".join(o.get("text", "")) for c in done["cells"] for o in c.get("outputs", [])]


def test_there_are_exercises_each_with_an_answer():
    assert len(EXERCISES) >= 2
    for path in EXERCISES:
        assert answer_for(path).exists(), f"{path.name} has no answer in teaching/answers/"


@each_exercise
def test_stored_clean_with_one_exercise_cell(path: Path):
    notebook = load_notebook(path)
    assert not has_outputs(notebook), f"run: python tools/strip_notebooks.py {path}"
    [cell] = exercise_cells(notebook)
    assert "NotImplementedError" in "".join(cell["source"]), "the shipped exercise cell must be left to write"


@each_exercise
def test_shipped_notebook_runs_and_says_what_is_left(path: Path, tmp_path: Path):
    printed = "\n".join(execute(load_notebook(path), tmp_path))
    assert "FAIL  not written yet" in printed
    assert "computes what fedlib's does" not in printed


@each_exercise
def test_the_answer_key_passes_in_the_notebook(path: Path, tmp_path: Path):
    notebook = load_notebook(path)
    exercise_cells(notebook)[0]["source"] = answer_for(path).read_text(encoding="utf-8")
    printed = "\n".join(execute(notebook, tmp_path))
    assert "computes what fedlib's does" in printed
    assert "FAIL" not in printed
    assert printed.count("PASS  round") == 2
