"""Data that are what they claim to be: the loaded images and labels held against known copies.

Two copies of one data set can differ in order (the project's offline MNIST is shuffled) and in
format (IDX files, a JPEG folder), so the digest that identifies a copy is order-free: the SHA-256
of each split's sorted per-sample digests (image bytes and label). :data:`KNOWN_COPIES` maps the
digests of the copies fedlib has checked to what they are. A folder whose files are another
known data set (Fashion-MNIST's files where MNIST's should be: the same sizes, so nothing else
notices) is refused in one line naming what it holds. A copy no digest knows (CIFAR-10 as
torchvision downloads it: its pixel-exact files were not at hand when the table was made; a
resized or edited copy) trains as given, its digest recorded in meta.json, so two runs on
different copies can be told apart.
"""

from __future__ import annotations

import hashlib

import torch

from fedlib.datasets.dataset import Dataset
from fedlib.errors import FedlibError

# order-free content digest (content_digest) -> (data set name, which copy it is)
# (computed from the offline copies described in the project's datasets README, 2026-11-28)
KNOWN_COPIES = {
    "0b40ce09713fea9c": ("mnist", "MNIST as published (60,000 + 10,000 images and labels, in any order)"),
    "9143654ad4366eee": ("fashion_mnist", "Fashion-MNIST as published (60,000 + 10,000 images and labels)"),
    "5fb2db456054f1d8": ("cifar10", "CIFAR-10 re-encoded as JPEG (the project's offline copy: the same images and "
                                    "labels, pixel values slightly off the original's)"),
}


def content_digest(dataset: Dataset) -> str:
    """The order-free digest of ``dataset``'s images and labels, both splits (16 hex digits)."""
    total = hashlib.sha256()
    for images, labels in ((dataset.train_x, dataset.train_y), (dataset.test_x, dataset.test_y)):
        total.update(str(tuple(images.shape)).encode())
        total.update(_sorted_sample_digests(images, labels))
    return total.hexdigest()[:16]


def _sorted_sample_digests(images: torch.Tensor, labels: torch.Tensor) -> bytes:
    """Each sample's digest (its image bytes, then its label), sorted, as one byte string."""
    rows = images.reshape(len(images), -1).contiguous().numpy()
    tags = labels.to(torch.int64).numpy()
    digests = [hashlib.blake2b(row.tobytes() + int(tag).to_bytes(8, "little"), digest_size=16).digest()
               for row, tag in zip(rows, tags)]
    return b"".join(sorted(digests)) if digests else b""


def identify(name: str, dataset: Dataset, where: str) -> str:
    """What copy of ``name`` the loaded ``dataset`` (read from ``where``) is, in words; a known
    copy of another data set is refused in one line (FedlibError)."""
    digest = content_digest(dataset)
    known = KNOWN_COPIES.get(digest)
    if known is None:
        return f"a copy no known digest matches (content digest {digest})"
    if known[0] != name:
        raise FedlibError(f"the files read as {name} from {where} are {known[1]}, not {name}: put {name}'s own "
                          "files there (or point FEDLIB_DATA at them)")
    return f"{known[1]} (content digest {digest})"
