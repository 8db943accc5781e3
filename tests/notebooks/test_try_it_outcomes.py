"""What each Try-it prompt shows (issue 44): the lesson profile's ``try_it`` list holds, per prompt, the
folded "what you should see" (``see``) and the figures in it that a stored run gives (``numbers``, as in a
lesson's ``outcome``: tests/notebooks/test_lesson_outcomes.py). The runs are the lesson's declared runs
with the prompt's edits passed over the profile, and they come from the committed store only
(``tools/lesson_store.py --only NOTEBOOK --try-it N`` builds them)."""

import sys
from pathlib import Path

import pytest
import yaml

from tests.notebooks.test_lesson_outcomes import LESSONS, declared_runs, number_in, numbers_unlike_the_runs

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tools.try_it import ASSIGNMENT, PROMPTS, SEE, cell_text  # noqa: E402

OUTCOMES = {(stem, number): entry for stem, section in LESSONS.items()
            for number, entry in enumerate(section.get("try_it") or [], 1) if entry}
WRITTEN = 86  # Try-it outcomes written so far (of 111 prompts); raise it as more are run
each_outcome = pytest.mark.parametrize("stem,number", sorted(OUTCOMES))


def edits(stem: str, number: int) -> dict:
    return {name: yaml.safe_load(value) for name, value in ASSIGNMENT.findall(PROMPTS[stem][0][number - 1])}


def test_outcomes_are_written_for_prompts_that_exist():
    assert len(OUTCOMES) >= WRITTEN, f"{len(OUTCOMES)} Try-it outcomes, {WRITTEN} were written: a try_it list went missing"
    for (stem, number) in OUTCOMES:
        assert stem in PROMPTS and number <= len(PROMPTS[stem][0]), f"{stem}: try_it entry {number} has no prompt"


@each_outcome
def test_the_outcome_is_folded_under_its_prompt(stem, number):
    text = cell_text(stem)
    prompt_line = f"{number}. {PROMPTS[stem][0][number - 1]}"
    assert prompt_line in text
    after = text.split(prompt_line, 1)[1].splitlines()[1]
    assert SEE in after and " ".join(OUTCOMES[stem, number]["see"].split())[:40] in after


@each_outcome
def test_every_number_of_the_outcome_is_in_its_text_and_the_stored_runs(stem, number, tmp_path, render_only):
    entry = OUTCOMES[stem, number]
    numbers = entry.get("numbers") or []
    assert numbers, f"{stem} Try-it {number}: an outcome declares the figures a run gives, so that a test checks them"
    see = " ".join(entry["see"].split())
    for item in numbers:
        assert number_in(see, item["value"]), f"{stem} Try-it {number}: {item['value']} is not a figure of its text"
    drawn = [item for item in numbers if "partition" in item]  # a lesson that trains nothing: its partitions
    if drawn:
        wrong = partition_numbers_unlike(stem, drawn, edits(stem, number))
        assert not wrong, f"{stem} Try-it {number}: the outcome's numbers differ from the partitions drawn: " + "; ".join(wrong)
    configs = declared_runs(stem, tmp_path, edits(stem, number))
    wrong = numbers_unlike_the_runs([item for item in numbers if "partition" not in item], configs,
                                    f"{stem} Try-it {number}")
    assert not wrong, f"{stem} Try-it {number}: the outcome's numbers differ from the committed runs: " + "; ".join(wrong)


# ------------------------------------------------------------------ the partitions of a lesson that trains nothing
PARTITION_METRICS = {  # name -> per-client summary (vacant classes, size) -> value
    "vacant_mean": lambda vacant, size: float(vacant.mean()),
    "vacant_cells": lambda vacant, size: int(vacant.sum()),
    "vacant_min": lambda vacant, size: int(vacant.min()),
    "vacant_max": lambda vacant, size: int(vacant.max()),
    "size_min": lambda vacant, size: int(size.min()),
    "size_max": lambda vacant, size: int(size.max()),
}


def partition_numbers_unlike(stem: str, numbers: list[dict], prompt_edits: dict) -> list[str]:
    """The numbers (value, metric, ``partition``: dirichlet or quantity, optional ``params`` over the prompt's
    edits) that the partition the notebook draws does not give; drawn from the training labels as the notebook
    draws them (fedvls_fig3_partitions)."""
    from fedlib.datasets.data import load_dataset
    from fedlib.datasets.partition import make_partition
    from fedlib.errors import FedlibError
    from fedlib.paper.plan import notebook_parameters
    from fedlib.reporting.notebook import load_profiles
    from tests.notebooks.test_lesson_outcomes import same_as_printed

    wrong = []
    for item in numbers:
        given = {**load_profiles(ROOT / "profiles", stem)["lesson"], **prompt_edits, **item.get("params", {})}
        p = notebook_parameters(ROOT / "notebooks" / f"{stem}.ipynb", given)
        try:
            data = load_dataset(p["dataset"], data_dir=p["data_dir"], download=False)
        except FedlibError as error:
            pytest.skip(f"{p['dataset']} is not on disk: {error}")
        options = ({"beta": p["beta"]} if item["partition"] == "dirichlet" else
                   {"classes_per_client": p["classes_per_client"], "quantity_split": p["quantity_split"]})
        summary = make_partition(item["partition"], data.train_y.numpy(), p["clients"], data.num_classes, p["seed"],
                                 **options).summary()
        value = PARTITION_METRICS[item["metric"]](summary["vacant_classes"].map(len), summary["size"])
        if not same_as_printed(value, item["value"]):
            wrong.append(f"{item['value']} ({item['metric']} of the {item['partition']} partition"
                         f"{', ' + str(item['params']) if item.get('params') else ''}): drawn {value}")
    return wrong
