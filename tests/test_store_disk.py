"""The results store's disk use is bounded: per-client state is written one file per client and
only when it changed, a kill never leaves two checkpoints or a corrupt one, and a finished run
keeps its final model, metrics and config only."""

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch

from fedlib import cli, engine, store
from fedlib.config import RunConfig
from fedlib.state import sample_clients

REPO = Path(__file__).resolve().parent.parent
PER_CLIENT_METHODS = ["moon", "scaffold", "fedcurv"]


def tiny(**changes) -> RunConfig:
    """8 clients, 2 per round: per-client tables fill up over the rounds."""
    base = dict(dataset="synthetic", model="mlp", partition="dirichlet", beta=0.5, clients=8,
                participation=0.25, rounds=5, local_epochs=1, batch_size=32, lr=0.05, momentum=0.5,
                seed=1, device="cpu", backend="sequential")
    base.update(changes)
    return RunConfig(**base)


def quiet_run(cfg, root, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return engine.run(cfg, results_dir=root, progress=False, **kwargs)


def without_seconds(rounds):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rounds]


def model_bytes(cfg) -> int:
    server, _ = engine.prepare(cfg)
    return sum(v.numel() * v.element_size() for v in server.model.state_dict().values())


def assert_same_tree(a, b, where=""):
    """Two checkpoint values hold the same structure and bit-identical tensors."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert list(a) == list(b), where  # same keys in the same order (sums run in that order)
        for key in a:
            assert_same_tree(a[key], b[key], f"{where}/{key}")
    else:
        assert a == b, where


def referenced_files(folder: Path) -> set[str]:
    return set(torch.load(folder / store.CHECKPOINT_FILE, weights_only=True)["client_files"].values())


# ---------------------------------------------------------------------- finished runs are small
@pytest.mark.parametrize("method", PER_CLIENT_METHODS + ["fedavg"])
def test_a_finished_run_keeps_no_resume_checkpoint_and_stays_small(tmp_path, method):
    cfg = tiny(method=method)
    result = quiet_run(cfg, tmp_path)
    folder = tmp_path / cfg.hash()
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "final.pt", "meta.json",
                                                        "rounds.jsonl", "summary.json"]
    # the model, SCAFFOLD's server variate c (one model's size) and small files; no per-client state
    bound = (2 if method == "scaffold" else 1) * model_bytes(cfg) + 64 * 1024
    assert store.disk_bytes(folder) < bound
    final = store.RunRecord(folder).read_final()
    assert final["round"] == cfg.rounds and final["model"].keys() == result.global_state().keys()
    assert bool(final["dropped_client_state"]) == (method in PER_CLIENT_METHODS)


def test_a_run_in_progress_writes_only_the_clients_that_trained(tmp_path):
    cfg = tiny(method="scaffold", rounds=6)
    quiet_run(cfg, tmp_path, stop_after=4)
    folder = tmp_path / cfg.hash()
    before = {p.name: p.stat().st_mtime_ns for p in (folder / "clients").iterdir()}
    quiet_run(cfg, tmp_path, stop_after=5)
    after = {p.name: p.stat().st_mtime_ns for p in (folder / "clients").iterdir()}
    trained = set(sample_clients(cfg.seed, 4, cfg.clients, cfg.participation))
    rewritten = {int(name.split("-")[0]) for name in set(after) - set(before)}
    assert rewritten == trained
    assert all(after[name] == before[name] for name in set(after) & set(before)), "an unchanged client was rewritten"
    assert set(after) == referenced_files(folder), "a replaced client file was left behind"


def test_a_client_entry_changed_in_place_is_written_again(tmp_path):
    record = store.RunRecord(tmp_path / "run")
    table = {0: torch.zeros(3), 1: torch.ones(3)}
    record.write_checkpoint({"round": 1, "model": {}, "extras": {"table": table}})
    first = dict(torch.load(record.folder / "checkpoint.pt", weights_only=True)["client_files"])
    table[1].add_(1.0)  # in place: same tensor object, new version
    record.write_checkpoint({"round": 2, "model": {}, "extras": {"table": table}})
    second = torch.load(record.folder / "checkpoint.pt", weights_only=True)["client_files"]
    assert second[0] == first[0] and second[1] != first[1]
    restored = store.RunRecord(record.folder).read_checkpoint()["extras"]["table"]
    assert list(restored) == [0, 1] and torch.equal(restored[1], torch.full((3,), 2.0))


# ---------------------------------------------------------------------- resume stays exact
@pytest.mark.parametrize("method", ["moon", "scaffold"])
def test_resume_after_several_kills_is_bit_identical_for_per_client_state(tmp_path, method):
    cfg = tiny(method=method, method_args={"projection_head": True} if method == "moon" else {})
    quiet_run(cfg, tmp_path / "a", stop_after=4)
    for stop in (1, 2, 4):  # killed after rounds 1, 2 and 4, resumed each time
        quiet_run(cfg, tmp_path / "b", stop_after=stop)
    a = store.RunRecord(tmp_path / "a" / cfg.hash()).read_checkpoint()
    b = store.RunRecord(tmp_path / "b" / cfg.hash()).read_checkpoint()
    assert_same_tree(a["model"], b["model"], "model")
    assert_same_tree(a["extras"], b["extras"], "extras")
    uninterrupted = quiet_run(cfg, tmp_path / "a")
    resumed = quiet_run(cfg, tmp_path / "b")
    assert without_seconds(resumed.rounds) == without_seconds(uninterrupted.rounds)
    assert_same_tree(uninterrupted.global_state(), resumed.global_state(), "final model")


def test_a_checkpoint_written_before_client_files_existed_still_resumes(tmp_path):
    cfg = tiny(method="fedcurv")
    reference = quiet_run(cfg, tmp_path / "a")
    quiet_run(cfg, tmp_path / "b", stop_after=2)
    folder = tmp_path / "b" / cfg.hash()
    state = store.RunRecord(folder).read_checkpoint()
    torch.save(state, folder / "checkpoint.pt")  # the old layout: one file, client tables inline
    for path in (folder / "clients").iterdir():
        path.unlink()
    resumed = quiet_run(cfg, tmp_path / "b")
    assert without_seconds(resumed.rounds) == without_seconds(reference.rounds)
    assert not (folder / "clients").exists() and not (folder / "checkpoint.pt").exists()


# ---------------------------------------------------------------------- kills while writing
class Killed(BaseException):
    """Stands for the process dying in the middle of a checkpoint."""


@pytest.mark.parametrize("target", ["client file", "checkpoint.pt"])
def test_an_exception_while_checkpointing_leaves_the_previous_checkpoint(tmp_path, monkeypatch, target):
    cfg = tiny(method="moon")
    reference = quiet_run(cfg, tmp_path / "a")
    quiet_run(cfg, tmp_path / "b", stop_after=2)
    folder = tmp_path / "b" / cfg.hash()
    committed = referenced_files(folder)
    real_replace = os.replace

    def dying_replace(source, destination):
        destination = Path(destination)
        if destination.parent.name == "clients" if target == "client file" else destination.name == "checkpoint.pt":
            raise Killed()
        real_replace(source, destination)

    monkeypatch.setattr(store.os, "replace", dying_replace)
    with pytest.raises(Killed):
        quiet_run(cfg, tmp_path / "b")
    monkeypatch.setattr(store.os, "replace", real_replace)
    assert store.RunRecord(folder).read_checkpoint()["round"] == 2  # the previous one, whole
    assert not list(folder.glob(".*.tmp")) and not list((folder / "clients").glob(".*.tmp"))
    strays = {p.name for p in (folder / "clients").iterdir()} - committed
    assert len(strays) <= len(sample_clients(cfg.seed, 2, cfg.clients, cfg.participation))
    resumed = quiet_run(cfg, tmp_path / "b")
    assert without_seconds(resumed.rounds) == without_seconds(reference.rounds)
    assert_same_tree(reference.global_state(), resumed.global_state(), "final model")


DIE_ON_SECOND_COMMIT = textwrap.dedent("""
    import json, os, sys, warnings
    from pathlib import Path
    from fedlib import engine, store
    from fedlib.config import RunConfig
    real_replace, commits = os.replace, []

    def replace(source, destination):  # SIGKILL-like: no cleanup, at the worst moment
        if Path(destination).name == "checkpoint.pt":
            commits.append(destination)
            if len(commits) == 2:
                os._exit(9)
        real_replace(source, destination)

    store.os.replace = replace
    warnings.simplefilter("ignore")
    engine.run(RunConfig.from_dict(json.loads(sys.argv[2])), results_dir=sys.argv[1], progress=False)
""")


def test_a_process_killed_before_its_commit_leaves_one_loadable_checkpoint(tmp_path):
    cfg = tiny(method="fedcurv")
    reference = quiet_run(cfg, tmp_path / "a")
    env = {**os.environ, "PYTHONPATH": str(REPO), "FEDLIB_REFERENCE": "off"}
    died = subprocess.run([sys.executable, "-c", DIE_ON_SECOND_COMMIT, str(tmp_path / "b"), json.dumps(cfg.to_dict())],
                          cwd=REPO, env=env, capture_output=True, text=True)
    assert died.returncode == 9, died.stderr
    folder = tmp_path / "b" / cfg.hash()
    record = store.RunRecord(folder)
    assert record.read_checkpoint()["round"] == 1
    committed = referenced_files(folder)
    clients = {p.name: p.stat().st_size for p in (folder / "clients").iterdir()}
    strays = set(clients) - committed
    # beside the committed checkpoint: the dead writer's temporary checkpoint.pt and the client
    # files of its round only, never a second copy of every client's state
    assert len(strays) <= len(sample_clients(cfg.seed, 1, cfg.clients, cfg.participation))
    assert len(list(folder.glob(".checkpoint.pt.*.tmp"))) == 1
    resumed = quiet_run(cfg, tmp_path / "b")
    assert without_seconds(resumed.rounds) == without_seconds(reference.rounds)
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "final.pt", "meta.json",
                                                        "rounds.jsonl", "summary.json"]


def test_a_run_killed_after_dropping_its_checkpoint_finishes_from_its_final_state(tmp_path):
    cfg = tiny(method="scaffold")
    first = quiet_run(cfg, tmp_path)
    folder = tmp_path / cfg.hash()
    (folder / "summary.json").unlink()  # killed between removing checkpoint.pt and the summary
    again = quiet_run(cfg, tmp_path)
    assert again.summary["final_accuracy"] == first.summary["final_accuracy"]
    assert len(again.rounds) == cfg.rounds and not (folder / "checkpoint.pt").exists()


# ---------------------------------------------------------------------- consumers of a finished run
def test_a_finished_run_still_serves_its_model_and_local_updates(tmp_path):
    from fedlib import drift

    cfg = tiny(method="scaffold")
    result = quiet_run(cfg, tmp_path)
    model = result.load_model("cpu")
    server, _ = engine.prepare(cfg)
    assert engine.evaluate(model, server.data)["accuracy"] == pytest.approx(result.final_accuracy, abs=1e-6)
    with pytest.warns(RuntimeWarning, match="kept no per-client state"):
        drift.local_update(result, client_id=0)


def test_list_shows_each_runs_size_on_disk_and_the_total(tmp_path, capsys):
    done, partial = tiny(method="moon"), tiny(method="moon", seed=2)
    quiet_run(done, tmp_path)
    quiet_run(partial, tmp_path, stop_after=3)
    assert cli.main(["list", "--results", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    sizes = {line.split()[0]: " ".join(line.split()[2:4]) for line in lines[:-1]}
    assert sizes[done.hash()] == store.human_bytes(store.disk_bytes(tmp_path / done.hash()))
    assert sizes[partial.hash()] == store.human_bytes(store.disk_bytes(tmp_path / partial.hash()))
    assert lines[-1].startswith("2 runs, ") and "on disk" in lines[-1]


@pytest.mark.parametrize("count, text", [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"),
                                         (5 * 1024 ** 3, "5.0 GiB")])
def test_human_bytes(count, text):
    assert store.human_bytes(count) == text
