"""Every partition scheme's exact indices and params, pinned: a digest of each client's index array
and of ``params`` for fixed labels and seed, taken from the code before the schemes were split into
one module each (issue 46). A change of any index, of the order random numbers are drawn in, or of a
recorded param fails here."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from fedlib.datasets.partition import make_partition

CASES = [
    ("iid", 7, {}, "9136d7d3334e641b"),
    ("dirichlet", 10, {"beta": 0.3}, "74e3b0653d2c2a6d"),
    ("dirichlet", 10, {"beta": 0.05, "min_size": 2}, "9796ee18d5e1702d"),
    ("shards", 20, {"shards_per_client": 2}, "d832dac8ef10ace9"),
    ("quantity", 10, {"classes_per_client": 2}, "e15951ff5a53485e"),
    ("quantity", 10, {"classes_per_client": 2, "quantity_split": "official"}, "045413a4ccedc19e"),
    ("pathological", 10, {"classes_per_client": 2}, "49c7dc67294ab778"),
    ("balanced", 6, {}, "fdeb68793669da50"),
    ("natural", 5, {"groups": "nine"}, "502085b0e287c92c"),
    ("iid", 7, {"global_balance": True}, "86b5d557b5e848c6"),
    ("dirichlet", 10, {"beta": 0.5, "global_balance": True}, "1ca6dcdc4517165f"),
    ("shards", 20, {"global_balance": True}, "8e62beeeadbcf709"),
    ("quantity", 10, {"global_balance": True}, "f5cf8244fa33bb21"),
    ("pathological", 10, {"classes_per_client": 1, "global_balance": True}, "bd473aa2eaef5ccc"),
]


def digest(partition) -> str:
    """The client index arrays, in client order, and the params, as a short sha256."""
    h = hashlib.sha256()
    for indices in partition.client_indices:
        h.update(np.asarray(indices, dtype=np.int64).tobytes())
        h.update(b"|")
    h.update(json.dumps(partition.params, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


@pytest.mark.parametrize("scheme, clients, options, expected", CASES)
def test_each_scheme_draws_the_pinned_indices(scheme, clients, options, expected):
    labels = np.random.default_rng(123).integers(0, 10, size=3000)  # classes of unequal sizes
    if options.get("groups") == "nine":
        options = {**options, "groups": np.arange(3000) % 9}
    partition = make_partition(scheme, labels, clients, 10, seed=3, **options)
    assert digest(partition) == expected
