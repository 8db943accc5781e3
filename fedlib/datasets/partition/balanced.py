"""The ``balanced`` scheme (PKD local class-balanced): every client holds the same count of every
class. It is globally balanced by construction and ignores ``global_balance``."""

from __future__ import annotations

import numpy as np

from fedlib.datasets.partition.base import class_indices, gather
from fedlib.errors import FedlibError

NAME = "balanced"
FIELDS = ()  # RunConfig settings read (and hashed)
OTHER_INPUTS = ()  # what it reads that is no RunConfig field


def split(labels, num_clients, num_classes, rng, options):
    """Give every client the same number of samples of every class; leftovers are dropped."""
    class_members = class_indices(labels, num_classes)
    smallest = min(len(members) for members in class_members)
    per_class = smallest // num_clients
    if per_class == 0:
        raise FedlibError(f"balanced needs every class to have >= num_clients ({num_clients}) "
                          f"samples, the smallest has {smallest}; use fewer clients")
    pieces = [[] for _ in range(num_clients)]
    for members in class_members:
        chosen = rng.permutation(members)[:per_class * num_clients]
        for k, piece in enumerate(chosen.reshape(num_clients, per_class)):
            pieces[k].append(piece)
    dropped = len(labels) - per_class * num_classes * num_clients
    return gather(pieces), {"per_class": per_class, "dropped_samples": dropped}

