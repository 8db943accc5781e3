"""tools/probes/fedvls_mnist_gap/probe.py hands the engine the authors' data as a DataSource."""

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from fedlib.datasets.dataset import Dataset
from fedlib.datasets.partition import make_partition

PROBE = Path(__file__).resolve().parents[2] / "tools" / "probes" / "fedvls_mnist_gap" / "probe.py"


def load_probe():
    """The probe as a module (it puts its own folder on sys.path for authors_partition)."""
    spec = importlib.util.spec_from_file_location("fedvls_mnist_gap_probe", PROBE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tiny_mnist(train: int = 12, test: int = 4) -> Dataset:
    """Images whose single pixel is their index in the pooled train + test set."""
    pixels = torch.arange(train + test, dtype=torch.uint8).reshape(-1, 1, 1, 1)
    labels = torch.arange(train + test) % 3
    return Dataset("mnist", pixels[:train], labels[:train], pixels[train:], labels[train:], ["0", "1", "2"],
                   (0.1307,), (0.3081,))


def test_the_natural_partition_gives_each_client_the_authors_samples_in_their_order(monkeypatch):
    probe = load_probe()
    idx_train = np.array([15, 3, 8, 0, 11, 6, 2, 9, 13, 5, 1, 4])  # positions in the pooled 16 samples
    idx_test = np.array([7, 10, 12, 14])
    batches = [[4, 0, 7], [11, 2, 9, 1, 5], [3, 10, 6, 8]]  # the authors' clients: positions in idx_train
    monkeypatch.setattr(probe, "authors_partition", lambda beta: (idx_train, idx_test, batches, None, 0))
    data = probe.authors_data(tiny_mnist(), beta=0.05)
    partition = make_partition("natural", data.train_y.numpy(), len(batches), 3, seed=0, groups=data.train_groups)
    for client, batch in zip(partition.client_indices, batches):
        assert data.train_x[client].flatten().tolist() == idx_train[batch].tolist()
    assert data.test_x.flatten().tolist() == idx_test.tolist()
    assert data.name != "mnist", "the authors' split is not fedlib's MNIST split"


def test_the_norm_setting_changes_the_normalisation_only(monkeypatch):
    probe = load_probe()
    source = probe.ProbeData("norm", 0.05)
    monkeypatch.setattr(probe, "FILES", SimpleNamespace(load=lambda name, **options: tiny_mnist()))
    data = source.load("mnist")
    assert (data.mean, data.std) == ((0.5,), (0.5,))
    assert torch.equal(data.train_x, tiny_mnist().train_x) and not source.real
