"""fedlib.algorithms._common: the class masks of the loss methods, and the received global model as
a frozen teacher with its ``teacher_mode``.

``teacher_mode`` of FedNTD, FedLMD and FedLMD-Tf: the received global model distils in eval mode
(BatchNorm's running statistics, the default) or, with ``teacher_mode="train"``, on each batch's
own statistics, as the FedVLS repository's FedNTD client does. Only BatchNorm tells the two
apart; the default stays out of the config hash, and every backend either computes the train mode
exactly or falls back to the sequential path with a warning."""

import math
import warnings
from types import SimpleNamespace

import pytest
import torch

from fedlib.algorithms import _common
from fedlib.algorithms.base import ClientContext, Outputs, run_teachers
from fedlib.core.config import RunConfig
from fedlib.core.registry import build_algorithm
from fedlib.engine.backends import stacked
from fedlib.errors import FedlibError
from tests.unit.algorithms.helpers import fake_server, t
from tests.helpers import one_round


# ---------------------------------------------------------------------- class masks
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


# ---------------------------------------------------------------------- the global teacher
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


# ---------------------------------------------------------------------- teacher_mode
# fedlmd_tf distils from the global model only from its switch round on
TEACHER_METHODS = [("fedntd", {}), ("fedlmd", {}), ("fedlmd_tf", {"switch_round": 0})]
CLASS_COUNTS = torch.tensor([6.0, 1.0, 0.0, 3.0])


def distillation(method: str, args: dict, batchnorm: bool, mode: str) -> SimpleNamespace:
    """The teacher a client gets, its logits on one batch and the client's loss on that batch."""
    algorithm = build_algorithm(method, {**args, "teacher_mode": mode})
    ctx = ClientContext(client_id=0, round=0, class_counts=CLASS_COUNTS, num_samples=10, data=None)
    algorithm.client_context(fake_server(batchnorm=batchnorm, seed=0), ctx)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(16, 3, generator=generator)
    labels = torch.tensor([0, 0, 0, 1, 3, 3, 0, 3] * 2)
    teacher_out = run_teachers(ctx.teachers, x)
    student = Outputs(x, torch.randn(16, 4, generator=generator))
    loss = algorithm.loss(student, labels, ctx, teacher_out)
    return SimpleNamespace(teacher=ctx.teachers["global"], logits=teacher_out["global"].logits, loss=float(loss))


@pytest.mark.parametrize("method, args", TEACHER_METHODS)
def test_train_mode_changes_the_teacher_only_when_it_has_batchnorm(method, args):
    bn = {mode: distillation(method, args, True, mode) for mode in ("eval", "train")}
    assert bn["train"].teacher.training and not bn["eval"].teacher.training
    assert not torch.allclose(bn["train"].logits, bn["eval"].logits, atol=1e-3)
    assert bn["train"].loss != pytest.approx(bn["eval"].loss, abs=1e-6)
    # the train-mode logits are the global model's on the batch's own statistics
    x = torch.randn(16, 3, generator=torch.Generator().manual_seed(1))  # the batch distillation() used
    assert torch.allclose(bn["train"].logits, fake_server(batchnorm=True, seed=0).model.train()(x))
    plain = {mode: distillation(method, args, False, mode) for mode in ("eval", "train")}
    assert torch.equal(plain["train"].logits, plain["eval"].logits)
    assert plain["train"].loss == plain["eval"].loss


@pytest.mark.parametrize("method", ["fedntd", "fedlmd", "fedlmd_tf", "fedlmd+fedprox"])
def test_default_teacher_mode_stays_out_of_the_hash(method):
    def make(**args):
        return RunConfig(dataset="synthetic", model="mlp", rounds=3, method=method, method_args=args)

    default = make()
    assert "teacher_mode" not in default.hashed_method_args()
    assert make(teacher_mode="eval").hash() == default.hash()
    train = make(teacher_mode="train")
    assert train.hashed_method_args()["teacher_mode"] == "train" and train.hash() != default.hash()


def test_unknown_teacher_mode_fails_at_config_time():
    with pytest.raises(FedlibError, match="teacher_mode='auto'"):
        RunConfig(dataset="synthetic", model="mlp", method="fedntd", method_args={"teacher_mode": "auto"})


# ---------------------------------------------------------------------- teacher_mode on the backends
def bn_config(method: str, backend: str = "sequential") -> RunConfig:
    """ResNet-8 (BatchNorm) on 4 unequal clients, one round: the teacher's mode matters here."""
    return RunConfig(dataset="synthetic", model="resnet8", partition="dirichlet", beta=0.3, clients=4,
                     max_train_samples=160, max_test_samples=40, rounds=1, local_epochs=1, batch_size=16,
                     lr=0.01, momentum=0.5, seed=3, device="cpu", backend=backend, method=method,
                     method_args={"teacher_mode": "train"})


@pytest.mark.parametrize("method", ["fedntd", "fedlmd"])
def test_stacked_path_runs_the_train_mode_teacher_on_each_clients_batch_statistics(method, torch_threads):
    torch_threads(1)
    reference, _ = one_round(bn_config(method))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no fallback: the stacked path handles it
        state, _ = one_round(bn_config(method, "stacked"))
    for key, value in reference.items():
        if value.is_floating_point():
            assert torch.allclose(value, state[key], atol=1e-4, rtol=0), key
        else:
            assert torch.equal(value, state[key]), key


def test_threads_path_falls_back_for_a_train_mode_batchnorm_teacher(torch_threads):
    torch_threads(2)  # two workers, so the threads path would otherwise run
    stacked._WARNED.clear()
    reference, _ = one_round(bn_config("fedntd"))
    with pytest.warns(UserWarning, match="BatchNorm statistics"):
        state, _ = one_round(bn_config("fedntd", "threads"))
    assert all(torch.equal(value, state[key]) for key, value in reference.items())
