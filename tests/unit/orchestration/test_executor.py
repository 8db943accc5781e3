"""The grid executor: runs side by side give the serial numbers, a killed worker's run resumes to
them, one store is never trained twice, stale claims are taken over, a missing Ray is one line.

Every run here trains with one intra-op thread (``threads=1``), so the serial reference and the
workers do the same float arithmetic and their metrics and final weights are compared exactly.
Local workers are spawned processes (a few seconds each to start on a loaded machine)."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings

import pytest
import torch

from fedlib import store
from fedlib.core.config import RunConfig
from fedlib.errors import FedlibError
from fedlib.orchestration import executor, experiments, pools
from fedlib.orchestration.executor import execute
from fedlib.paper import reproduce
from tests.helpers import tiny_config

TIMING_KEYS = ("seconds", "train_seconds")


DIGITS = dict(dataset="digits", max_train_samples=400, max_test_samples=200, seed=0)


def grid_of_six() -> list[RunConfig]:
    return experiments.grid(tiny_config(DIGITS), method=["fedavg", "fedprox"], seed=[0, 1, 2])


def slow_run() -> RunConfig:
    """About 0.25 s a round: long enough to be killed between two checkpoints."""
    return tiny_config(DIGITS, rounds=8, local_epochs=2, batch_size=16, max_train_samples=None,
                       max_test_samples=None, seed=1)


def stored_metrics(cfg: RunConfig, root) -> tuple[list[dict], dict, dict]:
    """A finished run's rounds, summary and final weights, timings left out."""
    record = store.RunRecord(store.run_dir(cfg, root))
    rounds = [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in record.read_rounds()]
    summary = {k: v for k, v in record.read_summary().items() if k not in TIMING_KEYS}
    return rounds, summary, record.read_final()["model"]


def assert_same_runs(configs, root_a, root_b) -> None:
    for cfg in configs:
        rounds_a, summary_a, model_a = stored_metrics(cfg, root_a)
        rounds_b, summary_b, model_b = stored_metrics(cfg, root_b)
        assert rounds_a == rounds_b and summary_a == summary_b, f"metrics of {cfg.hash()} differ"
        assert all(torch.equal(model_a[k], model_b[k]) for k in model_a), f"final weights of {cfg.hash()} differ"


@pytest.fixture(scope="module")
def serial_store(tmp_path_factory):
    """The six-run grid and the slow run, trained one after another in this process."""
    root = tmp_path_factory.mktemp("serial")
    outcomes = execute(grid_of_six() + [slow_run()], executor="serial", threads=1, results_dir=root, progress=False)
    assert [o.status for o in outcomes] == ["done"] * 7
    return root


class Killer(threading.Thread):
    """Kills the process that holds ``cfg``'s claim once ``after`` rounds are checkpointed."""

    def __init__(self, cfg: RunConfig, root, after: int = 2):
        super().__init__(daemon=True)
        self.record = store.RunRecord(store.run_dir(cfg, root))
        self.after, self.killed, self.stop = after, None, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set() and self.killed is None:
            claim = self._claim()
            if claim and self.after <= self.record.rounds_logged() and not self.record.complete:
                os.kill(claim["pid"], signal.SIGKILL)
                self.killed = (claim["pid"], self.record.rounds_logged())
            time.sleep(0.01)

    def _claim(self) -> dict | None:
        try:
            return json.loads((self.record.folder / store.CLAIM_FILE).read_text())
        except (OSError, ValueError):
            return None


# ---------------------------------------------------------------------- local workers
@pytest.mark.slow
def test_a_grid_on_two_local_workers_matches_the_serial_run(serial_store, tmp_path, capsys):
    configs = grid_of_six()
    outcomes = execute(configs + configs[:2], executor="local", workers=2, threads=1, results_dir=tmp_path)
    assert len(outcomes) == 6, "one outcome per distinct config"
    assert [o.status for o in outcomes] == ["done"] * 6
    assert len({o.worker for o in outcomes}) == 2, "two workers shared the grid"
    assert_same_runs(configs, serial_store, tmp_path)
    summary = capsys.readouterr().out
    assert "6 runs: 6 done" in summary and "on 2 local workers" in summary
    again = execute(configs, executor="local", workers=2, results_dir=tmp_path, progress=False)
    assert [o.status for o in again] == ["stored"] * 6, "stored runs are skipped, no worker starts"


@pytest.mark.slow
def test_a_killed_local_worker_is_retried_and_its_run_resumes_to_the_same_metrics(serial_store, tmp_path):
    cfg = slow_run()
    killer = Killer(cfg, tmp_path)
    killer.start()
    try:
        [outcome] = execute([cfg], executor="local", workers=1, threads=1, results_dir=tmp_path, progress=False)
    finally:
        killer.stop.set()
    assert killer.killed is not None, "the run finished before it could be killed"
    assert outcome.status == "done" and outcome.attempts == 2
    assert outcome.worker.split(":")[1] != str(killer.killed[0]), "a new worker finished it"
    assert_same_runs([cfg], serial_store, tmp_path)


def test_a_run_that_fails_is_reported_once_and_the_others_finish(tmp_path, capsys, monkeypatch):
    empty = tmp_path / "no-data"
    empty.mkdir()
    monkeypatch.setenv("FEDLIB_CACHE", str(empty))  # MNIST in neither the cache nor the data folder
    bad, good = tiny_config(DIGITS, dataset="mnist", data_dir=str(empty)), tiny_config(DIGITS, rounds=1)
    outcomes = execute([bad, good], executor="serial", threads=1, results_dir=tmp_path / "store")
    assert [o.status for o in outcomes] == ["failed", "done"]
    assert outcomes[0].error.startswith("FedlibError: ") and "mnist" in outcomes[0].error.lower()
    out = capsys.readouterr()
    assert (out.out + out.err).count(outcomes[0].error) == 1, "reported once, in the summary"
    assert "1 run failed:" in out.out


@pytest.mark.slow
def test_run_all_on_local_workers_serves_the_results_and_raises_for_a_failed_run(serial_store, tmp_path,
                                                                                monkeypatch):
    configs = grid_of_six()[:3]
    empty = tmp_path / "no-data"
    empty.mkdir()
    monkeypatch.setenv("FEDLIB_CACHE", str(empty))  # inherited by the spawned workers
    bad = tiny_config(DIGITS, dataset="mnist", data_dir=str(empty))
    with pytest.raises(FedlibError, match=r"1 of 4 runs failed on local workers; first: \w+ \(fedavg on mnist\)"):
        experiments.run_all([bad] + configs, results_dir=tmp_path / "store", workers=2, threads=1, progress=False)
    assert_same_runs(configs, serial_store, tmp_path / "store")
    results = experiments.run_all(configs, results_dir=tmp_path / "store", executor="local", progress=False)
    assert [r.config.hash() for r in results] == [c.hash() for c in configs], "served from the store, in order"


@pytest.mark.slow
def test_two_executors_on_one_store_never_train_the_same_run_twice(tmp_path):
    configs = experiments.grid(tiny_config(DIGITS, rounds=6), seed=[0, 1, 2, 3])
    outcomes = {}

    def executor_thread(name):
        outcomes[name] = execute(configs, executor="local", workers=1, threads=1, results_dir=tmp_path,
                                 progress=False, poll_seconds=0.2)

    threads = [threading.Thread(target=executor_thread, args=(name,)) for name in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=900)  # a guard against a hang, not a speed limit: a loaded machine took 130 s
    assert not any(thread.is_alive() for thread in threads), "an executor still runs after 15 minutes"
    for index, cfg in enumerate(configs):
        statuses = sorted(outcomes[name][index].status for name in "ab")
        trained = statuses.count("done")
        assert trained == 1, f"{cfg.hash()} trained {trained} times ({statuses})"
        assert statuses in (["done", "elsewhere"], ["done", "stored"]), statuses
    assert all(store.is_stored(cfg, tmp_path) for cfg in configs)


# ---------------------------------------------------------------------- claims
def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _claim(cfg: RunConfig, root, **holder) -> None:
    """A claim file as a holder leaves it: its last beat is both the time written and the file's mtime."""
    path = store.run_dir(cfg, root) / store.CLAIM_FILE
    claim = {"host": socket.gethostname(), "heartbeat": time.time(), "token": "x", **holder}
    path.write_text(json.dumps(claim))
    os.utime(path, (claim["heartbeat"], claim["heartbeat"]))


def _partial(cfg: RunConfig, root, rounds: int, torch_threads) -> None:
    """``rounds`` rounds checkpointed, as a worker killed then would leave them."""
    from fedlib.engine import engine

    torch_threads(1)
    engine.run(cfg, results_dir=root, progress=False, stop_after=rounds)


@pytest.mark.parametrize("holder", ["dead process", "silent host"])
def test_a_stale_claim_is_taken_over_and_the_run_resumes(serial_store, tmp_path, torch_threads, holder):
    cfg = grid_of_six()[1]
    _partial(cfg, tmp_path, 2, torch_threads)
    if holder == "dead process":
        _claim(cfg, tmp_path, pid=_dead_pid())
    else:  # another machine whose heartbeat stopped long ago
        _claim(cfg, tmp_path, pid=1, host="elsewhere.example", heartbeat=time.time() - store.STALE_CLAIM_SECONDS - 60)
    [outcome] = execute([cfg], executor="serial", threads=1, results_dir=tmp_path, progress=False)
    assert outcome.status == "done"
    assert not (store.run_dir(cfg, tmp_path) / store.CLAIM_FILE).exists()
    assert_same_runs([cfg], serial_store, tmp_path)


def test_a_run_held_by_a_live_process_waits_and_is_taken_over_when_it_dies(serial_store, tmp_path, torch_threads):
    cfg, other = grid_of_six()[2:4]
    _partial(cfg, tmp_path, 1, torch_threads)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _claim(cfg, tmp_path, pid=holder.pid)
        result = {}
        thread = threading.Thread(target=lambda: result.setdefault("outcomes", execute(
            [cfg, other], executor="serial", threads=1, results_dir=tmp_path, progress=False, poll_seconds=0.1)))
        thread.start()
        deadline = time.time() + 30
        while not store.is_stored(other, tmp_path) and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        assert not store.is_stored(cfg, tmp_path), "a claimed run was trained while its holder lives"
    finally:
        holder.kill()
        holder.wait()
    thread.join(timeout=60)
    assert [o.status for o in result["outcomes"]] == ["done", "done"]
    assert_same_runs([cfg, other], serial_store, tmp_path)


# ---------------------------------------------------------------------- options and a missing Ray
def test_without_ray_the_ray_executor_is_one_line_naming_the_extra(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(FedlibError) as caught:
        execute([tiny_config(DIGITS)], executor="ray", results_dir=tmp_path, progress=False)
    message = str(caught.value)
    assert "\n" not in message and "pip install -e '.[ray]'" in message
    status = reproduce.main(["--executor", "ray", "--workers", "2", "--only", "fedvls_table2_quantity",
                             "--results", str(tmp_path)])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "pip install -e '.[ray]'" in err


def test_bad_executor_options_are_one_line(tmp_path):
    with pytest.raises(FedlibError, match="unknown executor 'threads'"):
        execute([tiny_config(DIGITS)], executor="threads", results_dir=tmp_path)
    with pytest.raises(FedlibError, match="workers must be >= 1"):
        execute([tiny_config(DIGITS)], executor="local", workers=0, results_dir=tmp_path)
    with pytest.raises(FedlibError, match="needs --executor ray"):
        execute([tiny_config(DIGITS)], executor="local", address="auto", results_dir=tmp_path)


@pytest.mark.parametrize("model, share", [("mlp", 0.25), ("lenet5", 0.25), ("cnn2", 0.25), ("simple_cnn", 0.25),
                                          ("resnet18", 1.0), ("resnet50", 1.0), ("mobilenetv2", 1.0)])
def test_small_models_share_a_gpu_and_large_ones_get_a_whole_card(model, share):
    cfg = tiny_config(DIGITS, model=model, device="auto")
    assert executor.ray_resources(cfg, 2, cluster_has_gpus=True) == {"num_cpus": 2, "num_gpus": share}


def test_a_ray_task_is_submitted_with_the_resources_of_its_run():
    asked = []

    class Remote:  # stands in for the ray.remote function: records the options of each submission
        def options(self, **kw):
            asked.append(kw)
            return self

        def remote(self, *args):
            return object()

    pool = pools.RayPool.__new__(pools.RayPool)
    pool.threads, pool.gpus, pool.task, pool.pending = 3, True, Remote(), {}  # a cluster with GPUs
    for model in ("lenet5", "mobilenetv2"):
        pool.submit(tiny_config(DIGITS, model=model, device="auto"))
    assert [{k: kw[k] for k in ("num_cpus", "num_gpus")} for kw in asked] == [
        {"num_cpus": 3, "num_gpus": 0.25}, {"num_cpus": 3, "num_gpus": 1.0}]


def test_more_threads_than_cores_is_said_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(executor.resources, "available_cores", lambda: 2)
    with pytest.warns(RuntimeWarning, match="2 runs side by side x 2 threads each = 4 threads on 2 cores"):
        executor._warn_oversubscribed(2, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        executor._warn_oversubscribed(2, 1)  # the default budget: cores / workers


def test_ray_tasks_ask_for_a_gpu_share_sized_to_the_model():
    def resources(model, device="cpu", threads=1, cluster_has_gpus=True):
        return executor.ray_resources(tiny_config(DIGITS, model=model, device=device), threads, cluster_has_gpus)

    assert resources("resnet18") == {"num_cpus": 1}
    assert resources("lenet5", threads=4, cluster_has_gpus=False) == {"num_cpus": 4}, "a CPU-only cluster"


# ---------------------------------------------------------------------- local Ray
@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    try:
        ray.init(num_cpus=2, include_dashboard=False, object_store_memory=100 * 2 ** 20, log_to_driver=False)
    except Exception as exc:  # Ray gives its raylet 30 s to start, which an overloaded machine can miss
        ray.shutdown()
        if "timed out during startup" not in str(exc):
            raise
        pytest.skip(f"a local Ray could not start on this machine: {exc}")
    yield ray
    ray.shutdown()


@pytest.mark.ray
@pytest.mark.slow
def test_a_grid_on_a_local_ray_matches_the_serial_run(serial_store, local_ray, tmp_path):
    configs = grid_of_six()
    outcomes = execute(configs, executor="ray", workers=2, threads=1, results_dir=tmp_path, progress=False)
    assert [o.status for o in outcomes] == ["done"] * 6
    assert_same_runs(configs, serial_store, tmp_path)


@pytest.mark.ray
@pytest.mark.slow
def test_a_killed_ray_worker_is_retried_and_its_run_resumes_to_the_same_metrics(serial_store, local_ray, tmp_path):
    cfg = slow_run()
    killer = Killer(cfg, tmp_path)
    killer.start()
    try:
        [outcome] = execute([cfg], executor="ray", workers=1, threads=1, results_dir=tmp_path, progress=False)
    finally:
        killer.stop.set()
    assert killer.killed is not None, "the run finished before it could be killed"
    assert outcome.status == "done" and outcome.attempts == 2
    assert_same_runs([cfg], serial_store, tmp_path)


# ---------------------------------------------------------------------- fedlib sweep
SWEEP = ["sweep", "--dataset", "digits", "--model", "mlp", "--clients", "4", "--rounds", "1", "--local-epochs", "1",
         "--max-train-samples", "400", "--max-test-samples", "200", "--device", "cpu", "--executor", "serial",
         "--threads", "1", "--quiet"]


def test_fedlib_sweep_trains_every_combination_once(tmp_path, capsys):
    from fedlib.commands import cli

    argv = SWEEP + ["--results", str(tmp_path), "--method", "fedprox", "--grid", "seed=0,1",
                    "--grid", "method-arg=mu=0.01,mu=0.1", "--json"]
    assert cli.main(argv) == 0
    outcomes = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert [o["status"] for o in outcomes] == ["done"] * 4 and len({o["config_hash"] for o in outcomes}) == 4
    assert cli.main(argv[:-3] + ["--json"]) == 0, "the default mu, seeds 0 and 1"
    again = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert [o["status"] for o in again] == ["stored"] * 2, "mu=0.01 is fedprox's default: the same runs"


def test_fedlib_sweep_refuses_a_bad_grid_in_one_line(tmp_path, capsys):
    from fedlib.commands import cli

    for grid in ("seed", "seeds=0,1", "seed=zero,one", "drop-last=1,2"):
        assert cli.main(SWEEP + ["--results", str(tmp_path), "--grid", grid]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--grid" in err, err


# ---------------------------------------------------------------------- reproduce.sh on two workers
@pytest.mark.slow
def test_reproduce_trains_a_table_notebook_on_two_workers_then_renders_it_from_the_store(tmp_path, capsys):
    store_dir = tmp_path / "store"
    options = ["--profile", "smoke", "--only", "fedlmd_table5_combinations", "--results", str(store_dir),
               "--out", str(tmp_path / "notebooks"), "--figures", str(tmp_path / "figures"),
               "--tables", str(tmp_path / "tables")]
    assert reproduce.main([*options, "--executor", "local", "--workers", "2"]) == 0
    declared, _ = reproduce.notebook_runs("smoke", "fedlmd_table5_combinations", results_dir=str(store_dir),
                                          progress=False)
    assert len(declared) == 5 and all(store.is_stored(cfg, store_dir) for cfg in declared)
    assert (tmp_path / "tables" / "fedlmd_table5_combinations.csv").exists()
    assert (tmp_path / "notebooks" / "fedlmd_table5_combinations.ipynb").exists()
    again = execute(declared, executor="local", workers=2, results_dir=store_dir, progress=False)
    assert [o.status for o in again] == ["stored"] * 5, "the notebook trained nothing the executor had not"


def test_the_bar_shows_every_run_given_out_at_once(capsys):
    board = executor._Board(total=3, stored=0, progress=True, verbose=False)
    board.started(), board.started()
    assert board.bar.postfix == "done 0, running 2"
    board.stopped()
    board.finished(executor.Outcome(tiny_config(DIGITS), "done"))
    board.close()
    assert "running 2" in capsys.readouterr().err, "drawn when given out, not at the next finished run"
