"""FedLMD-Tf (fedlib.algorithms.fedlmd_tf): the teacher-free loss by hand and the switch to the
global teacher. Every expected number is computed here with ``math`` step by step."""

import math

import pytest
import torch

from fedlib.algorithms import fedlmd_tf
from fedlib.core.registry import build_algorithm
from tests.unit.algorithms.helpers import LMD_COUNTS, ce, fake_context, fake_server, softmax, t


def test_fedlmd_tf_hand_computed():
    z = [[1.0, 0.0, 2.0, -1.0], [3.0, 1.0, 0.0, 0.5]]
    y, tau, beta = [2, 0], 3.0, 0.4
    kl0 = -math.log(softmax([1.0 / tau, 0.0 / tau, -1.0 / tau])[2])  # mu = 1 at class 3
    q_s = softmax([1.0 / tau, 0.0 / tau, 0.5 / tau])  # student over {1, 2, 3}
    kl1 = 0.5 * math.log(0.5 / q_s[1]) + 0.5 * math.log(0.5 / q_s[2])  # mu uniform on {2, 3}
    expected = (ce(z[0], 2) + ce(z[1], 0)) / 2 + beta * (kl0 + kl1) / 2
    got = fedlmd_tf.local_loss(t(z), torch.tensor(y), t(LMD_COUNTS), tau=tau, beta=beta)
    assert got.item() == pytest.approx(expected, rel=1e-5)


def test_fedlmd_tf_switches_to_teacher_at_switch_round():
    method = build_algorithm("fedlmd_tf", {"switch_round": 2})
    for round_index, expects_teacher in ((0, False), (1, False), (2, True), (5, True)):
        ctx = fake_context(round_index)
        method.client_context(fake_server(round_index), ctx)
        assert ("global" in ctx.teachers) is expects_teacher
        assert ctx.metrics["majority_classes"] == 2.0
    never = build_algorithm("fedlmd_tf", {})
    assert not never.uses_teacher(10_000)
