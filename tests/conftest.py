"""Fixtures shared by the test modules."""

import pytest
import torch


@pytest.fixture
def torch_threads():
    """``torch.set_num_threads`` for one test; torch's setting is restored afterwards."""
    previous = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(previous)


@pytest.fixture(autouse=True)
def _torch_threads_unchanged():
    """A test that changes torch's intra-op threads (an executor's thread budget, for one) hands
    the next test the setting it found: a run's floating-point results depend on it."""
    previous = torch.get_num_threads()
    yield
    if torch.get_num_threads() != previous:
        torch.set_num_threads(previous)
