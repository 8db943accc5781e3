"""The results store cannot be tricked into running code, serving a truncated or diverged run as
a result, or letting two processes write one run folder."""

import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import warnings

import pandas as pd
import pytest
import torch

from fedlib import cli, engine, store, tables
from fedlib.config import RunConfig
from fedlib.errors import FedlibError
from fedlib.experiments import results_frame


def tiny(**changes) -> RunConfig:
    base = dict(dataset="synthetic", model="mlp", partition="dirichlet", beta=0.5, clients=4, rounds=3,
                local_epochs=1, batch_size=32, lr=0.05, momentum=0.5, seed=1, device="cpu")
    base.update(changes)
    return RunConfig(**base)


def exploding(**changes) -> RunConfig:
    """lr 1000 on digits: the test loss is NaN after round 0 while every weight stays finite."""
    base = dict(dataset="digits", model="mlp", rounds=3, lr=1000.0, clients=4, seed=0, device="cpu",
                max_train_samples=400)
    base.update(changes)
    return RunConfig(**base)


def quiet_run(cfg, tmp_path, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return engine.run(cfg, results_dir=tmp_path, progress=False, **kwargs)


# ---------------------------------------------------------------------- 1. no code from checkpoints
class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_crafted_checkpoint_is_refused_and_runs_nothing(tmp_path):
    cfg = tiny()
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
    cfg = tiny()
    quiet_run(cfg, tmp_path, stop_after=1)
    checkpoint = tmp_path / cfg.hash() / "checkpoint.pt"
    checkpoint.write_bytes(checkpoint.read_bytes()[:100])
    with pytest.raises(FedlibError, match="delete it to restart"):
        quiet_run(cfg, tmp_path)


def test_stateful_methods_checkpoints_load_weights_only(tmp_path):
    for method, args in [("moon", {"projection_head": True}), ("scaffold", {}), ("fedcurv", {}),
                         ("pkd", {"warmup_rounds": 1, "expert_rounds": 1, "groups": [[0, 1]]}),
                         ("fedgkd", {}), ("fedexp", {}), ("fedcsd", {})]:
        cfg = tiny(method=method, method_args=args, rounds=3, model="lenet5")
        quiet_run(cfg, tmp_path, stop_after=2)
        record = store.RunRecord(tmp_path / cfg.hash())
        assert record.read_checkpoint()["round"] == 2, method
        quiet_run(cfg, tmp_path)
        assert record.read_checkpoint() is None and record.read_final()["round"] == 3, method


# ---------------------------------------------------------------------- 2. runs always finish
def test_a_run_killed_before_its_summary_finishes_on_rerun(tmp_path):
    cfg = tiny()
    first = quiet_run(cfg, tmp_path)
    (tmp_path / cfg.hash() / "summary.json").unlink()
    again = quiet_run(cfg, tmp_path)
    assert again.final_accuracy == first.final_accuracy and len(again.rounds) == cfg.rounds


def test_a_lost_metrics_log_restarts_the_run_instead_of_completing_it_with_holes(tmp_path):
    cfg = tiny(rounds=4)
    reference = engine.run(cfg, use_store=False, progress=False)
    quiet_run(cfg, tmp_path, stop_after=2)
    (tmp_path / cfg.hash() / "rounds.jsonl").unlink()
    with pytest.warns(RuntimeWarning, match="restarting the run from round 0"):
        result = engine.run(cfg, results_dir=tmp_path, progress=False)
    assert [r["round"] for r in result.rounds] == [0, 1, 2, 3]
    assert result.final_accuracy == reference.final_accuracy


# ---------------------------------------------------------------------- 3. one writer per run folder
HOLDER = textwrap.dedent("""
    import sys, time
    from fedlib import store
    with store.RunRecord(sys.argv[1]).claim():
        print("claimed", flush=True)
        time.sleep(120)
""")


def test_a_second_writer_is_refused_until_the_first_is_dead(tmp_path):
    cfg = tiny()
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


# ---------------------------------------------------------------------- 4. diverged runs are flagged
def test_a_nan_loss_with_finite_weights_is_diverged_everywhere(tmp_path, capsys):
    cfg = exploding()
    with pytest.warns(RuntimeWarning, match="diverged in round 0"):
        result = engine.run(cfg, results_dir=tmp_path, progress=False)
    assert result.summary["diverged"] is True and len(result.rounds) == 1
    with pytest.warns(RuntimeWarning, match="stored run that diverged"):
        engine.run(cfg, results_dir=tmp_path, progress=False)
    assert cli.result_json(result)["diverged"] is True
    assert cli.main(["list", "--results", str(tmp_path)]) == 0
    assert " diverged " in capsys.readouterr().out
    frame = results_frame([result, quiet_run(tiny(), tmp_path)])
    assert frame["final_accuracy"].isna().tolist() == [True, False]


def test_a_diverged_run_resumed_after_a_kill_does_not_train_again(tmp_path):
    cfg = exploding()
    first = quiet_run(cfg, tmp_path)
    (tmp_path / cfg.hash() / "summary.json").unlink()
    again = quiet_run(cfg, tmp_path)
    assert again.summary["diverged"] is True and len(again.rounds) == len(first.rounds) == 1


def test_tables_mark_diverged_cells_instead_of_showing_a_number():
    frame = pd.DataFrame({"label": ["a", "a", "b"], "dataset": ["d"] * 3, "setting": ["s"] * 3,
                          "seed": [0, 1, 0], "final_accuracy": [float("nan"), 50.0, 60.0],
                          "diverged": [True, False, False]})
    _, _, text = tables.paper_layout(frame, "final_accuracy")
    assert text.loc["a"].tolist() == [tables.DIVERGED]
    assert "60" in text.loc["b"].iloc[0]


# ---------------------------------------------------------------------- 5. corrupt entries
def test_a_hand_edited_config_is_not_served(tmp_path):
    cfg = tiny()
    quiet_run(cfg, tmp_path)
    path = tmp_path / cfg.hash() / "config.json"
    edited = json.loads(path.read_text())
    edited["lr"] = 0.5
    path.write_text(json.dumps(edited))
    with pytest.raises(FedlibError, match="hashes to"):
        quiet_run(cfg, tmp_path)


@pytest.mark.parametrize("name, content", [("summary.json", ""), ("summary.json", "{\"final_acc"),
                                           ("rounds.jsonl", "{\"round\": 0}\n")])
def test_corrupt_complete_entries_are_refused_in_one_line(tmp_path, name, content):
    cfg = tiny()
    quiet_run(cfg, tmp_path)
    (tmp_path / cfg.hash() / name).write_text(content)
    with pytest.raises(FedlibError, match="delete the folder") as caught:
        quiet_run(cfg, tmp_path)
    assert "\n" not in str(caught.value)


def test_list_reports_a_corrupt_entry_and_goes_on(tmp_path, capsys):
    good, bad = tiny(), tiny(seed=2)
    quiet_run(good, tmp_path)
    quiet_run(bad, tmp_path)
    (tmp_path / bad.hash() / "config.json").write_text("{not json")
    assert cli.main(["list", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{bad.hash()}  corrupt" in out and f"{good.hash()}  done" in out


def test_provenance_records_backend_and_threads(tmp_path):
    cfg = tiny()
    quiet_run(cfg, tmp_path)
    meta = store.RunRecord(tmp_path / cfg.hash()).read_meta()
    assert meta["backend"] == cfg.backend and meta["environment"]["cpu_threads"] == torch.get_num_threads()


# ---------------------------------------------------------------------- 6-8. inputs and resume
@pytest.mark.parametrize("changes, says", [
    ({"clients": "10"}, "clients must be a whole number"),
    ({"lr": "0.1"}, "lr must be a number"),
    ({"rounds": 1.5}, "rounds must be a whole number"),
    ({"device": None}, "device must be a string"),
    ({"seed": 99999999999999999999999}, "seed must be between"),
    ({"seed": -1}, "seed must be between"),
    ({"method_args": "mu=0.1"}, "method_args must be a dict"),
    ({"method": "fedprox", "method_args": {"mu": [1, 2]}}, "fedprox argument mu=[1, 2]"),
    ({"method": "fedprox", "method_args": {"mu": None}}, "fedprox argument mu=None"),
    ({"method": "fedprox", "method_args": {"mu": True}}, "fedprox argument mu=True"),
    ({"drop_last": "yes"}, "drop_last must be True or False"),
    ({"lr": float("nan")}, "lr must be a number"),
])
def test_bad_config_values_are_one_line_errors(changes, says):
    with pytest.raises(FedlibError) as caught:
        tiny(**changes)
    assert says in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("spelling", [" fedvls + fedavg ", "feded", "fedavg+feded", "fedvls"])
def test_one_computation_has_one_hash_whatever_its_spelling(spelling):
    assert tiny(method=spelling).hash() == tiny(method="fedvls").hash()
    assert tiny(method=spelling).method == "fedvls"


def test_composition_order_is_kept_and_fedprox_plus_fedavg_is_fedprox():
    assert tiny(method="fedprox+fedavg").hash() == tiny(method="fedprox").hash()
    assert tiny(method="fedlmd+fedprox").method == "fedlmd+fedprox"


@pytest.mark.parametrize("argv, says", [
    (["run", "--dataset", "synthetic", "--model", "mlp", "--method", "fedprox", "--method-arg", "mu=0.1",
      "--method-arg", "mu=0.2"], "given twice"),
    (["run", "--dataset", "synthetic", "--model", "mlp", "--seed", "99999999999999999999999"], "seed must be"),
    (["run", "--dataset", "synthetic", "--model", "mlp", "--rounds", "1", "--device", "mps"], "MPS is not available"),
])
def test_cli_bad_inputs_exit_2_with_one_line(argv, says, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1


def test_cli_results_on_a_file_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    argv = ["run", "--dataset", "synthetic", "--model", "mlp", "--rounds", "1", "--quiet", "--results", str(blocker)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot write the results store" in err and len(err.splitlines()) == 1


def test_reproduce_refuses_an_empty_only_and_a_missing_data_folder(tmp_path, capsys):
    from fedlib import reproduce

    assert reproduce.main(["--list", "--only", ""]) == 2
    assert "no notebook names" in capsys.readouterr().err
    assert reproduce.main(["--list", "--data", str(tmp_path / "nowhere")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_resuming_with_another_thread_count_warns(tmp_path, torch_threads):
    cfg = tiny(rounds=3)
    torch_threads(2)
    quiet_run(cfg, tmp_path, stop_after=1)
    torch_threads(1)
    with pytest.warns(RuntimeWarning, match="agrees with an uninterrupted run only to float rounding"):
        engine.run(cfg, results_dir=tmp_path, progress=False)
