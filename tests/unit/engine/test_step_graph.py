"""GraphedSteps: which batches are replayed, which run eagerly, and what keeps a client eager.

These run on the CPU with :class:`EagerCapture` (a replay calls the kept step) or a recording
stand-in; the capture itself is tested on CUDA (tests/unit/engine/test_graphed.py).
"""

import torch

from fedlib.engine.backends.step_graph import EagerCapture, GraphedSteps, replay_obstacle


class RecordingCapture(EagerCapture):
    """Counts warm-up steps and captures; a capture must not run the step."""

    def __init__(self):
        self.warmed = 0
        self.captured = 0

    def warm(self, step):
        self.warmed += 1
        step()

    def capture(self, step):
        self.captured += 1
        return step


def batches(sizes, channels=1, channels_last=False):
    out = []
    for i, n in enumerate(sizes):
        x = torch.full((n, channels, 2, 2), float(i))
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        out.append((x, torch.full((n,), i)))
    return out


def test_warm_up_then_one_capture_replayed_for_every_full_batch_and_the_partial_one_eager():
    seen = []
    capture = RecordingCapture()
    steps = GraphedSteps(lambda x, y: seen.append((x.clone(), y.clone())), {}, capture, full_batch=4, warmup=3)
    data = batches([4, 4, 4, 4, 4, 4, 2, 4, 4])
    for x, y in data:
        steps(x, y)
    assert (capture.warmed, capture.captured) == (3, 1)
    assert (steps.eager_steps, steps.replays) == (4, 5), "3 warm-up steps and the 2-image batch eager"
    assert len(seen) == len(data), "every batch trained once, the captured one included"
    for (x, y), (sx, sy) in zip(data, seen):
        assert torch.equal(x, sx) and torch.equal(y, sy), "each step saw its own batch, in order"
    assert steps.refusal is None


def test_capture_waits_for_a_full_batch_and_a_batch_in_another_layout_runs_eagerly():
    capture = RecordingCapture()
    steps = GraphedSteps(lambda x, y: None, {}, capture, full_batch=4, warmup=1)
    for x, y in batches([4, 2]) + batches([4], channels=3) + batches([4], channels=3, channels_last=True):
        steps(x, y)
    assert capture.captured == 1
    assert (steps.eager_steps, steps.replays) == (3, 1), "the partial batch is not captured; channels_last is not the captured layout"


def test_a_step_that_reads_a_value_to_the_host_is_never_captured():
    capture = RecordingCapture()
    steps = GraphedSteps(lambda x, y: float(x.sum()), {}, capture, full_batch=4, warmup=2)
    for x, y in batches([4] * 6):
        steps(x, y)
    assert capture.captured == 0 and steps.replays == 0 and steps.eager_steps == 6
    assert "_local_scalar_dense" in steps.refusal


def test_a_step_that_replaces_a_context_tensor_is_never_captured():
    extras = {"counts": torch.zeros(3)}

    def step(x, y):
        extras["counts"] = extras["counts"] + 1  # a replay would keep reading the first tensor

    capture = RecordingCapture()
    steps = GraphedSteps(step, extras, capture, full_batch=4, warmup=1)
    for x, y in batches([4] * 4):
        steps(x, y)
    assert capture.captured == 0 and "ctx.extras['counts']" in steps.refusal
    assert torch.equal(extras["counts"], torch.full((3,), 4.0)), "every step still ran"


def test_an_in_place_update_of_a_context_tensor_can_be_replayed():
    extras = {"counts": torch.zeros(3)}
    assert replay_obstacle(lambda: extras["counts"].add_(1), extras) is None
    assert "nonzero" in replay_obstacle(lambda: torch.nonzero(extras["counts"]), extras)
