"""tools/verify_reference.py: a reference run retrained from its config matches bit for bit, and a
tampered one is caught with the round where it parts."""

import json

import torch

from fedlib import store
from fedlib.engine import engine
from tests.helpers import tiny_config
from tools import verify_reference


def _published(tmp_path):
    cfg = tiny_config(rounds=3)
    result = engine.run(cfg, results_dir=tmp_path / "work", progress=False)
    return cfg, store.publish(store.RunRecord(result.folder), tmp_path / "reference", force=True)  # a dirty checkout too


def test_a_reference_run_is_retrained_to_identical_rounds_and_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDLIB_REFERENCE", "off")
    before = torch.get_num_threads()
    cfg, folder = _published(tmp_path)
    try:
        assert verify_reference.main([cfg.hash(), "--reference", str(tmp_path / "reference"), "--record"]) == 0
    finally:
        torch.set_num_threads(before)
    check = json.loads((folder / verify_reference.REPRODUCED_FILE).read_text())
    assert check["identical_rounds"] == 3 and check["code_revision"]


def test_a_changed_number_is_reported_with_its_round(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FEDLIB_REFERENCE", "off")
    before = torch.get_num_threads()
    cfg, folder = _published(tmp_path)
    rounds = [json.loads(line) for line in (folder / "rounds.jsonl").read_text().splitlines()]
    rounds[1]["loss"] = rounds[1]["loss"] + 1e-6
    (folder / "rounds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rounds))
    store.seal(folder)  # a stored run whose numbers differ, not an edit after it was sealed
    try:
        assert verify_reference.main([cfg.hash(), "--reference", str(tmp_path / "reference"), "--record"]) == 1
    finally:
        torch.set_num_threads(before)
    assert "DIFFERS, round 2: loss" in capsys.readouterr().out
    assert not (folder / verify_reference.REPRODUCED_FILE).exists()


def test_first_difference_counts_rounds():
    assert verify_reference.first_difference([{"a": 1, "seconds": 1}], [{"a": 1, "seconds": 9}]) is None
    assert verify_reference.first_difference([{"a": 1}], []) == "1 stored rounds, 0 retrained"


def _as_nondeterministic_cuda_run(folder):
    meta = json.loads((folder / "meta.json").read_text())
    meta["device"] = "cuda"
    meta["environment"]["deterministic"] = False
    (folder / "meta.json").write_text(json.dumps(meta))


def test_a_nondeterministic_cuda_run_is_reported_not_failed(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FEDLIB_REFERENCE", "off")
    monkeypatch.setattr(verify_reference, "retrain_device", lambda meta: "cpu")
    before = torch.get_num_threads()
    cfg, folder = _published(tmp_path)
    _as_nondeterministic_cuda_run(folder)
    rounds = [json.loads(line) for line in (folder / "rounds.jsonl").read_text().splitlines()]
    rounds[1]["loss"] = rounds[1]["loss"] + 0.25  # drifted, as such a run may
    (folder / "rounds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rounds))
    store.seal(folder)  # a stored run whose numbers differ, not an edit after it was sealed
    try:
        assert verify_reference.main([cfg.hash(), "--reference", str(tmp_path / "reference"), "--record"]) == 0
    finally:
        torch.set_num_threads(before)
    out = capsys.readouterr().out
    assert "not expected bit-identical" in out and "largest per-round difference 0.25" in out
    assert "0 of 1 reference runs reproduced bit for bit; 1 not expected to" in out
    assert not (folder / verify_reference.REPRODUCED_FILE).exists()


def test_largest_gap_reads_numbers_and_lists():
    stored = [{"round": 0, "loss": 1.0, "class_accuracy": [0.5, 0.25], "seconds": 3, "clients": [1]}]
    retrained = [{"round": 0, "loss": 1.5, "class_accuracy": [0.5, 1.0], "seconds": 9, "clients": [1]}]
    assert verify_reference.largest_gap(stored, retrained) == 0.75
    assert verify_reference.largest_gap(stored, stored) == 0.0
