"""The notebooks as a course: an index that orders every notebook, a Try it cell closing each one
whose prompts change parameters the notebook has, links to code that exists, and a figure saved by
every table notebook."""

import json
import re
from pathlib import Path

import pytest

from fedlib.reporting.notebook import cell_defaults
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


# ---------------------------------------------------------------- the lesson profile
def lesson_times() -> dict:
    path = ROOT / "notebooks" / "lesson_times.json"
    return json.loads(path.read_text()) if path.exists() else {}


def test_the_course_shows_each_lessons_measured_time():
    from tools import lesson_store

    text = COURSE.read_text(encoding="utf-8")
    lessons = {nb.stem for nb in lesson_store.lesson_notebooks(None)}
    assert lesson_store.course_text(text, lesson_times(), lessons) == text, \
        "run: python tools/lesson_store.py --write-course"
    assert lessons, "some notebooks have a lesson profile"


BUILT = sorted(lesson_times())


@pytest.mark.parametrize("stem", BUILT)
def test_a_built_lesson_says_what_it_shows_and_trains_nothing_on_a_fresh_clone(stem, tmp_path):
    from fedlib import store
    from fedlib.paper.plan import declared_configs
    from fedlib.paper.reproduce import build_overrides
    from fedlib.reporting.notebook import load_profiles, profile_note

    assert profile_note(ROOT / "profiles", stem, "lesson"), f"profiles/{stem}.yaml: the lesson says what it shows"
    overrides = build_overrides("lesson", "cpu", None, tmp_path / "results", tmp_path / "f", tmp_path / "t")
    parameters = {**load_profiles(ROOT / "profiles", stem)["lesson"], **overrides}
    declared = declared_configs(ROOT / "notebooks" / f"{stem}.ipynb", parameters) or []
    missing = [cfg.hash() for cfg in declared if store.reference_record(cfg) is None]
    assert not missing, f"{stem}'s lesson runs {missing} are not in reference_results/: build it with tools/lesson_store.py"
