"""The ``quantity`` scheme (FedVLS "s"): ``classes_per_client`` classes each, unequal amounts;
consecutive clients share the same classes. ``quantity_split`` says how a class is cut between its
holders: ``symmetric`` (default) or the code's ``official`` rule."""

from __future__ import annotations

import math

import numpy as np

from fedlib.datasets.partition.base import class_indices, classes_per_client, gather, split_by_sizes
from fedlib.errors import FedlibError, one_of

NAME = "quantity"
FIELDS = ("classes_per_client", "quantity_split", "global_balance")  # RunConfig settings read (and hashed)
OTHER_INPUTS = ()  # what it reads that is no RunConfig field
# How a class is cut between its holders (see _unequal_sizes, official_quantity_sizes).
QUANTITY_SPLITS = ("symmetric", "official")


def split(labels, num_clients, num_classes, rng, options):
    """Hand each class to its holders (:func:`quantity_holders`) in unequal amounts."""
    per_client = classes_per_client(options, num_classes)
    rule = options["quantity_split"]
    if rule not in QUANTITY_SPLITS:
        raise one_of("quantity_split", rule, QUANTITY_SPLITS)
    holders = quantity_holders(num_clients, num_classes, per_client)
    pieces = [[] for _ in range(num_clients)]
    for c, members in enumerate(class_indices(labels, num_classes)):
        if rule == "official":
            sizes = official_quantity_sizes(len(members), len(holders[c]), num_classes, rng, c)
        else:
            sizes = _unequal_sizes(len(members), len(holders[c]), rng, c)
        for client, piece in zip(holders[c], split_by_sizes(rng.permutation(members), sizes)):
            pieces[client].append(piece)
    params = {"classes_per_client": per_client}
    if rule != "symmetric":  # recorded only when set, so existing partitions' params are unchanged
        params["quantity_split"] = rule
    return gather(pieces), params


def quantity_holders(num_clients: int, num_classes: int, classes_per_client: int
                     ) -> list[list[int]]:
    """Which clients hold each class in the ``quantity`` scheme.

    Clients are cut into ceil(C/s) runs of consecutive clients (sizes as equal as possible);
    run g holds the s consecutive classes g*s, ..., g*s+s-1, wrapping past C-1 to 0 when s
    does not divide C. For CIFAR-10, s=2, 10 clients this is the FedVLS code's layout:
    clients 0,1 hold classes 0,1; clients 2,3 hold 2,3; ... It equals the code's layout
    whenever s divides C and s*num_clients/C divides num_clients.
    """
    num_runs = math.ceil(num_classes / classes_per_client)
    if num_clients < num_runs:
        raise FedlibError(
            f"quantity with classes_per_client={classes_per_client} needs at least {num_runs} "
            f"clients so that all {num_classes} classes are held; raise num_clients or "
            "classes_per_client")
    holders: list[list[int]] = [[] for _ in range(num_classes)]
    for run, clients in enumerate(np.array_split(np.arange(num_clients), num_runs)):
        for offset in range(classes_per_client):
            holders[(run * classes_per_client + offset) % num_classes].extend(clients.tolist())
    return holders


def _unequal_sizes(total: int, num_holders: int, rng: np.random.Generator,
                   class_id: int) -> list[int]:
    """Random unequal split of ``total`` samples: every holder but the last draws a size.

    Draws are uniform in [fair/10, 2*fair - fair/10] (mean = the fair share), capped so every
    later holder can still get fair/10; the last holder takes the rest. fair/10 is the FedVLS
    code's lower bound; its upper bound differs by dataset and can overdraw, so we use this
    symmetric one (the code's rule is ``quantity_split="official"``, :func:`official_quantity_sizes`).
    """
    if total < num_holders:
        raise FedlibError(f"class {class_id} has {total} samples but {num_holders} clients "
                          "must hold it; use fewer clients or more classes_per_client")
    fair = total / num_holders
    low = max(1, int(fair // 10))
    sizes, remaining = [], total
    for later in range(num_holders - 1, 0, -1):
        high = max(low, min(int(2 * fair) - low, remaining - low * later))
        sizes.append(int(rng.integers(low, high + 1)))
        remaining -= sizes[-1]
    return sizes + [remaining]


def official_quantity_sizes(total: int, num_holders: int, num_classes: int,
                            rng: np.random.Generator, class_id: int = 0) -> list[int]:
    """The FedVLS code's cut of one class of ``total`` samples between ``num_holders`` clients.

    The code (``system/dataset_utils.py``, ``partition_data``, "noniid-labeldir") draws
    ``num_holders - 1`` sizes at once, each uniform over the integers of
    [int(low), int(high) - 1] with low = max(fair/10, 10/num_classes) and fair =
    total/num_holders; high is ``total`` on CIFAR-10 and ``fair`` on CIFAR-100 and TinyImageNet.
    The code picks high by dataset name; here it is picked by class count (10 classes: ``total``).
    The last holder takes the rest. Holders take consecutive slices, so when the draws add up to
    more than ``total`` the later holders get what is left, possibly nothing (Python's slicing).
    """
    if total < num_holders:
        raise FedlibError(f"class {class_id} has {total} samples but {num_holders} clients "
                          "must hold it; use fewer clients or more classes_per_client")
    if num_holders == 1:
        return [total]
    fair = total / num_holders
    low = int(max(fair / 10, 10 / num_classes))
    high = int(total if num_classes == 10 else fair)
    if high <= low:
        raise FedlibError(f"class {class_id} has {total} samples, too few for the official quantity "
                          f"split over {num_holders} clients; use quantity_split='symmetric'")
    draws = rng.integers(low, high, size=num_holders - 1)
    cuts = np.minimum(np.cumsum(draws), total)
    return np.diff(np.concatenate(([0], cuts, [total]))).astype(int).tolist()

