"""Fixtures shared by the test modules."""

import pytest
import torch


@pytest.fixture
def torch_threads():
    """``torch.set_num_threads`` for one test; torch's setting is restored afterwards."""
    previous = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(previous)
