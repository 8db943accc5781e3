"""The data a run reads is the data its config names: a partial copy of a dataset is refused,
every run records a fingerprint of its data, and a stored run is not served for other data."""

import json
import warnings

import numpy as np
import pytest
from PIL import Image

from fedlib.core.config import RunConfig
from fedlib.datasets import data
from fedlib.datasets.data_check import check_full_size, fingerprint, fingerprint_difference, split_sizes
from fedlib.engine import engine
from fedlib.errors import FedlibError
from tests.helpers import quiet_run, tiny_config

CIFAR_RUN = dict(dataset="cifar10", model="mlp", clients=2, rounds=1, batch_size=50, device="cpu",
                 partition="iid", augmentation="none")


def cifar_folder(root, train_per_class: int, test_per_class: int = 5, seed: int = 0):
    """A CIFAR-10 copy in the ImageFolder layout data.py reads (cifar10/{train,test}/<class>/*.png)."""
    rng = np.random.default_rng(seed)
    for split, count in (("train", train_per_class), ("test", test_per_class)):
        for name in data.CIFAR10_CLASSES:
            folder = root / "cifar10" / split / name
            folder.mkdir(parents=True)
            for index in range(count):
                pixels = rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(folder / f"{index}.png")
    return root


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDLIB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FEDLIB_REFERENCE", "off")
    engine._DATASET_CACHE.clear()
    engine._SOURCE_FINGERPRINTS.clear()
    yield
    engine._DATASET_CACHE.clear()
    engine._SOURCE_FINGERPRINTS.clear()


def test_a_partial_cifar10_copy_is_refused_with_one_line(tmp_path, private_cache):
    folder = cifar_folder(tmp_path / "data", train_per_class=30)  # 300 of 50,000 training images
    cfg = RunConfig(**CIFAR_RUN, data_dir=str(folder))
    with pytest.raises(FedlibError) as caught:
        quiet_run(cfg, tmp_path / "results")
    message = str(caught.value)
    assert "300 training images, not the full 50,000" in message and "max_train_samples" in message
    assert "\n" not in message
    assert not (tmp_path / "results" / cfg.hash() / "summary.json").exists(), "nothing stored"


def test_a_partial_copy_trains_as_a_named_subset_that_hashes_apart(tmp_path, private_cache):
    folder = cifar_folder(tmp_path / "data", train_per_class=30)
    full = RunConfig(**CIFAR_RUN, data_dir=str(folder))
    subset = full.replace(max_train_samples=200, max_test_samples=50)
    assert subset.hash() != full.hash()
    result = quiet_run(subset, tmp_path / "results")
    meta = json.loads((result.folder / "meta.json").read_text())
    assert meta["data_fingerprint"]["train"] == 300 and meta["data_fingerprint"]["test"] == 50
    assert meta["data_fingerprint"]["train_per_class"] == [30] * 10
    assert meta["trained_data"]["train"] == 200 and meta["trained_data"]["test"] == 50


def test_a_stored_run_is_not_served_for_data_of_other_counts(tmp_path, private_cache):
    cfg = RunConfig(**CIFAR_RUN, max_train_samples=200, max_test_samples=50,
                    data_dir=str(cifar_folder(tmp_path / "a", train_per_class=30)))
    quiet_run(cfg, tmp_path / "results")
    other = cfg.replace(data_dir=str(cifar_folder(tmp_path / "b", train_per_class=25)))
    assert other.hash() == cfg.hash(), "the folder is no part of the hash"
    with pytest.raises(FedlibError) as caught:
        quiet_run(other, tmp_path / "results")
    assert "trained on other data" in str(caught.value) and "300 train images stored vs 250 here" in str(caught.value)


def test_a_stored_run_with_the_same_counts_but_other_images_is_served_with_a_warning(tmp_path, private_cache):
    cfg = RunConfig(**CIFAR_RUN, max_train_samples=200, max_test_samples=50,
                    data_dir=str(cifar_folder(tmp_path / "a", train_per_class=30)))
    first = quiet_run(cfg, tmp_path / "results")
    other = cfg.replace(data_dir=str(cifar_folder(tmp_path / "b", train_per_class=30, seed=1)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        served = engine.run(other, results_dir=tmp_path / "results", progress=False)
    assert served.summary == first.summary
    assert any("other images of the same sizes" in str(w.message) for w in caught)


def test_runs_record_their_data_and_the_same_data_is_served(tmp_path, private_cache):
    cfg = tiny_config()
    first = quiet_run(cfg, tmp_path)
    meta = json.loads((first.folder / "meta.json").read_text())
    assert meta["data_fingerprint"] == fingerprint(data.make_synthetic())
    assert quiet_run(cfg, tmp_path).rounds == first.rounds


def test_reference_runs_committed_before_fingerprints_are_still_served(tmp_path, monkeypatch):
    monkeypatch.delenv("FEDLIB_REFERENCE", raising=False)
    from fedlib import store

    runs = sorted(p for p in store.REFERENCE_RESULTS.iterdir() if (p / "summary.json").exists())
    older = [p for p in runs if "data_fingerprint" not in json.loads((p / "meta.json").read_text())]
    assert older, "the reference store keeps runs committed before runs recorded a data fingerprint"
    folder = older[0]
    cfg = RunConfig.from_dict(json.loads((folder / "config.json").read_text()))
    result = quiet_run(cfg, tmp_path)
    assert result.folder.resolve() == folder.resolve()


def test_fingerprints_differ_in_counts_and_content():
    a = data.make_synthetic(seed=0)
    assert fingerprint_difference(fingerprint(a), fingerprint(a)) is None
    assert "train images" in fingerprint_difference(fingerprint(a), fingerprint(a.subset(500, None, 0)))
    assert "content digest" in fingerprint_difference(fingerprint(a), fingerprint(data.make_synthetic(seed=1)))


def test_full_size_check_and_split_sizes():
    assert split_sizes("mnist", {}) == (60000, 10000)
    assert split_sizes("mnist", {"split": "pooled_75_25"}) == (52500, 17500)
    assert split_sizes("mnist", {"split": "holdout_10"}) == (54000, 6000)
    assert split_sizes("femnist", {}) is None, "a dataset whose size varies with the build"
    small = data.make_synthetic(train_per_class=10)  # 100 of the 1,000 synthetic training images
    with pytest.raises(FedlibError, match="100 training images, not the full 1,000"):
        check_full_size(small, {}, "standard", None, None)
    check_full_size(small, {"train_per_class": 10}, "standard", None, None)  # its own full size
    check_full_size(small, {}, "standard", 100, None)  # a named subset


def test_a_cap_at_least_the_split_is_no_cap_and_keeps_the_hash():
    plain = RunConfig(dataset="mnist")
    assert RunConfig(dataset="mnist", max_train_samples=60000).hash() == plain.hash()
    assert RunConfig(dataset="mnist", max_train_samples=10 ** 9, max_test_samples=10 ** 6).max_train_samples is None
    assert RunConfig(dataset="mnist", max_train_samples=59999).hash() != plain.hash()
    pooled = RunConfig(dataset="mnist", dataset_options={"split": "pooled_75_25"}, max_train_samples=60000)
    assert pooled.max_train_samples is None, "the pooled split trains on 52,500"


def _no_image_reads(monkeypatch):
    """From here on, loading a dataset fails the test; the process forgets what it loaded, as a new one would."""
    from fedlib.datasets import sources

    def refuse(*args, **kwargs):
        raise AssertionError("a data set was loaded")

    engine._DATASET_CACHE.clear()
    engine._SOURCE_FINGERPRINTS.clear()
    monkeypatch.setattr(sources, "load_dataset", refuse)
    monkeypatch.setattr(data, "load_dataset", refuse)


def test_serving_a_stored_run_reads_no_image_once_training_kept_its_datas_fingerprint(tmp_path, private_cache, monkeypatch):
    # issue 46: serving stored metrics loaded the whole data set to fingerprint it, in every process
    cfg = RunConfig(**CIFAR_RUN, max_train_samples=200, max_test_samples=50,
                    data_dir=str(cifar_folder(tmp_path / "a", train_per_class=30)))
    first = quiet_run(cfg, tmp_path / "results")  # training keeps the fingerprint of the files it read
    _no_image_reads(monkeypatch)
    served = quiet_run(cfg, tmp_path / "results")
    assert served.summary == first.summary and served.rounds == first.rounds
    Image.fromarray(np.zeros((32, 32, 3), dtype=np.uint8)).save(tmp_path / "a" / "cifar10" / "train" / "cat" / "x.png")
    engine._SOURCE_FINGERPRINTS.clear()  # a new process
    with pytest.raises(AssertionError, match="a data set was loaded"):  # other files: fingerprinted anew
        quiet_run(cfg, tmp_path / "results")


def test_a_kept_fingerprint_of_other_data_still_refuses_the_stored_run(tmp_path, private_cache, monkeypatch):
    from fedlib.engine import run_data

    cfg = RunConfig(**CIFAR_RUN, max_train_samples=200, max_test_samples=50,
                    data_dir=str(cifar_folder(tmp_path / "a", train_per_class=30)))
    quiet_run(cfg, tmp_path / "results")
    other = cfg.replace(data_dir=str(cifar_folder(tmp_path / "b", train_per_class=25)))
    assert run_data.source_fingerprint(other)["train"] == 250  # kept for b's files
    _no_image_reads(monkeypatch)
    with pytest.raises(FedlibError) as caught:
        quiet_run(other, tmp_path / "results")
    assert "trained on other data" in str(caught.value) and "300 train images stored vs 250 here" in str(caught.value)
