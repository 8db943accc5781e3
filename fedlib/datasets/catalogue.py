"""What fedlib knows of each dataset before loading it, one :class:`DatasetInfo` record per dataset
in :data:`CATALOGUE`: class names in the dataset's own label order, the published normalisation
constants, the loader options it takes, its published shape (image size, classes, split sizes,
natural groups) that time estimates, stand-ins and declared runs use, where its files are looked
for and how to get them, whether its sizes are exact, and its default augmentation."""

from __future__ import annotations

import string
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

from fedlib.datasets.dataset import split_option
from fedlib.errors import FedlibError, one_of

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

# The loader options every file-based dataset takes (and an unknown name is checked against).
_COMMON_OPTIONS = {"image_size": None}
# An option of every dataset that no loader reads: ``standardise: false`` feeds the pixels scaled to
# [0, 1] without the per-channel standardisation (mean 0, std 1). It stays out of the resolved loader
# options, so caches, shapes and the runs that do not set it are unchanged.
STANDARDISE = "standardise"


def standardise_option(options: Mapping[str, object]) -> tuple[bool, dict]:
    """The ``standardise`` entry of dataset options (default True) and the options left; a value
    that is not true or false is one line."""
    rest = dict(options)
    value = rest.pop(STANDARDISE, True)
    if not isinstance(value, bool):
        raise FedlibError(f"dataset option standardise must be true or false, got {value!r}")
    return value, rest


def check_dataset_options(name: str, options: dict) -> None:
    """Raise a one-line FedlibError for a loader option ``name`` does not take (or a bad image_size).

    ``split`` (one of :data:`SPLITS`) is accepted for every dataset: it is not a loader option but
    a re-split the engine applies after loading, seeded by the run (:func:`apply_split`).
    """
    _resolve_options(name, split_option(options)[1])


def _resolve_options(name: str, options: dict) -> dict:
    """Defaults filled in; an unknown option is an error, never silently ignored (``standardise``
    is checked and left out: no loader reads it)."""
    options = standardise_option(options)[1]
    defaults = dict(CATALOGUE[name].options if name in CATALOGUE else _COMMON_OPTIONS)
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


# ----------------------------------------------------------------------------- shapes


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


# ----------------------------------------------------------------------------- the records


@dataclass(frozen=True)
class TorchvisionFiles:
    """Where torchvision's native layout of a dataset lies under the data folder: ``folder``, which
    must hold the file ``marker``; ``reader`` is the torchvision.datasets class that reads it."""

    folder: str
    marker: str
    reader: str


@dataclass(frozen=True)
class DatasetInfo:
    """Everything fedlib knows of one dataset before loading it (one record per dataset in :data:`CATALOGUE`)."""

    name: str
    shape: DatasetShape  # the published shape
    options: Mapping[str, object] = field(default_factory=lambda: dict(_COMMON_OPTIONS))  # loader options, defaults
    classes: Sequence[str] | None = None  # label order fixed by the dataset; folder trees are mapped onto it by name
    stats: tuple[tuple[float, ...], tuple[float, ...]] | None = None  # the (mean, std) everybody uses, else computed
    torchvision: TorchvisionFiles | None = None  # torchvision's native layout, which it can download
    folders: tuple[str, ...] = ()  # folder names tried under the data folder
    layouts: tuple[str, ...] = ("imagefolder",)  # the folder layouts it may have there
    how_to_get: str = ""  # the end of the "not found" message of one torchvision cannot download
    generated: bool = False  # made in memory, no files needed (digits, synthetic)
    exact_sizes: bool = False  # the published split sizes are exact (not so for LEAF's FEMNIST builds, ...)
    digits_only_shape: DatasetShape | None = None  # the shape with {"digits_only": True} (FEMNIST)
    augmentation: str = "crop_flip"  # the preset without a paper: "none" for grey or toy data
    paper_augmentation: Mapping[str, str] = field(default_factory=dict)  # paper -> its preset here, where it departs


_RECORDS = (
    DatasetInfo(
        "mnist", DatasetShape(1, 28, 10, 60000, 10000), classes=MNIST_CLASSES,
        stats=((0.1307,), (0.3081,)), torchvision=TorchvisionFiles("MNIST/raw", "train-images-idx3-ubyte", "MNIST"),
        folders=("mnist", "MNIST", "mnist-png", "mnist-jpeg"), exact_sizes=True, augmentation="none"),
    DatasetInfo(
        "fashion_mnist", DatasetShape(1, 28, 10, 60000, 10000), classes=FASHION_MNIST_CLASSES,
        stats=((0.2860,), (0.3530,)),
        torchvision=TorchvisionFiles("FashionMNIST/raw", "train-images-idx3-ubyte", "FashionMNIST"),
        folders=("fashion_mnist", "fashion-mnist", "FashionMNIST", "fashionmnist"), exact_sizes=True,
        augmentation="none"),
    DatasetInfo(
        "cifar10", DatasetShape(3, 32, 10, 50000, 10000), classes=CIFAR10_CLASSES,
        stats=((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
        torchvision=TorchvisionFiles("cifar-10-batches-py", "data_batch_1", "CIFAR10"),
        folders=("cifar10-jpeg", "cifar10", "CIFAR10", "cifar-10", "cifar10-png"), exact_sizes=True),
    DatasetInfo(
        "cifar100", DatasetShape(3, 32, 100, 50000, 10000),
        stats=((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
        torchvision=TorchvisionFiles("cifar-100-python", "train", "CIFAR100"),
        folders=("cifar100-jpeg", "cifar100", "CIFAR100", "cifar-100", "cifar100-png"), exact_sizes=True),
    DatasetInfo(
        "tinyimagenet", DatasetShape(3, 64, 200, 100000, 10000),
        folders=("tiny-imagenet-200", "tinyimagenet", "tiny-imagenet", "TinyImageNet", "tiny_imagenet"),
        layouts=("tinyimagenet", "imagefolder"),
        how_to_get="unpack tiny-imagenet-200.zip (cs231n.stanford.edu/tiny-imagenet-200.zip) in {data}/",
        exact_sizes=True, paper_augmentation={"fedvls": "autoaugment", "feded": "autoaugment"}),
    DatasetInfo(
        "cinic10", DatasetShape(3, 32, 10, 90000, 90000), classes=CIFAR10_CLASSES,
        folders=("cinic10", "CINIC-10", "cinic-10", "CINIC10"),
        how_to_get="unpack CINIC-10 (github.com/BayesWatch/cinic-10) as {data}/cinic10/{{train,test}}/<class>/",
        exact_sizes=True, paper_augmentation={"fedntd": "reflect_crop_flip", "fedlmd": "reflect_crop_flip"}),
    # LEAF's FEMNIST as TensorFlow Federated ships it (writers with >= 2 samples); a LEAF build
    # of your own may hold a few more writers. digits_only (PKD): TensorFlow Federated's only_digits sizes
    DatasetInfo(
        "femnist", DatasetShape(1, 28, 62, 671585, 77483, groups=3400),
        options={"image_size": None, "digits_only": False}, classes=FEMNIST_CLASSES,
        folders=("femnist", "FEMNIST", "femnist/data"), layouts=("femnist",),
        how_to_get="build it with LEAF (github.com/TalwalkarLab/leaf, data/femnist/preprocess.sh) and "
                   "put its train/ and test/ json folders in {data}/femnist/",
        digits_only_shape=DatasetShape(1, 28, 10, 341873, 40832, groups=3383), augmentation="none"),
    # 2,533 images (amazon 958, caltech 1,123, dslr 157, webcam 295), a fifth of each domain and class tested
    DatasetInfo(
        "office_caltech10", DatasetShape(3, 32, 10, 2027, 506, groups=4, group_names=OFFICE_DOMAINS),
        options={"image_size": 32, "test_fraction": 0.2, "split_seed": 0},
        folders=("office_caltech10", "office_caltech_10", "office-caltech-10", "Office-Caltech-10",
                 "OfficeCaltech10", "office_caltech", "office-caltech"),
        layouts=("office",),
        how_to_get="unpack Office-Caltech-10 (Gong et al., CVPR 2012) "
                   "as {data}/office_caltech10/<domain>/<class>/*.jpg, domains amazon, caltech, "
                   "dslr, webcam"),
    DatasetInfo(
        "digits", DatasetShape(1, 8, 10, 1437, 360), options={"image_size": 8, "split_seed": 0, "test_size": 360},
        generated=True, augmentation="none"),
    DatasetInfo(
        "synthetic", DatasetShape(1, 28, 10, 1000, 200),
        options={"num_classes": 10, "train_per_class": 100, "test_per_class": 20,
                 "image_shape": (1, 28, 28), "seed": 0, "noise": 0.25},
        generated=True, exact_sizes=True, augmentation="none"),
)
CATALOGUE: dict[str, DatasetInfo] = {info.name: info for info in _RECORDS}
DATASETS = tuple(CATALOGUE)


def dataset_info(name: str) -> DatasetInfo:
    """The record of dataset ``name``; a one-line FedlibError listing :data:`DATASETS` for another name."""
    if name not in CATALOGUE:
        raise one_of("dataset", name, DATASETS)
    return CATALOGUE[name]


def dataset_shape(name: str, **options) -> DatasetShape:
    """The shape of ``name`` loaded with ``options`` (image_size, digits_only, synthetic's arguments)."""
    info = dataset_info(name)
    resolved = _resolve_options(name, options)
    shape = info.digits_only_shape if resolved.get("digits_only") else info.shape
    if name == "synthetic":
        channels, size, _ = resolved["image_shape"]
        classes = resolved["num_classes"]
        return replace(shape, channels=channels, image_size=size, num_classes=classes,
                       train_size=classes * resolved["train_per_class"], test_size=classes * resolved["test_per_class"])
    if resolved.get("image_size"):
        shape = replace(shape, image_size=resolved["image_size"])
    return shape
