"""The ``dirichlet`` scheme, as the FedVLS code draws it: per class Dir(beta) over clients; clients
already holding >= N/num_clients samples get nothing more; redraw until every client has >=
min_size samples."""

from __future__ import annotations

import math

import numpy as np

from fedlib.datasets.partition.base import check_int, class_indices, gather, split_by_sizes
from fedlib.errors import FedlibError

NAME = "dirichlet"
FIELDS = ("beta", "min_client_size", "global_balance")  # RunConfig settings read (and hashed)
OTHER_INPUTS = ("max_retries",)  # what it reads that is no RunConfig field


def split(labels, num_clients, num_classes, rng, options):
    """Per class, Dir(beta) proportions over the clients not yet full; redrawn until every client has >= min_size."""
    beta, min_size, max_retries = options["beta"], options["min_size"], options["max_retries"]
    if not (isinstance(beta, (int, float, np.floating)) and math.isfinite(beta) and beta > 0):
        raise FedlibError(f"beta must be a positive number, got {beta!r}")
    check_int("min_size", min_size, low=0)
    check_int("max_retries", max_retries, low=1)
    if min_size * num_clients > len(labels):
        raise FedlibError(f"dirichlet cannot give {num_clients} clients >= {min_size} samples "
                          f"each from {len(labels)} samples; lower min_size or num_clients")
    class_sizes = np.bincount(labels, minlength=num_classes)
    for draw in range(1, max_retries + 1):
        counts = _dirichlet_counts(class_sizes, num_clients, beta, rng)
        if counts is not None and counts.sum(axis=1).min() >= min_size:
            return _deal_counts(labels, num_classes, counts, rng), {
                "beta": float(beta), "min_size": min_size, "max_retries": max_retries,
                "draws": draw}
    raise FedlibError(
        f"dirichlet(beta={beta}) gave some of the {num_clients} clients fewer than {min_size} "
        f"samples in all {max_retries} draws; raise beta, use fewer clients, lower min_size "
        "or raise max_retries")


def _dirichlet_counts(class_sizes: np.ndarray, num_clients: int, beta: float,
                      rng: np.random.Generator) -> np.ndarray | None:
    """One draw of the (clients x classes) counts, or None when a class found no taker."""
    # FedVLS code: a client that already holds N/num_clients samples gets no more.
    cap = class_sizes.sum() / num_clients
    counts = np.zeros((num_clients, len(class_sizes)), dtype=np.int64)
    for c, class_size in enumerate(class_sizes):
        proportions = rng.dirichlet(np.full(num_clients, beta))
        proportions = proportions * (counts.sum(axis=1) < cap)
        total = proportions.sum()
        if total <= 0:  # all the mass sat on full clients (tiny beta): redraw everything
            return None
        cuts = (np.cumsum(proportions / total) * class_size).astype(np.int64)[:-1]
        cuts = np.clip(cuts, 0, class_size)
        counts[:, c] = np.diff(np.concatenate(([0], cuts, [class_size])))
    return counts


def _deal_counts(labels, num_classes, counts, rng) -> list[np.ndarray]:
    """Hand each client counts[k, c] random samples of class c."""
    pieces = [[] for _ in range(counts.shape[0])]
    for c, members in enumerate(class_indices(labels, num_classes)):
        for k, piece in enumerate(split_by_sizes(rng.permutation(members), counts[:, c])):
            pieces[k].append(piece)
    return gather(pieces)

