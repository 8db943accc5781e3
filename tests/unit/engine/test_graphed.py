"""The graphed backend: every registered method gives the sequential path's numbers, or says why not.

On the CPU there are no CUDA graphs; the tests put :class:`EagerCapture` in the backend's table for
"cpu", so a round runs the whole graphed path (warm-up, static buffers, one kept step replayed per
full batch, eager partial batches), and must give the sequential path's state bit for bit. On a
CUDA GPU (marked ``cuda``) the real capture runs, and must agree to float rounding and replay.
"""

import warnings

import pytest

from fedlib.engine.backends import step_graph
from fedlib.core.config import RunConfig
from fedlib.engine import engine
from fedlib.engine.backends import graphed, stacked
from tests.unit.engine import test_backend_equivalence as equivalence
from tests.unit.engine.test_backend_equivalence import CASES, TOLERANCE, resynced_rounds, sequential_rounds

pytestmark = pytest.mark.usefixtures("two_threads")
# methods whose local step replaces a ctx.extras value every batch: trained eagerly, with the warning
REPLACES_CONTEXT = {"pkd"}
IDS = [f"{m}{'-' + str(a) if a else ''}" for m, a in CASES]


def config(method: str, args: dict, backend: str, device: str = "cpu") -> RunConfig:
    """The equivalence test's run (two rounds: PKD, FedConcat and FedLMD-Tf reach their second stage
    in round 2) with two local epochs: a client of 48 samples or more has three full batches of 16
    an epoch, so its second epoch's full batches are replayed after three warm-up steps (the tests
    check that some steps were replayed), between eager partial batches. The rate is lower than there: at 0.05 with three epochs FedVLS's
    paper variant, whose L_logit has no lower bound (fedlib/algorithms/fedvls.py), turns NaN on every path."""
    return equivalence.config(method, args, backend, device).replace(local_epochs=2, lr=0.02)


@pytest.fixture
def cpu_capture(monkeypatch):
    monkeypatch.setitem(graphed.CAPTURES, "cpu", lambda device: step_graph.EagerCapture())


@pytest.fixture
def counted_replays(monkeypatch):
    made = []
    original = graphed.graphed_steps

    def counting(*args, **kwargs):
        made.append(original(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(graphed, "graphed_steps", counting)
    return made


def graphed_rounds(method: str, args: dict, device: str, reference) -> tuple[list[float], list[str]]:
    """Each round's largest difference from the sequential path (started from its state) and the
    fallback warnings."""
    differences, fallbacks, _ = resynced_rounds(config(method, args, "graphed", device), reference)
    return differences, fallbacks


@pytest.mark.parametrize("method, args", CASES, ids=IDS)
def test_graphed_path_is_the_sequential_path_bit_for_bit_on_the_cpu(method, args, cpu_capture, counted_replays):
    reference = sequential_rounds(config(method, args, "sequential"))
    differences, fallbacks = graphed_rounds(method, args, "cpu", reference)
    assert differences == [0.0, 0.0], f"graphed differs from sequential by {differences}"
    server, algorithm = engine.prepare(config(method, args, "sequential"))
    declared = stacked.unsupported_reason(algorithm)
    refused = {steps.refusal for steps in counted_replays if steps.refusal}
    if declared is not None:
        assert fallbacks and not counted_replays, "a method that declares a fallback trains on the sequential path"
    elif method.split("+")[0] in REPLACES_CONTEXT:
        assert refused and all("ctx.extras" in reason for reason in refused), refused
        assert fallbacks
    else:
        assert not refused and not fallbacks, f"{method} refused: {refused or fallbacks}"
        assert sum(steps.replays for steps in counted_replays) > 0, "some steps were replayed"


def test_without_a_capture_for_the_device_the_round_trains_sequentially_with_one_warning():
    stacked._WARNED.clear()
    reference = sequential_rounds(config("fedavg", {}, "sequential"))
    differences, fallbacks = graphed_rounds("fedavg", {}, "cpu", reference)
    assert differences == [0.0, 0.0]
    assert len(fallbacks) == 1 and "CUDA graphs need a CUDA device (this run is on cpu)" in fallbacks[0]


def test_bf16_autocast_is_not_captured(cpu_capture):
    stacked._WARNED.clear()
    server, algorithm = engine.prepare(config("fedavg", {}, "graphed").replace(precision="bf16"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        engine.run_round(server, algorithm)
    assert any("bf16 autocast" in str(w.message) for w in caught)


def test_graphed_is_a_backend_that_shares_the_sequential_runs_hash():
    assert RunConfig(backend="graphed").hash() == RunConfig(backend="sequential").hash()


@pytest.mark.cuda
@pytest.mark.parametrize("method, args", CASES, ids=IDS)
def test_cuda_graphs_give_the_sequential_numbers_to_float_rounding(method, args, counted_replays):
    reference = sequential_rounds(config(method, args, "sequential", "cuda"))
    differences, fallbacks = graphed_rounds(method, args, "cuda", reference)
    assert max(differences) <= TOLERANCE, f"graphed is {max(differences):.2e} off the sequential path on CUDA"
    server, algorithm = engine.prepare(config(method, args, "sequential", "cuda"))
    if stacked.unsupported_reason(algorithm) is None and method.split("+")[0] not in REPLACES_CONTEXT:
        assert not fallbacks, fallbacks
        assert sum(steps.replays for steps in counted_replays) > 0, "the captured graph was replayed"
