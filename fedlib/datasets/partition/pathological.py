"""The ``pathological`` scheme (PKD): ``classes_per_client`` classes each, equal amounts, every class
held by the same number of clients."""

from __future__ import annotations

import numpy as np

from fedlib.datasets.partition.base import class_indices, classes_per_client, gather
from fedlib.errors import FedlibError

NAME = "pathological"
FIELDS = ("classes_per_client", "global_balance")  # RunConfig settings read (and hashed)
OTHER_INPUTS = ()  # what it reads that is no RunConfig field


def split(labels, num_clients, num_classes, rng, options):
    """Hand each class to its holders (:func:`pathological_holders`) in equal amounts."""
    per_client = classes_per_client(options, num_classes)
    holders = pathological_holders(num_clients, num_classes, per_client)
    pieces = [[] for _ in range(num_clients)]
    for c, members in enumerate(class_indices(labels, num_classes)):
        for client, piece in zip(holders[c], np.array_split(rng.permutation(members),
                                                            len(holders[c]))):
            pieces[client].append(piece)
    return gather(pieces), {"classes_per_client": per_client}


def pathological_holders(num_clients: int, num_classes: int, classes_per_client: int
                         ) -> list[list[int]]:
    """Which clients hold each class in the ``pathological`` scheme.

    Every class gets h = num_clients*k/C holders. Slot p = 0..num_clients*k-1 has class p // h
    and goes to client p % num_clients, so a class's h slots land on distinct clients and a
    client's k slots on distinct classes. 1 class per client, 10 clients: client i holds class i.
    """
    slots = num_clients * classes_per_client
    if slots % num_classes:
        raise FedlibError(
            f"pathological needs num_clients*classes_per_client ({slots}) divisible by "
            f"num_classes ({num_classes}) so every class has the same number of holders; "
            "change num_clients or classes_per_client")
    per_class = slots // num_classes
    holders: list[list[int]] = [[] for _ in range(num_classes)]
    for slot in range(slots):
        holders[slot // per_class].append(slot % num_clients)
    return holders

