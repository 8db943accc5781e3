"""Tests for fedlib.datasets.partition: invariants of every scheme, paper layouts, errors."""


import numpy as np
import pytest

from fedlib.errors import FedlibError
from fedlib.datasets.partition import PARTITIONS, Partition, make_partition, quantity_holders


def balanced_labels(num_classes=10, per_class=600, seed=0):
    """Shuffled labels with exactly per_class samples of each class."""
    labels = np.repeat(np.arange(num_classes), per_class)
    return np.random.default_rng(seed).permutation(labels)


def skewed_labels(seed=0):
    """Unequal class sizes (100..190 samples), shuffled."""
    labels = np.concatenate([np.full(100 + 10 * c, c) for c in range(10)])
    return np.random.default_rng(seed).permutation(labels)


def assert_disjoint(partition):
    joined = np.concatenate(partition.client_indices)
    assert len(np.unique(joined)) == len(joined)


def assert_consistent_counts(partition, labels):
    for idx, class_counts in zip(partition.client_indices, partition.counts):
        assert idx.dtype == np.int64
        np.testing.assert_array_equal(np.bincount(labels[idx], minlength=10), class_counts)


COVERING = [("iid", {}), ("dirichlet", {"beta": 0.3}), ("shards", {}), ("quantity", {}),
            ("pathological", {})]


@pytest.mark.parametrize("scheme,options", COVERING)
@pytest.mark.parametrize("make_labels", [balanced_labels, skewed_labels])
def test_covering_schemes_are_disjoint_and_cover(scheme, options, make_labels):
    labels = make_labels()
    partition = make_partition(scheme, labels, 10, 10, seed=1, **options)
    assert partition.scheme == scheme and partition.num_clients == 10
    assert_disjoint(partition)
    np.testing.assert_array_equal(np.sort(np.concatenate(partition.client_indices)),
                                  np.arange(len(labels)))
    assert_consistent_counts(partition, labels)
    assert partition.sizes().sum() == len(labels)


def test_iid_sizes_differ_by_at_most_one():
    sizes = make_partition("iid", balanced_labels(per_class=101), 7, 10, seed=0).sizes()
    assert sizes.max() - sizes.min() <= 1


@pytest.mark.parametrize("scheme,options", COVERING + [("balanced", {})])
def test_same_seed_same_partition_other_seed_differs(scheme, options):
    labels = balanced_labels()
    first = make_partition(scheme, labels, 10, 10, seed=3, **options)
    again = make_partition(scheme, labels, 10, 10, seed=3, **options)
    other = make_partition(scheme, labels, 10, 10, seed=4, **options)
    for a, b in zip(first.client_indices, again.client_indices):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, b)
               for a, b in zip(first.client_indices, other.client_indices))


def test_dirichlet_respects_min_size_and_records_params():
    labels = balanced_labels(per_class=300)
    partition = make_partition("dirichlet", labels, 20, 10, seed=0, beta=0.1, min_size=40)
    assert partition.sizes().min() >= 40
    assert partition.params["beta"] == 0.1 and partition.params["min_size"] == 40
    assert 1 <= partition.params["draws"] <= 1000
    # beta=0.1 on 20 clients must leave vacant classes, or the scheme is not skewing labels.
    assert (partition.counts == 0).any()


def test_dirichlet_extreme_setting_fails_fast_with_clean_error(monkeypatch):
    # beta=0.01 puts each of the 10 classes on ~1-2 of 100 clients: min_size 10 is
    # unreachable, so the scheme must give up after max_retries draws with a one-line error
    # (counted, not timed: speed is for the benchmarks).
    from fedlib.datasets.partition import dirichlet

    draws = []
    counts = dirichlet._dirichlet_counts
    monkeypatch.setattr(dirichlet, "_dirichlet_counts", lambda *args: draws.append(1) or counts(*args))
    labels = balanced_labels(per_class=6000)
    with pytest.raises(FedlibError) as caught:
        make_partition("dirichlet", labels, 100, 10, seed=0, beta=0.01, max_retries=50)
    assert len(draws) == 50
    message = str(caught.value)
    assert "\n" not in message and "beta=0.01" in message and "100 clients" in message


def test_dirichlet_extreme_setting_without_min_size_succeeds_quickly():
    labels = balanced_labels(per_class=6000)
    partition = make_partition("dirichlet", labels, 100, 10, seed=0, beta=0.01, min_size=0)
    assert partition.sizes().sum() == len(labels)
    assert_disjoint(partition)


def test_dirichlet_never_fills_a_client_far_past_its_fair_share():
    # A client holding >= N/n samples is excluded from later classes, so no client can exceed
    # N/n by more than one class's worth of samples.
    labels = balanced_labels(per_class=500)
    partition = make_partition("dirichlet", labels, 10, 10, seed=2, beta=0.05)
    assert partition.sizes().max() < 500 + 500


def test_shards_equal_counts_and_two_shards_per_client():
    labels = balanced_labels(per_class=600)
    partition = make_partition("shards", labels, 20, 10, seed=0, shards_per_client=2)
    # 2 shards x 20 clients / 10 classes = 4 shards of 150 per class.
    np.testing.assert_array_equal(partition.sizes(), np.full(20, 300))
    assert set(np.unique(partition.counts)) <= {0, 150, 300}
    assert ((partition.counts > 0).sum(axis=1) <= 2).all()


def test_quantity_consecutive_pairs_share_classes_cifar10_layout():
    labels = balanced_labels(per_class=500)
    partition = make_partition("quantity", labels, 10, 10, seed=0, classes_per_client=2)
    for client in range(10):
        first = 2 * (client // 2)
        held = np.flatnonzero(partition.counts[client]).tolist()
        assert held == [first, first + 1]
    # Unequal amounts: the two holders of a class should not split it exactly in half.
    assert (partition.counts[0::2] != partition.counts[1::2]).any()


@pytest.mark.parametrize("clients,classes,per_client", [(10, 100, 20), (20, 10, 2), (7, 10, 3)])
def test_quantity_clients_hold_exactly_their_classes(clients, classes, per_client):
    labels = balanced_labels(num_classes=classes, per_class=60)
    partition = make_partition("quantity", labels, clients, classes, seed=0,
                               classes_per_client=per_client)
    holders = quantity_holders(clients, classes, per_client)
    for c in range(classes):
        assert np.flatnonzero(partition.counts[:, c]).tolist() == sorted(holders[c])
    assert ((partition.counts > 0).sum(axis=1) == per_client).all()


@pytest.mark.parametrize("clients,per_client", [(10, 1), (10, 2), (20, 3)])
def test_pathological_equal_holders_and_sizes(clients, per_client):
    labels = balanced_labels(per_class=600)
    partition = make_partition("pathological", labels, clients, 10, seed=0,
                               classes_per_client=per_client)
    held = partition.counts > 0
    assert (held.sum(axis=1) == per_client).all()
    assert len(set(held.sum(axis=0))) == 1  # every class has the same number of holders
    assert len(set(partition.sizes())) == 1
    if per_client == 1:  # PKD MNIST layout: client i holds class i
        np.testing.assert_array_equal(partition.counts.argmax(axis=1), np.arange(10))


def test_balanced_exact_counts_and_reports_dropped():
    labels = skewed_labels()  # smallest class has 100 samples
    partition = make_partition("balanced", labels, 7, 10, seed=0)
    np.testing.assert_array_equal(partition.counts, np.full((7, 10), 100 // 7))
    assert_disjoint(partition)
    assert partition.params["dropped_samples"] == len(labels) - 7 * 10 * 14
    assert "dropped" in partition.summary().attrs["note"]


BALANCEABLE = [("iid", {}), ("dirichlet", {"beta": 0.3}), ("shards", {}), ("quantity", {}),
               ("pathological", {"classes_per_client": 1})]


@pytest.mark.parametrize("scheme,options", BALANCEABLE)
def test_global_balance_keeps_the_smallest_class_count_of_every_class(scheme, options):
    labels = skewed_labels()  # 100..190 samples per class
    partition = make_partition(scheme, labels, 10, 10, seed=1, global_balance=True, **options)
    np.testing.assert_array_equal(partition.counts.sum(axis=0), np.full(10, 100))
    assert_disjoint(partition)
    assert_consistent_counts(partition, labels)
    assert partition.params["global_balance"] is True
    assert partition.params["dropped_samples"] == len(labels) - 1000
    assert "global class balance" in partition.summary().attrs["note"]


def test_global_balance_is_seeded_and_a_no_op_on_equal_classes():
    labels = skewed_labels()
    first = make_partition("dirichlet", labels, 10, 10, seed=3, global_balance=True)
    again = make_partition("dirichlet", labels, 10, 10, seed=3, global_balance=True)
    other = make_partition("iid", labels, 10, 10, seed=4, global_balance=True)
    kept = np.sort(np.concatenate(first.client_indices))
    assert all(np.array_equal(a, b) for a, b in zip(first.client_indices, again.client_indices))
    assert not np.array_equal(kept, np.sort(np.concatenate(other.client_indices))), "another seed, other samples"
    equal = balanced_labels(per_class=60)
    for scheme in ("pathological", "balanced"):  # equal classes: nothing to drop; balanced ignores the option
        on = make_partition(scheme, equal, 10, 10, seed=3, classes_per_client=1, global_balance=True)
        off = make_partition(scheme, equal, 10, 10, seed=3, classes_per_client=1)
        assert all(np.array_equal(a, b) for a, b in zip(on.client_indices, off.client_indices))


def test_natural_one_client_per_group_and_sampling():
    labels = balanced_labels(per_class=20)
    groups = np.arange(len(labels)) % 8
    full = make_partition("natural", labels, 8, 10, seed=0, groups=groups)
    for g, idx in enumerate(full.client_indices):
        assert (groups[idx] == g).all() and len(idx) == (groups == g).sum()
    sampled = make_partition("natural", labels, 3, 10, seed=0, groups=groups)
    chosen = sampled.params["group_ids"]
    assert len(chosen) == 3 and len(set(chosen)) == 3
    assert sampled.params["dropped_samples"] == len(labels) - sampled.sizes().sum()
    again = make_partition("natural", labels, 3, 10, seed=0, groups=groups)
    assert again.params["group_ids"] == chosen


def test_natural_accepts_string_domains():
    labels = balanced_labels(per_class=4)
    domains = np.array(["amazon", "caltech", "dslr", "webcam"] * 10)
    partition = make_partition("natural", labels, 4, 10, seed=0, groups=domains)
    assert partition.params["group_ids"] == ["amazon", "caltech", "dslr", "webcam"]


def test_summary_columns_and_values():
    counts = np.array([[5, 0, 1], [0, 0, 9]])
    partition = Partition([np.arange(6), np.arange(6, 15)], counts, "manual", {})
    table = partition.summary()
    assert list(table.columns) == ["size", "classes_held", "vacant_classes", "majority_classes"]
    assert table["size"].tolist() == [6, 9]
    assert table["classes_held"].tolist() == [2, 1]
    assert table["vacant_classes"].tolist() == [[1], [0, 1]]
    assert table["majority_classes"].tolist() == [[0], [2]]


BAD_INPUTS = [
    ("nope", {}, {}),
    ("iid", {"num_clients": 0}, {}),
    ("iid", {"num_clients": 601}, {}),
    ("iid", {"num_clients": 2.5}, {}),
    ("iid", {"num_classes": 5}, {}),
    ("iid", {"seed": None}, {}),
    ("iid", {"labels": np.zeros((3, 2), dtype=int)}, {}),
    ("iid", {"labels": np.array([0.5, 1.0])}, {}),
    ("dirichlet", {}, {"beta": 0}),
    ("dirichlet", {}, {"beta": -1.0}),
    ("dirichlet", {}, {"min_size": 100}),
    ("shards", {"num_clients": 3}, {"shards_per_client": 3}),
    ("quantity", {}, {"classes_per_client": 11}),
    ("quantity", {"num_clients": 4}, {"classes_per_client": 2}),
    ("pathological", {"num_clients": 3}, {"classes_per_client": 1}),
    ("balanced", {"num_clients": 61}, {}),
    ("natural", {}, {}),
    ("natural", {}, {"groups": np.zeros(5)}),
    ("natural", {"num_clients": 4}, {"groups": np.arange(600) % 3}),
    ("natural", {}, {"groups": np.arange(600) % 10, "global_balance": True}),
    ("iid", {}, {"global_balance": "yes"}),
    ("iid", {"num_classes": 11}, {"global_balance": True}),  # class 10 has no sample
]


@pytest.mark.parametrize("scheme,positional,options", BAD_INPUTS)
def test_bad_inputs_raise_one_line_fedlib_error(scheme, positional, options):
    args = {"labels": balanced_labels(per_class=60), "num_clients": 10, "num_classes": 10,
            "seed": 0}
    args.update(positional)
    with pytest.raises(FedlibError) as caught:
        make_partition(scheme, args["labels"], args["num_clients"], args["num_classes"],
                       seed=args["seed"], **options)
    message = str(caught.value)
    assert message and "\n" not in message


def test_unknown_scheme_lists_valid_ones():
    with pytest.raises(FedlibError, match="dirichlet"):
        make_partition("dirichlett", balanced_labels(), 10, 10, seed=0)
    assert len(PARTITIONS) == 7
