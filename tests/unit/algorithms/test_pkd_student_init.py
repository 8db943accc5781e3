"""PKD's ``student_init``: "warm" (the default, the paper's text) keeps the warmed-up global model for
the KD stage and leaves every stored hash as it was; "fresh" restarts the KD stage from the run's
initial weights once the experts are trained (the reading the paper's cost study fits)."""

import torch

from fedlib.core.config import RunConfig
from fedlib.engine import engine
from tests.helpers import tiny_config

PKD = dict(method="pkd", rounds=3, method_args={"warmup_rounds": 1, "expert_rounds": 1, "groups": [[0, 1]]})


class GlobalAtRoundStart:
    """Copies the global model as each round's clients are sampled."""

    def __init__(self):
        self.states = {}

    def on_round_start(self, server, clients):
        self.states[server.round] = {k: v.clone() for k, v in server.model.state_dict().items()}


def _run(student_init):
    cfg = tiny_config(PKD, method_args={**PKD["method_args"], "student_init": student_init})
    recorder = GlobalAtRoundStart()
    result = engine.run(cfg, hooks=[recorder], use_store=False, progress=False)
    initial = engine.prepare(cfg)[0].model.state_dict()
    same = {r: all(torch.equal(s[k], initial[k]) for k in initial) for r, s in recorder.states.items()}
    return result, same


def test_fresh_restarts_the_kd_stage_from_the_initial_weights_and_warm_does_not():
    fresh, fresh_same = _run("fresh")
    warm, warm_same = _run("warm")
    assert fresh_same == {0: True, 1: True, 2: False}  # round 1 is the first KD round
    assert warm_same == {0: True, 1: False, 2: False}
    assert fresh.rounds[0]["accuracy"] == warm.rounds[0]["accuracy"]  # the warm-up is shared
    assert fresh.rounds[-1]["accuracy"] != warm.rounds[-1]["accuracy"]


def test_the_default_is_warm_and_leaves_the_hash_unchanged():
    cfg = tiny_config(PKD)
    assert cfg.resolved_method_args()["student_init"] == "warm"
    explicit = tiny_config(PKD, method_args={**PKD["method_args"], "student_init": "warm"})
    assert explicit.hash() == cfg.hash()
    assert tiny_config(PKD, method_args={**PKD["method_args"], "student_init": "fresh"}).hash() != cfg.hash()


def test_an_unknown_student_init_is_a_one_line_error():
    import pytest

    from fedlib.errors import FedlibError

    with pytest.raises(FedlibError, match="student_init"):
        RunConfig(**{**tiny_config(PKD).to_dict(), "method_args": {"student_init": "cold"}})
