"""Every committed reference run still hashes to its folder name: a change to how configs are
canonicalised or hashed that would orphan a stored run (and retrain it under another name)
fails here first."""

import json
from pathlib import Path

import pytest

from fedlib.core.config import RunConfig

ROOT = Path(__file__).resolve().parents[3]
RUNS = sorted(p.parent for p in (ROOT / "reference_results").glob("*/config.json"))


def test_the_reference_store_holds_runs():
    assert len(RUNS) > 40


@pytest.mark.parametrize("folder", RUNS, ids=[p.name for p in RUNS])
def test_a_reference_run_hashes_to_its_folder_name(folder: Path):
    fields = json.loads((folder / "config.json").read_text())
    fields.pop("results_dir", None)  # where it was trained: no part of the run
    assert RunConfig(**fields).hash() == folder.name
