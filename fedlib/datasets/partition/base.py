"""The :class:`Partition` type every scheme returns, and what the schemes share: the checks of
their inputs, a train set's indices by class, and the assembly of clients' pieces into a
Partition (indices sorted ascending within a client, counts per class)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from fedlib.errors import FedlibError


@dataclass
class Partition:
    """The result of splitting a train set over clients.

    ``client_indices[k]`` holds client k's int64 indices into the train set; ``counts[k, c]`` is
    how many of them have label c. ``params`` records what produced the split (scheme
    parameters, seed, and facts such as ``dropped_samples``).
    """

    client_indices: list[np.ndarray]
    counts: np.ndarray
    scheme: str
    params: dict = field(default_factory=dict)

    @property
    def num_clients(self) -> int:
        return len(self.client_indices)

    @property
    def num_classes(self) -> int:
        return int(self.counts.shape[1])

    def sizes(self) -> np.ndarray:
        """Number of samples held by each client."""
        return self.counts.sum(axis=1)

    def summary(self) -> pd.DataFrame:
        """One row per client: size, number of classes held, vacant and majority classes.

        Vacant classes have no local sample (FedVLS). Majority classes follow FedLMD:
        n_{k,c} > n_k / C, strictly.
        """
        sizes = self.sizes()
        rows = []
        for size, class_counts in zip(sizes, self.counts):
            rows.append({
                "size": int(size),
                "classes_held": int((class_counts > 0).sum()),
                "vacant_classes": np.flatnonzero(class_counts == 0).tolist(),
                "majority_classes": np.flatnonzero(
                    class_counts > size / self.num_classes).tolist(),
            })
        table = pd.DataFrame(rows)
        table.index.name = "client"
        dropped = self.params.get("dropped_samples", 0)
        if dropped:
            how = " with global class balance" if self.params.get("global_balance") else ""
            table.attrs["note"] = f"{dropped} samples were dropped by the {self.scheme} scheme{how}"
        return table


def checked_labels(labels, num_classes: int) -> np.ndarray:
    """``labels`` as int64 after checking them: a non-empty 1-D integer array in [0, num_classes)."""
    check_int("num_classes", num_classes, low=1)
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size == 0:
        raise FedlibError(f"labels must be a non-empty 1-D array, got shape {labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer):
        raise FedlibError(f"labels must be integers, got dtype {labels.dtype}; "
                          "pass class ids, not names or one-hot rows")
    if labels.min() < 0 or labels.max() >= num_classes:
        raise FedlibError(f"labels must lie in [0, {num_classes}), found "
                          f"{labels.min()}..{labels.max()}; check num_classes")
    return labels.astype(np.int64, copy=False)


def check_int(name: str, value, low: int, high: int | None = None, hint: str = "") -> None:
    """Raise FedlibError unless value is an int in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise FedlibError(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise FedlibError(f"{name} must be {bounds}, got {value}" + (f"; {hint}" if hint else ""))


def build(scheme: str, labels: np.ndarray, num_classes: int,
          client_indices: list[np.ndarray], params: dict) -> Partition:
    """The Partition of ``client_indices`` (each sorted ascending, as int64) with its class counts."""
    client_indices = [np.sort(np.asarray(idx, dtype=np.int64)) for idx in client_indices]
    counts = np.stack([np.bincount(labels[idx], minlength=num_classes)
                       for idx in client_indices]).astype(np.int64)
    return Partition(client_indices, counts, scheme, params)


def class_indices(labels: np.ndarray, num_classes: int) -> list[np.ndarray]:
    """Indices of each class in train-set order."""
    return [np.flatnonzero(labels == c) for c in range(num_classes)]


def split_by_sizes(indices: np.ndarray, sizes) -> list[np.ndarray]:
    """``indices`` cut into consecutive pieces of ``sizes``."""
    return np.split(indices, np.cumsum(sizes)[:-1])


def gather(pieces_per_client: list[list[np.ndarray]]) -> list[np.ndarray]:
    """Each client's pieces joined into one index array (an empty int64 array for none)."""
    return [np.concatenate(pieces) if pieces else np.empty(0, np.int64)
            for pieces in pieces_per_client]


def classes_per_client(options: dict, num_classes: int) -> int:
    """The ``classes_per_client`` option of ``quantity`` and ``pathological``, checked: in [1, num_classes]."""
    per_client = options["classes_per_client"]
    check_int("classes_per_client", per_client, low=1, high=num_classes)
    return per_client
