"""tools/lesson_store.py: the course column it writes, the models and analyses it publishes."""

import json
from pathlib import Path

import pytest

from fedlib import store
from fedlib.core.config import RunConfig
from fedlib.engine import engine
from fedlib.errors import FedlibError
from tools import lesson_store

COURSE = """| step | notebook | what | first | smoke | lesson |
|---|---|---|---|---|---|
| 1 | [alpha](alpha.ipynb) | a | nothing | 26 s | - |
| 2 | [beta](beta.ipynb) | b | 1 | 30 s | 5 s |
| 3 | [gamma](gamma.ipynb) | c | 2 | 31 s | - |
"""


def test_the_course_column_shows_the_time_or_why_there_is_none():
    times = {"alpha": {"seconds": 65}, "beta": {"seconds": 409}}
    rows = lesson_store.course_text(COURSE, times, {"alpha", "beta", "gamma"}).splitlines()
    assert rows[2].endswith("| 26 s | 65 s |")
    assert rows[3].endswith("| 30 s | 6.8 min |")
    assert rows[4].endswith("| 31 s | not built |")
    assert lesson_store.course_text(COURSE, times, {"alpha"}).splitlines()[3].endswith("| 30 s | - |")
    assert rows[:2] == COURSE.splitlines()[:2]  # the header is left alone


def test_the_course_column_prefers_the_standalone_time():
    times = {"beta": {"seconds": 20, "standalone": {"seconds": 250}}}
    assert lesson_store.course_text(COURSE, times, {"beta"}).splitlines()[3].endswith("| 30 s | 4.2 min |")


def test_a_build_keeps_the_standalone_time_and_a_standalone_keeps_the_build(tmp_path, monkeypatch):
    monkeypatch.setattr(lesson_store, "TIMES", tmp_path / "times.json")
    lesson_store.record_standalone("beta", 250.4, 3, 1, "one training beside it")
    lesson_store.record_time("beta", 20.2, 0)
    lesson_store.record_standalone("alpha", 61, 2, None, "")
    lesson_store.record_time("alpha", 70, 1)
    lesson_store.record_standalone("alpha", 66, 2, None, "quiet")
    times = json.loads((tmp_path / "times.json").read_text())
    assert times["beta"]["seconds"] == 20 and times["beta"]["standalone"]["seconds"] == 250
    assert times["beta"]["standalone"]["load"] == "one training beside it"
    assert times["alpha"]["seconds"] == 70 and times["alpha"]["standalone"]["seconds"] == 66


def test_a_standalone_execution_switches_the_reference_store_off(tmp_path, monkeypatch):
    seen = {}

    def fake_run(command, cwd, env):
        seen.update(env=env, command=command)
        return type("Done", (), {"returncode": 0})()

    monkeypatch.setattr(lesson_store.subprocess, "run", fake_run)
    monkeypatch.delenv(store.REFERENCE_ENV, raising=False)
    lesson_store.execute(Path("getting_started.ipynb"), tmp_path, publish=False, threads=1, standalone=True)
    assert seen["env"][store.REFERENCE_ENV] == "off"
    assert "--publish" not in seen["command"]
    lesson_store.execute(Path("getting_started.ipynb"), tmp_path, publish=False, threads=1)
    assert seen["env"].get(store.REFERENCE_ENV) != "off"


@pytest.fixture
def reference(tmp_path, monkeypatch):
    """An empty reference store for lesson_store, and runs that record a clean code revision."""
    from fedlib.store import provenance

    root = tmp_path / "reference"
    monkeypatch.setenv("FEDLIB_REFERENCE", str(root))
    monkeypatch.setattr(provenance, "code_revision", lambda: "c" * 40)
    return root


def tiny(seed: int) -> RunConfig:
    return RunConfig(dataset="synthetic", model="mlp", clients=2, rounds=1, batch_size=32, seed=seed,
                     max_train_samples=64, max_test_samples=32)


def test_only_the_models_the_notebook_read_are_published_with_the_runs(tmp_path, reference):
    scratch = tmp_path / "scratch"
    read, unread = (engine.run(tiny(seed), results_dir=scratch, progress=False) for seed in (0, 1))
    (scratch / lesson_store.MODEL_READS).write_text(read.config.hash() + "\n")
    published = lesson_store.publish_trained(scratch)
    assert sorted(p.name for p in published) == sorted([read.config.hash(), unread.config.hash()])
    assert (reference / read.config.hash() / store.FINAL_FILE).exists()
    assert not (reference / unread.config.hash() / store.FINAL_FILE).exists()
    assert lesson_store.publish_trained(scratch) == []  # already there


def test_a_model_read_from_a_run_published_without_it_is_added_when_the_retrain_is_the_same_run(tmp_path, reference):
    scratch = tmp_path / "scratch"
    result = engine.run(tiny(0), results_dir=scratch, progress=False)
    folder = store.publish(store.RunRecord(result.folder))  # metrics only
    (scratch / lesson_store.MODEL_READS).write_text(result.config.hash() + "\n")
    assert lesson_store.publish_trained(scratch) == [folder]
    assert (folder / store.FINAL_FILE).read_bytes() == (result.folder / store.FINAL_FILE).read_bytes()
    assert store.seal_problem(folder) is None and store.FINAL_FILE in json.loads((folder / store.DIGEST_FILE).read_text())["sha256"]


def test_a_model_read_from_a_run_published_without_it_is_refused_unless_retrained_identically(tmp_path, reference):
    scratch = tmp_path / "scratch"
    result = engine.run(tiny(0), results_dir=scratch, progress=False)
    folder = store.publish(store.RunRecord(result.folder))  # metrics only
    (scratch / lesson_store.MODEL_READS).write_text(result.config.hash() + "\n")
    rounds = result.folder / "rounds.jsonl"  # a retrain on another CPU: one accuracy differs in float rounding
    entries = [json.loads(line) for line in rounds.read_text().splitlines()]
    entries[0]["accuracy"] += 1e-7
    rounds.write_text("".join(json.dumps(e) + "\n" for e in entries))
    store.seal(result.folder)  # as that machine's own run
    with pytest.raises(FedlibError, match="differs from the committed run from round 1"):
        lesson_store.publish_trained(scratch)
    assert not (folder / store.FINAL_FILE).exists()
    import shutil

    shutil.rmtree(result.folder)  # no retrain at all
    with pytest.raises(FedlibError, match="holds without it"):
        lesson_store.publish_trained(scratch)


def test_analysis_caches_are_copied_once(tmp_path, reference):
    scratch = tmp_path / "scratch"
    store.write_atomic(scratch / "drift" / "abc.csv", b"a,b\n")
    store.write_atomic(scratch / "local_update" / "def.npz", b"npz")  # fedlib.analysis.local_update's cache
    assert lesson_store.publish_analyses(scratch) == [reference / "drift" / "abc.csv",
                                                      reference / "local_update" / "def.npz"]
    assert (reference / "drift" / "abc.csv").read_bytes() == b"a,b\n"
    assert lesson_store.publish_analyses(scratch) == []
    assert not Path(reference / "analysis").exists()


def test_a_try_it_build_passes_the_prompts_edits_and_refuses_a_prompt_that_is_not_there(monkeypatch):
    from tools import try_it

    assert lesson_store.prompt_edits("getting_started", 1) == [("beta", "0.05")]
    assert lesson_store.prompt_edits("fedcsd_table1_3_4_label_skew", 2) == [
        ("ablations", '["base", "no_similarity", "no_mask", "no_tma"]')]
    assert lesson_store.prompt_edits("fedlmd_table5_combinations", 1)[0][0] == "part_args"  # a mapping, in YAML
    with pytest.raises(FedlibError, match="getting_started has 3 Try-it prompts; --try-it takes 1 to 3"):
        lesson_store.prompt_edits("getting_started", 4)
    monkeypatch.setitem(try_it.PROMPTS, "getting_started", (["Compare the two curves by eye."], []))
    with pytest.raises(FedlibError, match="sets no parameter"):  # every shipped prompt sets one now
        lesson_store.prompt_edits("getting_started", 1)


def test_a_try_it_build_runs_the_notebook_with_the_edits_over_the_lesson_profile(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(lesson_store.subprocess, "run",
                        lambda command, **kwargs: calls.append(command) or type("Done", (), {"returncode": 0})())
    lesson_store.execute(Path("notebooks/getting_started.ipynb"), tmp_path, False, 1, edits=[("beta", "0.05")])
    command = calls[0]
    assert command[command.index("--profile") + 1] == "lesson"
    assert command[command.index("-p") + 1:command.index("-p") + 3] == ["beta", "0.05"]
    assert command[command.index("--out") + 1] == str(tmp_path / "notebook")  # the lesson's own output is left alone
    assert "--publish" not in command
