"""Datasets as uint8 image tensors with labels, class names and normalisation constants.

``load_dataset(name)`` returns a :class:`Dataset` whose images are uint8 ``(N, C, H, W)`` CPU
tensors, small enough to move to the accelerator once and index there (see
:mod:`fedlib.datasets.augment` for the per-batch augmentation). Sources, in this order:

1. fedlib's own cache, one ``.pt`` file per dataset, source folder and options
   (``cache_dir`` or ``$FEDLIB_CACHE`` or ``~/.cache/fedlib``);
2. torchvision's native layouts under the data folder (MNIST, FashionMNIST, CIFAR-10/100),
   downloaded only with ``download=True`` or ``FEDLIB_DOWNLOAD=1``;
3. folder trees under the data folder, ``<data>/<folder>/...``:

   - ImageFolder: ``<folder>/{train,test}/<class>/*.jpg|png`` (CINIC-10's ``valid`` is ignored);
   - TinyImageNet's official layout: ``train/<wnid>/images/*``, ``val/images`` with
     ``val/val_annotations.txt``, ``words.txt`` for the class names (val is the test split);
   - Office-Caltech-10: ``<folder>/<domain>/<class>/*`` for the domains amazon, caltech, dslr,
     webcam (names matched case-insensitively); images are resized to ``image_size`` (default
     32) and split per domain and class into train/test (``test_fraction``, ``split_seed``);
   - FEMNIST in LEAF's json: ``<folder>/{train,test}/*.json`` each holding
     ``{"users": [...], "user_data": {user: {"x": [[784 floats in 0..1]], "y": [...]}}}``;
     pixels are kept as LEAF stores them (white background);
4. ``digits``: scikit-learn's bundled 8x8 digits, no files needed;
5. ``synthetic``: :func:`make_synthetic`, class-dependent patterns plus noise.

The data folder is ``data_dir``, else ``$FEDLIB_DATA``, else ``<cache>/data``.
Every file-based dataset accepts ``image_size`` (resize to a square, default: keep).
:func:`dataset_available` and :func:`missing_dataset_message` say, without loading anything,
whether ``load_dataset`` would find a dataset (notebooks skip runs on data that are not there).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import string
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import torch

from fedlib.errors import FedlibError, one_of

DATASETS = (
    "mnist", "fashion_mnist", "cifar10", "cifar100", "tinyimagenet", "cinic10", "femnist",
    "office_caltech10", "digits", "synthetic",
)

MNIST_CLASSES = [str(d) for d in range(10)]
FASHION_MNIST_CLASSES = [
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
]
CIFAR10_CLASSES = [
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
]
# LEAF's label order: digits, then upper case, then lower case letters.
FEMNIST_CLASSES = list(string.digits + string.ascii_uppercase + string.ascii_lowercase)
OFFICE_DOMAINS = ("amazon", "caltech", "dslr", "webcam")

# Label order fixed by the dataset itself; folder trees are mapped onto it by name.
_CANONICAL_CLASSES = {
    "mnist": MNIST_CLASSES, "fashion_mnist": FASHION_MNIST_CLASSES,
    "cifar10": CIFAR10_CLASSES, "cinic10": CIFAR10_CLASSES, "femnist": FEMNIST_CLASSES,
}
# The constants everybody uses; other datasets get theirs computed from the training set.
_STANDARD_STATS = {
    "mnist": ((0.1307,), (0.3081,)),
    "fashion_mnist": ((0.2860,), (0.3530,)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
}
_GREY = {"mnist", "fashion_mnist", "femnist"}

# torchvision's native layout: dataset -> (folder under the data folder, a file that must exist)
_TORCHVISION_LAYOUT = {
    "mnist": ("MNIST/raw", "train-images-idx3-ubyte"),
    "fashion_mnist": ("FashionMNIST/raw", "train-images-idx3-ubyte"),
    "cifar10": ("cifar-10-batches-py", "data_batch_1"),
    "cifar100": ("cifar-100-python", "train"),
}
# Folder names tried under the data folder, and the layouts each dataset may use there.
_FOLDER_NAMES = {
    "mnist": ("mnist", "MNIST", "mnist-png", "mnist-jpeg"),
    "fashion_mnist": ("fashion_mnist", "fashion-mnist", "FashionMNIST", "fashionmnist"),
    "cifar10": ("cifar10-jpeg", "cifar10", "CIFAR10", "cifar-10", "cifar10-png"),
    "cifar100": ("cifar100-jpeg", "cifar100", "CIFAR100", "cifar-100", "cifar100-png"),
    "tinyimagenet": ("tiny-imagenet-200", "tinyimagenet", "tiny-imagenet", "TinyImageNet",
                     "tiny_imagenet"),
    "cinic10": ("cinic10", "CINIC-10", "cinic-10", "CINIC10"),
    "femnist": ("femnist", "FEMNIST", "femnist/data"),
    "office_caltech10": ("office_caltech10", "office_caltech_10", "office-caltech-10",
                         "Office-Caltech-10", "OfficeCaltech10", "office_caltech", "office-caltech"),
}
_FOLDER_LAYOUTS = {
    "tinyimagenet": ("tinyimagenet", "imagefolder"),
    "femnist": ("femnist",),
    "office_caltech10": ("office",),
}
_IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp"}
_CACHE_FORMAT = 1

# Train/test splits a run may ask for with dataset_options={"split": ...}; the engine applies them
# with the run's seed (:func:`apply_split`). "pooled_75_25" is the FedVLS code's MNIST split;
# "pooled_75_25_train_eval" also tests on its training part, as that code's swapped loaders do.
SPLITS = ("standard", "pooled_75_25", "pooled_75_25_train_eval", "holdout_10")
POOLED_TRAIN_FRACTION = 0.75
HOLDOUT_FRACTION = 0.10  # "holdout_10": a stratified tenth of the training set becomes the test set
_HOLDOUT_SEED_KEY = 1010
_POOL_SEED_KEY = 7525  # mixed with the run seed, so the pool split and the partition draw apart


@dataclass
class Dataset:
    """One image classification dataset, held as uint8 tensors on the CPU."""

    name: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    class_names: list[str]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    train_groups: np.ndarray | None = None
    test_groups: np.ndarray | None = None
    group_names: list[str] | None = None
    source: str = ""
    # fedlib.datasets.data_check.fingerprint of the data as loaded, kept through re-splits and subsets
    # (set by the engine)
    fingerprint: dict | None = None

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return tuple(self.train_x.shape[1:])

    @property
    def in_channels(self) -> int:
        return int(self.train_x.shape[1])

    def subset(self, max_train: int | None, max_test: int | None, seed: int) -> "Dataset":
        """A stratified, seeded reduction: each class keeps its share of the samples.

        ``None`` (or a limit at least the split's size) keeps that split whole. Images on disk
        are sorted by class, so taking the first N would drop whole classes.
        """
        train_idx = stratified_indices(self.train_y, max_train, seed)
        test_idx = stratified_indices(self.test_y, max_test, seed + 1)
        return replace(
            self,
            train_x=self.train_x[train_idx], train_y=self.train_y[train_idx],
            test_x=self.test_x[test_idx], test_y=self.test_y[test_idx],
            train_groups=_take(self.train_groups, train_idx),
            test_groups=_take(self.test_groups, test_idx),
        )

    def pooled(self, train_fraction: float, seed: int) -> "Dataset":
        """Train and test pooled, shuffled (seeded) and cut again: floor(train_fraction * N) train.

        The cut is not stratified, like scikit-learn's ``train_test_split`` in the FedVLS code.
        Each part lists its samples in pool order (the old train set first, then the old test set).
        """
        if not 0 < train_fraction < 1:
            raise FedlibError(f"train_fraction must be in (0, 1), got {train_fraction}")
        x = torch.cat([self.train_x, self.test_x])
        y = torch.cat([self.train_y, self.test_y])
        groups = None
        if self.train_groups is not None and self.test_groups is not None:
            groups = np.concatenate([self.train_groups, self.test_groups])
        order = np.random.default_rng([seed, _POOL_SEED_KEY]).permutation(len(y))
        cut = int(np.floor(train_fraction * len(y)))
        train_idx = torch.from_numpy(np.sort(order[:cut])).long()
        test_idx = torch.from_numpy(np.sort(order[cut:])).long()
        return replace(
            self, train_x=x[train_idx], train_y=y[train_idx], test_x=x[test_idx], test_y=y[test_idx],
            train_groups=_take(groups, train_idx), test_groups=_take(groups, test_idx),
        )


def split_option(options: dict) -> tuple[str, dict]:
    """The ``split`` entry of dataset options (default "standard") and the loader options left."""
    rest = dict(options)
    split = rest.pop("split", "standard")
    if split not in SPLITS:
        raise one_of("split", split, SPLITS)
    return split, rest


def apply_split(dataset: Dataset, split: str, seed: int) -> Dataset:
    """``dataset`` with the train/test split ``split`` (one of :data:`SPLITS`), seeded by ``seed``.

    ``standard`` keeps the dataset's own split. ``holdout_10`` trains on 90 % of the training
    set and tests on the other, stratified 10 % (the real test set is never seen: for pilots that
    choose a setting before the test set is looked at). ``pooled_75_25`` pools train and test and cuts
    75 % train / 25 % test (the FedVLS code's MNIST data). ``pooled_75_25_train_eval`` trains on
    the same 75 % and also tests on it: the FedVLS code hands its server the 75 % loader as the
    test loader, so the paper's MNIST column measured accuracy on the clients' training data.
    """
    if split not in SPLITS:
        raise one_of("split", split, SPLITS)
    if split == "standard":
        return dataset
    if split == "holdout_10":
        return holdout(dataset, HOLDOUT_FRACTION, seed)
    pooled = dataset.pooled(POOLED_TRAIN_FRACTION, seed)
    if split == "pooled_75_25_train_eval":
        pooled = replace(pooled, test_x=pooled.train_x, test_y=pooled.train_y, test_groups=pooled.train_groups)
    return pooled


def holdout(dataset: Dataset, fraction: float, seed: int) -> Dataset:
    """The training set cut in two, stratified and seeded: (1 - fraction) trains, fraction tests."""
    labels = dataset.train_y
    held = stratified_indices(labels, max(1, int(round(fraction * len(labels)))), seed + _HOLDOUT_SEED_KEY)
    keep = torch.ones(len(labels), dtype=torch.bool)
    keep[held] = False
    kept = torch.nonzero(keep).flatten()
    groups = dataset.train_groups
    return replace(dataset, train_x=dataset.train_x[kept], train_y=labels[kept],
                   test_x=dataset.train_x[held], test_y=labels[held],
                   train_groups=None if groups is None else groups[kept.numpy()],
                   test_groups=None if groups is None else groups[held.numpy()])


def stratified_indices(labels: torch.Tensor, limit: int | None, seed: int) -> torch.Tensor:
    """Sorted indices of at most ``limit`` samples, every class keeping its share (seeded)."""
    if limit is None or limit >= len(labels):
        return torch.arange(len(labels))
    if limit < 1:
        raise FedlibError(f"subset size must be a positive number of samples, got {limit}")
    rng = np.random.default_rng(seed)
    labels_np = labels.numpy()
    classes, class_counts = np.unique(labels_np, return_counts=True)
    quotas = _class_quotas(class_counts, limit, rng)
    chosen = [
        rng.choice(np.flatnonzero(labels_np == label), size=quota, replace=False)
        for label, quota in zip(classes, quotas)
    ]
    return torch.from_numpy(np.sort(np.concatenate(chosen))).long()


def _class_quotas(class_counts: np.ndarray, total: int, rng: np.random.Generator) -> np.ndarray:
    """Split ``total`` over classes proportionally (largest remainder, seeded tie-break)."""
    exact = class_counts * total / class_counts.sum()
    quotas = np.floor(exact).astype(int)
    remainders = exact - quotas
    # Random tie-break so equal remainders do not always favour the lowest class index.
    order = np.lexsort((rng.random(len(exact)), -remainders))
    quotas[order[: total - quotas.sum()]] += 1
    return quotas


def _take(groups: np.ndarray | None, indices: torch.Tensor) -> np.ndarray | None:
    return None if groups is None else groups[indices.numpy()]


# ----------------------------------------------------------------------------- entry point


def load_dataset(
    name: str,
    data_dir: str | os.PathLike | None = None,
    download: bool = False,
    cache_dir: str | os.PathLike | None = None,
    **options,
) -> Dataset:
    """Load dataset ``name`` (one of :data:`DATASETS`) as uint8 tensors.

    ``options``: ``image_size`` for every file-based dataset; FEMNIST ``digits_only``;
    Office-Caltech-10 ``test_fraction``, ``split_seed``; digits ``image_size``, ``split_seed``,
    ``test_size``; synthetic: the arguments of :func:`make_synthetic`.
    """
    if name not in DATASETS:
        raise one_of("dataset", name, DATASETS)
    if _DECLARING.get() and _missing_message(name, data_dir, download) is not None:
        return _declared_stand_in(name, options)
    options = _resolve_options(name, options)
    if name == "digits":
        return load_digits(**options)
    if name == "synthetic":
        return make_synthetic(**options)
    cache_root = _cache_root(cache_dir)
    source = _find_source(name, _data_root(data_dir, cache_root), _download_allowed(download))
    cache_file = _cache_file(cache_root, name, source, options)
    cached = _read_cache(cache_file)
    if cached is not None:
        return cached
    dataset = _LOADERS[source.layout](name, source, options)
    dataset = _finish(dataset, options.get("image_size"))
    _write_cache(cache_file, dataset)
    return dataset


def dataset_available(name: str, data_dir: str | os.PathLike | None = None,
                      download: bool = False) -> bool:
    """Whether :func:`load_dataset` would find ``name`` (one of :data:`DATASETS`).

    Only checks that the files are where a loader looks (same folder rules as ``load_dataset``);
    nothing is read, decoded, cached or downloaded. ``digits`` and ``synthetic`` are always
    available; the torchvision datasets also are with ``download=True`` or ``FEDLIB_DOWNLOAD=1``
    (the download itself may still fail offline). fedlib's cache alone does not count: its
    entries are keyed by the source folder, which must exist.
    """
    return missing_dataset_message(name, data_dir, download) is None


def missing_dataset_message(name: str, data_dir: str | os.PathLike | None = None,
                            download: bool = False) -> str | None:
    """``None`` when ``name`` can be loaded (see :func:`dataset_available`), else one line:
    what is missing, the folders searched and how to get it (the error ``load_dataset`` raises).
    Always ``None`` while :func:`declaring`."""
    if _DECLARING.get():
        if name not in DATASETS:
            raise one_of("dataset", name, DATASETS)
        return None
    return _missing_message(name, data_dir, download)


_DECLARING = contextvars.ContextVar("fedlib_declaring_runs", default=False)


@contextlib.contextmanager
def declaring() -> Iterator[None]:
    """Inside, the data are not needed: every dataset reads as present (:func:`dataset_available`,
    :func:`missing_dataset_message`), and :func:`load_dataset` serves a missing one as a small
    stand-in of its published shape (one sample per natural group and per class, so counts of
    groups and classes hold). ``fedlib.paper.plan`` declares notebooks' runs inside it, so the
    grids that size themselves from the data can be declared on a machine without it."""
    token = _DECLARING.set(True)
    try:
        yield
    finally:
        _DECLARING.reset(token)


def _declared_stand_in(name: str, options: dict) -> Dataset:
    shape = dataset_shape(name, **options)
    return stand_in_dataset(name, max(shape.groups, shape.num_classes), shape.num_classes, **options)


def _missing_message(name: str, data_dir: str | os.PathLike | None, download: bool) -> str | None:
    if name not in DATASETS:
        raise one_of("dataset", name, DATASETS)
    if name in ("digits", "synthetic"):
        return None
    try:
        _find_source(name, _data_root(data_dir, _cache_root(None)), _download_allowed(download))
    except FedlibError as exc:
        return str(exc)
    return None


def _data_root(data_dir, cache_root: Path) -> Path:
    return Path(data_dir or os.environ.get("FEDLIB_DATA") or cache_root / "data")


def _download_allowed(download: bool) -> bool:
    return bool(download) or os.environ.get("FEDLIB_DOWNLOAD") == "1"


_COMMON_OPTIONS = {"image_size": None}
_EXTRA_OPTIONS = {
    "femnist": {"digits_only": False},
    "office_caltech10": {"image_size": 32, "test_fraction": 0.2, "split_seed": 0},
    "digits": {"image_size": 8, "split_seed": 0, "test_size": 360},
    "synthetic": {"num_classes": 10, "train_per_class": 100, "test_per_class": 20,
                  "image_shape": (1, 28, 28), "seed": 0, "noise": 0.25},
}


def check_dataset_options(name: str, options: dict) -> None:
    """Raise a one-line FedlibError for a loader option ``name`` does not take (or a bad image_size).

    ``split`` (one of :data:`SPLITS`) is accepted for every dataset: it is not a loader option but
    a re-split the engine applies after loading, seeded by the run (:func:`apply_split`).
    """
    _resolve_options(name, split_option(options)[1])


def _resolve_options(name: str, options: dict) -> dict:
    """Defaults filled in; an unknown option is an error, never silently ignored."""
    if name == "synthetic":
        defaults = dict(_EXTRA_OPTIONS[name])
    else:
        defaults = {**_COMMON_OPTIONS, **_EXTRA_OPTIONS.get(name, {})}
    for key in options:
        if key not in defaults:
            raise one_of(f"{name} option", key, defaults)
    resolved = {**defaults, **options}
    if "image_size" in resolved:
        _check_image_size(resolved["image_size"])
    return resolved


def _check_image_size(image_size) -> None:
    if image_size is not None and (not isinstance(image_size, int) or image_size < 1):
        raise FedlibError(f"image_size must be a positive integer (pixels) or None, got {image_size!r}")


# ----------------------------------------------------------------------------- finding sources


@dataclass(frozen=True)
class _Source:
    layout: str  # "torchvision", "imagefolder", "tinyimagenet", "femnist" or "office"
    path: Path  # the dataset's own folder: what the cache key and messages name
    root: Path | None = None  # torchvision's root argument (torchvision layout only)
    download: bool = False


def _find_source(name: str, data_root: Path, download: bool) -> _Source:
    looked: list[Path] = []
    if name in _TORCHVISION_LAYOUT:
        folder, marker = _TORCHVISION_LAYOUT[name]
        looked.append(data_root / folder)
        if (data_root / folder / marker).is_file():
            return _Source("torchvision", data_root / folder, root=data_root)
    for folder in _FOLDER_NAMES[name]:
        path = data_root / folder
        looked.append(path)
        for layout in _FOLDER_LAYOUTS.get(name, ("imagefolder",)):
            if _LAYOUT_CHECKS[layout](path):
                return _Source(layout, path)
    if download and name in _TORCHVISION_LAYOUT:
        folder = _TORCHVISION_LAYOUT[name][0]
        return _Source("torchvision", data_root / folder, root=data_root, download=True)
    raise _missing_error(name, looked, data_root)


# How to get a dataset that torchvision cannot download (the end of the "not found" message).
_HOW_TO_GET = {
    "femnist": "build it with LEAF (github.com/TalwalkarLab/leaf, data/femnist/preprocess.sh) and "
               "put its train/ and test/ json folders in {data}/femnist/",
    "office_caltech10": "unpack Office-Caltech-10 (Gong et al., CVPR 2012) "
                        "as {data}/office_caltech10/<domain>/<class>/*.jpg, domains amazon, caltech, "
                        "dslr, webcam",
    "tinyimagenet": "unpack tiny-imagenet-200.zip (cs231n.stanford.edu/tiny-imagenet-200.zip) in {data}/",
    "cinic10": "unpack CINIC-10 (github.com/BayesWatch/cinic-10) as {data}/cinic10/{{train,test}}/<class>/",
}


def _missing_error(name: str, looked: list[Path], data_root: Path) -> FedlibError:
    paths = ", ".join(str(p) for p in looked)
    if name in _TORCHVISION_LAYOUT:
        remedy = ("in torchvision or ImageFolder layout, or allow download "
                  "(download=True or FEDLIB_DOWNLOAD=1)")
    else:
        remedy = f"(it cannot be downloaded automatically): {_HOW_TO_GET[name].format(data=data_root)}"
    return FedlibError(
        f"dataset {name!r} not found; looked in: {paths}; set FEDLIB_DATA (or --data) to a "
        f"folder holding it {remedy}"
    )


def _is_imagefolder(path: Path) -> bool:
    return (path / "train").is_dir() and (path / "test").is_dir()


def _is_tinyimagenet(path: Path) -> bool:
    return (path / "train").is_dir() and (path / "val" / "val_annotations.txt").is_file()


def _is_femnist(path: Path) -> bool:
    return all(any((path / split).glob("*.json")) for split in ("train", "test"))


def _is_office(path: Path) -> bool:
    return bool(_office_domains(path))


_LAYOUT_CHECKS: dict[str, Callable[[Path], bool]] = {
    "imagefolder": _is_imagefolder, "tinyimagenet": _is_tinyimagenet,
    "femnist": _is_femnist, "office": _is_office,
}


# ----------------------------------------------------------------------------- cache


def _cache_root(cache_dir) -> Path:
    root = cache_dir or os.environ.get("FEDLIB_CACHE") or Path.home() / ".cache" / "fedlib"
    return Path(root)


def _cache_file(cache_root: Path, name: str, source: _Source, options: dict) -> Path:
    # The source folder is part of the key: another copy of the data must not hit this entry.
    key = json.dumps(
        {"format": _CACHE_FORMAT, "name": name, "layout": source.layout,
         "path": str(source.path.resolve()), "options": options},
        sort_keys=True, default=str,
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_root / f"{name}-{digest}.pt"


def _read_cache(path: Path) -> Dataset | None:
    if not path.is_file():
        return None
    try:
        stored = torch.load(path, weights_only=True)
        for key in ("train_groups", "test_groups"):
            if stored[key] is not None:
                stored[key] = stored[key].numpy()
        return Dataset(**stored)
    except Exception:  # an unreadable entry is rebuilt from the source, never trusted
        return None


def _write_cache(path: Path, dataset: Dataset) -> None:
    stored = {field: getattr(dataset, field) for field in dataset.__dataclass_fields__}
    for key in ("train_groups", "test_groups"):
        if stored[key] is not None:
            stored[key] = torch.from_numpy(stored[key])
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(stored, temporary)
        os.replace(temporary, path)  # atomic: readers see the old file or the whole new one
    except OSError as exc:
        warnings.warn(f"fedlib could not write its dataset cache {path}: {exc}")
        temporary.unlink(missing_ok=True)


# ----------------------------------------------------------------------------- finishing


def _finish(dataset: Dataset, image_size: int | None) -> Dataset:
    """Resize if asked, then attach the normalisation constants."""
    if image_size is not None and dataset.image_shape[1:] != (image_size, image_size):
        dataset = replace(
            dataset,
            train_x=resize_images(dataset.train_x, image_size),
            test_x=resize_images(dataset.test_x, image_size),
        )
    # The published constants describe the native resolution; resized images get their own.
    if dataset.name in _STANDARD_STATS and image_size is None:
        mean, std = _STANDARD_STATS[dataset.name]
    else:
        mean, std = channel_stats(dataset.train_x)
    return replace(dataset, mean=mean, std=std)


def resize_images(images: torch.Tensor, image_size: int, chunk: int = 2048) -> torch.Tensor:
    """Resize a uint8 batch ``(N, C, H, W)`` to square ``image_size`` (bilinear, antialiased)."""
    from torchvision.transforms.v2.functional import resize

    parts = [resize(images[i : i + chunk], [image_size, image_size], antialias=True)
             for i in range(0, len(images), chunk)]
    return torch.cat(parts)


def channel_stats(
    images: torch.Tensor, chunk: int = 1024
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-channel mean and std of uint8 images, in [0, 1] units (chunked: no float copy)."""
    channels = images.shape[1]
    sums = torch.zeros(channels, dtype=torch.float64)
    squares = torch.zeros(channels, dtype=torch.float64)
    for start in range(0, len(images), chunk):
        block = images[start : start + chunk].to(torch.float64) / 255.0
        sums += block.sum(dim=(0, 2, 3))
        squares += block.square().sum(dim=(0, 2, 3))
    count = images.shape[0] * images.shape[2] * images.shape[3]
    mean = sums / count
    std = (squares / count - mean.square()).clamp_min(0).sqrt()
    # A constant channel carries no information; 1.0 avoids dividing by zero.
    std = torch.where(std > 0, std, torch.ones_like(std))
    return tuple(round(v, 4) for v in mean.tolist()), tuple(round(v, 4) for v in std.tolist())


def _labels(values) -> torch.Tensor:
    return torch.as_tensor(np.asarray(values), dtype=torch.int64)


# ----------------------------------------------------------------------------- torchvision


def _load_torchvision(name: str, source: _Source, options: dict) -> Dataset:
    import torchvision.datasets as tvd

    dataset_class = {"mnist": tvd.MNIST, "fashion_mnist": tvd.FashionMNIST,
                     "cifar10": tvd.CIFAR10, "cifar100": tvd.CIFAR100}[name]
    try:
        train = dataset_class(str(source.root), train=True, download=source.download)
        test = dataset_class(str(source.root), train=False, download=source.download)
    except Exception as exc:  # torchvision raises RuntimeError, URLError, OSError, ...
        action = "download" if source.download else "read"
        detail = " ".join(str(exc).split())
        raise FedlibError(
            f"could not {action} {name} into {source.root} ({detail}); without internet, put the "
            f"files there in torchvision layout or set FEDLIB_DATA to a folder that has them"
        ) from exc
    return Dataset(
        name=name,
        train_x=_as_nchw(train.data), train_y=_labels(train.targets),
        test_x=_as_nchw(test.data), test_y=_labels(test.targets),
        class_names=list(_CANONICAL_CLASSES.get(name, train.classes)),
        mean=(), std=(), source=str(source.path),
    )


def _as_nchw(images) -> torch.Tensor:
    """torchvision keeps MNIST as (N, H, W) tensors and CIFAR as (N, H, W, C) arrays."""
    images = torch.as_tensor(np.asarray(images), dtype=torch.uint8)
    if images.ndim == 3:
        return images.unsqueeze(1).contiguous()
    return images.permute(0, 3, 1, 2).contiguous()


# ----------------------------------------------------------------------------- image folders


def read_images(paths: list[Path], channels: int, image_size: int | None = None) -> torch.Tensor:
    """Decode image files into one uint8 ``(N, C, H, W)`` tensor, resizing when asked."""
    from PIL import Image
    from torchvision.transforms.v2.functional import resize

    # PIL rather than torchvision.io: the latter's decoders are deprecated from torchvision 0.29.
    mode = "L" if channels == 1 else "RGB"
    images = []
    for path in paths:
        with Image.open(path) as file:
            pixels = np.asarray(file.convert(mode)).reshape(file.height, file.width, channels)
        image = torch.from_numpy(pixels.copy()).permute(2, 0, 1)
        if image_size is not None and tuple(image.shape[1:]) != (image_size, image_size):
            image = resize(image, [image_size, image_size], antialias=True)
        images.append(image)
    if not images:
        raise FedlibError("no image files (.jpg, .jpeg, .png, .bmp) found where images were expected")
    sizes = {tuple(image.shape) for image in images}
    if len(sizes) > 1:
        raise FedlibError(
            f"images under {Path(paths[0]).parent.parent} differ in size ({sorted(sizes)[:3]}...); "
            f"pass image_size=<pixels> to resize them"
        )
    return torch.stack(images)


def _image_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in _IMAGE_SUFFIXES)


def _class_folders(split_dir: Path) -> dict[str, Path]:
    return {p.name: p for p in sorted(split_dir.iterdir()) if p.is_dir()}


def _normalised(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def _class_order(
    folder_names: list[str], canonical: list[str] | None
) -> tuple[list[str], dict[str, int]]:
    """Class names and folder -> label, keeping the dataset's own label order when known.

    Folders named like the canonical classes ("T-shirt_top" for "T-shirt/top") or named
    0..C-1 map onto the canonical order; anything else is ordered alphabetically.
    """
    if canonical is not None:
        by_name = {_normalised(c): i for i, c in enumerate(canonical)}
        if sorted(_normalised(f) for f in folder_names) == sorted(by_name):
            return list(canonical), {f: by_name[_normalised(f)] for f in folder_names}
    if sorted(folder_names) == sorted(str(i) for i in range(len(folder_names))):
        names = [str(i) for i in range(len(folder_names))]
        if canonical is not None and len(canonical) == len(folder_names):
            names = list(canonical)
        return names, {f: int(f) for f in folder_names}
    ordered = sorted(folder_names)
    return ordered, {f: i for i, f in enumerate(ordered)}


def _load_imagefolder(name: str, source: _Source, options: dict) -> Dataset:
    train_dirs = _class_folders(source.path / "train")
    test_dirs = _class_folders(source.path / "test")
    if set(train_dirs) != set(test_dirs):
        raise FedlibError(
            f"{source.path}: train and test class folders differ "
            f"({sorted(set(train_dirs) ^ set(test_dirs))[:5]}); both splits need the same classes"
        )
    class_names, label_of = _class_order(list(train_dirs), _CANONICAL_CLASSES.get(name))
    channels = 1 if name in _GREY else 3
    splits = []
    for dirs in (train_dirs, test_dirs):
        files = [(path, label_of[folder]) for folder, d in dirs.items() for path in _image_files(d)]
        images = read_images([p for p, _ in files], channels, options.get("image_size"))
        splits.append((images, _labels([label for _, label in files])))
    (train_x, train_y), (test_x, test_y) = splits
    return Dataset(name, train_x, train_y, test_x, test_y, class_names, (), (),
                   source=str(source.path))


def _load_tinyimagenet(name: str, source: _Source, options: dict) -> Dataset:
    """TinyImageNet's official layout; the labelled ``val`` split serves as the test set."""
    wnids = sorted(_class_folders(source.path / "train"))
    label_of = {wnid: i for i, wnid in enumerate(wnids)}
    train_files = [(p, label_of[w]) for w in wnids
                   for p in _image_files(source.path / "train" / w / "images")]
    val_files = []
    for line in (source.path / "val" / "val_annotations.txt").read_text().splitlines():
        fields = line.split("\t")
        if len(fields) >= 2 and fields[1] in label_of:
            val_files.append((source.path / "val" / "images" / fields[0], label_of[fields[1]]))
    image_size = options.get("image_size")
    return Dataset(
        name=name,
        train_x=read_images([p for p, _ in train_files], 3, image_size),
        train_y=_labels([label for _, label in train_files]),
        test_x=read_images([p for p, _ in val_files], 3, image_size),
        test_y=_labels([label for _, label in val_files]),
        class_names=_wordnet_names(source.path / "words.txt", wnids),
        mean=(), std=(), source=str(source.path),
    )


def _wordnet_names(words_file: Path, wnids: list[str]) -> list[str]:
    """First synonym from words.txt ("n01443537<TAB>goldfish, Carassius auratus"), else the wnid."""
    names = {}
    if words_file.is_file():
        for line in words_file.read_text().splitlines():
            wnid, _, words = line.partition("\t")
            names[wnid] = words.split(",")[0].strip()
    return [names.get(wnid) or wnid for wnid in wnids]


# ----------------------------------------------------------------------------- Office-Caltech-10


def _office_domains(path: Path) -> list[tuple[str, Path]]:
    if not path.is_dir():
        return []
    folders = {p.name.lower(): p for p in path.iterdir() if p.is_dir()}
    return [(domain, folders[domain]) for domain in OFFICE_DOMAINS if domain in folders]


def _load_office(name: str, source: _Source, options: dict) -> Dataset:
    """Office-Caltech-10: every domain split per class into train/test, domain id kept."""
    test_fraction = options["test_fraction"]
    if not 0 < test_fraction < 1:
        raise FedlibError(f"test_fraction must lie strictly between 0 and 1, got {test_fraction}")
    domains = _office_domains(source.path)
    class_names = sorted({c for _, d in domains for c in _class_folders(d)})
    files, labels, domain_ids = [], [], []
    for domain_id, (_, domain_dir) in enumerate(domains):
        for class_name, class_dir in _class_folders(domain_dir).items():
            for path in _image_files(class_dir):
                files.append(path)
                labels.append(class_names.index(class_name))
                domain_ids.append(domain_id)
    images = read_images(files, 3, options["image_size"])
    labels, domain_ids = np.asarray(labels), np.asarray(domain_ids)
    is_test = _split_per_group(labels * len(domains) + domain_ids, test_fraction,
                               options["split_seed"])
    return Dataset(
        name=name,
        train_x=images[torch.from_numpy(~is_test)], train_y=_labels(labels[~is_test]),
        test_x=images[torch.from_numpy(is_test)], test_y=_labels(labels[is_test]),
        class_names=class_names, mean=(), std=(),
        train_groups=domain_ids[~is_test], test_groups=domain_ids[is_test],
        group_names=[domain for domain, _ in domains], source=str(source.path),
    )


def _split_per_group(group_keys: np.ndarray, test_fraction: float, seed: int) -> np.ndarray:
    """Boolean test mask taking round(test_fraction * n) random members of every group."""
    rng = np.random.default_rng(seed)
    is_test = np.zeros(len(group_keys), dtype=bool)
    for key in np.unique(group_keys):
        members = rng.permutation(np.flatnonzero(group_keys == key))
        is_test[members[: round(len(members) * test_fraction)]] = True
    return is_test


# ----------------------------------------------------------------------------- FEMNIST


def _load_femnist(name: str, source: _Source, options: dict) -> Dataset:
    """LEAF's FEMNIST json; writer ids go to train_groups/test_groups."""
    train_users, train_x, train_y = _read_leaf_split(source.path / "train")
    test_users, test_x, test_y = _read_leaf_split(source.path / "test")
    class_names = FEMNIST_CLASSES
    if options["digits_only"]:  # PKD keeps the ten digit classes only
        keep_train, keep_test = train_y < 10, test_y < 10
        train_users, train_x, train_y = train_users[keep_train], train_x[keep_train], train_y[keep_train]
        test_users, test_x, test_y = test_users[keep_test], test_x[keep_test], test_y[keep_test]
        class_names = FEMNIST_CLASSES[:10]
    writers = sorted(set(train_users.tolist()) | set(test_users.tolist()))
    writer_id = {writer: i for i, writer in enumerate(writers)}
    return Dataset(
        name=name,
        train_x=torch.from_numpy(train_x), train_y=_labels(train_y),
        test_x=torch.from_numpy(test_x), test_y=_labels(test_y),
        class_names=list(class_names), mean=(), std=(),
        train_groups=np.array([writer_id[u] for u in train_users], dtype=np.int64),
        test_groups=np.array([writer_id[u] for u in test_users], dtype=np.int64),
        group_names=writers, source=str(source.path),
    )


def _read_leaf_split(folder: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    users, images, labels = [], [], []
    for json_file in sorted(folder.glob("*.json")):
        content = json.loads(json_file.read_text())
        for user in content["users"]:
            pixels = _leaf_pixels(json_file, content["user_data"][user]["x"])
            images.append(np.round(pixels * 255).astype(np.uint8).reshape(-1, 1, 28, 28))
            labels.extend(content["user_data"][user]["y"])
            users.extend([user] * len(pixels))
    if not images:
        raise FedlibError(f"{folder}: no FEMNIST users found in its json files")
    return np.asarray(users), np.concatenate(images), np.asarray(labels, dtype=np.int64)


def _leaf_pixels(json_file: Path, rows: list) -> np.ndarray:
    pixels = np.asarray(rows, dtype=np.float32)
    if pixels.size == 0:
        return pixels.reshape(0, 784)
    if pixels.ndim != 2 or pixels.shape[1] != 784:
        raise FedlibError(f"{json_file}: every FEMNIST sample must be 784 pixel values (28x28)")
    if pixels.min() < 0 or pixels.max() > 1:
        raise FedlibError(f"{json_file}: FEMNIST pixels must lie in [0, 1] as LEAF writes them")
    return pixels


_LOADERS: dict[str, Callable[[str, _Source, dict], Dataset]] = {
    "torchvision": _load_torchvision, "imagefolder": _load_imagefolder,
    "tinyimagenet": _load_tinyimagenet, "office": _load_office, "femnist": _load_femnist,
}


# ----------------------------------------------------------------------------- no files needed


def load_digits(image_size: int = 8, split_seed: int = 0, test_size: int = 360) -> Dataset:
    """scikit-learn's bundled 8x8 digits (1797 images), stratified train/test split.

    Values 0..16 are scaled to 0..255; ``image_size`` > 8 upsamples (e.g. 28 for MNIST models).
    """
    from sklearn.datasets import load_digits as sklearn_digits
    from sklearn.model_selection import train_test_split

    _check_image_size(image_size)
    bunch = sklearn_digits()
    images = torch.from_numpy(np.round(bunch.images * (255 / 16)).astype(np.uint8)).unsqueeze(1)
    indices = np.arange(len(bunch.target))
    try:
        train_idx, test_idx = train_test_split(
            indices, test_size=test_size, stratify=bunch.target, random_state=split_seed)
    except ValueError as exc:
        raise FedlibError(f"digits test_size={test_size} is not usable: {exc}") from exc
    train_idx, test_idx = torch.from_numpy(np.sort(train_idx)), torch.from_numpy(np.sort(test_idx))
    dataset = Dataset(
        name="digits",
        train_x=images[train_idx], train_y=_labels(bunch.target[train_idx.numpy()]),
        test_x=images[test_idx], test_y=_labels(bunch.target[test_idx.numpy()]),
        class_names=list(MNIST_CLASSES), mean=(), std=(), source="sklearn.datasets.load_digits",
    )
    return _finish(dataset, image_size)


def make_synthetic(
    num_classes: int = 10,
    train_per_class: int = 100,
    test_per_class: int = 20,
    image_shape: tuple[int, int, int] = (1, 28, 28),
    seed: int = 0,
    noise: float = 0.25,
) -> Dataset:
    """Class-dependent smooth patterns plus Gaussian noise, as uint8; learnable in a few steps.

    Every class has one random 4x4 pattern upsampled to the image size; a sample is its class
    pattern plus ``noise`` (std, in [0, 1] pixel units), clipped. Fully determined by ``seed``.
    """
    if num_classes < 2 or train_per_class < 1 or test_per_class < 1 or noise < 0:
        raise FedlibError(
            "make_synthetic needs num_classes >= 2, train/test_per_class >= 1 and noise >= 0")
    if len(image_shape) != 3 or min(image_shape) < 1:
        raise FedlibError(f"image_shape must be (channels, height, width), got {image_shape!r}")
    channels, height, width = (int(v) for v in image_shape)
    generator = torch.Generator().manual_seed(seed)
    coarse = torch.rand(num_classes, channels, 4, 4, generator=generator)
    patterns = torch.nn.functional.interpolate(coarse, size=(height, width), mode="bilinear",
                                               align_corners=False)

    def draw(per_class: int) -> tuple[torch.Tensor, torch.Tensor]:
        labels = torch.arange(num_classes).repeat_interleave(per_class)
        pixels = patterns[labels] + noise * torch.randn(len(labels), channels, height, width,
                                                        generator=generator)
        return (pixels.clamp(0, 1) * 255).round().to(torch.uint8), labels

    train_x, train_y = draw(train_per_class)
    test_x, test_y = draw(test_per_class)
    dataset = Dataset("synthetic", train_x, train_y, test_x, test_y,
                      [f"class_{i}" for i in range(num_classes)], (), (), source="synthetic")
    return _finish(dataset, None)


# ----------------------------------------------------------------------------- stand-ins


@dataclass(frozen=True)
class DatasetShape:
    """What a dataset looks like to a run, without its pixels: image shape, classes, split sizes
    and natural groups (FEMNIST writers, Office-Caltech-10 domains; 0 where there are none).

    The sizes are the published ones, used to scale time estimates (fedlib.reporting.tables) and to
    declare runs whose setting depends on the data (every FEMNIST writer as a client).
    """

    channels: int
    image_size: int
    num_classes: int
    train_size: int
    test_size: int
    groups: int = 0
    group_names: tuple[str, ...] = ()


DATASET_SHAPES = {
    "mnist": DatasetShape(1, 28, 10, 60000, 10000),
    "fashion_mnist": DatasetShape(1, 28, 10, 60000, 10000),
    "cifar10": DatasetShape(3, 32, 10, 50000, 10000),
    "cifar100": DatasetShape(3, 32, 100, 50000, 10000),
    "tinyimagenet": DatasetShape(3, 64, 200, 100000, 10000),
    "cinic10": DatasetShape(3, 32, 10, 90000, 90000),
    # LEAF's FEMNIST as TensorFlow Federated ships it (writers with >= 2 samples); a LEAF build
    # of your own may hold a few more writers
    "femnist": DatasetShape(1, 28, 62, 671585, 77483, groups=3400),
    # 2,533 images (amazon 958, caltech 1,123, dslr 157, webcam 295), a fifth of each domain and class tested
    "office_caltech10": DatasetShape(3, 32, 10, 2027, 506, groups=4, group_names=OFFICE_DOMAINS),
    "digits": DatasetShape(1, 8, 10, 1437, 360),
    "synthetic": DatasetShape(1, 28, 10, 1000, 200),
}
# FEMNIST's ten digit classes ({"digits_only": True}, PKD): TensorFlow Federated's only_digits sizes
_FEMNIST_DIGITS = DatasetShape(1, 28, 10, 341873, 40832, groups=3383)


def dataset_shape(name: str, **options) -> DatasetShape:
    """The shape of ``name`` loaded with ``options`` (image_size, digits_only, synthetic's arguments)."""
    if name not in DATASETS:
        raise one_of("dataset", name, DATASETS)
    resolved = _resolve_options(name, options)
    shape = _FEMNIST_DIGITS if name == "femnist" and resolved["digits_only"] else DATASET_SHAPES[name]
    if name == "synthetic":
        channels, size, _ = resolved["image_shape"]
        classes = resolved["num_classes"]
        return replace(shape, channels=channels, image_size=size, num_classes=classes,
                       train_size=classes * resolved["train_per_class"], test_size=classes * resolved["test_per_class"])
    if resolved.get("image_size"):
        shape = replace(shape, image_size=resolved["image_size"])
    return shape


def stand_in_dataset(name: str, num_train: int, num_test: int, seed: int = 0, groups: int | None = None,
                     **options) -> Dataset:
    """A dataset shaped like ``name`` (channels, image size, classes, class names) holding
    :func:`make_synthetic`'s class patterns: what a dry run trains on where the real files are
    missing. ``num_train`` / ``num_test`` samples, classes balanced; ``groups`` natural groups
    (default: the dataset's own count, e.g. Office-Caltech-10's four domains) dealt round-robin,
    so every group holds samples of several classes."""
    shape = dataset_shape(name, **options)
    if num_train < 1 or num_test < 1:
        raise FedlibError(f"a stand-in needs >= 1 train and test sample, got {num_train} and {num_test}")
    classes = shape.num_classes
    synthetic = make_synthetic(classes, -(-num_train // classes), -(-num_test // classes),
                               (shape.channels, shape.image_size, shape.image_size), seed=seed)
    synthetic = synthetic.subset(num_train, num_test, seed)
    dataset = replace(synthetic, name=name, class_names=_stand_in_class_names(name, classes),
                      source=f"stand-in for {name} (synthetic patterns of its shape)")
    group_count = shape.groups if groups is None else groups
    if group_count:
        dataset = replace(dataset, train_groups=np.arange(num_train) % group_count,
                          test_groups=np.arange(num_test) % group_count,
                          group_names=list(shape.group_names) or [f"group_{g}" for g in range(group_count)])
    return dataset


def _stand_in_class_names(name: str, classes: int) -> list[str]:
    known = _CANONICAL_CLASSES.get(name, [])
    return list(known[:classes]) if len(known) >= classes else [f"class_{i}" for i in range(classes)]
