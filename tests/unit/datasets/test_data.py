"""Tests of fedlib.datasets.data (datasets, layouts, cache, subsets) and fedlib.datasets.augment."""

import json
import os
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from fedlib.datasets import data, loaders
from fedlib.datasets.augment import (
    AUGMENTATIONS, CIFAR10_POLICY, AugmentSpec, augment_spec, autoaugment_cifar10,
    default_augmentation, normalize, op_magnitude, prepare_batch,
)
from fedlib.datasets.data import Dataset, load_dataset, make_synthetic
from fedlib.errors import FedlibError

REPO_ROOT = Path(__file__).resolve().parents[3]


def write_image(image: torch.Tensor, path) -> None:
    """Save a uint8 (C, H, W) tensor; the format follows the file suffix (PNG is lossless)."""
    array = image.permute(1, 2, 0).numpy()
    Image.fromarray(array[:, :, 0] if array.shape[2] == 1 else array).save(path)


# ----------------------------------------------------------------------------- helpers


def write_idx(path: Path, array: np.ndarray) -> None:
    """Write an uncompressed IDX file (the MNIST format) holding uint8 ``array``."""
    header = struct.pack(">I", 0x0800 + array.ndim) + b"".join(
        struct.pack(">I", n) for n in array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


def write_mnist_raw(root: Path, folder: str, train_n: int = 30, test_n: int = 10) -> dict:
    raw = root / folder / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    arrays = {}
    for prefix, n in (("train", train_n), ("t10k", test_n)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = np.arange(n) % 10
        write_idx(raw / f"{prefix}-images-idx3-ubyte", images)
        write_idx(raw / f"{prefix}-labels-idx1-ubyte", labels)
        arrays[prefix] = (images, labels)
    return arrays


def class_image(label: int, channels: int = 3, size: int = 8) -> torch.Tensor:
    """A constant image whose value encodes the label, so labels can be checked from pixels."""
    return torch.full((channels, size, size), 20 * label + 5, dtype=torch.uint8)


def write_imagefolder(split_dir: Path, class_folders: list[str], per_class: int, size: int = 8):
    for label, folder in enumerate(class_folders):
        (split_dir / folder).mkdir(parents=True)
        for i in range(per_class):
            write_image(class_image(label, size=size), str(split_dir / folder / f"{i:04d}.png"))


@pytest.fixture
def cache_dir(tmp_path) -> Path:
    return tmp_path / "cache"


def real_data_dir() -> Path | None:
    candidates = [os.environ.get("FEDLIB_DATA"), REPO_ROOT.parent / "shared" / "datasets"]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None


# ----------------------------------------------------------------------------- generated data


def test_digits_shapes_dtypes_and_classes():
    digits = load_dataset("digits")
    assert digits.train_x.dtype == torch.uint8 and digits.train_y.dtype == torch.int64
    assert digits.train_x.shape == (1437, 1, 8, 8) and digits.test_x.shape == (360, 1, 8, 8)
    assert digits.class_names == [str(d) for d in range(10)]
    assert digits.num_classes == 10 and digits.in_channels == 1
    assert digits.train_x.max() == 255  # 16 on sklearn's scale
    assert torch.bincount(digits.test_y).min() >= 35  # stratified: 36 per class


def test_digits_upsampled_for_mnist_models():
    digits = load_dataset("digits", image_size=28)
    assert digits.image_shape == (1, 28, 28)
    assert 0 < digits.mean[0] < 1 and digits.std[0] > 0


def test_synthetic_shapes_determinism_and_learnability():
    dataset = make_synthetic(num_classes=4, train_per_class=50, test_per_class=25,
                             image_shape=(3, 8, 8), seed=3)
    assert dataset.train_x.shape == (200, 3, 8, 8) and dataset.test_x.shape == (100, 3, 8, 8)
    assert dataset.train_x.dtype == torch.uint8 and dataset.num_classes == 4
    assert torch.equal(dataset.train_x, make_synthetic(4, 50, 25, (3, 8, 8), seed=3).train_x)
    assert not torch.equal(dataset.train_x, make_synthetic(4, 50, 25, (3, 8, 8), seed=4).train_x)
    # A linear model must beat chance (25 %) clearly after a few steps.
    torch.manual_seed(0)
    model = torch.nn.Linear(3 * 8 * 8, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    features = normalize(dataset.train_x, dataset.mean, dataset.std).flatten(1)
    for _ in range(30):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(features), dataset.train_y).backward()
        optimizer.step()
    test_features = normalize(dataset.test_x, dataset.mean, dataset.std).flatten(1)
    accuracy = (model(test_features).argmax(1) == dataset.test_y).float().mean()
    assert accuracy > 0.6


def test_unknown_dataset_and_option_are_one_line_errors():
    with pytest.raises(FedlibError, match="unknown dataset 'cifar11'"):
        load_dataset("cifar11")
    with pytest.raises(FedlibError, match="unknown digits option 'imagesize'"):
        load_dataset("digits", imagesize=28)
    with pytest.raises(FedlibError, match="image_size"):
        load_dataset("digits", image_size=0)
    tiny = load_dataset("synthetic", num_classes=3, train_per_class=2, test_per_class=1)
    assert tiny.num_classes == 3 and len(tiny.train_y) == 6 and tiny.source == "synthetic"


def test_failed_download_is_a_one_line_error(tmp_path, cache_dir, monkeypatch):
    import torchvision.datasets

    calls = []

    class OfflineMNIST:
        def __init__(self, root, train, download):
            calls.append(download)
            raise RuntimeError("Error downloading train-images-idx3-ubyte.gz:\nTried mirrors")
    monkeypatch.setattr(torchvision.datasets, "MNIST", OfflineMNIST)
    data.set_download(True)  # the process's switch ($FEDLIB_DOWNLOAD=1 at an edge) alone allows it
    with pytest.raises(FedlibError, match="could not download mnist") as error:
        load_dataset("mnist", data_dir=tmp_path, cache_dir=cache_dir)
    assert "\n" not in str(error.value) and calls == [True]


def test_missing_dataset_names_the_paths(tmp_path, cache_dir, monkeypatch):
    monkeypatch.delenv("FEDLIB_DOWNLOAD", raising=False)
    with pytest.raises(FedlibError) as error:
        load_dataset("mnist", data_dir=tmp_path, cache_dir=cache_dir)
    message = str(error.value)
    assert "\n" not in message
    assert str(tmp_path / "MNIST" / "raw") in message and str(tmp_path / "mnist") in message
    assert "FEDLIB_DATA" in message and "download" in message
    with pytest.raises(FedlibError, match="femnist.*cannot be downloaded"):
        load_dataset("femnist", data_dir=tmp_path, cache_dir=cache_dir)


@pytest.fixture
def no_download(monkeypatch, tmp_path):
    """No download switch and no data folder from the environment; the cache in tmp_path."""
    monkeypatch.delenv("FEDLIB_DOWNLOAD", raising=False)
    monkeypatch.delenv("FEDLIB_DATA", raising=False)
    monkeypatch.setenv("FEDLIB_CACHE", str(tmp_path / "cache"))


def test_dataset_available_finds_fake_layouts_without_reading_them(tmp_path, no_download):
    root = tmp_path / "data"
    for split in ("train", "test"):  # FEMNIST: LEAF json folders (content never read here)
        (root / "femnist" / split).mkdir(parents=True)
        (root / "femnist" / split / "all_data_0.json").write_text("not json")
    (root / "Office-Caltech-10" / "DSLR" / "mug").mkdir(parents=True)  # one domain is enough
    (root / "cifar-100-python").mkdir(parents=True)
    (root / "cifar-100-python" / "train").write_bytes(b"")
    write_imagefolder(root / "cifar10-jpeg" / "train", ["cat"], 1)
    (root / "cifar10-jpeg" / "test").mkdir()
    for name in ("femnist", "office_caltech10", "cifar100", "cifar10"):
        assert data.dataset_available(name, data_dir=root), name
        assert data.missing_dataset_message(name, data_dir=root) is None
    assert not (tmp_path / "cache").exists()  # nothing loaded, nothing cached


def test_dataset_available_false_in_an_empty_folder_with_one_line_how_to(tmp_path, no_download):
    for name in ("mnist", "cifar100", "femnist", "office_caltech10", "tinyimagenet", "cinic10"):
        assert not data.dataset_available(name, data_dir=tmp_path), name
        message = data.missing_dataset_message(name, data_dir=tmp_path)
        assert "\n" not in message and name in message and str(tmp_path) in message
    femnist = data.missing_dataset_message("femnist", data_dir=tmp_path)
    assert "LEAF" in femnist and str(tmp_path / "femnist") in femnist
    office = data.missing_dataset_message("office_caltech10", data_dir=tmp_path)
    assert "amazon, caltech, dslr, webcam" in office
    # half a layout is not a layout: LEAF json in train/ only, a CIFAR-100 folder without files
    (tmp_path / "femnist" / "train").mkdir(parents=True)
    (tmp_path / "femnist" / "train" / "a.json").write_text("{}")
    (tmp_path / "cifar-100-python").mkdir()
    assert not data.dataset_available("femnist", data_dir=tmp_path)
    assert not data.dataset_available("cifar100", data_dir=tmp_path)


def test_dataset_available_follows_download_switch_and_environment(tmp_path, no_download, monkeypatch):
    assert data.dataset_available("cifar100", data_dir=tmp_path, download=True)
    assert not data.dataset_available("femnist", data_dir=tmp_path, download=True)  # not downloadable
    data.set_download(True)  # $FEDLIB_DOWNLOAD=1, read at an edge
    assert data.dataset_available("cifar100", data_dir=tmp_path)
    data.set_download(False)
    write_mnist_raw(tmp_path, "MNIST")
    monkeypatch.setenv("FEDLIB_DATA", str(tmp_path))  # data_dir=None reads $FEDLIB_DATA
    assert data.dataset_available("mnist") and not data.dataset_available("fashion_mnist")


def test_generated_datasets_are_always_available(tmp_path, no_download):
    for name in ("digits", "synthetic"):
        assert data.dataset_available(name, data_dir=tmp_path / "nowhere")
        assert data.missing_dataset_message(name) is None
    with pytest.raises(FedlibError, match="unknown dataset 'femnist_digits'"):
        data.dataset_available("femnist_digits")


# ----------------------------------------------------------------------------- on-disk layouts


def test_torchvision_mnist_idx_layout(tmp_path, cache_dir):
    arrays = write_mnist_raw(tmp_path, "MNIST")
    mnist = load_dataset("mnist", data_dir=tmp_path, cache_dir=cache_dir)
    assert mnist.train_x.shape == (30, 1, 28, 28) and mnist.test_x.shape == (10, 1, 28, 28)
    assert np.array_equal(mnist.train_x[:, 0].numpy(), arrays["train"][0])
    assert np.array_equal(mnist.test_y.numpy(), arrays["t10k"][1])
    assert mnist.mean == (0.1307,) and mnist.std == (0.3081,)
    assert mnist.source == str(tmp_path / "MNIST" / "raw")


def test_torchvision_fashion_mnist_has_real_class_names(tmp_path, cache_dir, monkeypatch):
    write_mnist_raw(tmp_path, "FashionMNIST")
    monkeypatch.setenv("FEDLIB_DATA", str(tmp_path))  # the default data folder
    fashion = load_dataset("fashion_mnist", cache_dir=cache_dir)
    assert fashion.class_names[0] == "T-shirt/top" and fashion.class_names[6] == "Shirt"
    assert fashion.mean == (0.2860,)


def test_imagefolder_cifar10_labels_and_pixels(tmp_path, cache_dir):
    root = tmp_path / "cifar10-jpeg"
    write_imagefolder(root / "train", data.CIFAR10_CLASSES, per_class=3)
    write_imagefolder(root / "test", data.CIFAR10_CLASSES, per_class=1)
    cifar = load_dataset("cifar10", data_dir=tmp_path, cache_dir=cache_dir)
    assert cifar.train_x.shape == (30, 3, 8, 8) and cifar.test_x.shape == (10, 3, 8, 8)
    assert cifar.class_names == data.CIFAR10_CLASSES
    # The pixel value encodes the folder's class: labels must agree with it.
    assert torch.equal(cifar.train_x[:, 0, 0, 0].long(), 20 * cifar.train_y + 5)
    assert cifar.mean == (0.4914, 0.4822, 0.4465)


def test_imagefolder_maps_folder_names_onto_canonical_order(tmp_path, cache_dir):
    folders = [name.replace("/", "_") for name in data.FASHION_MNIST_CLASSES]
    root = tmp_path / "fashion-mnist"
    for split in ("train", "test"):
        for label, folder in enumerate(folders):
            (root / split / folder).mkdir(parents=True)
            write_image(class_image(label, channels=1), str(root / split / folder / "a.png"))
    fashion = load_dataset("fashion_mnist", data_dir=tmp_path, cache_dir=cache_dir)
    assert fashion.class_names == data.FASHION_MNIST_CLASSES  # not alphabetical
    assert fashion.in_channels == 1
    assert torch.equal(fashion.train_x[:, 0, 0, 0].long(), 20 * fashion.train_y + 5)


def test_imagefolder_mixed_sizes_need_image_size(tmp_path, cache_dir):
    root = tmp_path / "cifar100"
    for split in ("train", "test"):
        for label, size in ((0, 8), (1, 12)):
            (root / split / f"c{label}").mkdir(parents=True)
            write_image(class_image(label, size=size), str(root / split / f"c{label}" / "a.png"))
    with pytest.raises(FedlibError, match="image_size"):
        load_dataset("cifar100", data_dir=tmp_path, cache_dir=cache_dir)
    resized = load_dataset("cifar100", data_dir=tmp_path, cache_dir=cache_dir, image_size=10)
    assert resized.image_shape == (3, 10, 10) and resized.class_names == ["c0", "c1"]


def test_tinyimagenet_official_layout(tmp_path, cache_dir):
    root = tmp_path / "tiny-imagenet-200"
    wnids = ["n02", "n01"]  # deliberately unsorted: labels follow the sorted wnids
    for wnid in wnids:
        (root / "train" / wnid / "images").mkdir(parents=True)
        for i in range(2):
            path = root / "train" / wnid / "images" / f"{wnid}_{i}.JPEG"
            write_image(class_image(0, size=16), str(path))
    (root / "val" / "images").mkdir(parents=True)
    annotations = []
    for i, wnid in enumerate(["n01", "n02", "n02"]):
        write_image(class_image(0, size=16), str(root / "val" / "images" / f"val_{i}.JPEG"))
        annotations.append(f"val_{i}.JPEG\t{wnid}\t0\t0\t15\t15")
    (root / "val" / "val_annotations.txt").write_text("\n".join(annotations))
    (root / "test" / "images").mkdir(parents=True)  # unlabelled official test split: ignored
    (root / "words.txt").write_text("n01\tgoldfish, Carassius auratus\nn02\tsalamander\n")
    tiny = load_dataset("tinyimagenet", data_dir=tmp_path, cache_dir=cache_dir)
    assert tiny.class_names == ["goldfish", "salamander"]
    assert tiny.train_x.shape == (4, 3, 16, 16) and tiny.test_y.tolist() == [0, 1, 1]
    assert torch.bincount(tiny.train_y).tolist() == [2, 2]


def test_cinic10_uses_train_and_test_not_valid(tmp_path, cache_dir):
    root = tmp_path / "CINIC-10"
    write_imagefolder(root / "train", data.CIFAR10_CLASSES, per_class=2)
    write_imagefolder(root / "valid", data.CIFAR10_CLASSES, per_class=5)
    write_imagefolder(root / "test", data.CIFAR10_CLASSES, per_class=1)
    cinic = load_dataset("cinic10", data_dir=tmp_path, cache_dir=cache_dir)
    assert len(cinic.train_y) == 20 and len(cinic.test_y) == 10
    assert cinic.class_names == data.CIFAR10_CLASSES
    assert len(cinic.mean) == 3 and all(s > 0 for s in cinic.std)


def test_office_caltech_domains_resize_and_split(tmp_path, cache_dir):
    root = tmp_path / "office_caltech_10"
    for domain, size in (("amazon", 20), ("Caltech", 30), ("webcam", 12)):  # case-insensitive
        for label, class_name in enumerate(["back_pack", "mug"]):
            (root / domain / class_name).mkdir(parents=True)
            for i in range(10):
                write_image(class_image(label, size=size), str(root / domain / class_name / f"{i}.png"))
    office = load_dataset("office_caltech10", data_dir=tmp_path, cache_dir=cache_dir, image_size=16)
    assert office.image_shape == (3, 16, 16)
    assert office.group_names == ["amazon", "caltech", "webcam"]
    assert len(office.train_y) == 48 and len(office.test_y) == 12  # 80/20 per domain and class
    assert np.bincount(office.test_groups).tolist() == [4, 4, 4]
    assert len(office.train_groups) == len(office.train_y)
    # Pixels encode the class: labels stayed with their images through the split.
    assert torch.equal(office.test_x[:, 0, 8, 8].long(), 20 * office.test_y + 5)


def test_office_split_depends_on_seed_only(tmp_path):
    keys = np.repeat(np.arange(3), 10)
    first = loaders._split_per_group(keys, 0.2, seed=0)
    assert np.array_equal(first, loaders._split_per_group(keys, 0.2, seed=0))
    assert not np.array_equal(first, loaders._split_per_group(keys, 0.2, seed=1))
    assert [first[keys == k].sum() for k in range(3)] == [2, 2, 2]


def write_leaf(folder: Path, users: dict) -> None:
    folder.mkdir(parents=True)
    content = {"users": list(users), "num_samples": [len(y) for _, y in users.values()],
               "user_data": {u: {"x": x, "y": y} for u, (x, y) in users.items()}}
    (folder / "all_data_0.json").write_text(json.dumps(content))


def test_femnist_leaf_json_writers_and_digits_only(tmp_path, cache_dir):
    def pixels(value):
        return [value] * 784
    root = tmp_path / "femnist"
    write_leaf(root / "train", {"w1": ([pixels(0.0), pixels(1.0)], [3, 40]),
                                "w2": ([pixels(0.5)], [7])})
    write_leaf(root / "test", {"w1": ([pixels(1.0)], [12]), "w2": ([pixels(0.2)], [1])})
    femnist = load_dataset("femnist", data_dir=tmp_path, cache_dir=cache_dir)
    assert femnist.num_classes == 62 and femnist.class_names[10] == "A"
    assert femnist.train_x.shape == (3, 1, 28, 28) and femnist.train_y.tolist() == [3, 40, 7]
    assert femnist.train_x[1].min() == 255 and femnist.train_x[2, 0, 0, 0] == 128
    assert femnist.group_names == ["w1", "w2"] and femnist.train_groups.tolist() == [0, 0, 1]
    digits = load_dataset("femnist", data_dir=tmp_path, cache_dir=cache_dir, digits_only=True)
    assert digits.num_classes == 10 and digits.train_y.tolist() == [3, 7]
    assert digits.test_y.tolist() == [1] and digits.test_groups.tolist() == [1]


def test_femnist_rejects_wrong_pixel_counts(tmp_path, cache_dir):
    root = tmp_path / "femnist"
    write_leaf(root / "train", {"w1": ([[0.5] * 783], [1])})
    write_leaf(root / "test", {"w1": ([[0.5] * 784], [1])})
    with pytest.raises(FedlibError, match="784"):
        load_dataset("femnist", data_dir=tmp_path, cache_dir=cache_dir)


# ----------------------------------------------------------------------------- cache


def test_cache_round_trip_and_source_in_key(tmp_path, cache_dir, monkeypatch):
    write_mnist_raw(tmp_path / "a", "MNIST")
    first = load_dataset("mnist", data_dir=tmp_path / "a", cache_dir=cache_dir)
    assert len(list(cache_dir.glob("mnist-*.pt"))) == 1

    def no_source(*args, **kwargs):
        raise AssertionError("read the source although the cache holds the dataset")
    monkeypatch.setitem(data._LOADERS, "torchvision", no_source)
    second = load_dataset("mnist", data_dir=tmp_path / "a", cache_dir=cache_dir)
    for field in ("train_x", "train_y", "test_x", "test_y"):
        assert torch.equal(getattr(first, field), getattr(second, field))
    for field in ("class_names", "mean", "std", "source"):
        assert getattr(second, field) == getattr(first, field)
    monkeypatch.undo()

    # Another copy of the data elsewhere must not be answered from the first copy's entry.
    raw_b = write_mnist_raw(tmp_path / "b", "MNIST", train_n=20)
    other = load_dataset("mnist", data_dir=tmp_path / "b", cache_dir=cache_dir)
    assert len(other.train_y) == 20 and np.array_equal(other.train_x[:, 0].numpy(), raw_b["train"][0])


def test_cache_keeps_groups_and_a_corrupt_entry_is_rebuilt(tmp_path, cache_dir):
    root = tmp_path / "femnist"
    write_leaf(root / "train", {"w1": ([[0.5] * 784], [1]), "w2": ([[0.1] * 784], [2])})
    write_leaf(root / "test", {"w2": ([[0.3] * 784], [2])})
    first = load_dataset("femnist", data_dir=tmp_path, cache_dir=cache_dir)
    cached = load_dataset("femnist", data_dir=tmp_path, cache_dir=cache_dir)
    assert isinstance(cached.train_groups, np.ndarray)
    assert cached.train_groups.tolist() == first.train_groups.tolist() == [0, 1]
    (entry,) = cache_dir.glob("femnist-*.pt")
    entry.write_bytes(b"not a torch file")
    rebuilt = load_dataset("femnist", data_dir=tmp_path, cache_dir=cache_dir)
    assert torch.equal(rebuilt.train_x, first.train_x)


# ----------------------------------------------------------------------------- subset


def test_subset_is_stratified_and_seeded():
    dataset = make_synthetic(num_classes=4, train_per_class=50, test_per_class=10, image_shape=(1, 4, 4))
    imbalanced = Dataset(**{**dataset.__dict__,
                            "train_x": dataset.train_x[40:], "train_y": dataset.train_y[40:],
                            "train_groups": np.arange(160)})  # class 0 keeps 10 samples
    small = imbalanced.subset(max_train=80, max_test=8, seed=0)
    assert torch.bincount(small.train_y).tolist() == [5, 25, 25, 25]
    assert torch.bincount(small.test_y).tolist() == [2, 2, 2, 2]
    # Groups travel with their samples.
    assert torch.equal(small.train_y, imbalanced.train_y[torch.from_numpy(small.train_groups)])
    same = imbalanced.subset(80, 8, seed=0)
    other = imbalanced.subset(80, 8, seed=1)
    assert np.array_equal(small.train_groups, same.train_groups)
    assert not np.array_equal(small.train_groups, other.train_groups)
    whole = imbalanced.subset(None, 10_000, seed=0)
    assert len(whole.train_y) == 160 and len(whole.test_y) == 40
    with pytest.raises(FedlibError):
        imbalanced.subset(0, None, seed=0)


# ----------------------------------------------------------------------------- augment


def ramp_batch(n: int = 16, channels: int = 3, size: int = 8) -> torch.Tensor:
    """Every pixel different, so any shift or flip is visible."""
    values = torch.arange(channels * size * size, dtype=torch.int64) % 251 + 1
    return values.view(1, channels, size, size).repeat(n, 1, 1, 1).to(torch.uint8)


MEAN, STD = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)


def test_presets_and_defaults():
    assert set(AUGMENTATIONS) == {"none", "crop_flip", "crop_flip_cutout", "crop_flip_autoaugment", "autoaugment",
                                  "reflect_crop_flip"}
    assert augment_spec("crop_flip_cutout").cutout == 16
    # FedVLS: crop + flip + AutoAugment on CIFAR, AutoAugment alone on TinyImageNet
    assert augment_spec("crop_flip_autoaugment") == AugmentSpec(crop_padding=4, hflip=True, autoaugment=True)
    assert augment_spec("autoaugment") == AugmentSpec(autoaugment=True)
    # FedNTD/FedLMD on CINIC-10: reflect-padded crop + flip, no Cutout
    assert augment_spec("reflect_crop_flip") == AugmentSpec(crop_padding=4, hflip=True, padding_mode="reflect")
    with pytest.raises(FedlibError, match="unknown augmentation"):
        augment_spec("flip")
    assert default_augmentation("mnist") == "none"
    assert default_augmentation("cifar10") == "crop_flip"
    assert default_augmentation("cifar100", "FedVLS") == "crop_flip_autoaugment"
    assert default_augmentation("cifar10", "fedlmd") == "crop_flip_cutout"
    assert default_augmentation("mnist", "fedvls") == "none"
    assert default_augmentation("tinyimagenet", "fedvls") == "autoaugment"
    assert default_augmentation("cinic10", "fedntd") == default_augmentation("cinic10", "FedLMD") == "reflect_crop_flip"
    assert default_augmentation("cinic10") == "crop_flip"
    with pytest.raises(FedlibError):
        default_augmentation("cifar10", "unknown_paper")
    with pytest.raises(FedlibError):
        AugmentSpec(crop_padding=-1)
    with pytest.raises(FedlibError, match="padding_mode"):
        AugmentSpec(crop_padding=4, padding_mode="edge")


@pytest.mark.parametrize("name", sorted(AUGMENTATIONS))
def test_prepare_batch_shapes_and_determinism(name):
    batch = ramp_batch(size=32)  # larger than the Cutout square
    spec = augment_spec(name)
    first = prepare_batch(batch, MEAN, STD, spec, torch.Generator().manual_seed(7))
    second = prepare_batch(batch, MEAN, STD, spec, torch.Generator().manual_seed(7))
    assert first.shape == batch.shape and first.dtype == torch.float32
    assert torch.equal(first, second)
    if name != "none":
        third = prepare_batch(batch, MEAN, STD, spec, torch.Generator().manual_seed(8))
        assert not torch.equal(first, third)


def test_prepare_batch_rejects_float_input_and_wrong_channels():
    with pytest.raises(FedlibError, match="uint8"):
        prepare_batch(torch.zeros(2, 3, 8, 8), MEAN, STD)
    with pytest.raises(FedlibError, match="channels"):
        prepare_batch(ramp_batch(channels=1), MEAN, STD)


def test_normalise_constant_mean_image_gives_zero():
    batch = torch.full((4, 3, 6, 6), 128, dtype=torch.uint8)
    mean = (128 / 255,) * 3
    out = prepare_batch(batch, mean, (0.3, 0.2, 0.1), None, None)
    assert out.abs().max() < 1e-6
    scaled = prepare_batch(torch.full((1, 3, 2, 2), 255, dtype=torch.uint8), MEAN, STD)
    assert torch.allclose(scaled, torch.full_like(scaled, 2.0))  # (1 - 0.5) / 0.25


def test_flip_really_flips():
    batch = ramp_batch(n=64)
    out = prepare_batch(batch, MEAN, STD, AugmentSpec(hflip=True), torch.Generator().manual_seed(0))
    plain = normalize(batch, MEAN, STD)
    flipped = [torch.equal(o, p.flip(-1)) for o, p in zip(out, plain)]
    kept = [torch.equal(o, p) for o, p in zip(out, plain)]
    assert all(f or k for f, k in zip(flipped, kept))
    assert 10 < sum(flipped) < 54  # about half each way


def test_crop_with_padding_shifts_content():
    batch = ramp_batch(n=64, size=8)
    spec = AugmentSpec(crop_padding=2)
    out = prepare_batch(batch, MEAN, STD, spec, torch.Generator().manual_seed(0))
    padded = torch.nn.functional.pad(normalize(batch, MEAN, STD), (2, 2, 2, 2),
                                     value=-MEAN[0] / STD[0])  # zero pixels, normalised
    offsets = set()
    for sample in range(len(out)):
        matches = [(dy, dx) for dy in range(5) for dx in range(5)
                   if torch.equal(out[sample], padded[sample, :, dy:dy + 8, dx:dx + 8])]
        assert len(matches) == 1  # every crop is exactly one window of the padded image
        offsets.add(matches[0])
    assert len(offsets) > 10 and (2, 2) in offsets


def test_reflect_crop_cuts_windows_of_the_mirrored_image():
    batch = ramp_batch(n=64, size=8)
    out = prepare_batch(batch, MEAN, STD, AugmentSpec(crop_padding=2, padding_mode="reflect"),
                        torch.Generator().manual_seed(0))
    mirrored = torch.nn.functional.pad(normalize(batch, MEAN, STD), (2, 2, 2, 2), mode="reflect")
    offsets = set()
    for sample in range(len(out)):
        matches = [(dy, dx) for dy in range(5) for dx in range(5)
                   if torch.equal(out[sample], mirrored[sample, :, dy:dy + 8, dx:dx + 8])]
        assert len(matches) == 1  # one window of the reflect-padded image, never a zero border
        offsets.add(matches[0])
    assert len(offsets) > 10 and (0, 0) in offsets
    # the same offsets as the zero-padded crop: the centre (inside the image at any offset) agrees
    zero = prepare_batch(batch, MEAN, STD, AugmentSpec(crop_padding=2), torch.Generator().manual_seed(0))
    assert torch.equal(out[:, :, 2:-2, 2:-2], zero[:, :, 2:-2, 2:-2]) and not torch.equal(out, zero)


def test_reflect_padding_equals_torch_on_uint8_and_rejects_too_much():
    from fedlib.datasets.augment import pad_images

    batch = torch.randint(0, 256, (3, 3, 32, 32), generator=torch.Generator().manual_seed(2), dtype=torch.uint8)
    expected = torch.nn.functional.pad(batch.float(), (4, 4, 4, 4), mode="reflect").to(torch.uint8)
    assert torch.equal(pad_images(batch, 4, "reflect"), expected)
    assert torch.equal(pad_images(batch, 4), torch.nn.functional.pad(batch, (4, 4, 4, 4)))
    with pytest.raises(FedlibError, match="reflect padding"):
        pad_images(batch[:, :, :4, :4], 4, "reflect")


def test_autoaugment_alone_keeps_64x64_tinyimagenet_images_in_place():
    batch = torch.randint(0, 256, (64, 3, 64, 64), generator=torch.Generator().manual_seed(3), dtype=torch.uint8)
    spec = augment_spec("autoaugment")
    out = prepare_batch(batch, MEAN, STD, spec, torch.Generator().manual_seed(0))
    assert out.shape == batch.shape and out.dtype == torch.float32
    assert torch.equal(out, prepare_batch(batch, MEAN, STD, spec, torch.Generator().manual_seed(0)))
    unchanged = [torch.equal(o, p) for o, p in zip(out, normalize(batch, MEAN, STD))]
    assert 5 < sum(unchanged) < 60  # no crop or flip: a sample no sub-policy touched is the image itself
    # translations scale with the image: 150/331 of 64 pixels at the top bin, as torchvision's table
    assert op_magnitude("TranslateX", 9, 64, 64) == pytest.approx(150 / 331 * 64)
    assert op_magnitude("TranslateY", 9, 64, 32) == pytest.approx(150 / 331 * 64)


def test_autoaugment_magnitudes_match_torchvision_at_64_pixels():
    from torchvision.transforms import AutoAugment, AutoAugmentPolicy

    reference = AutoAugment(AutoAugmentPolicy.CIFAR10)
    if not hasattr(reference, "_augmentation_space"):
        pytest.skip("this torchvision keeps its AutoAugment tables elsewhere")
    for op, (magnitudes, _) in reference._augmentation_space(10, (64, 64)).items():
        for magnitude_bin in range(10):
            expected = float(magnitudes[magnitude_bin]) if magnitudes.ndim else 0.0
            ours = op_magnitude(op, magnitude_bin if magnitudes.ndim else None, 64, 64)
            assert ours == pytest.approx(expected, abs=1e-4), (op, magnitude_bin)


def test_cutout_zeroes_one_clipped_square():
    batch = torch.full((32, 3, 32, 32), 255, dtype=torch.uint8)  # 2.0 everywhere after normalising
    out = prepare_batch(batch, MEAN, STD, AugmentSpec(cutout=16), torch.Generator().manual_seed(0))
    areas = []
    for sample in out:
        zero = (sample == 0).all(dim=0)
        assert torch.equal(sample[:, ~zero], torch.full_like(sample[:, ~zero], 2.0))
        rows, cols = zero.any(dim=1).nonzero(), zero.any(dim=0).nonzero()
        box = (rows.max() - rows.min() + 1) * (cols.max() - cols.min() + 1)
        assert box == zero.sum()  # the zeros form one rectangle
        areas.append(int(zero.sum()))
    assert min(areas) >= 64 and max(areas) <= 256 and 256 in areas


def test_autoaugment_policy_matches_torchvision():
    from torchvision.transforms import AutoAugment, AutoAugmentPolicy

    reference = AutoAugment(AutoAugmentPolicy.CIFAR10)
    if not hasattr(reference, "policies") or not hasattr(reference, "_augmentation_space"):
        pytest.skip("this torchvision keeps its AutoAugment tables elsewhere")
    assert tuple(tuple(p) for p in reference.policies) == CIFAR10_POLICY
    space = reference._augmentation_space(10, (32, 32))
    for op, (magnitudes, _) in space.items():
        for magnitude_bin in range(10):
            expected = float(magnitudes[magnitude_bin]) if magnitudes.ndim else 0.0
            ours = op_magnitude(op, magnitude_bin if magnitudes.ndim else None, 32, 32)
            assert ours == pytest.approx(expected, abs=1e-4), (op, magnitude_bin)


def test_autoaugment_changes_images_and_keeps_uint8():
    batch = torch.randint(0, 256, (64, 3, 16, 16), generator=torch.Generator().manual_seed(1),
                          dtype=torch.uint8)
    out = autoaugment_cifar10(batch, torch.Generator().manual_seed(0))
    assert out.dtype == torch.uint8 and out.shape == batch.shape
    changed = (out != batch).flatten(1).any(dim=1).sum()
    assert 10 < changed < 64  # most sub-policies fire sometimes, not always
    assert torch.equal(out, autoaugment_cifar10(batch, torch.Generator().manual_seed(0)))


# ----------------------------------------------------------------------------- real data


def require_real(folder: str) -> Path:
    root = real_data_dir()
    if root is None or not (root / folder).is_dir():
        pytest.skip(f"real data folder {folder} not present (set FEDLIB_DATA)")
    return root


@pytest.mark.parametrize("name, folder", [("mnist", "MNIST"), ("fashion_mnist", "FashionMNIST")])
def test_real_mnist_like(name, folder, tmp_path):
    root = require_real(folder)
    dataset = load_dataset(name, data_dir=root, cache_dir=tmp_path)
    assert dataset.train_x.shape == (60000, 1, 28, 28) and len(dataset.test_y) == 10000
    counts = torch.bincount(dataset.train_y, minlength=10)
    assert counts.min() > 5000 and counts.max() < 7000
    assert torch.bincount(dataset.test_y).min() > 800


@pytest.mark.slow
def test_real_cifar10_jpeg():
    root = require_real("cifar10-jpeg")
    cifar = load_dataset("cifar10", data_dir=root)  # default cache: decoded once, then fast
    assert cifar.train_x.shape == (50000, 3, 32, 32) and cifar.test_x.shape == (10000, 3, 32, 32)
    assert torch.bincount(cifar.train_y).tolist() == [5000] * 10
    assert torch.bincount(cifar.test_y).tolist() == [1000] * 10
    assert cifar.class_names == data.CIFAR10_CLASSES
    measured_mean, _ = data.channel_stats(cifar.train_x[::10])
    assert measured_mean == pytest.approx(cifar.mean, abs=0.01)


def test_holdout_split_tests_on_a_stratified_tenth_of_the_training_set():
    from fedlib.datasets.data import apply_split, load_dataset

    data = load_dataset("digits")
    held = apply_split(data, "holdout_10", seed=0)
    assert len(held.train_y) + len(held.test_y) == len(data.train_y)
    assert abs(len(held.test_y) - round(0.1 * len(data.train_y))) <= 1
    # every held-out image comes from the training set, none from the test set
    train_rows = {bytes(x.numpy()) for x in data.train_x}
    assert all(bytes(x.numpy()) in train_rows for x in held.test_x[:50])
    counts = torch.bincount(held.test_y, minlength=data.num_classes).float()
    assert float(counts.min()) >= 0.5 * float(counts.mean())  # stratified
    again = apply_split(data, "holdout_10", seed=0)
    assert torch.equal(again.test_y, held.test_y)
