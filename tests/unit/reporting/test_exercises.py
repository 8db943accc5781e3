"""The exercise checker: the answer key passes, the usual slips fail with a line that says where."""

import runpy
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from fedlib.core.registry import method_names, register, unregister
from fedlib.errors import FedlibError
from fedlib.reporting.exercises import check_method

ANSWERS = Path(__file__).resolve().parents[3] / "teaching" / "answers"


@pytest.fixture(scope="module", autouse=True)
def student_methods():
    """The answers and the slips below registered for this module only (other tests list the
    registered methods)."""
    before = set(method_names())
    answers = {name: runpy.run_path(str(ANSWERS / f"{name}.py")) for name in ("fedprox", "fedvls")}
    for make in (_doubled, _no_term, _full_kl, _broken):
        register(make(answers))
    yield
    unregister(*(set(method_names()) - before))
    assert set(method_names()) == before


def _doubled(answers):
    return type("DoubledFedProx", (answers["fedprox"]["MyFedProx"],), {
        "name": "test_doubled_fedprox", "__doc__": "The proximal term without its 1/2.",
        "penalty": lambda self, model, ctx: 2 * answers["fedprox"]["MyFedProx"].penalty(self, model, ctx)})


def _no_term(answers):
    return type("CrossEntropyOnly", (answers["fedprox"]["MyFedProx"],), {
        "name": "test_no_prox", "__doc__": "No term at all: FedAvg under another name.",
        "penalty": lambda self, model, ctx: None})


def _full_kl(answers):
    return type("FullKL", (answers["fedvls"]["MyFedVLS"],), {
        "name": "test_full_kl_fedvls", "__doc__": "Distillation over every class, not the vacant ones.",
        "loss": _full_kl_loss})


def _full_kl_loss(self, out, labels, ctx, teacher_out):
    prior = ctx.class_counts / ctx.class_counts.sum()
    calibrated = F.cross_entropy(out.logits + torch.log(prior), labels)
    teacher = F.softmax(teacher_out["global"].logits, dim=1)
    kl = (teacher * (torch.log(teacher) - F.log_softmax(out.logits, dim=1))).sum(dim=1).mean()
    return calibrated + self.hp["lam"] * kl


def _broken(answers):
    return type("Broken", (answers["fedprox"]["MyFedProx"],), {
        "name": "test_broken_fedprox", "__doc__": "Student code that raises.",
        "penalty": lambda self, model, ctx: ctx.extras["no_such_key"]})


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
