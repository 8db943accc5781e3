"""The ``shards`` scheme (FedNTD): every client gets ``shards_per_client`` equal shards of one class
each."""

from __future__ import annotations

import numpy as np

from fedlib.datasets.partition.base import check_int, class_indices, gather
from fedlib.errors import FedlibError

NAME = "shards"
FIELDS = ("shards_per_client", "global_balance")  # RunConfig settings read (and hashed)
OTHER_INPUTS = ()  # what it reads that is no RunConfig field


def split(labels, num_clients, num_classes, rng, options):
    """Cut every class into equal shards and deal ``shards_per_client`` random shards to each client."""
    shards_per_client = options["shards_per_client"]
    check_int("shards_per_client", shards_per_client, low=1)
    total_shards = shards_per_client * num_clients
    if total_shards % num_classes:
        raise FedlibError(
            f"shards needs shards_per_client*num_clients ({total_shards}) divisible by "
            f"num_classes ({num_classes}); change shards_per_client or num_clients")
    shards_per_class = total_shards // num_classes
    remaining = []  # remaining[c]: the unused shards of class c
    for c, members in enumerate(class_indices(labels, num_classes)):
        if len(members) < shards_per_class:
            raise FedlibError(f"class {c} has {len(members)} samples, too few for "
                              f"{shards_per_class} shards; use fewer shards or clients")
        # Unshuffled class indices cut into (near-)equal consecutive shards, as in FedNTD.
        remaining.append(np.array_split(members, shards_per_class))
    drawn_labels = np.tile(np.arange(num_classes), shards_per_class)
    rng.shuffle(drawn_labels)
    pieces = []
    for client_labels in drawn_labels.reshape(num_clients, shards_per_client):
        pieces.append([remaining[c].pop(rng.integers(len(remaining[c])))
                       for c in client_labels])
    return gather(pieces), {"shards_per_client": shards_per_client}

