"""The :class:`Dataset` a run reads (uint8 image tensors, labels, class names, normalisation
constants, natural groups) and its re-splits: stratified subsets, the pooled 75/25 split of the
FedVLS code, the 10 % hold-out of pilots."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from fedlib.errors import FedlibError, one_of

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
    # which copy of the data set the files are (fedlib.datasets.identity.identify), set as it loads
    identity: str = ""

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


def unit_scaled(dataset: Dataset) -> Dataset:
    """``dataset`` fed as pixels / 255, without standardising: mean 0 and std 1 on every channel
    (the dataset option ``standardise: false``)."""
    channels = dataset.image_shape[0]
    return replace(dataset, mean=(0.0,) * channels, std=(1.0,) * channels)
