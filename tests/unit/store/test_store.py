"""fedlib.store, the results store.

Its disk use is bounded: per-client state is written one file per client and only when it changed,
a kill never leaves two checkpoints or a corrupt one, and a finished run keeps its final model,
metrics and config only. It cannot be tricked into running code, serving a truncated or diverged
run as a result, or letting two processes write one run folder. The committed reference store is
read beside the working store, and render-only mode trains nothing: cells no store holds read
"not run", never a stand-in number."""

import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest
import torch

from fedlib import store
from fedlib.commands import cli
from fedlib.core.config import RunConfig
from fedlib.core.state import sample_clients
from fedlib.engine import engine, model_source
from fedlib.errors import FedlibError
from fedlib.orchestration import environment, experiments
from fedlib.orchestration.experiments import results_frame
from fedlib.reporting import tables
from fedlib.store import claim as store_claim, files as store_files, provenance, publishing as store_publishing
from tests.helpers import quiet_run, tiny_config

REPO = Path(__file__).resolve().parents[3]
PER_CLIENT_METHODS = ["moon", "scaffold", "fedcurv"]
EIGHT_CLIENTS = dict(clients=8, participation=0.25, rounds=5, backend="sequential")  # per-client tables fill up


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


# ====================================================================== disk use
# ---------------------------------------------------------------------- finished runs are small
@pytest.mark.parametrize("method", PER_CLIENT_METHODS + ["fedavg"])
def test_a_finished_run_keeps_no_resume_checkpoint_and_stays_small(tmp_path, method):
    cfg = tiny_config(EIGHT_CLIENTS, method=method)
    result = quiet_run(cfg, tmp_path)
    folder = tmp_path / cfg.hash()
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "digest.json", "final.pt", "meta.json",
                                                        "rounds.jsonl", "summary.json"]
    # the model, SCAFFOLD's server variate c (one model's size) and small files; no per-client state
    bound = (2 if method == "scaffold" else 1) * model_bytes(cfg) + 64 * 1024
    assert store.disk_bytes(folder) < bound
    final = store.RunRecord(folder).read_final()
    assert final["round"] == cfg.rounds and final["model"].keys() == result.global_state().keys()
    assert bool(final["dropped_client_state"]) == (method in PER_CLIENT_METHODS)


def test_a_run_in_progress_writes_only_the_clients_that_trained(tmp_path):
    cfg = tiny_config(EIGHT_CLIENTS, method="scaffold", rounds=6)
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
    cfg = tiny_config(EIGHT_CLIENTS, method=method, method_args={"projection_head": True} if method == "moon" else {})
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
    cfg = tiny_config(EIGHT_CLIENTS, method="fedcurv")
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
    cfg = tiny_config(EIGHT_CLIENTS, method="moon")
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

    monkeypatch.setattr(store_files.os, "replace", dying_replace)
    with pytest.raises(Killed):
        quiet_run(cfg, tmp_path / "b")
    monkeypatch.setattr(store_files.os, "replace", real_replace)
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
    from fedlib.core.config import RunConfig
    from fedlib.engine import engine
    from fedlib.store import files as store_files
    real_replace, commits = os.replace, []

    def replace(source, destination):  # SIGKILL-like: no cleanup, at the worst moment
        if Path(destination).name == "checkpoint.pt":
            commits.append(destination)
            if len(commits) == 2:
                os._exit(9)
        real_replace(source, destination)

    store_files.os.replace = replace
    warnings.simplefilter("ignore")
    engine.run(RunConfig.from_dict(json.loads(sys.argv[2])), results_dir=sys.argv[1], progress=False)
""")


def test_a_process_killed_before_its_commit_leaves_one_loadable_checkpoint(tmp_path):
    cfg = tiny_config(EIGHT_CLIENTS, method="fedcurv")
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
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "digest.json", "final.pt", "meta.json",
                                                        "rounds.jsonl", "summary.json"]


def test_a_run_killed_after_dropping_its_checkpoint_finishes_from_its_final_state(tmp_path):
    cfg = tiny_config(EIGHT_CLIENTS, method="scaffold")
    first = quiet_run(cfg, tmp_path)
    folder = tmp_path / cfg.hash()
    (folder / "summary.json").unlink()  # killed between removing checkpoint.pt and the summary
    again = quiet_run(cfg, tmp_path)
    assert again.summary["final_accuracy"] == first.summary["final_accuracy"]
    assert len(again.rounds) == cfg.rounds and not (folder / "checkpoint.pt").exists()


# ---------------------------------------------------------------------- consumers of a finished run
def test_a_finished_run_still_serves_its_model_and_local_updates(tmp_path):
    from fedlib.analysis import drift

    cfg = tiny_config(EIGHT_CLIENTS, method="scaffold")
    result = quiet_run(cfg, tmp_path)
    model = result.load_model("cpu")
    server, _ = engine.prepare(cfg)
    assert engine.evaluate(model, server.data)["accuracy"] == pytest.approx(result.final_accuracy, abs=1e-6)
    with pytest.warns(RuntimeWarning, match="kept no per-client state"):
        drift.local_update(result, client_id=0)


def test_list_shows_each_runs_size_on_disk_and_the_total(tmp_path, capsys):
    done, partial = tiny_config(EIGHT_CLIENTS, method="moon"), tiny_config(EIGHT_CLIENTS, method="moon", seed=2)
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


# ====================================================================== safety
def exploding(**changes) -> RunConfig:
    """lr 1000 on digits: the test loss is NaN after round 0 while every weight stays finite."""
    base = dict(dataset="digits", model="mlp", rounds=3, lr=1000.0, clients=4, seed=0, device="cpu",
                max_train_samples=400)
    base.update(changes)
    return RunConfig(**base)


# ---------------------------------------------------------------------- no code from checkpoints
class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_crafted_checkpoint_is_refused_and_runs_nothing(tmp_path):
    cfg = tiny_config()
    quiet_run(cfg, tmp_path, stop_after=1)
    marker = tmp_path / "pwned"
    checkpoint = tmp_path / cfg.hash() / "checkpoint.pt"
    with open(checkpoint, "wb") as handle:
        pickle.dump({"round": 1, "model": _Payload(marker)}, handle)
    with pytest.raises(FedlibError, match="cannot be loaded safely") as caught:
        quiet_run(cfg, tmp_path)
    assert "\n" not in str(caught.value)
    assert not marker.exists()


def test_a_truncated_checkpoint_is_one_line(tmp_path):
    cfg = tiny_config()
    quiet_run(cfg, tmp_path, stop_after=1)
    checkpoint = tmp_path / cfg.hash() / "checkpoint.pt"
    checkpoint.write_bytes(checkpoint.read_bytes()[:100])
    with pytest.raises(FedlibError, match="delete it to restart"):
        quiet_run(cfg, tmp_path)


def test_stateful_methods_checkpoints_load_weights_only(tmp_path):
    for method, args in [("moon", {"projection_head": True}), ("scaffold", {}), ("fedcurv", {}),
                         ("pkd", {"warmup_rounds": 1, "expert_rounds": 1, "groups": [[0, 1]]}),
                         ("fedgkd", {}), ("fedexp", {}), ("fedcsd", {})]:
        cfg = tiny_config(method=method, method_args=args, rounds=3, model="lenet5")
        quiet_run(cfg, tmp_path, stop_after=2)
        record = store.RunRecord(tmp_path / cfg.hash())
        assert record.read_checkpoint()["round"] == 2, method
        quiet_run(cfg, tmp_path)
        assert record.read_checkpoint() is None and record.read_final()["round"] == 3, method


# ---------------------------------------------------------------------- runs always finish
def test_a_run_killed_before_its_summary_finishes_on_rerun(tmp_path):
    cfg = tiny_config()
    first = quiet_run(cfg, tmp_path)
    (tmp_path / cfg.hash() / "summary.json").unlink()
    again = quiet_run(cfg, tmp_path)
    assert again.final_accuracy == first.final_accuracy and len(again.rounds) == cfg.rounds


def test_a_lost_metrics_log_restarts_the_run_instead_of_completing_it_with_holes(tmp_path):
    cfg = tiny_config(rounds=4)
    reference = engine.run(cfg, use_store=False, progress=False)
    quiet_run(cfg, tmp_path, stop_after=2)
    (tmp_path / cfg.hash() / "rounds.jsonl").unlink()
    with pytest.warns(RuntimeWarning, match="restarting the run from round 0"):
        result = engine.run(cfg, results_dir=tmp_path, progress=False)
    assert [r["round"] for r in result.rounds] == [0, 1, 2, 3]
    assert result.final_accuracy == reference.final_accuracy


# ---------------------------------------------------------------------- one writer per run folder
HOLDER = textwrap.dedent("""
    import sys, time
    from fedlib import store
    with store.RunRecord(sys.argv[1]).claim():
        print("claimed", flush=True)
        time.sleep(120)
""")


def test_a_second_writer_is_refused_until_the_first_is_dead(tmp_path):
    cfg = tiny_config()
    folder = tmp_path / cfg.hash()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "claimed"
        os.kill(holder.pid, signal.SIGSTOP)  # paused, still alive: its claim stands
        with pytest.raises(FedlibError, match=f"being written by pid {holder.pid}"):
            quiet_run(cfg, tmp_path)
        assert not (folder / "summary.json").exists()
    finally:
        holder.kill()
        holder.wait()
    result = quiet_run(cfg, tmp_path)  # the dead holder's claim is taken over
    assert len(result.rounds) == cfg.rounds and not (folder / "claim.json").exists()


def test_a_writer_that_lost_its_claim_stops_without_writing(tmp_path):
    record = store.RunRecord(tmp_path / "run")
    with record.claim() as claim:
        store.write_json(tmp_path / "run" / "claim.json", {"host": "elsewhere", "pid": 1, "token": "x",
                                                             "heartbeat": 1e12})
        with pytest.raises(FedlibError, match="lost the claim"):
            claim.heartbeat()
    assert json.loads((tmp_path / "run" / "claim.json").read_text())["token"] == "x"  # not released


def test_a_held_claim_beats_on_its_own_and_stops_when_released(tmp_path, monkeypatch):
    monkeypatch.setattr(store_claim, "HEARTBEAT_SECONDS", 0.02)
    record = store.RunRecord(tmp_path / "run")
    path = tmp_path / "run" / "claim.json"
    with record.claim() as claim:
        written = path.read_text()
        os.utime(path, (1.0, 1.0))  # as if the last beat were long ago
        deadline = time.time() + 10
        while path.stat().st_mtime == 1.0 and time.time() < deadline:
            time.sleep(0.01)
        assert path.stat().st_mtime > time.time() - 60, "refreshed with no checkpoint written"
        assert store.RunRecord(tmp_path / "run").in_progress() and path.read_text() == written  # touched only
        assert claim._beating.is_alive()
    assert not path.exists() and not claim._beating.is_alive()


def test_another_hosts_claim_is_live_while_its_file_is_touched(tmp_path):
    record = store.RunRecord(tmp_path / "run")
    path = tmp_path / "run" / "claim.json"
    claimed_at = time.time() - 3 * store.STALE_CLAIM_SECONDS  # claimed long ago ...
    store.write_json(path, {"host": "elsewhere.example", "pid": 1, "token": "x", "heartbeat": claimed_at})
    assert record.in_progress(), "... but beating: the file was touched just now"
    os.utime(path, (claimed_at, claimed_at))
    assert not record.in_progress(), "silent for longer than STALE_CLAIM_SECONDS"


def test_a_hung_run_stops_beating_so_that_its_claim_can_go_stale(tmp_path, monkeypatch):
    monkeypatch.setattr(store_claim, "HEARTBEAT_SECONDS", 0.02)
    monkeypatch.setattr(store_claim, "HUNG_RUN_SECONDS", 0.1)  # no checkpoint for this long: hung
    with store.RunRecord(tmp_path / "run").claim() as claim:
        claim._beating.join(timeout=10)
        assert not claim._beating.is_alive()


def test_clearing_partial_writes_leaves_the_claims_own_files_alone(tmp_path):
    record = store.RunRecord(tmp_path / "run")
    with record.claim():
        beat_in_flight = tmp_path / "run" / f".{store.CLAIM_FILE}.abc.tmp"
        partial = tmp_path / "run" / ".summary.json.abc.tmp"
        beat_in_flight.write_text("{}")
        partial.write_text("{")
        record.discard_partial_writes()
        assert beat_in_flight.exists() and not partial.exists()


def test_the_heartbeat_thread_never_overwrites_a_claim_taken_over(tmp_path, monkeypatch):
    monkeypatch.setattr(store_claim, "HEARTBEAT_SECONDS", 0.02)
    record = store.RunRecord(tmp_path / "run")
    path = tmp_path / "run" / "claim.json"
    with record.claim() as claim:
        store.write_json(path, {"host": "elsewhere", "pid": 1, "token": "x", "heartbeat": 5.0})
        claim._beating.join(timeout=10)
        assert not claim._beating.is_alive()  # it saw the new holder and stopped
        assert json.loads(path.read_text()) == {"host": "elsewhere", "pid": 1, "token": "x", "heartbeat": 5.0}
        with pytest.raises(FedlibError, match="lost the claim"):
            claim.heartbeat()  # the writer's next checkpoint stops it


# ---------------------------------------------------------------------- diverged runs are flagged
def test_a_nan_loss_with_finite_weights_is_diverged_everywhere(tmp_path, capsys):
    cfg = exploding()
    with pytest.warns(RuntimeWarning, match="diverged in round 1:"):
        result = engine.run(cfg, results_dir=tmp_path, progress=False)
    assert result.summary["diverged"] is True and len(result.rounds) == 1
    with pytest.warns(RuntimeWarning, match="stored run that diverged"):
        engine.run(cfg, results_dir=tmp_path, progress=False)
    assert cli.result_json(result)["diverged"] is True
    assert cli.main(["list", "--results", str(tmp_path)]) == 0
    assert " diverged " in capsys.readouterr().out
    frame = results_frame([result, quiet_run(tiny_config(), tmp_path)])
    assert frame["final_accuracy"].isna().tolist() == [True, False]


def test_a_diverged_run_resumed_after_a_kill_does_not_train_again(tmp_path):
    cfg = exploding()
    first = quiet_run(cfg, tmp_path)
    (tmp_path / cfg.hash() / "summary.json").unlink()
    again = quiet_run(cfg, tmp_path)
    assert again.summary["diverged"] is True and len(again.rounds) == len(first.rounds) == 1


# ---------------------------------------------------------------------- corrupt entries
def test_a_hand_edited_config_is_not_served(tmp_path):
    cfg = tiny_config()
    quiet_run(cfg, tmp_path)
    path = tmp_path / cfg.hash() / "config.json"
    edited = json.loads(path.read_text())
    edited["lr"] = 0.5
    path.write_text(json.dumps(edited))
    with pytest.raises(FedlibError, match="its config.json does not match its digest.json"):
        quiet_run(cfg, tmp_path)
    (path.parent / store.DIGEST_FILE).unlink()  # a run stored before sealing: its files are held against its hash
    with pytest.raises(FedlibError, match="hashes to"):
        quiet_run(cfg, tmp_path)


@pytest.mark.parametrize("name, content", [("summary.json", ""), ("summary.json", "{\"final_acc"),
                                           ("rounds.jsonl", "{\"round\": 0}\n")])
def test_corrupt_complete_entries_are_refused_in_one_line(tmp_path, name, content):
    cfg = tiny_config()
    quiet_run(cfg, tmp_path)
    (tmp_path / cfg.hash() / name).write_text(content)
    with pytest.raises(FedlibError, match="delete the folder") as caught:
        quiet_run(cfg, tmp_path)
    assert "\n" not in str(caught.value)


def test_list_reports_a_corrupt_entry_and_goes_on(tmp_path, capsys):
    good, bad, edited = tiny_config(), tiny_config(seed=2), tiny_config(seed=3)
    for cfg in (good, bad, edited):
        quiet_run(cfg, tmp_path)
    (tmp_path / bad.hash() / store.DIGEST_FILE).unlink()  # stored before sealing
    for cfg in (bad, edited):
        (tmp_path / cfg.hash() / "config.json").write_text("{not json")
    assert cli.main(["list", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{bad.hash()}  corrupt" in out and f"{good.hash()}  done" in out
    assert f"{edited.hash()}  damaged" in out and "its config.json does not match" in out


def test_provenance_records_backend_and_threads(tmp_path):
    cfg = tiny_config()
    quiet_run(cfg, tmp_path)
    meta = store.RunRecord(tmp_path / cfg.hash()).read_meta()
    assert meta["backend"] == cfg.backend and meta["environment"]["cpu_threads"] == torch.get_num_threads()


# ---------------------------------------------------------------------- resume on another machine
def test_resuming_with_another_thread_count_warns(tmp_path, torch_threads):
    cfg = tiny_config(rounds=3)
    torch_threads(2)
    quiet_run(cfg, tmp_path, stop_after=1)
    torch_threads(1)
    with pytest.warns(RuntimeWarning, match="agrees with an uninterrupted run only to float rounding"):
        engine.run(cfg, results_dir=tmp_path, progress=False)


# ====================================================================== the reference store
@pytest.fixture
def reference(tmp_path, monkeypatch):
    """An empty reference store; runs trained meanwhile record a clean code revision, so that they
    can be published from a checkout with local changes."""
    root = tmp_path / "reference"
    monkeypatch.setenv("FEDLIB_REFERENCE", str(root))
    monkeypatch.setattr(provenance, "code_revision", lambda: "c" * 40)
    return root


def test_a_published_run_is_served_from_the_reference_store_without_checkpoint(tmp_path, reference):
    cfg = tiny_config(rounds=2)
    work = tmp_path / "work"
    result = engine.run(cfg, results_dir=work, progress=False)
    folder = store.publish(store.RunRecord(result.folder))
    assert sorted(p.name for p in folder.iterdir()) == sorted((*store.REFERENCE_FILES, store.DIGEST_FILE))
    served = engine.run(cfg, results_dir=tmp_path / "fresh", progress=False)  # nothing stored there
    assert served.folder == folder and served.final_accuracy == result.final_accuracy
    assert not (tmp_path / "fresh").exists(), "served, not trained"
    assert store.is_stored(cfg, tmp_path / "fresh")


def test_the_model_of_a_run_committed_without_it_is_trained_again_in_the_working_store(tmp_path, reference, capsys):
    cfg = tiny_config(rounds=2)
    result = engine.run(cfg, results_dir=tmp_path / "work", progress=False)
    store.publish(store.RunRecord(result.folder))  # metrics only
    served = engine.run(cfg, results_dir=tmp_path / "fresh", progress=False)
    previous = engine.set_render_only(True)
    try:  # rendering only: nothing trains, one line says how to get the model
        with pytest.raises(FedlibError, match="model is not committed .* rendered only"):
            served.global_state()
    finally:
        engine.set_render_only(previous)
    assert not (tmp_path / "fresh").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same machine: the retrained run ends where the committed one did
        state = served.global_state()
    assert "its model is not committed" in capsys.readouterr().out
    assert (tmp_path / "fresh" / cfg.hash() / store.FINAL_FILE).exists()
    for name, tensor in result.global_state().items():
        assert torch.equal(state[name], tensor), name
    assert served.load_model() is not None  # read from the working store now, not trained a third time
    assert "its model is not committed" not in capsys.readouterr().out
    with pytest.warns(provenance.ProvenanceWarning, match="trained again here ends at 60.00 % .* committed run at 50.00 %"):
        model_source._say_if_different(cfg.hash(), {"final_accuracy": 0.5}, {"final_accuracy": 0.6})
    unnamed = engine.RunResult(cfg, served.rounds, served.summary, served.folder, origin="served")
    with pytest.raises(FedlibError, match="no working store was named"):
        unnamed.global_state()


def test_a_run_published_with_its_model_serves_the_model(tmp_path, reference, monkeypatch):
    cfg = tiny_config(rounds=2)
    result = engine.run(cfg, results_dir=tmp_path / "work", progress=False)
    folder = store.publish(store.RunRecord(result.folder), with_model=True)
    assert sorted(p.name for p in folder.iterdir()) == sorted((*store.REFERENCE_FILES, store.FINAL_FILE, store.DIGEST_FILE))
    served = engine.run(cfg, results_dir=tmp_path / "fresh", progress=False)
    assert served.folder == folder
    environment.apply({store.MODEL_READS_ENV: str(tmp_path / "reads.txt")})  # a kernel's set-up: how tools/lesson_store.py learns it
    engine.run(cfg.replace(seed=1), results_dir=tmp_path / "work", progress=False)  # training reads no model for it
    assert not (tmp_path / "reads.txt").exists()
    served.global_state()
    assert (tmp_path / "reads.txt").read_text().split() == [cfg.hash()]
    for name, tensor in result.global_state().items():
        assert torch.equal(served.global_state()[name], tensor), name
    monkeypatch.setattr(store_publishing, "MAX_PUBLISHED_MODEL", 10)
    with pytest.raises(FedlibError, match="over the 10 the committed store takes"):
        store.publish(store.RunRecord(result.folder), tmp_path / "other", with_model=True)


def test_an_analysis_cache_is_read_from_the_reference_store_when_the_working_store_lacks_it(tmp_path, reference):
    work = tmp_path / "work"
    assert store.analysis_cache(work, "drift", "x.csv") == work / "drift" / "x.csv"  # neither: write here
    store.write_atomic(reference / "drift" / "x.csv", b"shipped")
    assert store.analysis_cache(work, "drift", "x.csv").read_bytes() == b"shipped"
    store.write_atomic(work / "drift" / "x.csv", b"mine")
    assert store.analysis_cache(work, "drift", "x.csv").read_bytes() == b"mine"  # the working store's first


def test_an_unfinished_run_cannot_be_published(tmp_path):
    cfg = tiny_config(rounds=2)
    engine.run(cfg, results_dir=tmp_path, progress=False, stop_after=1)
    with pytest.raises(FedlibError, match="not complete"):
        store.publish(store.RunRecord(tmp_path / cfg.hash()), tmp_path / "reference")


def test_a_tampered_reference_run_is_refused(tmp_path, reference):
    cfg = tiny_config(rounds=2)
    result = engine.run(cfg, results_dir=tmp_path / "work", progress=False)
    folder = store.publish(store.RunRecord(result.folder))
    config = json.loads((folder / "config.json").read_text())
    config["lr"] = 0.5
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(FedlibError, match="its config.json does not match its digest.json"):
        engine.run(cfg, results_dir=tmp_path / "fresh", progress=False)


def test_render_only_trains_nothing_and_marks_cells_not_run(tmp_path, reference, monkeypatch):
    stored, missing = tiny_config(rounds=2, method="fedavg"), tiny_config(rounds=2, method="fedprox")
    engine.run(stored, results_dir=tmp_path, progress=False)
    monkeypatch.setenv("FEDLIB_RENDER_ONLY", "1")
    assert engine.run(stored, results_dir=tmp_path, progress=False).summary, "served: the variable is read at an edge"
    with pytest.raises(engine.NotRun, match="is in no store"):
        engine.run(missing, results_dir=tmp_path, progress=False, render_only=True)
    engine.set_render_only(True)  # what a notebook's set-up does with the variable (notebook.apply_profile)
    with pytest.raises(engine.NotRun, match="is in no store"):
        engine.run(missing, results_dir=tmp_path, progress=False)
    # stored, but a hook must see every round: it would be recomputed, which render-only forbids
    with pytest.raises(engine.NotRun, match="recomputed for a recording hook"):
        engine.run(stored, results_dir=tmp_path, progress=False, hooks=[object()])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = experiments.run_all([stored, missing], results_dir=tmp_path, progress=False)
    assert not (tmp_path / missing.hash()).exists()
    frame = experiments.results_frame(results)
    frame["label"], frame["setting"] = frame["method"], "s"
    assert frame["not_run"].tolist() == [False, True] and pd.isna(frame["final_accuracy"].iloc[1])
    _, _, text = tables.paper_layout(frame, "final_accuracy")
    assert text.loc["fedprox"].tolist() == [tables.NOT_RUN]
    assert text.loc["fedavg"].iloc[0] not in (tables.NOT_RUN, "-")
    engine.set_render_only(False)  # the argument alone, passed down from run_all to engine.run
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = experiments.run_all([missing], results_dir=tmp_path, progress=False, render_only=True)
    assert again[0].summary.get("not_run") and not (tmp_path / missing.hash()).exists()


def test_the_reference_store_can_be_switched_off(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDLIB_REFERENCE", "off")
    assert store.reference_root() is None and store.reference_record(tiny_config(rounds=2)) is None


def test_a_copy_without_git_reads_its_stamped_commit_and_sees_edits(tmp_path):
    (tmp_path / "fedlib").mkdir()
    (tmp_path / "fedlib" / "engine.py").write_text("x = 1\n")
    assert provenance._stamped_revision(tmp_path) == "unknown"  # no stamp: nothing to claim
    store.write_json(tmp_path / store.STAMP_FILE, {"commit": "abc123", "fedlib_sha256": store.fedlib_digest(tmp_path)})
    assert provenance._stamped_revision(tmp_path) == "abc123"
    (tmp_path / "fedlib" / "engine.py").write_text("x = 2\n")  # an edit after stamping
    assert provenance._stamped_revision(tmp_path) == "abc123+dirty"
    assert not store.is_clean_revision(provenance._stamped_revision(tmp_path))
