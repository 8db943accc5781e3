"""The seed losses: FedVLS/FedED, FedNTD, FedLMD, FedLMD-Tf, FedLC, FedRS, FedAvg+KD.

Every expected number is computed here with ``math`` step by step, not with the code under test.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from fedlib.algorithms import build_algorithm, get_class, method_class
from fedlib.algorithms import _common, fedavg_kd, fedlc, fedlmd, fedlmd_tf, fedntd, fedrs, fedvls
from fedlib.algorithms.base import ClientContext
from fedlib.errors import FedlibError

SEED_METHODS = ("fedvls", "fedntd", "fedlmd", "fedlmd_tf", "fedlc", "fedrs", "fedavg_kd")


def t(rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float32)


def softmax(values: list[float]) -> list[float]:
    exps = [math.exp(v) for v in values]
    return [e / sum(exps) for e in exps]


def kl(p: list[float], q: list[float]) -> float:
    return sum(pi * math.log(pi / qi) for pi, qi in zip(p, q) if pi > 0)


def ce(logits: list[float], label: int) -> float:
    return -math.log(softmax(logits)[label])


# ====================================================================== shared helpers
def test_masked_log_softmax_restricts_and_zeroes_empty_rows():
    logits = t([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    mask = torch.tensor([[True, False, True], [False, False, False]])
    out = _common.masked_log_softmax(logits, mask)
    expected = math.log(math.exp(1) / (math.exp(1) + math.exp(3)))
    assert out[0, 0].item() == pytest.approx(expected, rel=1e-6)
    assert out[0, 1].item() == 0.0
    assert torch.equal(out[1], torch.zeros(3))


def test_majority_is_strict_and_vacant_is_zero_count():
    counts = t([5.0, 2.5, 2.5, 0.0])  # n/C = 2.5: exactly n/C is not majority
    assert _common.majority_classes(counts).tolist() == [True, False, False, False]
    assert _common.vacant_classes(counts).tolist() == [False, False, False, True]


# ====================================================================== FedNTD
def test_fedntd_hand_computed():
    z = [[1.0, 2.0, 0.5], [0.0, -1.0, 2.0]]
    zg = [[0.5, 0.0, 1.5], [1.0, 1.0, 3.0]]
    y = [1, 2]
    tau, beta = 2.0, 0.5
    # sample 0: not-true classes {0, 2}; sample 1: {0, 1}
    kl0 = kl(softmax([0.5 / tau, 1.5 / tau]), softmax([1.0 / tau, 0.5 / tau]))
    kl1 = kl(softmax([1.0 / tau, 1.0 / tau]), softmax([0.0 / tau, -1.0 / tau]))
    ce_mean = (ce(z[0], 1) + ce(z[1], 2)) / 2
    expected = ce_mean + beta * tau ** 2 * (kl0 + kl1) / 2
    got = fedntd.local_loss(t(z), t(zg), torch.tensor(y), tau=tau, beta=beta)
    assert got.item() == pytest.approx(expected, rel=1e-5)


def test_fedntd_ignores_true_class_logit():
    torch.manual_seed(0)
    z, zg = torch.randn(6, 5), torch.randn(6, 5)
    y = torch.tensor([0, 1, 2, 3, 4, 0])
    before = fedntd.not_true_kl(z, zg, y, tau=1.5)
    z2, zg2 = z.clone(), zg.clone()
    z2[torch.arange(6), y] += 7.0
    zg2[torch.arange(6), y] -= 5.0
    assert fedntd.not_true_kl(z2, zg2, y, tau=1.5).item() == pytest.approx(before.item(), abs=1e-6)
    assert before.item() > 0.0


# ====================================================================== FedVLS
COUNTS = [3.0, 1.0, 0.0, 0.0]  # p = (0.75, 0.25, 0, 0); vacant O = {2, 3}


def test_fedvls_paper_hand_computed():
    z = [[2.0, 0.0, 1.0, -1.0], [0.5, 1.5, -0.5, 0.0]]
    zg = [[0.0, 0.0, 2.0, 0.0], [0.0, 0.0, -1.0, 1.0]]
    y, lam, p = [0, 1], 0.3, [0.75, 0.25]
    # L_cal: softmax over the non-vacant classes of z + log p
    cal = [-math.log(p[yi] * math.exp(zi[yi]) / (p[0] * math.exp(zi[0]) + p[1] * math.exp(zi[1])))
           for zi, yi in zip(z, y)]
    l_cal = sum(cal) / 2
    # L_dis: KL over the vacant classes {2, 3}
    l_dis = (kl(softmax([2.0, 0.0]), softmax([1.0, -1.0])) + kl(softmax([-1.0, 1.0]), softmax([-0.5, 0.0]))) / 2
    # L_logit: class 0 is only "not the label" for sample 1, class 1 only for sample 0; B = 2
    l0 = math.log(math.exp(z[1][0]) / 2)
    l1 = math.log(math.exp(z[0][1]) / 2)
    l_logit = 0.75 * l0 + 0.25 * l1
    got = fedvls.local_loss(t(z), t(zg), torch.tensor(y), t(COUNTS), lam=lam)
    assert got.item() == pytest.approx(l_cal + lam * l_dis + l_logit, rel=1e-5)


def test_fedvls_suppression_skips_a_class_that_labels_the_whole_batch():
    z = [[2.0, 0.0, 1.0, -1.0], [0.5, 1.5, -0.5, 0.0]]
    # both samples are class 0: L^0 is log 0 and is left out; L^1 uses both samples
    l1 = math.log((math.exp(0.0) + math.exp(1.5)) / 2)
    got = fedvls.logit_suppression(t(z), torch.tensor([0, 0]), t(COUNTS))
    assert got.item() == pytest.approx(0.25 * l1, rel=1e-5)


def test_fedvls_official_hand_computed():
    z = [[2.0, 0.0, 1.0, -1.0], [0.5, 1.5, -0.5, 0.0]]
    zg = [[0.0, 0.0, 2.0, 0.0], [0.0, 0.0, -1.0, 1.0]]
    y, lam = [0, 1], 0.3
    prior = [0.75, 0.25, 0.0, 0.0]
    shift = [math.log(pc + 1e-9) for pc in prior]  # vacant classes stay in, shifted by log 1e-9
    cal = sum(-math.log(softmax([zc + s for zc, s in zip(zi, shift)])[yi]) for zi, yi in zip(z, y)) / 2
    adjusted = [[zc - s + math.log(1 / 4) for zc, s in zip(zi, shift)] for zi in z]
    sup = 0.0
    for c in range(4):  # masked entries are multiplied by 0, so they count e^0 = 1
        entries = [adjusted[i][c] * (1.0 if y[i] != c else 0.0) for i in range(2)]
        sup += prior[c] * (math.log(sum(math.exp(e) for e in entries)) - math.log(2))
    dis = (kl(softmax([2.0, 0.0]), softmax([1.0, -1.0])) + kl(softmax([-1.0, 1.0]), softmax([-0.5, 0.0]))) / 2
    got = fedvls.local_loss(t(z), t(zg), torch.tensor(y), t(COUNTS), lam=lam, variant="official")
    assert got.item() == pytest.approx(cal + 0.005 * sup + lam * dis, rel=1e-5)


def test_fedvls_distillation_zero_when_local_equals_global_or_few_vacant():
    torch.manual_seed(1)
    z = torch.randn(5, 6)
    zg = torch.randn(5, 6)
    many_vacant = t([4, 3, 0, 0, 0, 2])
    assert fedvls.vacant_distillation(z, z.clone(), many_vacant).item() == pytest.approx(0.0, abs=1e-7)
    assert fedvls.vacant_distillation(z, zg, many_vacant).item() > 0.0
    for counts in (t([4, 3, 1, 1, 1, 0]), t([4, 3, 1, 1, 1, 2])):  # one vacant class, none
        assert fedvls.vacant_distillation(z, zg, counts).item() == pytest.approx(0.0, abs=1e-7)


def test_fedvls_ablation_switches():
    torch.manual_seed(2)
    z, zg, y = torch.randn(4, 4), torch.randn(4, 4), torch.tensor([0, 1, 0, 1])
    counts = t(COUNTS)
    cal = fedvls.calibrated_ce(z, y, counts)
    sup = fedvls.logit_suppression(z, y, counts)
    dis = fedvls.vacant_distillation(z, zg, counts)
    only_cal = fedvls.local_loss(z, None, y, counts, distill=False, suppress=False)
    no_dis = fedvls.local_loss(z, None, y, counts, distill=False)
    no_sup = fedvls.local_loss(z, zg, y, counts, lam=0.5, suppress=False)
    assert only_cal.item() == pytest.approx(cal.item(), rel=1e-6)
    assert no_dis.item() == pytest.approx((cal + sup).item(), rel=1e-6)
    assert no_sup.item() == pytest.approx((cal + 0.5 * dis).item(), rel=1e-6)
    with pytest.raises(FedlibError):
        fedvls.local_loss(z, None, y, counts)
    with pytest.raises(FedlibError):
        fedvls.local_loss(z, zg, y, counts, variant="nope")


# ====================================================================== FedLMD and FedLMD-Tf
LMD_COUNTS = [6.0, 3.0, 1.0, 0.0]  # n/C = 2.5: majority {0, 1}


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


def test_fedlmd_tf_hand_computed():
    z = [[1.0, 0.0, 2.0, -1.0], [3.0, 1.0, 0.0, 0.5]]
    y, tau, beta = [2, 0], 3.0, 0.4
    kl0 = -math.log(softmax([1.0 / tau, 0.0 / tau, -1.0 / tau])[2])  # mu = 1 at class 3
    q_s = softmax([1.0 / tau, 0.0 / tau, 0.5 / tau])  # student over {1, 2, 3}
    kl1 = 0.5 * math.log(0.5 / q_s[1]) + 0.5 * math.log(0.5 / q_s[2])  # mu uniform on {2, 3}
    expected = (ce(z[0], 2) + ce(z[1], 0)) / 2 + beta * (kl0 + kl1) / 2
    got = fedlmd_tf.local_loss(t(z), torch.tensor(y), t(LMD_COUNTS), tau=tau, beta=beta)
    assert got.item() == pytest.approx(expected, rel=1e-5)


# ====================================================================== FedLC, FedRS, FedAvg+KD
def test_fedlc_hand_computed():
    counts = t([16.0, 1.0, 0.0])
    z = [[1.0, 2.0, 5.0], [0.0, 0.5, -1.0]]
    tau = 0.5
    margins = [tau * 16 ** -0.25, tau * 1.0]  # 0.25 and 0.5; class 2 (n=0) leaves the softmax
    calibrated = [[zi[0] - margins[0], zi[1] - margins[1]] for zi in z]
    expected = (ce(calibrated[0], 0) + ce(calibrated[1], 1)) / 2
    got = fedlc.local_loss(t(z), torch.tensor([0, 1]), counts, tau=tau)
    assert got.item() == pytest.approx(expected, rel=1e-5)


def test_fedrs_hand_computed():
    counts = t([2.0, 0.0, 1.0])
    z = [[1.0, 3.0, 0.0], [0.5, -2.0, 1.0]]
    alpha = 0.7
    restricted = [[zi[0], alpha * zi[1], zi[2]] for zi in z]  # class 1 is missing locally
    expected = (ce(restricted[0], 0) + ce(restricted[1], 2)) / 2
    got = fedrs.local_loss(t(z), torch.tensor([0, 2]), counts, alpha=alpha)
    assert got.item() == pytest.approx(expected, rel=1e-5)
    with pytest.raises(FedlibError):
        build_algorithm("fedrs", {"alpha": 1.5})


def test_fedavg_kd_hand_computed():
    z, zg = [[1.0, 0.0, -1.0]], [[0.0, 2.0, 0.0]]
    tau, beta = 2.0, 0.3
    expected = ce(z[0], 0) + beta * tau ** 2 * kl(softmax([0.0, 1.0, 0.0]), softmax([0.5, 0.0, -0.5]))
    got = fedavg_kd.local_loss(t(z), t(zg), torch.tensor([0]), tau=tau, beta=beta)
    assert got.item() == pytest.approx(expected, rel=1e-5)


# ====================================================================== numerics and gradients
def _all_losses(z, zg, y, counts):
    """Every seed loss (and variant) on the same inputs."""
    return {
        "fedntd": fedntd.local_loss(z, zg, y, tau=2.0),
        "fedvls": fedvls.local_loss(z, zg, y, counts, lam=0.5),
        "fedvls_official": fedvls.local_loss(z, zg, y, counts, variant="official"),
        "fedlmd": fedlmd.local_loss(z, zg, y, counts, tau=2.0),
        "fedlmd_tf": fedlmd_tf.local_loss(z, y, counts, tau=2.0),
        "fedlc": fedlc.local_loss(z, y, counts),
        "fedrs": fedrs.local_loss(z, y, counts),
        "fedavg_kd": fedavg_kd.local_loss(z, zg, y, tau=2.0),
    }


def test_losses_finite_at_extreme_logits():
    counts = t([5.0, 3.0, 1.0, 0.0, 0.0])
    y = torch.tensor([0, 1, 2, 0, 1, 0])
    signs = torch.tensor([[1, -1, 1, -1, 1]] * 6, dtype=torch.float32)
    z = (1e4 * signs * torch.tensor([[1.0], [-1.0]]).repeat(3, 1)).requires_grad_()
    zg = -1e4 * signs
    for name, value in _all_losses(z, zg, y, counts).items():
        assert torch.isfinite(value), name
        (grad,) = torch.autograd.grad(value, z)
        assert torch.isfinite(grad).all(), name


def test_gradients_flow_into_student_logits_only():
    torch.manual_seed(4)
    counts = t([5.0, 3.0, 1.0, 0.0, 0.0])
    y = torch.tensor([0, 1, 2, 0])
    for name in ("fedntd", "fedvls", "fedvls_official", "fedlmd", "fedlmd_tf", "fedavg_kd"):
        z = torch.randn(4, 5, requires_grad=True)
        zg = torch.randn(4, 5, requires_grad=True)
        _all_losses(z, zg, y, counts)[name].backward()
        assert zg.grad is None, name
        assert z.grad is not None and z.grad.abs().sum() > 0, name


# ====================================================================== methods and hooks
class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x, return_features=False):
        logits = self.bn(self.fc(x))
        return (x, logits) if return_features else logits


def fake_server(round_index: int = 0) -> SimpleNamespace:
    return SimpleNamespace(model=TinyNet(), round=round_index, cache={}, new_model=lambda num_classes=None: TinyNet())


def fake_context(round_index: int = 0) -> ClientContext:
    return ClientContext(client_id=0, round=round_index, class_counts=t(LMD_COUNTS), num_samples=10, data=None)


def test_global_teacher_is_frozen_cached_per_round_and_reloaded():
    server = fake_server()
    first = _common.global_teacher(server)
    assert not first.training and not any(p.requires_grad for p in first.parameters())
    assert _common.global_teacher(server) is first
    with torch.no_grad():
        server.model.fc.weight.add_(1.0)
    assert not torch.equal(first.fc.weight, server.model.fc.weight)  # same round: not reloaded
    server.round = 1
    assert _common.global_teacher(server, train_mode=True) is first
    assert torch.equal(first.fc.weight, server.model.fc.weight) and first.training


def test_fedlmd_tf_switches_to_teacher_at_switch_round():
    method = build_algorithm("fedlmd_tf", {"switch_round": 2})
    for round_index, expects_teacher in ((0, False), (1, False), (2, True), (5, True)):
        ctx = fake_context(round_index)
        method.client_context(fake_server(round_index), ctx)
        assert ("global" in ctx.teachers) is expects_teacher
        assert ctx.metrics["majority_classes"] == 2.0
    never = build_algorithm("fedlmd_tf", {})
    assert not never.uses_teacher(10_000)


def test_fedvls_official_extras_weight_decay_and_teacher_mode():
    official = build_algorithm("fedvls", {"variant": "official"}, dataset="cifar100")
    paper = build_algorithm("feded", {}, dataset="cifar100")
    assert paper.hp["lam"] == 0.5 and official.hp["lam"] == 0.5
    model = TinyNet()
    assert official.make_optimizer(model, 0.1, 0.9, 1e-4).param_groups[0]["weight_decay"] == 0.0
    assert paper.make_optimizer(model, 0.1, 0.9, 1e-4).param_groups[0]["weight_decay"] == 1e-4
    for method, train_mode in ((official, True), (paper, False)):
        ctx = fake_context()
        method.client_context(fake_server(), ctx)
        assert ctx.teachers["global"].training is train_mode
    no_teacher = build_algorithm("fedvls", {"distill": "false"})
    ctx = fake_context()
    no_teacher.client_context(fake_server(), ctx)
    assert ctx.teachers == {} and ctx.metrics["vacant_classes"] == 1.0


def test_registry_names_aliases_and_compositions():
    assert get_class("feded") is get_class("fedvls")
    assert get_class("fedcodl") is get_class("fedavg_kd")
    assert build_algorithm("fedvls", {}, dataset="mnist").hp["lam"] == 0.1
    for combo in ("fedlmd+fedprox", "fedlmd_tf+fedprox", "fedvls+fedprox"):
        assert method_class(combo).name == combo
    with pytest.raises(FedlibError):
        build_algorithm("fedlmd", {"variant": "code"})


# ====================================================================== end to end
@pytest.mark.parametrize("method,args", [
    ("fedvls", {}), ("fedvls", {"variant": "official"}), ("fedntd", {}), ("fedlmd", {}),
    ("fedlmd_tf", {"switch_round": 1}), ("fedlc", {}), ("fedrs", {}), ("fedavg_kd", {}),
])
def test_methods_run_two_rounds_without_nan(method, args):
    from fedlib import engine
    from fedlib.config import RunConfig

    cfg = RunConfig(dataset="synthetic", model="mlp", clients=3, rounds=2, local_epochs=1, batch_size=16,
                    max_train_samples=96, max_test_samples=50, method=method, method_args=args)
    result = engine.run(cfg, use_store=False, progress=False)
    assert len(result.rounds) == 2
    assert all(math.isfinite(r["loss"]) for r in result.rounds)
    assert 0.0 <= result.final_accuracy <= 1.0
