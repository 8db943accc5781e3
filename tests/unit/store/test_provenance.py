"""Where a run's numbers come from: publishing only committed code, a resume's record in meta.json,
the reference store served before the working store, complete runs only, fp32 on CUDA."""

import json
import warnings
from types import SimpleNamespace

import pytest
import torch

from fedlib import store
from fedlib.commands import listing
from fedlib.engine import engine
from fedlib.errors import FedlibError
from fedlib.orchestration import executor
from fedlib.store import provenance
from tests.helpers import quiet_run, tiny_config

CLEAN_START, CLEAN_LATER = "a" * 40, "b" * 40


def fake_run(folder, cfg, accuracies, meta=None, diverged=False):
    """A complete run folder of ``cfg`` written by hand: one evaluated round per accuracy."""
    rounds = [{"round": i, "accuracy": a, "loss": 1.0, "class_accuracy": [a], "seconds": float(i)}
              for i, a in enumerate(accuracies)]
    record = store.RunRecord(folder)
    record.write_config(cfg)
    record.write_meta(meta if meta is not None else {"code_revision": CLEAN_START})
    record.write_rounds(rounds)
    record.write_summary({"config_hash": cfg.hash(), "final_accuracy": accuracies[-1],
                          "best_accuracy": max(accuracies), "best_round": 0, "final_loss": 1.0,
                          "class_accuracy": [accuracies[-1]], "class_names": ["0"], "rounds_run": len(rounds),
                          "train_seconds": 1.0, "diverged": diverged})
    record.seal()  # as a finished run is
    return record


@pytest.fixture
def reference(tmp_path, monkeypatch):
    root = tmp_path / "reference"
    monkeypatch.setenv("FEDLIB_REFERENCE", str(root))
    return root


# ====================================================================== 1. publish committed code only
@pytest.mark.parametrize("meta", [
    {"code_revision": CLEAN_START + "+dirty"},
    {"code_revision": "unknown"},
    {},
    {"code_revision": CLEAN_START, "resumes": [{"rounds_done": 1, "code_revision": CLEAN_LATER + "+dirty"}]},
])
def test_a_run_trained_from_uncommitted_code_is_not_published_unless_forced(tmp_path, meta):
    cfg = tiny_config(rounds=2)
    record = fake_run(tmp_path / "work" / cfg.hash(), cfg, [0.5, 0.6], meta=meta)
    with pytest.raises(FedlibError, match=r"uncommitted code \(code revision (\w+\+dirty|unknown)\)") as caught:
        store.publish(record, tmp_path / "reference")
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "reference").exists()
    assert (store.publish(record, tmp_path / "reference", force=True) / "summary.json").exists()


def test_a_run_trained_from_commits_is_published(tmp_path):
    cfg = tiny_config(rounds=2)
    meta = {"code_revision": CLEAN_START, "resumes": [{"rounds_done": 1, "code_revision": CLEAN_LATER}]}
    record = fake_run(tmp_path / "work" / cfg.hash(), cfg, [0.5, 0.6], meta=meta)
    assert json.loads((store.publish(record, tmp_path / "reference") / "meta.json").read_text()) == meta


# ====================================================================== 2. a resume keeps the run's history
@pytest.fixture
def revisions(monkeypatch):
    """provenance.code_revision answers ``revisions[0]``; set it to what the code is now."""
    now = [CLEAN_START]
    monkeypatch.setattr(provenance, "code_revision", lambda: now[0])
    return now


def test_a_resume_keeps_the_start_in_meta_and_appends_its_own_record(tmp_path, torch_threads, revisions):
    cfg = tiny_config(rounds=3)
    torch_threads(2)
    quiet_run(cfg, tmp_path, stop_after=1)
    started = store.RunRecord(tmp_path / cfg.hash()).read_meta()
    assert "resumes" not in started
    torch_threads(1)
    revisions[0] = CLEAN_LATER
    with pytest.warns(store.ProvenanceWarning) as caught:
        engine.run(cfg, results_dir=tmp_path, progress=False)
    messages = [str(w.message) for w in caught]
    assert any("agrees with an uninterrupted run only to float rounding" in m for m in messages)
    assert any(f"code revision {CLEAN_LATER}; it started with {CLEAN_START}" in m for m in messages)
    meta = store.RunRecord(tmp_path / cfg.hash()).read_meta()
    assert {k: v for k, v in meta.items() if k != "resumes"} == started
    assert meta["environment"]["cpu_threads"] == 2 and meta["code_revision"] == CLEAN_START
    [entry] = meta["resumes"]
    assert entry["rounds_done"] == 1 and entry["cpu_threads"] == 1 and entry["code_revision"] == CLEAN_LATER
    assert entry["backend"] == cfg.backend and entry["torch"] == torch.__version__ and entry["host"] and entry["date"]


def test_a_resume_with_the_same_arithmetic_and_commit_is_silent_and_still_recorded(tmp_path, revisions):
    cfg = tiny_config(rounds=3)
    quiet_run(cfg, tmp_path, stop_after=1)
    quiet_run(cfg, tmp_path, stop_after=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", store.ProvenanceWarning)
        engine.run(cfg, results_dir=tmp_path, progress=False)
    meta = store.RunRecord(tmp_path / cfg.hash()).read_meta()
    assert [e["rounds_done"] for e in meta["resumes"]] == [1, 2]


def test_a_resume_from_uncommitted_code_warns_even_when_the_revision_reads_the_same(tmp_path, revisions):
    revisions[0] = CLEAN_START + "+dirty"
    cfg = tiny_config(rounds=2)
    quiet_run(cfg, tmp_path, stop_after=1)
    with pytest.warns(store.ProvenanceWarning, match="may come from different code"):
        engine.run(cfg, results_dir=tmp_path, progress=False)


def test_show_lists_each_resume_on_one_line_and_reads_runs_without_resumes(tmp_path, torch_threads, revisions):
    cfg, old = tiny_config(rounds=3), tiny_config(rounds=3, seed=2)
    torch_threads(2)
    quiet_run(cfg, tmp_path, stop_after=1)
    torch_threads(1)
    quiet_run(cfg, tmp_path)
    quiet_run(old, tmp_path)  # never resumed: meta.json has no "resumes", as runs stored before it existed
    lines = listing.show_lines(listing.find_run(cfg.hash(), tmp_path))
    [resumed] = [line for line in lines if "resumed after" in line]
    assert resumed.startswith("  resumed after round 1 of 3: revision aaaaaaaaaaaa, backend")
    assert "1 threads on cpu" in resumed
    assert not any("resumed after" in line for line in listing.show_lines(listing.find_run(old.hash(), tmp_path)))


def test_the_executor_reports_a_resume_with_other_arithmetic(tmp_path, torch_threads, revisions):
    cfg = tiny_config(rounds=2, results_dir=str(tmp_path))
    torch_threads(2)
    quiet_run(cfg, tmp_path, stop_after=1)
    result = executor.train_one(cfg.to_dict(), threads=1)
    assert result["status"] == executor.DONE
    [note] = result["notes"]
    assert "only to float rounding" in note
    outcome = executor._outcome(cfg, result["status"], 1, result)
    text = executor.format_summary([outcome], "serial")
    assert "1 provenance note" in text and note in text


# ====================================================================== 3. the reference store wins
def test_the_reference_run_is_served_before_a_different_working_run_with_one_warning(tmp_path, reference):
    cfg = tiny_config(rounds=2)
    work = tmp_path / "work"
    fake_run(work / cfg.hash(), cfg, [0.7, 0.9])
    published = fake_run(reference / cfg.hash(), cfg, [0.4, 0.5])
    with pytest.warns(store.ProvenanceWarning) as caught:
        served = engine.run(cfg, results_dir=work, progress=False)
    assert served.folder == published.folder and served.final_accuracy == 0.5
    [warning] = [str(w.message) for w in caught]
    assert str(work / cfg.hash()) in warning and str(reference / cfg.hash()) in warning
    assert "the reference one is used" in warning and "\n" not in warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", store.ProvenanceWarning)  # said once
        assert engine.run(cfg, results_dir=work, progress=False).final_accuracy == 0.5


def test_a_working_run_equal_but_for_wall_time_is_shadowed_silently(tmp_path, reference):
    cfg = tiny_config(rounds=2)
    working = fake_run(tmp_path / "work" / cfg.hash(), cfg, [0.4, 0.5])
    rounds = working.read_rounds()
    working.write_rounds([{**r, "seconds": r["seconds"] + 7} for r in rounds])
    working.seal()  # a run that took longer, not an edit
    published = fake_run(reference / cfg.hash(), cfg, [0.4, 0.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error", store.ProvenanceWarning)
        assert engine.run(cfg, results_dir=tmp_path / "work", progress=False).folder == published.folder


def test_show_reads_the_run_the_stores_serve(tmp_path, reference):
    cfg = tiny_config(rounds=2)
    fake_run(tmp_path / "work" / cfg.hash(), cfg, [0.7, 0.9])
    fake_run(reference / cfg.hash(), cfg, [0.4, 0.5])
    run = listing.find_run(cfg.hash()[:6], tmp_path / "work")
    assert run.record.folder == reference / cfg.hash() and run.summary["final_accuracy"] == 0.5
    lines = listing.show_lines(run)
    assert any("holds this hash too, with other per-round metrics; not used" in line for line in lines)
    other = tiny_config(rounds=2, seed=5)
    fake_run(tmp_path / "work" / other.hash(), other, [0.3, 0.3])
    assert listing.find_run(other.hash(), tmp_path / "work").record.folder == tmp_path / "work" / other.hash()


def test_a_prefix_matching_runs_in_both_stores_is_ambiguous(tmp_path, reference):
    cfg, other = tiny_config(rounds=2), tiny_config(rounds=2, seed=5)
    fake_run(tmp_path / "work" / cfg.hash(), cfg, [0.7, 0.9])
    fake_run(reference / other.hash(), other, [0.4, 0.5])
    with pytest.raises(FedlibError, match="2 stored runs start with ''"):
        listing.find_run("", tmp_path / "work")


# ====================================================================== 4. complete runs only
def test_a_stored_run_with_fewer_rounds_than_its_config_is_refused(tmp_path):
    cfg = tiny_config(rounds=3)
    fake_run(tmp_path / cfg.hash(), cfg, [0.5, 0.6])
    with pytest.raises(FedlibError, match="holds 2 of its config's 3 rounds and did not diverge; delete the folder"):
        engine.run(cfg, results_dir=tmp_path, progress=False)


def test_a_stored_run_with_more_rounds_than_its_config_is_refused(tmp_path):
    cfg = tiny_config(rounds=1)
    fake_run(tmp_path / cfg.hash(), cfg, [0.5, 0.6])
    with pytest.raises(FedlibError, match="holds 2 rounds but its config 1"):
        engine.run(cfg, results_dir=tmp_path, progress=False)


def test_a_diverged_run_may_hold_fewer_rounds(tmp_path):
    cfg = tiny_config(rounds=3)
    fake_run(tmp_path / cfg.hash(), cfg, [0.5, 0.6], diverged=True)
    with pytest.warns(RuntimeWarning, match="diverged"):
        assert len(engine.run(cfg, results_dir=tmp_path, progress=False).rounds) == 2


# ====================================================================== 5. fp32 on CUDA
@pytest.fixture
def tf32_flags():
    before = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = True
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = before


def test_a_cuda_run_turns_tf32_off_and_records_it(tf32_flags, monkeypatch):
    engine.fp32_on_cuda(torch.device("cpu"))
    assert torch.backends.cudnn.allow_tf32 and engine.precision_flags(torch.device("cpu")) == {}
    engine.fp32_on_cuda(torch.device("cuda"))
    assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
    monkeypatch.setattr(engine, "counts", lambda dataset: {})  # the fake server below holds no data to count
    monkeypatch.setattr(engine.stacked, "stack_memory", lambda device: 1 << 30)  # no card to ask
    server = SimpleNamespace(device=torch.device("cuda"), hparams={},
                             data=SimpleNamespace(dataset=SimpleNamespace(source="x", fingerprint=None, identity="")))
    assert engine._meta(tiny_config(), server)["environment"]["tf32"] is False


def test_prepare_sets_the_precision_flags_for_the_run_device(monkeypatch):
    seen = []
    monkeypatch.setattr(engine, "fp32_on_cuda", seen.append)
    engine.prepare(tiny_config(rounds=1))
    assert seen == [torch.device("cpu")]
