"""The exercise checker: the answer key passes, the usual slips fail with a line that says where."""

import runpy
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from fedlib.algorithms import register
from fedlib.errors import FedlibError
from fedlib.reporting.exercises import check_method

ANSWERS = Path(__file__).resolve().parents[3] / "teaching" / "answers"
FEDPROX = runpy.run_path(str(ANSWERS / "fedprox.py"))["MyFedProx"]
FEDVLS = runpy.run_path(str(ANSWERS / "fedvls.py"))["MyFedVLS"]


@register
class DoubledFedProx(FEDPROX):
    """The proximal term without its 1/2."""

    name = "test_doubled_fedprox"

    def penalty(self, model, ctx):
        return 2 * super().penalty(model, ctx)


@register
class CrossEntropyOnly(FEDPROX):
    """No term at all: FedAvg under another name."""

    name = "test_no_prox"

    def penalty(self, model, ctx):
        return None


@register
class FullKL(FEDVLS):
    """The distillation taken over every class instead of the vacant ones."""

    name = "test_full_kl_fedvls"

    def loss(self, out, labels, ctx, teacher_out):
        prior = ctx.class_counts / ctx.class_counts.sum()
        calibrated = F.cross_entropy(out.logits + torch.log(prior), labels)
        teacher = F.softmax(teacher_out["global"].logits, dim=1)
        kl = (teacher * (torch.log(teacher) - F.log_softmax(out.logits, dim=1))).sum(dim=1).mean()
        return calibrated + self.hp["lam"] * kl


@register
class Broken(FEDPROX):
    """Student code that raises."""

    name = "test_broken_fedprox"

    def penalty(self, model, ctx):
        return ctx.extras["no_such_key"]


# The answer key passing is tested where students meet it: tests/notebooks/test_exercises.py.


def test_the_fedvls_answer_fails_against_fedvls_with_suppression():
    """The check can tell the suppression term is missing: it compares the whole objective."""
    check = check_method("my_fedvls", "fedvls", {"lam": 1.0}, rounds=2)
    assert not check.passed


def test_a_forgotten_half_is_named():
    check = check_method("test_doubled_fedprox", "fedprox", {"mu": 1.0})
    assert not check.passed
    assert "a factor 1/2?" in str(check)
    assert not any("round" in line for line in check.lines), "runs compared although the objectives differ"


def test_a_missing_term_is_named():
    check = check_method("test_no_prox", "fedprox", {"mu": 1.0})
    assert not check.passed
    assert "the method's own term is missing" in str(check)


def test_distilling_over_every_class_fails():
    check = check_method("test_full_kl_fedvls", "fedvls", {"lam": 1.0}, reference_args={"suppress": False})
    failed = [line for line in check.lines if line.startswith("FAIL")]
    assert failed and not check.passed


def test_student_errors_become_one_fail_line():
    check = check_method("test_broken_fedprox", "fedprox", {"mu": 1.0})
    assert not check.passed
    assert any("your method raised KeyError" in line for line in check.lines)


def test_an_unregistered_name_is_one_clear_error():
    with pytest.raises(FedlibError, match="method"):
        check_method("nobody_wrote_this", "fedprox")
