"""The notebooks as a course: an index that orders every notebook, a Try it cell closing each one
whose prompts change parameters the notebook has, links to code that exists, and a figure saved by
every table notebook."""

import json
import re
from pathlib import Path

import pytest

from fedlib.notebook import cell_defaults
from tools import try_it

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
COURSE = ROOT / "notebooks" / "README.md"
each_notebook = pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def test_the_try_it_cells_are_as_the_tool_writes_them():
    assert try_it.main(["--check"]) == 0, "run: python tools/try_it.py"


@each_notebook
def test_the_notebook_ends_with_prompts_on_its_own_parameters(path: Path):
    last = cells(path)[-1]
    text = "".join(last["source"])
    assert last["cell_type"] == "markdown" and text.startswith(try_it.HEADING + "\n")
    prompts = re.findall(r"^\d+\. (.+)$", text, flags=re.MULTILINE)
    assert 2 <= len(prompts) <= 3
    parameters = set(cell_defaults(path))
    for prompt in prompts:
        named = {re.match(r"\w+", code).group() for code in re.findall(r"`([^`]+)`", prompt) if re.match(r"\w+", code)}
        assert named & parameters, f"a prompt changes no parameter of {path.stem}: {prompt}"


@each_notebook
def test_the_code_it_links_exists(path: Path):
    text = "".join(cells(path)[-1]["source"])
    targets = re.findall(r"\]\(\.\./([^)]+)\)", text)
    assert targets, "link the code of the methods the notebook compares"
    assert all((ROOT / target).exists() for target in targets), targets


def test_the_course_orders_every_notebook_once():
    text = COURSE.read_text(encoding="utf-8")
    linked = re.findall(r"\]\(([a-z0-9_]+)\.ipynb\)", text)
    assert sorted(linked) == sorted(p.stem for p in NOTEBOOKS)  # each once
    steps = [int(n) for n in re.findall(r"^\| (\d+) \|", text, flags=re.MULTILINE)]
    assert steps == list(range(1, len(NOTEBOOKS) + 1))


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if "_table" in p.stem], ids=lambda p: p.stem)
def test_every_table_notebook_saves_a_figure(path: Path):
    code = "".join("".join(c["source"]) for c in cells(path) if c["cell_type"] == "code")
    assert "plots.save_figure(" in code
