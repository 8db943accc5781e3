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

The pieces live beside it: the :class:`Dataset` type and its re-splits (:mod:`.dataset`), what is
known of each dataset before loading (:mod:`.catalogue`), the readers of each layout
(:mod:`.loaders`), and the datasets that need no files (:mod:`.generated`); their public names
are importable from here too.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterator

import torch

from fedlib.datasets.catalogue import (  # noqa: F401 - public names, importable from here
    CATALOGUE, CIFAR10_CLASSES, DATASETS, FASHION_MNIST_CLASSES, FEMNIST_CLASSES, MNIST_CLASSES, OFFICE_DOMAINS,
    DatasetInfo, DatasetShape, _resolve_options, check_dataset_options, dataset_info, dataset_shape,
    standardise_option)
from fedlib.datasets.dataset import (  # noqa: F401
    HOLDOUT_FRACTION, POOLED_TRAIN_FRACTION, SPLITS, Dataset, apply_split, holdout, split_option, stratified_indices,
    unit_scaled)
from fedlib.datasets.generated import load_digits, make_synthetic, stand_in_dataset
from fedlib.datasets.identity import identify
from fedlib.datasets.loaders import (  # noqa: F401
    _LOADERS, _finish, _office_domains, _Source, channel_stats, read_images, resize_images)
from fedlib.errors import FedlibError
from fedlib.folders import env_folder

_CACHE_FORMAT = 2  # 2: entries keyed by the source files' sizes and times, holding the data's identity


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
    ``test_size``; synthetic: the arguments of :func:`make_synthetic`; for every dataset
    ``standardise=False``: pixels / 255 fed as they are (:func:`unit_scaled`).
    """
    dataset_info(name)  # a one-line error for an unknown name
    standardise, options = standardise_option(options)
    dataset = _load(name, data_dir, download, cache_dir, options)
    return dataset if standardise else unit_scaled(dataset)


def _load(name: str, data_dir, download: bool, cache_dir, options: dict) -> Dataset:
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
    dataset = replace(dataset, identity=identify(name, dataset, str(source.path)))
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
        dataset_info(name)  # a one-line error for an unknown name
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
    if dataset_info(name).generated:
        return None
    try:
        _find_source(name, _data_root(data_dir, _cache_root(None)), _download_allowed(download))
    except FedlibError as exc:
        return str(exc)
    return None


def _data_root(data_dir, cache_root: Path) -> Path:
    return Path(data_dir or env_folder("FEDLIB_DATA") or cache_root / "data")


def data_root(data_dir: str | os.PathLike | None = None) -> Path:
    """The folder datasets are looked for and downloaded into: ``data_dir``, else $FEDLIB_DATA,
    else ``data/`` in fedlib's cache."""
    return _data_root(data_dir, _cache_root(None))


DOWNLOAD_ENV = "FEDLIB_DOWNLOAD"  # =1: an edge lets every run download what it lacks (set_download)
_DOWNLOAD = False  # this process's mode, set by an edge (orchestration.environment), never read from the environment


def set_download(on: bool) -> bool:
    """Let torchvision download a missing dataset for every run of this process (``on``), as
    ``download=True`` does for one; returns the mode before."""
    global _DOWNLOAD
    before, _DOWNLOAD = _DOWNLOAD, bool(on)
    return before


def _download_allowed(download: bool) -> bool:
    return bool(download) or _DOWNLOAD


# ----------------------------------------------------------------------------- finding sources


def _find_source(name: str, data_root: Path, download: bool) -> _Source:
    info = CATALOGUE[name]
    looked: list[Path] = []
    if info.torchvision is not None:
        folder = info.torchvision.folder
        looked.append(data_root / folder)
        if (data_root / folder / info.torchvision.marker).is_file():
            return _Source("torchvision", data_root / folder, root=data_root)
    for folder in info.folders:
        path = data_root / folder
        looked.append(path)
        for layout in info.layouts:
            if _LAYOUT_CHECKS[layout](path):
                return _Source(layout, path)
    if download and info.torchvision is not None:
        return _Source("torchvision", data_root / info.torchvision.folder, root=data_root, download=True)
    raise _missing_error(info, looked, data_root)


def _missing_error(info: DatasetInfo, looked: list[Path], data_root: Path) -> FedlibError:
    name = info.name
    paths = ", ".join(str(p) for p in looked)
    if info.torchvision is not None:
        remedy = ("in torchvision or ImageFolder layout, or allow download "
                  "(download=True or FEDLIB_DOWNLOAD=1)")
    else:
        remedy = f"(it cannot be downloaded automatically): {info.how_to_get.format(data=data_root)}"
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
    root = cache_dir or env_folder("FEDLIB_CACHE") or Path.home() / ".cache" / "fedlib"
    return Path(root)


def _cache_file(cache_root: Path, name: str, source: _Source, options: dict) -> Path:
    # The source folder and its files' names, sizes and modification times are part of the key:
    # another copy of the data, or new files put in the same folder, must not hit this entry.
    key = json.dumps(
        {"format": _CACHE_FORMAT, "name": name, "layout": source.layout,
         "path": str(source.path.resolve()), "files": files_signature(source.path), "options": options},
        sort_keys=True, default=str,
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_root / f"{name}-{digest}.pt"


def fingerprint_file(name: str, data_dir: str | os.PathLike | None = None, **options) -> Path | None:
    """Where the fingerprint of dataset ``name`` as its files here load (``options``, no download)
    is kept between processes: beside fedlib's cache entry of that dataset, under the same key (the
    source folder and its files' names, sizes and modification times: a stat of each file, no image
    read), so other files, or a file changed in place, miss it. None for a dataset without files
    (digits, synthetic) or whose files are not here."""
    if name in ("digits", "synthetic") or name not in DATASETS:
        return None
    cache_root = _cache_root(None)
    try:
        source = _find_source(name, _data_root(data_dir, cache_root), False)
    except FedlibError:
        return None
    entry = _cache_file(cache_root, name, source, _resolve_options(name, options))
    return entry.with_name(f"{entry.stem}.fingerprint.json")


def files_signature(folder: Path) -> str:
    """A digest of every file under ``folder``: its path there, size and modification time (a
    stat of each file, no reading; about 0.1 s for the 60,000 files of a JPEG folder)."""
    digest = hashlib.sha256()
    for path in sorted(_files_under(Path(folder))):
        try:
            info = path.stat()
        except OSError:  # a dangling link: not a file the loader reads
            continue
        digest.update(f"{path.relative_to(folder)}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def _files_under(folder: Path) -> Iterator[Path]:
    for parent, _, names in os.walk(folder):  # linked folders are not followed (no loops)
        yield from (Path(parent) / name for name in names)


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
    except (OSError, RuntimeError) as exc:  # torch.save reports a full disk as RuntimeError
        warnings.warn(f"fedlib could not write its dataset cache {path}: {exc}")
        temporary.unlink(missing_ok=True)
