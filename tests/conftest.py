"""Fixtures shared by the test modules."""

import pytest
import torch


@pytest.fixture
def torch_threads():
    """``torch.set_num_threads`` for one test; torch's setting is restored afterwards."""
    previous = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(previous)


@pytest.fixture
def one_thread(torch_threads):
    """One intra-op thread: tiny models only lose time to thread hand-offs on a busy CPU, and the
    sums run in one fixed order."""
    torch_threads(1)


@pytest.fixture
def two_threads(torch_threads):
    """Two intra-op threads, so the threads backend has two workers even on a one-core machine."""
    torch_threads(2)


@pytest.fixture(autouse=True)
def _torch_threads_unchanged():
    """A test that changes torch's intra-op threads (an executor's thread budget, for one) hands
    the next test the setting it found: a run's floating-point results depend on it."""
    previous = torch.get_num_threads()
    yield
    if torch.get_num_threads() != previous:
        torch.set_num_threads(previous)


@pytest.fixture(autouse=True)
def _modes_reset():
    """A test that sets a process-wide mode (what an edge reads from the environment: the run
    defaults, render-only, downloads, threads, ...) leaves fedlib's own behind: the next test
    starts as a fresh process whose environment sets none would."""
    from fedlib.orchestration import environment

    yield
    environment.reset()


@pytest.fixture
def render_only():
    """Runs come from the stores only for one test, as under ``reproduce --render-only``."""
    from fedlib.engine import engine

    engine.set_render_only(True)
    yield
    engine.set_render_only(False)


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` run where a CUDA GPU is present and are skipped elsewhere: no test
    depends on a GPU."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is false)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
