"""PKD (fedlib.algorithms.pkd): the partial KD loss by hand, which expert fires, options, expert
training and the whole method end to end. Weak-class discovery is in tests/unit/measures/test_weak_classes.py."""

import math

import pytest
import torch

from fedlib.algorithms.pkd import expert_assignment, group_kl, partial_kd_loss, train_expert
from fedlib.core.config import RunConfig
from fedlib.core.registry import build_algorithm
from fedlib.errors import FedlibError
from fedlib.measures.weak_classes import discover_groups
from tests.unit.algorithms.helpers import kl, softmax
from tests.helpers import planted_confusion, tiny_config


# ====================================================================== the loss
def test_pkd_is_zero_when_nothing_is_misclassified_within_a_group():
    groups = [[0, 1], [2, 3]]
    labels = torch.tensor([0, 2, 1, 4])
    # sample 0 correct, sample 1 correct, sample 2 (class 1) predicted 4: outside its group,
    # sample 3 (class 4, in no group) predicted 0
    student = torch.tensor([[5.0, 1, 0, 0, 0], [0, 0, 5, 1, 0], [0, 1, 0, 0, 5], [5, 0, 0, 0, 1]])
    experts = [torch.randn(4, 2), torch.randn(4, 2)]
    assert expert_assignment(student, labels, groups).sum() == 0
    assert partial_kd_loss(student, experts, labels, groups, T=5.0) == 0


def test_pkd_hand_computed_value_both_directions():
    groups = [[0, 1], [1, 2, 3]]
    labels = torch.tensor([0, 2, 3])
    student = torch.tensor([[1.0, 2, 0, 0],  # class 0 predicted 1: expert 0 fires
                            [0.0, 0, 1, 3],  # class 2 predicted 3: expert 1 fires
                            [0.0, 0, 0, 4]])  # correct: nothing fires
    experts = [torch.tensor([[2.0, 0], [9, 9], [9, 9]]),
               torch.tensor([[9.0, 9, 9], [0, 1, 2], [9, 9, 9]])]
    T = 2.0
    # sample 0 over classes {0, 1}: student [1, 2] / 2, expert [2, 0] / 2
    p_s0, p_e0 = softmax([0.5, 1.0]), softmax([1.0, 0.0])
    # sample 1 over classes {1, 2, 3}: student [0, 1, 3] / 2, expert [0, 1, 2] / 2
    p_s1, p_e1 = softmax([0.0, 0.5, 1.5]), softmax([0.0, 0.5, 1.0])
    standard = (kl(p_e0, p_s0) + kl(p_e1, p_s1)) / 3  # summed over fired samples, / batch size 3
    printed = (kl(p_s0, p_e0) + kl(p_s1, p_e1)) / 3
    fired = expert_assignment(student, labels, groups)
    assert fired.tolist() == [[1, 0], [0, 1], [0, 0]]
    got = partial_kd_loss(student, experts, labels, groups, T=T)
    assert got.item() == pytest.approx(standard, rel=1e-6)
    got = partial_kd_loss(student, experts, labels, groups, T=T, kl_direction="printed")
    assert got.item() == pytest.approx(printed, rel=1e-6)
    got = partial_kd_loss(student, experts, labels, groups, T=T, t_squared=True)
    assert got.item() == pytest.approx(4 * standard, rel=1e-6)


def test_at_most_one_expert_fires_and_the_smallest_group_wins():
    groups = [[0, 1, 2], [0, 1]]
    labels = torch.tensor([0, 1])
    student = torch.tensor([[0.0, 3, 0], [0.0, 0, 3]])  # 0 -> 1 (both groups), 1 -> 2 (only group 0)
    fired = expert_assignment(student, labels, groups)
    assert fired.tolist() == [[0, 1], [1, 0]]
    # equal sizes: the earlier group wins; 1 -> 2 is now in no group
    fired = expert_assignment(student, labels, [[0, 1], [0, 1]])
    assert fired.tolist() == [[1, 0], [0, 0]]


def test_pkd_finite_at_extreme_logits_and_gradient_only_into_student():
    groups = [[0, 1], [1, 2, 3]]
    labels = torch.tensor([0, 2, 1, 3])
    student = (1e4 * torch.tensor([[-1.0, 1, 0, 0], [1, 0, -1, 1], [0, 0, 1, -1], [1, 1, 1, -1]])).requires_grad_()
    experts = [(1e4 * torch.tensor([[1.0, -1]] * 4)).requires_grad_(),
               (1e4 * torch.tensor([[-1.0, 1, -1]] * 4)).requires_grad_()]
    for direction in ("standard", "printed"):
        loss = partial_kd_loss(student, experts, labels, groups, T=5.0, kl_direction=direction)
        assert torch.isfinite(loss) and loss > 0
        loss.backward()
        assert torch.isfinite(student.grad).all()
        assert all(e.grad is None for e in experts)
        if direction == "standard":  # (p_s - p_e) / T: nonzero even when both saturate
            assert student.grad.abs().sum() > 0
        student.grad = None


# ====================================================================== options
def test_unknown_options_raise_fedlib_error():
    with pytest.raises(FedlibError):
        discover_groups(planted_confusion(), grouping="spectral")
    with pytest.raises(FedlibError):
        build_algorithm("pkd", {"kl_direction": "reverse"})
    with pytest.raises(FedlibError):
        build_algorithm("pkd", {"groups": "[[0, 6"})
    with pytest.raises(FedlibError):
        group_kl(torch.zeros(1, 2), torch.zeros(1, 2), T=5.0, direction="reverse")


def test_dataset_defaults_follow_the_paper():
    assert build_algorithm("pkd", {}, "fashion_mnist").hp["lam"] == 1.0
    assert build_algorithm("pkd", {}, "cifar10").hp["lam"] == 0.5
    assert build_algorithm("pkd", {}, "cifar100").hp["lam"] == 0.5
    assert build_algorithm("pkd", {}, "mnist").hp["warmup_rounds"] == 10
    assert build_algorithm("pkd", {}, "mnist").hp["grouping"] == "stars"
    assert build_algorithm("pkd", {"groups": "[[0, 6], [2, 4, 6]]"}).hp["groups"] == [[0, 6], [2, 4, 6]]


# ====================================================================== expert training and end to end
# three IID clients, two rounds: a warm-up round, then expert training and distillation
PKD_RUN = dict(partition="iid", clients=3, rounds=2, batch_size=16, max_train_samples=200, max_test_samples=50,
               lr=0.01, momentum=0.0, seed=0)


def pkd_config(**method_args) -> RunConfig:
    args = {"warmup_rounds": 1, "expert_rounds": 1, **method_args}
    return tiny_config(PKD_RUN, method="pkd", method_args=args)


def test_expert_training_on_group_samples_only():
    from fedlib.engine import engine

    server, _ = engine.prepare(pkd_config())
    before = server.model.state_dict()["classifier.weight"].clone()
    state, cost = train_expert(server, [1, 3], rounds=2, local_epochs=1)
    assert state["classifier.weight"].shape[0] == 2
    assert all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point())
    counts = server.data.partition.counts  # (K, C): Eq. 5 per round = n_g / n at full participation
    share = float(counts[:, [1, 3]].sum()) / float(counts.sum())
    assert cost == pytest.approx(2 * share)
    assert torch.equal(server.model.state_dict()["classifier.weight"], before)  # global untouched


def test_the_experts_are_trained_in_begin_round_before_any_client_and_only_there():
    from fedlib.algorithms.base import ClientContext
    from fedlib.engine import engine

    server, algorithm = engine.prepare(pkd_config(groups=[[1, 3]]))
    server.round = 0  # the warm-up: nothing to prepare
    algorithm.begin_round(server)
    assert "pkd_experts" not in server.extras
    server.round = 1  # the first KD round
    client = server.data.client(0)
    with pytest.raises(FedlibError, match="begin_round"):  # client_context does not train them itself
        algorithm.client_context(server, ClientContext(0, 1, client.class_counts, client.num_samples, client))
    algorithm.begin_round(server)
    assert server.extras["pkd_groups"] == [[1, 3]] and len(server.extras["pkd_experts"]) == 1
    experts = server.extras["pkd_experts"]
    algorithm.begin_round(server)  # a later call (a later round) keeps them
    assert server.extras["pkd_experts"] is experts


def test_pkd_begin_round_runs_the_other_parts_begin_round():
    from types import SimpleNamespace

    from fedlib.algorithms.base import Algorithm
    from fedlib.algorithms.pkd import PKD
    from fedlib.core.registry import compose

    class Counting(Algorithm):
        name = "counting"

        def begin_round(self, server):
            super().begin_round(server)
            server.extras["begun"] = server.extras.get("begun", 0) + 1

    method = compose([PKD, Counting])(dict(PKD.defaults))
    server = SimpleNamespace(round=0, extras={})  # a warm-up round: PKD itself does nothing
    method.begin_round(server)
    assert server.extras == {"begun": 1}


def test_pkd_runs_end_to_end_with_explicit_groups():
    from fedlib.engine import engine

    result = engine.run(pkd_config(groups=[[1, 3], [3, 5, 7]]), use_store=False, progress=False)
    warmup, pkd = result.rounds
    assert "expert_fired_0" not in warmup and warmup["cost_units"] == 1.0
    assert pkd["pkd_groups"] == [[1, 3], [3, 5, 7]]
    for key in ("expert_fired_0", "expert_fired_1"):
        assert 0.0 <= pkd[key] <= 1.0
    assert pkd["cost_units"] >= 1.0 + pkd["pkd_expert_cost"]
    assert pkd["cost_units_total"] == pytest.approx(warmup["cost_units"] + pkd["cost_units"])
    assert len(pkd["pkd_confusion"]) == 10
    assert all(math.isfinite(r["loss"]) for r in result.rounds)


def test_pkd_runs_end_to_end_with_discovered_groups_and_resumes_from_extras():
    import io

    from fedlib.algorithms.base import ClientContext
    from fedlib.engine import engine

    cfg = pkd_config(confusion_ratio=0.9, distance_quantile=1.0, max_groups=1)
    server, algorithm = engine.prepare(cfg)
    metrics = []
    for round_index in range(2):  # warm-up round 0, then discovery + expert + PKD round 1
        server.round = round_index
        metrics.append(engine.run_round(server, algorithm))
    groups = server.extras["pkd_groups"]
    assert len(groups) == 1 and len(groups[0]) >= 2
    assert metrics[1]["pkd_groups"] == groups and "expert_fired_0" in metrics[1]
    expert = algorithm.expert_modules(server)[0]
    assert expert.classifier.out_features == len(groups[0]) and not expert.training
    assert all(torch.isfinite(p).all() for p in server.model.parameters())

    # a checkpoint of server.extras brings the same experts back without retraining them
    buffer = io.BytesIO()
    torch.save(server.extras, buffer)
    buffer.seek(0)
    restored, algorithm2 = engine.prepare(cfg)
    restored.extras, restored.round = torch.load(buffer), 2
    client = restored.data.client(0)
    ctx = ClientContext(0, 2, client.class_counts, client.num_samples, client)
    algorithm2.client_context(restored, ctx)
    x, _ = next(client.eval_batches(8))
    assert torch.allclose(ctx.teachers["pkd_expert_0"](x), expert(x))
    assert restored.extras["pkd_expert_cost"] == server.extras["pkd_expert_cost"]


def test_partial_kd_normalisations_divide_by_batch_or_fired_count():
    from fedlib.algorithms.pkd import expert_assignment, partial_kd_loss

    torch.manual_seed(0)
    student = torch.randn(8, 4)
    labels = torch.tensor([0, 1, 0, 1, 2, 3, 2, 3])
    student[:, :2] = torch.tensor([[-1.0, 2.0], [2.0, -1.0]]).repeat(4, 1)  # rows 0-3 mispredict within {0, 1}
    groups, experts = [[0, 1]], [torch.randn(8, 2)]
    fired = expert_assignment(student, labels, groups)
    count = float(fired.sum())
    assert 0 < count < 8
    per_batch = partial_kd_loss(student, experts, labels, groups, T=5.0, fired=fired)
    per_fired = partial_kd_loss(student, experts, labels, groups, T=5.0, fired=fired, normalise="fired")
    with_t2 = partial_kd_loss(student, experts, labels, groups, T=5.0, fired=fired, normalise="fired", t_squared=True)
    assert torch.allclose(per_fired, per_batch * 8 / count)
    assert torch.allclose(with_t2, per_fired * 25)
    none_fired = torch.zeros_like(fired)
    assert float(partial_kd_loss(student, experts, labels, groups, fired=none_fired, normalise="fired")) == 0.0


def test_the_normalise_argument_keeps_stored_hashes_at_its_default():
    from fedlib.core.config import RunConfig

    base = RunConfig(dataset="synthetic", model="mlp", method="pkd", rounds=21)  # past the 20-round warm-up
    assert "normalise" not in base.hashed_fields()["method_args"]
    assert base.replace(method_args={"normalise": "fired"}).hash() != base.hash()
