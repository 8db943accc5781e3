"""Every Try-it prompt that sets a parameter sets it to something other than what the lesson
profile already runs: a prompt that changes nothing teaches nothing."""

import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import notebook_parameters

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tools.try_it import ASSIGNMENT, PROMPTS  # noqa: E402


def test_prompts_set_parameters():
    assignments = [a for prompts, _ in PROMPTS.values() for p in prompts for a in ASSIGNMENT.findall(p)]
    assert len(assignments) >= 100, "the prompts' `name = value` form changed: update ASSIGNMENT"


@pytest.mark.parametrize("stem", sorted(PROMPTS))
def test_every_prompt_changes_the_lesson(stem, tmp_path):
    lesson = notebook_parameters(stem, "lesson", tmp_path)
    for number, prompt in enumerate(PROMPTS[stem][0], 1):
        for name, value in ASSIGNMENT.findall(prompt):
            assert name in lesson, f"prompt {number} sets {name}, which {stem} has no parameter for"
            assert lesson[name] != yaml.safe_load(value), (
                f"prompt {number} sets {name} = {value}, the value the lesson profile already runs")
