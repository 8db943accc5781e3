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
