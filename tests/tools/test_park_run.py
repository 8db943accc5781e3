"""tools/park_run.py: an unfinished run parked in the checkout resumes, elsewhere, to the metrics of
an uninterrupted run; published runs are unparked; finished runs are never parked."""

import shutil

import torch

from fedlib import store
from fedlib.engine import engine
from tests.helpers import tiny_config
from tools import park_run


def _strip(rounds):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rounds]


def test_a_parked_run_resumes_in_a_fresh_store_to_identical_metrics(tmp_path):
    cfg = tiny_config(rounds=4, method="fedprox")
    uninterrupted = engine.run(cfg, results_dir=tmp_path / "a", progress=False)
    engine.run(cfg, results_dir=tmp_path / "b", progress=False, stop_after=2)
    parked = tmp_path / "parked"
    [run] = park_run.unfinished_runs(tmp_path / "b")
    copy = park_run.park(run, parked)
    assert sorted(p.name for p in copy.iterdir()) == ["checkpoint.pt", "config.json", "meta.json", "rounds.jsonl"]
    shutil.rmtree(tmp_path / "b")  # the machine is gone; only the parked copy is left
    assert park_run.restore(cfg.hash(), tmp_path / "c", parked)
    resumed = engine.run(cfg, results_dir=tmp_path / "c", progress=False)
    assert _strip(resumed.rounds) == _strip(uninterrupted.rounds)
    a, b = uninterrupted.global_state(), resumed.global_state()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not park_run.restore(cfg.hash(), tmp_path / "c", parked)  # finished there: nothing to restore


def test_restore_never_replaces_a_checkpoint_that_is_further_along(tmp_path):
    cfg = tiny_config(rounds=4)
    engine.run(cfg, results_dir=tmp_path / "r", progress=False, stop_after=1)
    parked = tmp_path / "parked"
    park_run.park(tmp_path / "r" / cfg.hash(), parked)
    engine.run(cfg, results_dir=tmp_path / "r", progress=False, stop_after=3)
    assert not park_run.restore(cfg.hash(), tmp_path / "r", parked)
    assert len(store.RunRecord(tmp_path / "r" / cfg.hash()).read_rounds()) == 3


def test_finished_runs_are_not_parked_and_published_ones_are_unparked(tmp_path, monkeypatch):
    cfg = tiny_config(rounds=2)
    engine.run(cfg, results_dir=tmp_path / "r", progress=False)
    assert park_run.unfinished_runs(tmp_path / "r") == []
    parked = tmp_path / "parked"
    (parked / cfg.hash()).mkdir(parents=True)
    (parked / "0123456789ab").mkdir()
    monkeypatch.setattr(store, "REFERENCE_RESULTS", tmp_path / "reference")
    store.publish(store.RunRecord(tmp_path / "r" / cfg.hash()), tmp_path / "reference", force=True)
    assert [p.name for p in park_run.unpark_published(parked)] == [cfg.hash()]
    assert [p.name for p in parked.iterdir()] == ["0123456789ab"]


def test_restore_leaves_a_live_or_finished_run_alone(tmp_path):
    cfg = tiny_config(rounds=4)
    engine.run(cfg, results_dir=tmp_path / "r", progress=False, stop_after=2)
    parked = tmp_path / "parked"
    park_run.park(tmp_path / "r" / cfg.hash(), parked)
    live = tmp_path / "live" / cfg.hash()
    live.mkdir(parents=True)
    with store.RunRecord(live).claim():  # a process is writing it now
        assert not park_run.restore(cfg.hash(), tmp_path / "live", parked)
    final = tmp_path / "final" / cfg.hash()
    final.mkdir(parents=True)
    (final / store.FINAL_FILE).write_bytes(b"")  # killed between its final state and its summary
    assert not park_run.restore(cfg.hash(), tmp_path / "final", parked)
    assert park_run.restore(cfg.hash(), tmp_path / "empty", parked)


def test_the_reference_tool_resumes_with_the_thread_count_the_run_started_with(tmp_path):
    from tools import reference_runs

    cfg = tiny_config(rounds=3)
    engine.run(cfg, results_dir=tmp_path, progress=False, stop_after=1)
    folder = tmp_path / cfg.hash()
    started = store.RunRecord(folder).read_meta()["environment"]["cpu_threads"]
    before = torch.get_num_threads()
    try:
        assert reference_runs.resume_threads(folder, started + 1) == started
        assert torch.get_num_threads() == started
        assert reference_runs.resume_threads(tmp_path / "none", 5) == 5
    finally:
        torch.set_num_threads(before)
