"""Datasets that need no files: scikit-learn's bundled digits, fedlib's synthetic class patterns,
and stand-ins of any dataset's published shape holding those patterns (what a dry run, a timing
probe or a declaration trains on or sizes from where the real files are missing)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from fedlib.datasets.catalogue import CATALOGUE, MNIST_CLASSES, _check_image_size, dataset_shape, standardise_option
from fedlib.datasets.dataset import Dataset, unit_scaled
from fedlib.datasets.loaders import _finish, _labels
from fedlib.errors import FedlibError

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


def stand_in_dataset(name: str, num_train: int, num_test: int, seed: int = 0, groups: int | None = None,
                     **options) -> Dataset:
    """A dataset shaped like ``name`` (channels, image size, classes, class names) holding
    :func:`make_synthetic`'s class patterns: what a dry run trains on where the real files are
    missing. ``num_train`` / ``num_test`` samples, classes balanced; ``groups`` natural groups
    (default: the dataset's own count, e.g. Office-Caltech-10's four domains) dealt round-robin,
    so every group holds samples of several classes. ``standardise=False`` as :func:`load_dataset`."""
    standardise, options = standardise_option(options)
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
    return dataset if standardise else unit_scaled(dataset)


def _stand_in_class_names(name: str, classes: int) -> list[str]:
    info = CATALOGUE.get(name)
    known = info.classes if info is not None and info.classes is not None else []
    return list(known[:classes]) if len(known) >= classes else [f"class_{i}" for i in range(classes)]
