"""FedLMD (fedlib.algorithms.fedlmd): the paper's loss by hand, and ``variant="official"``.

The official variant follows the authors' code's arithmetic (wnma3mz/FedLMD,
src/algorithms/fedlmd/criterion.py): additive -1000 masks on the tempered logits, teacher
masked on the majority labels and the true label, student on the true label, KL over all
classes times tau^2 (batch mean). Every expected number is computed here with ``math``.
"""

import math
import warnings

import pytest
import torch
from torch.func import vmap

from fedlib.algorithms import fedlmd, fedlmd_tf
from fedlib.core.config import RunConfig
from fedlib.engine import engine
from fedlib.errors import FedlibError
from tests.unit.algorithms.helpers import LMD_COUNTS, ce, log_softmax, softmax, t

OFFSET = 1000.0  # the constant of the authors' code


def code_kl(student: list[float], teacher: list[float], label: int, majority: set[int], tau: float) -> float:
    """One sample of the code's term, tau^2 * KL, with its masks written out by hand."""
    masked_t = [z / tau - OFFSET * (c in majority) - OFFSET * (c == label) for c, z in enumerate(teacher)]
    masked_s = [z / tau - OFFSET * (c == label) for c, z in enumerate(student)]
    log_p, log_q = log_softmax(masked_t), log_softmax(masked_s)
    return tau ** 2 * sum(math.exp(a) * (a - b) for a, b in zip(log_p, log_q) if math.exp(a) > 0)


# ====================================================================== the paper's loss
def test_fedlmd_hand_computed():
    z = [[1.0, 0.0, 2.0, -1.0], [3.0, 1.0, 0.0, 0.5]]
    zg = [[0.5, 2.0, 1.0, 0.0], [1.0, 0.0, -1.0, 1.0]]
    y, tau, beta = [2, 0], 2.0, 0.7
    # sample 0 (y=2): teacher support {3} -> p'_g = 1 at class 3; student over {0, 1, 3}
    kl0 = -math.log(softmax([1.0 / tau, 0.0 / tau, -1.0 / tau])[2])
    # sample 1 (y=0): teacher over {2, 3}; student over {1, 2, 3}
    p_t = softmax([-1.0 / tau, 1.0 / tau])
    q_s = softmax([1.0 / tau, 0.0 / tau, 0.5 / tau])
    kl1 = p_t[0] * math.log(p_t[0] / q_s[1]) + p_t[1] * math.log(p_t[1] / q_s[2])
    ce_mean = (ce(z[0], 2) + ce(z[1], 0)) / 2
    expected = ce_mean + beta * (kl0 + kl1) / 2
    got = fedlmd.local_loss(t(z), t(zg), torch.tensor(y), t(LMD_COUNTS), tau=tau, beta=beta)
    assert got.item() == pytest.approx(expected, rel=1e-5)
    official = fedlmd.local_loss(t(z), t(zg), torch.tensor(y), t(LMD_COUNTS), tau=tau, beta=beta,
                                 variant="official")
    assert official.item() == pytest.approx(ce_mean + beta * tau ** 2 * (kl0 + kl1) / 2, rel=1e-5)


def test_fedlmd_teacher_has_no_mass_on_majority_or_true_classes():
    torch.manual_seed(3)
    zg = torch.randn(8, 4) * 5
    y = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])
    dist = fedlmd.teacher_distribution(zg, y, t(LMD_COUNTS), tau=1.5)
    assert torch.all(dist[:, :2] == 0)  # majority classes 0 and 1
    assert torch.all(dist[torch.arange(8), y] == 0)
    assert torch.allclose(dist.sum(dim=1), torch.ones(8))  # every sample has support here
    uniform = fedlmd_tf.teacher_distribution(y, t(LMD_COUNTS))
    assert torch.all(uniform[:, :2] == 0)
    assert uniform[0].tolist() == [0.0, 0.0, 0.5, 0.5]  # y=0: uniform over {2, 3}
    assert uniform[2].tolist() == [0.0, 0.0, 0.0, 1.0]  # y=2: only class 3 left


def test_fedlmd_sample_with_empty_teacher_support_adds_nothing():
    counts = t([4.0, 4.0, 1.0])  # n/C = 3: majority {0, 1}; y = 2 leaves the teacher nothing
    z, zg = t([[1.0, 2.0, 0.0]]), t([[0.0, 3.0, 1.0]])
    got = fedlmd.local_loss(z, zg, torch.tensor([2]), counts, beta=5.0)
    assert got.item() == pytest.approx(ce([1.0, 2.0, 0.0], 2), rel=1e-6)


# ====================================================================== official: the edge case
def test_label_as_only_non_majority_class_gives_the_codes_huge_term():
    # counts [4, 4, 1]: n/C = 3, majority {0, 1}; y = 2 is the only non-majority class, so the
    # teacher's masks put -1000 on every class and cancel: p_g = softmax(z_g) over all classes
    counts, z, zg, tau, beta = t([4.0, 4.0, 1.0]), [1.0, 2.0, 0.0], [0.0, 3.0, 1.0], 1.0, 0.5
    p_g = [math.exp(v) / sum(math.exp(w) for w in zg) for v in zg]
    log_q = [1.0 - math.log(math.e + math.e ** 2), 2.0 - math.log(math.e + math.e ** 2),
             -OFFSET - math.log(math.e + math.e ** 2)]  # the student keeps its -1000 at y
    kl = sum(p * (math.log(p) - q) for p, q in zip(p_g, log_q))
    assert kl == pytest.approx(code_kl(z, zg, 2, {0, 1}, tau))
    assert kl == pytest.approx(OFFSET * p_g[2], rel=0.01)  # about 1000 * tau^2 * p_g(y)
    got = fedlmd.local_loss(t([z]), t([zg]), torch.tensor([2]), counts, tau=tau, beta=beta, variant="official")
    assert got.item() == pytest.approx(ce(z, 2) + beta * kl, rel=1e-5)
    paper = fedlmd.local_loss(t([z]), t([zg]), torch.tensor([2]), counts, tau=tau, beta=beta)
    assert paper.item() == pytest.approx(ce(z, 2), rel=1e-6)  # exact exclusion: nothing to distil


def test_edge_case_at_temperature_two_scales_by_tau_squared():
    # C = 4, counts [3, 3, 3, 1]: n/C = 2.5, majority {0, 1, 2}; y = 3
    counts, z, zg, tau = t([3.0, 3.0, 3.0, 1.0]), [0.5, -1.0, 2.0, 1.0], [1.0, 0.0, -2.0, 4.0], 2.0
    scaled = [v / tau for v in zg]
    p_g = [math.exp(v) / sum(math.exp(w) for w in scaled) for v in scaled]
    s = [v / tau for v in z]
    norm = math.log(sum(math.exp(v) for v in s[:3]))  # the student's e^(z_y/tau - 1000) vanishes
    log_q = [s[0] - norm, s[1] - norm, s[2] - norm, s[3] - OFFSET - norm]
    expected = tau ** 2 * sum(p * (math.log(p) - q) for p, q in zip(p_g, log_q))
    assert expected == pytest.approx(code_kl(z, zg, 3, {0, 1, 2}, tau))
    got = fedlmd.local_loss(t([z]), t([zg]), torch.tensor([3]), counts, tau=tau, beta=1.0, variant="official")
    assert got.item() == pytest.approx(ce(z, 3) + expected, rel=1e-5)


# ====================================================================== official: where it agrees with the paper
def test_official_equals_paper_times_tau_squared_when_the_teacher_has_support():
    z = [[1.0, 0.0, 2.0, -1.0], [3.0, 1.0, 0.0, 0.5], [0.0, 1.0, -1.0, 2.0]]
    zg = [[0.5, 2.0, 1.0, 0.0], [1.0, 0.0, -1.0, 1.0], [2.0, 1.0, 0.5, -0.5]]
    y, tau, beta = [2, 0, 1], 2.0, 0.7
    # sample 0 (y=2): teacher = 1 at class 3; student over {0, 1, 3}
    kl0 = -math.log(math.exp(-1.0 / tau) / sum(math.exp(v / tau) for v in (1.0, 0.0, -1.0)))
    # sample 1 (y=0, a majority label: -1000 twice): teacher over {2, 3}; student over {1, 2, 3}
    p_t = [math.exp(-1.0 / tau), math.exp(1.0 / tau)]
    p_t = [p / sum(p_t) for p in p_t]
    q = [math.exp(v / tau) for v in (1.0, 0.0, 0.5)]
    q = [v / sum(q) for v in q]
    kl1 = p_t[0] * math.log(p_t[0] / q[1]) + p_t[1] * math.log(p_t[1] / q[2])
    # sample 2 (y=1, majority): teacher over {2, 3}; student over {0, 2, 3}
    p_t2 = [math.exp(0.5 / tau), math.exp(-0.5 / tau)]
    p_t2 = [p / sum(p_t2) for p in p_t2]
    q2 = [math.exp(v / tau) for v in (0.0, -1.0, 2.0)]
    q2 = [v / sum(q2) for v in q2]
    kl2 = p_t2[0] * math.log(p_t2[0] / q2[1]) + p_t2[1] * math.log(p_t2[1] / q2[2])
    for i, kl in enumerate((kl0, kl1, kl2)):
        assert tau ** 2 * kl == pytest.approx(code_kl(z[i], zg[i], y[i], {0, 1}, tau), rel=1e-9)
    ce_mean = sum(ce(z[i], y[i]) for i in range(3)) / 3
    args = (t(z), t(zg), torch.tensor(y), t(LMD_COUNTS))
    official = fedlmd.local_loss(*args, tau=tau, beta=beta, variant="official")
    assert official.item() == pytest.approx(ce_mean + beta * tau ** 2 * (kl0 + kl1 + kl2) / 3, rel=1e-5)
    paper = fedlmd.local_loss(*args, tau=tau, beta=beta)
    assert paper.item() == pytest.approx(ce_mean + beta * (kl0 + kl1 + kl2) / 3, rel=1e-5)


def test_logits_a_thousand_apart_leak_through_the_codes_masks():
    # counts [4, 1, 1]: majority {0}; y = 1 leaves the paper's teacher class 2 alone, but a
    # teacher logit 2500 on class 0 beats its -1000 mask: the code's teacher sits on class 0
    counts, z, zg = t([4.0, 1.0, 1.0]), [0.0, 1.0, 2.0], [2500.0, 0.0, 0.0]
    expected_code = math.log(1.0 + math.e ** 2)  # -log q(0), q over {0, 2} (e^(1-1000) vanishes)
    expected_paper = -(2.0 - math.log(1.0 + math.e ** 2))  # -log q(2)
    assert code_kl(z, zg, 1, {0}, 1.0) == pytest.approx(expected_code)
    args = (t([z]), t([zg]), torch.tensor([1]), counts)
    official = fedlmd.local_loss(*args, beta=1.0, variant="official")
    assert official.item() == pytest.approx(ce(z, 1) + expected_code, rel=1e-5)
    paper = fedlmd.local_loss(*args, beta=1.0)
    assert paper.item() == pytest.approx(ce(z, 1) + expected_paper, rel=1e-5)


# ====================================================================== official: purity, gradients, vmap
def test_official_runs_under_vmap_without_a_fallback():
    torch.manual_seed(0)
    z, zg = torch.randn(3, 5, 4) * 3, torch.randn(3, 5, 4) * 3
    y = torch.tensor([[2, 3, 0, 1, 2], [3, 3, 3, 0, 1], [0, 1, 2, 3, 0]])
    counts = t([[6.0, 3.0, 1.0, 0.0], [3.0, 3.0, 3.0, 1.0], [1.0, 1.0, 1.0, 1.0]])  # client 1: y=3 edge

    def loss(zk, zgk, yk, ck):
        return fedlmd.local_loss(zk, zgk, yk, ck, tau=2.0, beta=0.3, variant="official")

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a missing batching rule warns
        stacked = vmap(loss)(z, zg, y, counts)
    one_by_one = torch.stack([loss(z[k], zg[k], y[k], counts[k]) for k in range(3)])
    assert torch.allclose(stacked, one_by_one, rtol=1e-6)
    assert stacked[1] > 100  # the edge-case samples dominate that client's loss


def test_official_gradient_is_finite_and_reaches_the_student_only():
    counts = t([5.0, 3.0, 1.0, 0.0, 0.0])
    y = torch.tensor([0, 1, 2, 0, 1, 0])
    signs = torch.tensor([[1, -1, 1, -1, 1]] * 6, dtype=torch.float32)
    z = (1e4 * signs * torch.tensor([[1.0], [-1.0]]).repeat(3, 1)).requires_grad_()
    zg = (-1e4 * signs).requires_grad_()
    value = fedlmd.local_loss(z, zg, y, counts, tau=2.0, variant="official")
    value.backward()
    assert torch.isfinite(value) and torch.isfinite(z.grad).all()
    assert zg.grad is None


def test_official_one_round_stacked_matches_sequential():
    cfg = RunConfig(dataset="synthetic", model="lenet5", partition="dirichlet", beta=0.3, clients=4,
                    max_train_samples=200, max_test_samples=60, rounds=1, local_epochs=1, batch_size=16,
                    lr=0.01, momentum=0.5, seed=3, device="cpu", method="fedlmd",
                    method_args={"variant": "official", "tau": 2.0})
    seq_server, seq_alg = engine.prepare(cfg)
    engine.run_round(seq_server, seq_alg)
    stk_server, stk_alg = engine.prepare(cfg.replace(backend="stacked"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no fallback to the sequential path
        engine.run_round(stk_server, stk_alg)
    for key, value in seq_server.model.state_dict().items():
        assert torch.allclose(value, stk_server.model.state_dict()[key], atol=1e-5, rtol=0), key


# ====================================================================== hyperparameter ranges (FedLMD and FedLMD-Tf)
@pytest.mark.parametrize("method, key, value, allowed", [
    ("fedlmd", "tau", 0.0, "(0, inf)"),
    ("fedlmd", "beta", -0.1, "[0, inf)"),
    ("fedlmd_tf", "tau", -1.0, "(0, inf)"),
    ("fedlmd_tf", "switch_round", -2, "an integer in [-1, inf)"),
    ("fedlmd_tf", "switch_round", 1.5, "an integer in [-1, inf)"),
])
def test_out_of_range_hyperparameter_fails_when_the_config_is_made(method, key, value, allowed):
    with pytest.raises(FedlibError) as info:
        RunConfig(dataset="synthetic", model="mlp", method=method, method_args={key: value})
    message = str(info.value)
    assert method in message and f"{key}={value!r}" in message and allowed in message


def test_in_range_values_are_accepted():
    RunConfig(dataset="synthetic", model="mlp", method="fedlmd", method_args={"tau": 0.5, "beta": 0.0})
    RunConfig(dataset="synthetic", model="mlp", method="fedlmd_tf", method_args={"switch_round": -1})
    RunConfig(dataset="synthetic", model="mlp", method="fedlmd_tf", method_args={"switch_round": 0})
    assert fedlmd_tf.FedLMDTf.ranges["switch_round"].contains(7)
