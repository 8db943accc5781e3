"""Data that are what they claim: another known data set's files in a data set's folder are refused
in one line naming what they are; a copy no digest knows trains as given, its identity recorded;
the dataset cache notices new files in the same folder."""

import os
import shutil
from dataclasses import replace

import pytest
import torch

from fedlib.datasets import data, identity
from fedlib.datasets.generated import make_synthetic
from fedlib.errors import FedlibError
from tests.unit.datasets.test_data import real_data_dir

SHARED = str(real_data_dir() or "")
HAS_FASHION = os.path.isfile(os.path.join(SHARED, "FashionMNIST", "raw", "train-images-idx3-ubyte"))


def test_the_digest_ignores_order_and_sees_one_changed_pixel_or_label():
    ds = make_synthetic(image_shape=(1, 8, 8))
    digest = identity.content_digest(ds)
    order = torch.randperm(len(ds.train_y), generator=torch.Generator().manual_seed(0))
    assert identity.content_digest(replace(ds, train_x=ds.train_x[order], train_y=ds.train_y[order])) == digest
    pixel = ds.train_x.clone()
    pixel[3, 0, 0, 0] ^= 1
    assert identity.content_digest(replace(ds, train_x=pixel)) != digest
    label = ds.test_y.clone()
    label[0] = (label[0] + 1) % 10
    assert identity.content_digest(replace(ds, test_y=label)) != digest


def test_an_unknown_copy_trains_as_given_and_a_known_one_of_another_set_is_refused(monkeypatch):
    ds = make_synthetic(image_shape=(1, 8, 8))
    assert identity.identify("mnist", ds, "/data").startswith("a copy no known digest matches")
    monkeypatch.setitem(identity.KNOWN_COPIES, identity.content_digest(ds), ("fashion_mnist", "Fashion-MNIST as published"))
    assert identity.identify("fashion_mnist", ds, "/data").startswith("Fashion-MNIST as published")
    with pytest.raises(FedlibError, match=r"^the files read as mnist from /data are Fashion-MNIST as published, not mnist"):
        identity.identify("mnist", ds, "/data")


@pytest.mark.skipif(not HAS_FASHION, reason="needs the offline Fashion-MNIST copy (../shared/datasets)")
def test_fashion_mnists_files_in_an_mnist_folder_are_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDLIB_CACHE", str(tmp_path / "cache"))
    shutil.copytree(os.path.join(SHARED, "FashionMNIST", "raw"), tmp_path / "MNIST" / "raw")
    with pytest.raises(FedlibError, match="are Fashion-MNIST as published.*, not mnist"):
        data.load_dataset("mnist", data_dir=tmp_path)
    fashion = data.load_dataset("fashion_mnist", data_dir=SHARED)
    assert fashion.identity.startswith("Fashion-MNIST as published")


def test_the_cache_key_follows_the_files_not_the_folder_alone(tmp_path):
    folder = tmp_path / "raw"
    folder.mkdir()
    (folder / "a.bin").write_bytes(b"1234")
    first = data.files_signature(folder)
    assert data.files_signature(folder) == first
    (folder / "a.bin").write_bytes(b"12345")  # replaced by another file
    assert data.files_signature(folder) != first
    os.utime(folder / "a.bin", ns=(1, 1))
    moved = data.files_signature(folder)
    os.utime(folder / "a.bin", ns=(2, 2))  # same size, newer copy
    assert data.files_signature(folder) != moved
