"""The course's exercises: check a method a student wrote against fedlib's own implementation.

A student writes a method through the method contract (:mod:`fedlib.algorithms.base`) in a notebook
cell and registers it under a name of their own. :func:`check_method` then answers two questions,
each on scikit-learn's bundled 8x8 digits (offline, seconds on a CPU):

1. **The same objective?** On a few clients, from a global model moved off its starting point so
   that terms which vanish at the start (a proximal term, a distillation towards the same model)
   do not, the student's ``objective`` (loss plus penalty) on one local batch and its gradient
   are compared with the reference method's.
2. **The same training?** Both methods train a short federated run from the same seed on the
   sequential path, nothing stored; their test accuracy and test loss are compared round by round.

Nothing is stored or served: a student's method changes with every edit, so its runs must never
come back from a results store under an old edit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from fedlib.algorithms.client_training import client_setup
from fedlib.core.config import RunConfig
from fedlib.core.registry import build_algorithm, get_class
from fedlib.engine import engine
from fedlib.errors import FedlibError, one_line

OBJECTIVE_RTOL = 1e-4  # the same formula summed in another order differs by float rounding only
LOSS_ATOL = 1e-3  # test loss after a few rounds of the same training
ACCURACY_ATOL = 0.005  # two test images of 360


@dataclass
class ExerciseCheck:
    """What :func:`check_method` found: one line per comparison, and whether every one passed."""

    student: str
    reference: str
    lines: list[str] = field(default_factory=list)
    passed: bool = True

    def add(self, ok: bool, text: str) -> None:
        """Record one comparison."""
        self.passed = self.passed and ok
        self.lines.append(f"{'PASS' if ok else 'FAIL'}  {text}")

    def __str__(self) -> str:
        verdict = ("your method computes what fedlib's does" if self.passed
                   else "your method differs from fedlib's: read the FAIL lines")
        return "\n".join([*self.lines, f"=> {self.student} against {self.reference}: {verdict}"])


def exercise_config(method: str, method_args: dict[str, Any] | None = None, *, rounds: int = 3,
                    seed: int = 0, beta: float = 0.3) -> RunConfig:
    """The run an exercise checks on: digits, an MLP, 5 clients at Dir(``beta``), sequential path."""
    return RunConfig(dataset="digits", model="mlp", clients=5, partition="dirichlet", beta=beta,
                     rounds=rounds, local_epochs=1, batch_size=32, lr=0.05, momentum=0.0, seed=seed,
                     method=method, method_args=dict(method_args or {}), backend="sequential", device="cpu")


def check_method(student: str, reference: str, method_args: dict[str, Any] | None = None, *,
                 reference_args: dict[str, Any] | None = None, rounds: int = 3,
                 clients: tuple[int, ...] = (0, 1, 2)) -> ExerciseCheck:
    """Compare the registered method ``student`` with fedlib's ``reference``, both under
    ``method_args`` and the reference also under ``reference_args`` (switches the exercise leaves
    out, e.g. FedVLS's ``suppress=False``); see the module docstring. Returns the report; a
    mismatch, or an error in the student's code, is a FAIL line, never an exception."""
    for name in (student, reference):
        get_class(name)  # one line naming the methods there are, for a name not registered
    report = ExerciseCheck(student, reference)
    args = {student: dict(method_args or {}), reference: {**(method_args or {}), **(reference_args or {})}}
    try:
        _compare_objectives(report, student, reference, args, clients)
        if report.passed:
            _compare_runs(report, student, reference, args, rounds)
        else:
            report.lines.append("(the short runs are skipped until the objectives agree)")
    except NotImplementedError as missing:
        report.add(False, f"not written yet: {missing or 'a hook still raises NotImplementedError'}")
    except FedlibError:
        raise
    except Exception as error:  # the student's code raised: say where, in one line
        report.add(False, f"your method raised {one_line(error, None)}")
    return report


def _moved_global_model(server, seed: int) -> None:
    """Move the global model off its initial weights (deterministically), in place."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in server.model.parameters():
            noise = torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype)
            parameter.add_(0.1 * noise.to(parameter.device))


def _objective_and_grad(server, algorithm, client_id: int) -> tuple[float, torch.Tensor]:
    """One client's objective on its first local batch, from a local model moved off the
    global one, and the gradient's flattened value."""
    ctx, batches = client_setup(server, algorithm, client_id, server.cfg.lr)
    model = server.local_model()
    with torch.no_grad():  # a local model away from the global one: penalties are non-zero
        for index, parameter in enumerate(model.parameters()):
            parameter.add_(0.05 * torch.sin(torch.arange(parameter.numel(), dtype=parameter.dtype) + index)
                           .reshape(parameter.shape))
    model.train()
    x, y = next(iter(batches))
    model.zero_grad(set_to_none=True)
    value = algorithm.objective(model, x, y, ctx)
    value.backward()
    grad = torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])
    return float(value.detach()), grad


def _compare_objectives(report: ExerciseCheck, student: str, reference: str,
                        args: dict[str, dict[str, Any]], clients: tuple[int, ...]) -> None:
    server, reference_method = engine.prepare(exercise_config(reference, args[reference]))
    student_method = build_algorithm(student, args[student], server.cfg.dataset)
    plain = build_algorithm("fedavg")
    _moved_global_model(server, seed=1)
    for client_id in clients:
        theirs, their_grad = _objective_and_grad(server, reference_method, client_id)
        yours, your_grad = _objective_and_grad(server, student_method, client_id)
        cross_entropy, _ = _objective_and_grad(server, plain, client_id)
        close = math.isclose(yours, theirs, rel_tol=OBJECTIVE_RTOL, abs_tol=1e-6)
        report.add(close, f"client {client_id}: objective on one batch, yours {yours:.6f}, fedlib's {theirs:.6f}"
                   + ("" if close else _ratio_hint(yours - cross_entropy, theirs - cross_entropy)))
        same_grad = your_grad.shape == their_grad.shape and torch.allclose(your_grad, their_grad, rtol=1e-3, atol=1e-6)
        gap = float((your_grad - their_grad).abs().max()) if your_grad.shape == their_grad.shape else math.inf
        report.add(same_grad, f"client {client_id}: gradient of the objective, largest difference {gap:.2e}")


def _ratio_hint(yours: float, theirs: float) -> str:
    """A nudge from the two objectives' parts beyond plain cross-entropy (FedAvg's objective):
    a missing term, a forgotten 1/2, a flipped sign."""
    if math.isclose(theirs, 0.0, abs_tol=1e-7):
        return " (fedlib's objective is plain cross-entropy here: yours adds to it)"
    if math.isclose(yours, 0.0, abs_tol=1e-7):
        return " (yours is plain cross-entropy: the method's own term is missing)"
    ratio = yours / theirs
    for factor, hint in ((2.0, "twice fedlib's: a factor 1/2?"), (0.5, "half fedlib's: a factor 1/2 too many?"),
                         (-1.0, "fedlib's with the sign flipped")):
        if math.isclose(ratio, factor, rel_tol=1e-3):
            return f" (the part beyond cross-entropy is {hint})"
    return f" (the part beyond cross-entropy: yours {yours:.6f}, fedlib's {theirs:.6f})"


def _compare_runs(report: ExerciseCheck, student: str, reference: str, args: dict[str, dict[str, Any]],
                  rounds: int) -> None:
    runs = {name: engine.run(exercise_config(name, args[name], rounds=rounds), progress=False, use_store=False)
            for name in (reference, student)}
    for theirs, yours in zip(runs[reference].rounds, runs[student].rounds):
        if "accuracy" not in theirs:
            continue
        accuracy_gap = abs(yours["accuracy"] - theirs["accuracy"])
        loss_gap = abs(yours["loss"] - theirs["loss"])
        ok = accuracy_gap <= ACCURACY_ATOL and loss_gap <= LOSS_ATOL
        report.add(ok, f"round {theirs['round']}: test accuracy yours {100 * yours['accuracy']:.2f} %, "
                       f"fedlib's {100 * theirs['accuracy']:.2f} %; test loss {yours['loss']:.4f} / {theirs['loss']:.4f}")
