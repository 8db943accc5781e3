"""Readers of each on-disk layout fedlib finds (torchvision's native files, image folders,
TinyImageNet, Office-Caltech-10, LEAF's FEMNIST json), and the finishing every loaded dataset gets
(resizing, normalisation constants). :mod:`fedlib.datasets.data` finds the source and picks the
reader (:data:`_LOADERS`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from fedlib.datasets.catalogue import CATALOGUE, FEMNIST_CLASSES, OFFICE_DOMAINS
from fedlib.datasets.dataset import Dataset
from fedlib.errors import FedlibError

_IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp"}


@dataclass(frozen=True)
class _Source:
    layout: str  # "torchvision", "imagefolder", "tinyimagenet", "femnist" or "office"
    path: Path  # the dataset's own folder: what the cache key and messages name
    root: Path | None = None  # torchvision's root argument (torchvision layout only)
    download: bool = False


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
    info = CATALOGUE.get(dataset.name)
    if info is not None and info.stats is not None and image_size is None:
        mean, std = info.stats
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

    info = CATALOGUE[name]
    dataset_class = getattr(tvd, info.torchvision.reader)
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
        class_names=list(info.classes if info.classes is not None else train.classes),
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
    info = CATALOGUE.get(name)
    class_names, label_of = _class_order(list(train_dirs), info.classes if info is not None else None)
    # 1 channel for the grey datasets (MNIST, Fashion-MNIST, FEMNIST), else colour
    channels = info.shape.channels if info is not None else 3
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
