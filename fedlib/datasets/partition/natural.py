"""The ``natural`` scheme: one client per group id (FEMNIST writer, Office-Caltech-10 domain). It
refuses ``global_balance``, which would alter the groups' own data."""

from __future__ import annotations

import numpy as np

from fedlib.errors import FedlibError

NAME = "natural"
FIELDS = ()  # RunConfig settings read (and hashed)
OTHER_INPUTS = ("groups",)  # what it reads that is no RunConfig field


def split(labels, num_clients, num_classes, rng, options):
    """One client per group id (all groups, or ``num_clients`` of them drawn at random)."""
    groups = options["groups"]
    if groups is None:
        raise FedlibError("natural partition needs groups= (one group id per sample, "
                          "e.g. FEMNIST writer ids or domain names)")
    groups = np.asarray(groups)
    if groups.shape != labels.shape:
        raise FedlibError(f"groups must have one id per sample: {groups.shape} vs labels "
                          f"{labels.shape}")
    group_ids = np.unique(groups)
    if num_clients > len(group_ids):
        raise FedlibError(f"natural has {len(group_ids)} groups, cannot make {num_clients} "
                          f"clients; use num_clients <= {len(group_ids)}")
    if num_clients < len(group_ids):
        group_ids = group_ids[np.sort(rng.choice(len(group_ids), num_clients, replace=False))]
    client_indices = [np.flatnonzero(groups == g) for g in group_ids]
    dropped = len(labels) - sum(len(idx) for idx in client_indices)
    return client_indices, {"group_ids": group_ids.tolist(), "dropped_samples": dropped}

