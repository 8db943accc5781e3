"""FedCSD (fedlib.algorithms.fedcsd): the loss by hand in both variants, its masks, invariants and
gradients; the server's moving-average teacher and prototypes; the teacher's mode and the
official variant's prototypes; hyperparameter ranges."""

import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from fedlib.algorithms import fedcsd
from fedlib.algorithms.base import run_teachers
from fedlib.algorithms.client_training import client_setup
from fedlib.core.config import RunConfig
from fedlib.core.registry import build_algorithm
from fedlib.core.state import keyed_seed, sample_clients
from fedlib.engine import engine
from fedlib.errors import FedlibError
from tests.unit.algorithms.helpers import log_softmax, t, tempered_kl

E = math.e


# ====================================================================== the loss
IDENTITY = t([[1.0, 0.0], [0.0, 1.0]])


def test_fedcsd_paper_value_by_hand():
    # sample 1: z=[1,0], teacher [2,1], y=0; prototypes = identity, so
    # delta = [cos(z,e0), cos(z,e1)] = [1, 0], delta_hat = [e, 1] / (e + 1)
    # z_hat = [2e, 1] / (e + 1); teacher p_y = e^2 / (e^2 + e) = e / (e + 1) > 1/2 -> mask 1
    # sample 2: z=[0,1], teacher [0,3], y=0: teacher p_y = 1 / (1 + e^3) < 1/2 -> mask 0
    mu, tau = 0.5, 2.0
    z_hat1 = [2 * E / (E + 1), 1 / (E + 1)]
    kl1 = tempered_kl(z_hat1, [1.0, 0.0], tau)
    ce1 = -log_softmax([1.0, 0.0])[0]  # log(1 + e^-1)
    ce2 = -log_softmax([0.0, 1.0])[0]  # log(1 + e)
    expected = (ce1 + ce2) / 2 + mu * tau ** 2 * (kl1 * 1 + 0.0) / 2
    value = fedcsd.local_loss(t([[1, 0], [0, 1]]), t([[2, 1], [0, 3]]), torch.tensor([0, 0]),
                              IDENTITY, mu=mu, tau=tau)
    assert value.item() == pytest.approx(expected, rel=1e-5)


def test_fedcsd_official_weights_ce_and_masks_on_refined_logits():
    # z=[0,1] points at class 1: delta = [0, 1], delta_hat = [1, e] / (1 + e)
    # teacher [1, 0.9], y=0: raw teacher p_y > 1/2 (paper keeps the sample), but the refined
    # logits [1/(1+e), 0.9e/(1+e)] = [0.269, 0.658] give p_y < 1/2 (official drops it)
    logits, teacher, labels = t([[0, 1]]), t([[1.0, 0.9]]), torch.tensor([0])
    mu, tau = 0.5, 4.0
    ce = -log_softmax([0.0, 1.0])[0]
    official = fedcsd.local_loss(logits, teacher, labels, IDENTITY, mu=mu, tau=tau, variant="official")
    assert official.item() == pytest.approx((1 - mu) * ce, rel=1e-6)
    z_hat = [1 / (1 + E), 0.9 * E / (1 + E)]
    paper = fedcsd.local_loss(logits, teacher, labels, IDENTITY, mu=mu, tau=tau, variant="paper")
    assert paper.item() == pytest.approx(ce + mu * tau ** 2 * tempered_kl(z_hat, [0.0, 1.0], tau), rel=1e-5)


def test_fedcsd_switches_off_give_plain_kd():
    # no similarity weighting and no mask: CE + mu * tau^2 * KL(teacher || student)
    logits, teacher, labels = t([[0.5, -1.0, 2.0]]), t([[3.0, 0.0, -1.0]]), torch.tensor([2])
    expected = -log_softmax([0.5, -1.0, 2.0])[2] + 0.1 * 9.0 * tempered_kl([3.0, 0.0, -1.0], [0.5, -1.0, 2.0], 3.0)
    value = fedcsd.local_loss(logits, teacher, labels, torch.eye(3), mu=0.1, tau=3.0,
                              use_similarity=False, use_mask=False)
    assert value.item() == pytest.approx(expected, rel=1e-5)


def test_fedcsd_adaptive_versus_hard_mask():
    # teacher [1, 1.2, -5], y=0: p_0 = e / (e + e^1.2 + e^-5) = 0.45 > 1/3 (adaptive keeps),
    # argmax = 1 != 0 (hard drops)
    p0 = E / (E + math.exp(1.2) + math.exp(-5))
    assert p0 > 1 / 3
    teacher, labels = t([[1.0, 1.2, -5.0]]), torch.tensor([0])
    assert fedcsd.teacher_mask(teacher, labels, "adaptive").tolist() == [1.0]
    assert fedcsd.teacher_mask(teacher, labels, "hard").tolist() == [0.0]
    with pytest.raises(FedlibError, match="mask type"):
        fedcsd.teacher_mask(teacher, labels, "soft")


def test_fedcsd_mask_zeroes_samples_the_teacher_gets_wrong():
    torch.manual_seed(0)
    logits = torch.randn(6, 4, requires_grad=True)
    labels = torch.tensor([0, 1, 2, 3, 0, 1])
    teacher = torch.full((6, 4), 5.0)
    teacher[torch.arange(6), labels] = -5.0  # the teacher puts almost no mass on the true class
    prototypes = torch.randn(4, 4)
    for variant in ("paper", "official"):
        for mask_type in ("adaptive", "hard"):
            value = fedcsd.local_loss(logits, teacher, labels, prototypes, mu=0.3, variant=variant,
                                      mask_type=mask_type)
            ce_weight = 1.0 if variant == "paper" else 0.7
            assert value.item() == pytest.approx(ce_weight * F.cross_entropy(logits, labels).item(), rel=1e-6)


@pytest.mark.parametrize("variant", ["paper", "official"])
@pytest.mark.parametrize("mask_type", ["adaptive", "hard"])
def test_fedcsd_finite_at_extreme_logits(variant, mask_type):
    torch.manual_seed(1)
    logits = (torch.randn(8, 5) * 1e4).requires_grad_(True)
    teacher, prototypes = torch.randn(8, 5) * 1e4, torch.randn(5, 5) * 1e4
    prototypes[2] = 0.0  # a class no client holds
    labels = torch.randint(0, 5, (8,))
    value = fedcsd.local_loss(logits, teacher, labels, prototypes, variant=variant, mask_type=mask_type,
                              use_mask=False)
    value.backward()
    assert torch.isfinite(value) and torch.isfinite(logits.grad).all()


def test_fedcsd_paper_gradient_reaches_the_student_only_through_its_softmax():
    torch.manual_seed(2)
    logits = torch.randn(4, 3, requires_grad=True)
    teacher = torch.randn(4, 3, requires_grad=True)
    prototypes = torch.randn(3, 3, requires_grad=True)
    labels = torch.tensor([0, 1, 2, 1])
    mu, tau = 0.7, 2.0
    fedcsd.local_loss(logits, teacher, labels, prototypes, mu=mu, tau=tau, use_mask=False).backward()
    assert teacher.grad is None and prototypes.grad is None
    # with delta_hat constant: dL/dz = (softmax(z) - onehot)/B + mu * tau * (q_s - q_t)/B
    z = logits.detach()
    delta_hat = torch.softmax(F.normalize(z, dim=1) @ F.normalize(prototypes.detach(), dim=1).T, dim=1)
    q_t = torch.softmax(delta_hat * teacher.detach() / tau, dim=1)
    q_s = torch.softmax(z / tau, dim=1)
    expected = (torch.softmax(z, 1) - F.one_hot(labels, 3)) / 4 + mu * tau * (q_s - q_t) / 4
    assert torch.allclose(logits.grad, expected, atol=1e-6)
    # the official variant also differentiates through delta_hat, so its gradient differs
    official_logits = z.clone().requires_grad_(True)
    fedcsd.local_loss(official_logits, teacher, labels, prototypes, mu=mu, tau=tau, variant="official",
                      use_mask=False).backward()
    assert teacher.grad is None and prototypes.grad is None
    ce_grad = (torch.softmax(z, 1) - F.one_hot(labels, 3)) / 4
    official_expected = (1 - mu) * ce_grad + mu * tau * (q_s - q_t) / 4
    assert not torch.allclose(official_logits.grad, official_expected, atol=1e-4)


def test_fedcsd_rejects_bad_inputs():
    with pytest.raises(FedlibError, match="variant"):
        fedcsd.local_loss(t([[1, 0]]), t([[1, 0]]), torch.tensor([0]), IDENTITY, variant="code")
    with pytest.raises(FedlibError, match="shape"):
        fedcsd.local_loss(t([[1, 0]]), t([[1, 0]]), torch.tensor([0]), torch.eye(3))
    with pytest.raises(FedlibError, match="alpha"):
        build_algorithm("fedcsd", {"alpha": 1.5})


# ====================================================================== server side
def test_moving_average_teacher_on_toy_state():
    teacher = {"w": t([1.0, 2.0]), "bn.running_mean": t([0.0]), "bn.num_batches_tracked": torch.tensor(3)}
    global_ = {"w": t([3.0, 6.0]), "bn.running_mean": t([1.0]), "bn.num_batches_tracked": torch.tensor(5)}
    updated = fedcsd.moving_average(teacher, global_, alpha=0.9)
    # 0.9*1 + 0.1*3 = 1.2; 0.9*2 + 0.1*6 = 2.4; 0.9*0 + 0.1*1 = 0.1; the counter copies the global
    assert torch.allclose(updated["w"], t([1.2, 2.4]))
    assert torch.allclose(updated["bn.running_mean"], t([0.1]))
    assert updated["bn.num_batches_tracked"].item() == 5


def test_fedcsd_end_round_keeps_teacher_in_extras():
    model = torch.nn.Linear(2, 2)
    server = SimpleNamespace(model=model, extras={})
    method = build_algorithm("fedcsd", {"alpha": 0.75})
    method.setup(server)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        model.weight.add_(4.0)
    method.end_round(server, [])
    assert torch.allclose(server.extras["fedcsd_teacher"]["weight"], start["weight"] + 0.25 * 4.0)
    off = build_algorithm("fedcsd", {"use_tma": False})
    off_server = SimpleNamespace(model=model, extras={})
    off.setup(off_server)
    assert "fedcsd_teacher" not in off_server.extras


def test_prototypes_by_hand():
    sums, counts = t([[2.0, 4.0], [0.0, 0.0]]), t([2.0, 0.0])
    local = fedcsd.client_prototypes(sums, counts)
    assert local.tolist() == [[1.0, 2.0], [0.0, 0.0]]
    # class 0: mean of [1,2] and [3,4] = [2,3]; class 1: only client B holds it -> [5,6]
    other = t([[3.0, 4.0], [5.0, 6.0]])
    merged = fedcsd.global_prototypes([local, other], [counts > 0, torch.tensor([True, True])])
    assert merged.tolist() == [[2.0, 3.0], [5.0, 6.0]]


# ====================================================================== teacher mode and prototypes
def _bn_config(seed: int = 3, **args) -> RunConfig:
    # resnet8 has BatchNorm; crop_flip makes training batches differ from the unaugmented pass
    return RunConfig(dataset="synthetic", model="resnet8", clients=3, rounds=1, local_epochs=1, batch_size=16,
                     max_train_samples=120, max_test_samples=30, lr=0.05, method="fedcsd", method_args=args,
                     device="cpu", seed=seed, augmentation="crop_flip")


def _first_client(cfg: RunConfig):
    """(server, method, ctx, batches) of round 0's first client, set up as the engine does."""
    server, method = engine.prepare(cfg)
    server.round_clients = sample_clients(cfg.seed, 0, cfg.clients, cfg.participation)
    ctx, batches = client_setup(server, method, server.round_clients[0], cfg.lr)
    return server, method, ctx, batches


def _stored_teacher(server, train: bool) -> torch.nn.Module:
    model = server.new_model()
    model.load_state_dict(server.extras[fedcsd.TEACHER])
    return model.train(train)


def run_teachers_logits(ctx, x):
    return run_teachers(ctx.teachers, x)[fedcsd.TEACHER].logits


def _class_means(model, batches, num_classes):
    sums, counts = torch.zeros(num_classes, num_classes), torch.zeros(num_classes)
    with torch.no_grad():
        for x, y in batches:
            logits = model(x)
            for row, label in zip(logits, y.tolist()):
                sums[label] += row
                counts[label] += 1
    return sums / counts.clamp_min(1)[:, None]


@pytest.mark.parametrize("variant, train", [("official", True), ("paper", False)])
def test_fedcsd_teacher_targets_follow_the_variants_mode(variant, train):
    server, method, ctx, batches = _first_client(_bn_config(variant=variant))
    teacher = ctx.teachers[fedcsd.TEACHER]
    assert teacher.training is train
    x, _ = next(batches)
    targets = run_teachers_logits(ctx, x)
    same = _stored_teacher(server, train)(x)
    other = _stored_teacher(server, not train)(x)
    assert torch.allclose(targets, same, atol=1e-6)
    assert not torch.allclose(targets, other, atol=1e-3)  # batch vs running statistics matter here


def test_fedcsd_teacher_mode_switch_overrides_the_variant():
    _, _, ctx, _ = _first_client(_bn_config(variant="official", teacher_mode="eval"))
    assert ctx.teachers[fedcsd.TEACHER].training is False
    _, _, ctx, _ = _first_client(_bn_config(variant="paper", teacher_mode="train"))
    assert ctx.teachers[fedcsd.TEACHER].training is True


def test_fedcsd_official_prototypes_come_from_seeded_augmented_training_batches():
    cfg = _bn_config(variant="official")
    server, _, ctx, _ = _first_client(cfg)
    client = ctx.client_id
    got = server.cache["fedcsd_round"]["prototypes"][client]
    # by hand: one epoch of the client's training batches from the prototype stream's generator,
    # through a train-mode copy of the stored teacher
    seed = keyed_seed(cfg.seed, 0, client, fedcsd.PROTOTYPE_STREAM)
    batches = server.data.client(client).train_batches(cfg.batch_size, 1, torch.Generator().manual_seed(seed))
    expected = _class_means(_stored_teacher(server, True), batches, server.num_classes)
    assert torch.allclose(got, expected, atol=1e-5)
    # the paper variant: eval mode over the fixed, unaugmented pass
    paper_server, _, paper_ctx, _ = _first_client(_bn_config(variant="paper"))
    paper = paper_server.cache["fedcsd_round"]["prototypes"][client]
    paper_expected = _class_means(_stored_teacher(paper_server, False), paper_ctx.data.eval_batches(),
                                  server.num_classes)
    assert torch.allclose(paper, paper_expected, atol=1e-5)
    assert not torch.allclose(got, paper, atol=1e-3)
    # augmentation and order alone (both in train mode) change the prototypes too
    fixed_server, _, _, _ = _first_client(_bn_config(variant="official", prototype_batches="eval"))
    assert not torch.allclose(got, fixed_server.cache["fedcsd_round"]["prototypes"][client], atol=1e-3)


def test_fedcsd_official_prototypes_are_reproducible_and_leave_the_training_stream_alone():
    runs = []
    for args in ({"variant": "official"}, {"variant": "official"}, {"variant": "paper"}):
        server, _, ctx, batches = _first_client(_bn_config(**args))
        x, y = next(batches)
        runs.append((server.cache["fedcsd_round"]["prototypes"], x, y, torch.rand(3)))
    (first, x1, y1, r1), (second, x2, y2, r2), (_, x3, y3, r3) = runs
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)
    # the training batches and the global RNG (dropout) are those of the paper variant
    assert torch.equal(x1, x3) and torch.equal(y1, y3) and torch.equal(r1, r3)


def test_fedcsd_stored_teacher_is_only_the_moving_average():
    # train-mode forwards update the round's teacher module, never server.extras
    cfg = _bn_config(variant="official")
    server, method = engine.prepare(cfg)
    start = {k: v.clone() for k, v in server.extras[fedcsd.TEACHER].items()}
    engine.run_round(server, method)
    expected = fedcsd.moving_average(start, server.model.state_dict(), 0.9)
    for key, value in server.extras[fedcsd.TEACHER].items():
        assert torch.equal(value, expected[key]), key
    assert "fedcsd_round" in server.cache and not hasattr(server, "_fedcsd_cache")


# ====================================================================== hyperparameter ranges
@pytest.mark.parametrize("key, value, allowed", [
    ("mu", 1.5, "[0, 1]"), ("mu", -0.1, "[0, 1]"), ("alpha", 1.2, "[0, 1]"), ("tau", 0.0, "(0, inf)"),
])
def test_fedcsd_out_of_range_hyperparameter_fails_at_config_time(key, value, allowed):
    with pytest.raises(FedlibError) as info:
        RunConfig(dataset="synthetic", model="mlp", method="fedcsd", method_args={key: value})
    message = str(info.value)
    assert "fedcsd" in message and f"{key}={value!r}" in message and allowed in message
