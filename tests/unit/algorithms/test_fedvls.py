"""FedVLS / FedED (fedlib.algorithms.fedvls): the paper's and the official variant's losses by hand,
the vacant-class distillation, the ablation switches and the official variant's extras. Every
expected number is computed here with ``math`` step by step, not with the code under test."""

import math

import pytest
import torch

from fedlib.algorithms import fedvls
from fedlib.core.registry import build_algorithm
from fedlib.errors import FedlibError
from tests.unit.algorithms.helpers import TinyNet, fake_context, fake_server, kl, softmax, t

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
