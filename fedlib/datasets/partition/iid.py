"""The ``iid`` scheme: shuffle the train set, split it as evenly as possible."""

from __future__ import annotations

import numpy as np


NAME = "iid"
FIELDS = ("global_balance",)  # RunConfig settings read (and hashed)
OTHER_INPUTS = ()  # what it reads that is no RunConfig field


def split(labels, num_clients, num_classes, rng, options):
    """Shuffle the train set and cut it into ``num_clients`` near-equal parts."""
    order = rng.permutation(len(labels))
    return np.array_split(order, num_clients), {}

