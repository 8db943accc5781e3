"""What the data a run reads must be: the full dataset (or a subset its config names), and the
same data a stored run was trained on.

A partial copy of a dataset (400 of CIFAR-10's 50,000 training images) loads and trains without
error, and its numbers would be stored under the config's hash as if they were the full data's.
:func:`check_full_size` refuses it with one line unless the config names a subset
(``max_train_samples`` / ``max_test_samples``), which hashes apart. :func:`fingerprint` records
in a run's meta.json what it trained on (sizes and samples per class of both splits, and a
digest of labels and a spread of images); the engine serves a stored run only for data whose
fingerprint agrees (see ``engine.check_served_data``). :func:`files_fingerprint` keeps the fingerprint
of the files here between processes, under the key of fedlib's dataset cache (the files' names,
sizes and modification times), so serving a stored run reads no image once it was computed.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from fedlib.datasets.catalogue import CATALOGUE, dataset_shape
from fedlib.datasets.data import fingerprint_file
from fedlib.datasets.dataset import HOLDOUT_FRACTION, POOLED_TRAIN_FRACTION, Dataset, split_option
from fedlib.errors import FedlibError

DIGEST_IMAGES = 1024  # images per split the digest reads, evenly spread over the split
COUNT_KEYS = ("train", "test", "train_per_class", "test_per_class")  # a fingerprint's counts (its digest aside)


def full_sizes(name: str, options: dict) -> tuple[int, int] | None:
    """(train, test) sizes of dataset ``name`` loaded in full with loader ``options``; None for a
    dataset whose size is not fixed (``exact_sizes`` False in its record,
    :class:`~fedlib.datasets.catalogue.DatasetInfo`: LEAF's FEMNIST and Office-Caltech-10's domains
    vary with the build, digits with its test_size option)."""
    info = CATALOGUE.get(name)
    if info is None or not info.exact_sizes:
        return None
    shape = dataset_shape(name, **options)
    return shape.train_size, shape.test_size


def split_sizes(name: str, dataset_options: dict) -> tuple[int, int] | None:
    """(train, test) sizes a run trains and tests on before any cap: the full sizes re-split as
    ``dataset_options["split"]`` says (fedlib.datasets.data.apply_split); None when not fixed."""
    split, options = split_option(dataset_options)
    sizes = full_sizes(name, options)
    if sizes is None:
        return None
    train, test = sizes
    if split == "holdout_10":
        held = max(1, int(round(HOLDOUT_FRACTION * train)))
        return train - held, held
    if split.startswith("pooled_75_25"):
        cut = int(np.floor(POOLED_TRAIN_FRACTION * (train + test)))
        return (cut, cut) if split == "pooled_75_25_train_eval" else (cut, train + test - cut)
    return train, test


def check_full_size(dataset: Dataset, options: dict, split: str, max_train: int | None,
                    max_test: int | None) -> None:
    """Refuse (one line) a loaded dataset whose train or test split is not the known full size,
    unless the config caps that split (``max_train``/``max_test``) at no more than the samples
    there; a re-split (``split`` other than "standard") mixes both, so it needs both capped."""
    sizes = full_sizes(dataset.name, options)
    loaded = (len(dataset.train_y), len(dataset.test_y))
    if sizes is None or loaded == sizes:
        return
    caps = (max_train, max_test)
    if split != "standard" and None not in caps and sum(loaded) >= sum(caps):
        return
    for part, have, full, cap, option in zip(("training", "test"), loaded, sizes, caps,
                                             ("max_train_samples", "max_test_samples")):
        if have == full or (split == "standard" and cap is not None and have >= cap):
            continue
        raise FedlibError(
            f"{dataset.name} at {dataset.source or 'its source'} holds {have:,} {part} images, not the full "
            f"{full:,}: an incomplete copy would store wrong numbers under the full data's config; complete it "
            f"(or point FEDLIB_DATA at a full copy), or ask for a subset with {option} <= {have}")


def fingerprint(dataset: Dataset) -> dict:
    """What identifies the data a run read: both splits' sizes and samples per class, and a
    digest of every label and of up to DIGEST_IMAGES images per split (evenly spread)."""
    digest = hashlib.blake2b(digest_size=8)
    for images, labels in ((dataset.train_x, dataset.train_y), (dataset.test_x, dataset.test_y)):
        digest.update(str(tuple(images.shape)).encode())
        digest.update(labels.to(torch.int64).numpy().tobytes())
        picked = torch.linspace(0, max(0, len(images) - 1), min(DIGEST_IMAGES, len(images))).long()
        digest.update(images[picked].contiguous().numpy().tobytes())
    return {**counts(dataset), "digest": digest.hexdigest()}


def counts(dataset: Dataset) -> dict:
    """Sizes and samples per class of both splits."""
    classes = dataset.num_classes
    return {"train": len(dataset.train_y), "test": len(dataset.test_y),
            "train_per_class": torch.bincount(dataset.train_y, minlength=classes).tolist(),
            "test_per_class": torch.bincount(dataset.test_y, minlength=classes).tolist()}


def fingerprint_difference(stored: dict, here: dict) -> str | None:
    """How two fingerprints differ ('train 400 vs 50000', 'content digest'), or None when they agree."""
    for key in COUNT_KEYS:
        if stored.get(key) != here.get(key):
            if key.endswith("per_class"):
                return f"samples per class of the {key.split('_')[0]} split differ"
            return f"{stored.get(key)} {key} images stored vs {here.get(key)} here"
    if stored.get("digest") != here.get("digest"):
        return f"the same counts but other images (content digest {stored.get('digest')} vs {here.get('digest')})"
    return None


def files_fingerprint(name: str, data_dir, options: dict, load: Callable[[], Dataset]) -> dict:
    """The :func:`fingerprint` of dataset ``name`` as its files here load with ``options``, without
    reading an image when an earlier process computed it from the same files (kept under the key of
    fedlib's dataset cache: :func:`fedlib.datasets.data.fingerprint_file`); else ``load()`` is
    fingerprinted and kept. Serving a stored run compares its recorded fingerprint with this."""
    path = fingerprint_file(name, data_dir, **options)
    kept = _read_fingerprint(path)
    if kept is not None:
        return kept
    value = fingerprint(load())
    if path is not None:
        _write_fingerprint(path, value)
    return value


def _read_fingerprint(path: Path | None) -> dict | None:
    """A kept fingerprint, or None when there is none (or it cannot be read: then it is recomputed)."""
    try:
        value = json.loads(path.read_text()) if path is not None and path.is_file() else None
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) and all(key in value for key in (*COUNT_KEYS, "digest")) else None


def _write_fingerprint(path: Path, value: dict) -> None:
    """Keep ``value`` at ``path`` (atomically; a cache that cannot be written is skipped)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(json.dumps(value, sort_keys=True))
        os.replace(temporary, path)
    except OSError:
        temporary.unlink(missing_ok=True)
