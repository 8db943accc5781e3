"""Each method declares how a one-round run still reaches its later rounds' path (Algorithm.short_run);
the dry run asks the method, never a table of method names of its own."""

import inspect

import pytest

from fedlib.core.config import RunConfig
from fedlib.core.registry import method_class
from fedlib.orchestration import dry_run


def test_fedavg_and_a_plain_method_change_nothing():
    assert method_class("fedavg").short_run({}, 1) == ({}, 1, "")
    assert method_class("fedprox").short_run({"mu": 0.1}, 1) == ({}, 1, "")


@pytest.mark.parametrize("method", ["moon", "fedgf", "fedcurv", "fedproto"])
def test_methods_whose_state_starts_after_round_zero_ask_for_two_rounds(method):
    changes, rounds, note = method_class(method).short_run({}, 1)
    assert (changes, rounds) == ({}, 2) and note.startswith(f"{method}: 2 rounds")


def test_pkd_skips_its_warm_up_so_round_zero_distils():
    changes, rounds, _ = method_class("pkd").short_run({"warmup_rounds": 20}, 1)
    assert changes == {"warmup_rounds": 0, "expert_rounds": 1} and rounds == 1


def test_fedlmd_tf_switches_at_round_zero_only_when_it_switches_at_all():
    assert method_class("fedlmd_tf").short_run({}, 1) == ({}, 1, "")
    changes, _, note = method_class("fedlmd_tf").short_run({"switch_round": 50}, 1)
    assert changes == {"switch_round": 0} and "switch_round 0" in note


def test_a_composition_joins_its_parts_short_runs():
    changes, rounds, note = method_class("fedconcat+moon").short_run({}, 1)
    assert changes == {"encoder_rounds": 1} and rounds == 2
    assert "fedconcat" in note and "moon" in note


def test_the_dry_run_copy_takes_the_methods_changes():
    cfg = RunConfig(method="pkd", method_args={"warmup_rounds": 20, "expert_rounds": 25}, rounds=120)
    dry, note = dry_run.dry_run_config(cfg)
    assert dry.method_args["warmup_rounds"] == 0 and dry.rounds == 1 and note.startswith("pkd")


def test_the_dry_run_names_no_method():
    source = inspect.getsource(dry_run)
    assert not any(f'"{name}"' in source for name in ("pkd", "moon", "fedconcat", "fedlmd_tf", "fedgf"))


def test_pkd_says_when_a_short_run_never_fired_its_kd_loss():
    assert "did not fire" in method_class("pkd").short_run_missed([{"pkd_groups": []}])
    assert method_class("pkd").short_run_missed([{"pkd_groups": [[0, 6]]}]) == ""
    assert method_class("fedavg").short_run_missed([{}]) == ""
