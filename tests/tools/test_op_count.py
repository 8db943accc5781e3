"""benchmarks/op_count.py counts aten ops and host syncs per local step on the CPU."""

import torch

from benchmarks import op_count


def test_a_sync_is_counted_with_where_it_came_from():
    counts = op_count.OpCounts()
    x = torch.arange(4.0)
    with counts:
        y = x * 2
        float(y.sum())  # one value read back: a host sync
        bool((y > 1).any())  # another
    assert counts.syncs["_local_scalar_dense"] == 2
    assert counts.ops["mul"] == 1 and counts.total >= 5
    assert sum(counts.origins.values()) == 2


def test_fedvls_local_steps_have_no_host_sync():
    """Its class masks once read the labels' range back every step (one_hot's check)."""
    cfg = op_count.count_config("lenet5", "fedvls")
    counts = op_count.sequential_step_counts(cfg, steps=1)
    assert counts.total > 50
    assert sum(counts.syncs.values()) == 0, dict(counts.origins)


def test_stacked_counts_are_the_steps_only():
    """Counted through the backend's step_context: the batches' drawing (the epoch's randperm) and
    augmentation are outside, as on the sequential count; nothing in the backend is rebound."""
    from fedlib.engine.backends import stacked

    tick = stacked._tick
    counts = op_count.stacked_step_counts(op_count.count_config("lenet5", "fedavg"))
    assert stacked._tick is tick
    assert counts.total > 50 and counts.ops["convolution"] > 0
    assert "randperm" not in counts.ops


def test_augmenting_a_batch_is_counted_on_its_own_line():
    crop_flip = op_count.augmentation_counts("crop_flip", steps=1)
    autoaugment = op_count.augmentation_counts("crop_flip_autoaugment", steps=1)
    assert 10 < crop_flip.total < autoaugment.total
    assert sum(crop_flip.syncs.values()) == 0 and sum(autoaugment.syncs.values()) == 0  # no value read back
    table = op_count.table(["fedavg"], ["lenet5"], steps=1, with_stacked=False,
                           augmentations=("crop_flip", "crop_flip_autoaugment"))
    assert f"| crop_flip | {crop_flip.total:.0f} | 0.0 |" in table
    assert f"| crop_flip_autoaugment | {autoaugment.total:.0f} | 0.0 |" in table


def test_a_stacked_steps_draw_is_counted_per_client_and_at_once():
    """The stacked path draws a step's batches of all clients at once: fewer ops than one
    client at a time, the same tensors (tests/unit/engine/test_stacked_batches.py), no sync."""
    per_client = op_count.stacked_draw_counts("crop_flip", clients=2, steps=1, together=False)
    together = op_count.stacked_draw_counts("crop_flip", clients=2, steps=1)
    assert 10 < together.total < per_client.total
    assert sum(per_client.syncs.values()) == 0 and sum(together.syncs.values()) == 0
    assert "randperm" not in together.ops  # the counted step begins no epoch
