"""What fedlib knows of each dataset before loading it: names, class names in the dataset's own
label order, the published normalisation constants, the loader options each takes, and the
published shapes (image size, classes, split sizes, natural groups) that time estimates, stand-ins
and declared runs use."""

from __future__ import annotations

import string
from dataclasses import dataclass, replace

from fedlib.datasets.dataset import split_option
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
