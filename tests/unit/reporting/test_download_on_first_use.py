"""A lesson on a teaching machine with internet needs no data folder: the notebook's set-up lets
torchvision fetch what is missing, says so in one line, and leaves everything else alone."""

import os

import pytest

from fedlib.reporting.notebook import download_on_first_use


@pytest.fixture
def empty_data(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDLIB_DATA", str(tmp_path))
    monkeypatch.delenv("FEDLIB_DOWNLOAD", raising=False)  # restored after the test
    return tmp_path


def test_a_lesson_missing_its_data_downloads_it_and_says_where(empty_data):
    line = download_on_first_use({"profile": "lesson", "dataset": "mnist", "data_dir": None})
    assert line is not None and "mnist" in line and str(empty_data) in line
    assert os.environ["FEDLIB_DOWNLOAD"] == "1"


def test_every_missing_dataset_of_a_lesson_is_named(empty_data):
    line = download_on_first_use({"profile": "lesson", "datasets": ["mnist", "fashion_mnist", "digits"]})
    assert "mnist, fashion_mnist" in line and "digits" not in line


def test_download_off_is_respected(empty_data, monkeypatch):
    monkeypatch.setenv("FEDLIB_DOWNLOAD", "0")
    assert download_on_first_use({"profile": "lesson", "dataset": "mnist"}) is None
    assert os.environ["FEDLIB_DOWNLOAD"] == "0"


@pytest.mark.parametrize("resolved", [{"profile": "smoke", "dataset": "mnist"},
                                      {"profile": "quick", "dataset": "mnist"},
                                      {"profile": "lesson", "dataset": "digits"},
                                      {"profile": "lesson", "dataset": "femnist"}],  # no download exists
                         ids=["smoke", "quick", "bundled", "not-downloadable"])
def test_nothing_changes_outside_lessons_that_can_download(empty_data, resolved):
    assert download_on_first_use(resolved) is None
    assert "FEDLIB_DOWNLOAD" not in os.environ


def test_data_on_disk_needs_no_download(empty_data):
    (empty_data / "MNIST" / "raw").mkdir(parents=True)
    for name in ("train-images-idx3-ubyte", "t10k-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-labels-idx1-ubyte"):
        (empty_data / "MNIST" / "raw" / name).write_bytes(b"")
    assert download_on_first_use({"profile": "lesson", "dataset": "mnist"}) is None
