"""A local worker dies with the ``fedlib sweep`` that started it, even one killed with SIGKILL
(which runs no cleanup): no run goes on training, unwatched, after its sweep is gone."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
LONG_SWEEP = ["sweep", "--dataset", "digits", "--model", "mlp", "--clients", "4", "--rounds", "500",
              "--local-epochs", "5", "--device", "cpu", "--executor", "local", "--workers", "1", "--threads", "1",
              "--quiet"]


def gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie nobody reaps counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def wait_for(condition, limit: float = 180.0) -> bool:
    """Poll ``condition`` until it holds or ``limit`` seconds pass; whether it held."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def worker_pid(results: Path, parent: int) -> int | None:
    """The pid holding a run's claim in ``results`` when it is not ``parent`` (a worker's)."""
    for claim in results.glob("*/claim.json"):
        try:
            pid = json.loads(claim.read_text())["pid"]
        except (OSError, ValueError, KeyError):
            continue
        if pid != parent:
            return pid
    return None


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_worker_stops_when_its_sweep_is_killed(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "FEDLIB_REFERENCE": "off"}
    sweep = subprocess.Popen([sys.executable, "-m", "fedlib", *LONG_SWEEP, "--results", str(tmp_path)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = None
    try:
        assert wait_for(lambda: worker_pid(tmp_path, sweep.pid) is not None), "no worker claimed the run"
        worker = worker_pid(tmp_path, sweep.pid)
        os.kill(sweep.pid, signal.SIGKILL)
        sweep.wait()
        assert wait_for(lambda: gone(worker), limit=60), f"worker {worker} trains on after its sweep was killed"
    finally:
        if sweep.poll() is None:
            sweep.kill()
        if worker is not None and not gone(worker):
            os.kill(worker, signal.SIGKILL)
