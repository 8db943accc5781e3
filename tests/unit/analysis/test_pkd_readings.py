"""The KD-stage readings grid (notebooks/pkd_kd_stage_readings): its runs at the paper profile are
PKD Table 1's stored runs and the three readings, and a longer run's first rounds are what a
shorter run gives, which is what lets the notebook read Table 1's 300-round runs over 120 rounds."""

import pytest

from fedlib.engine import engine
from fedlib.paper.grids import pkd
from tests.helpers import notebook_parameters, tiny_config


def test_the_paper_profile_reuses_table1s_stored_runs_and_adds_the_three_readings(tmp_path):
    runs = pkd.readings_runs(notebook_parameters("pkd_kd_stage_readings", "paper", tmp_path))
    hashes = {label: cfg.hash() for (label, seed), cfg in runs.items() if seed == 0}
    assert hashes["fedavg"] == "8f104f610687"  # PKD Table 1, FedAvg, Fashion-MNIST, 10 clients, seed 0
    assert hashes["warm batch T^2"] == "7de30090475e"  # PKD Table 1, PKD (the paper profile's reading)
    assert hashes["(a) fresh batch T^2"] == "aa36e4e00b96"
    # the profile's confirm_readings: reading (a) and FedAvg again at seed 1, the committed 120-round runs
    assert runs[("fedavg", 1)].hash() == "a922354a51ee" and runs[("(a) fresh batch T^2", 1)].hash() == "5d6f76781081"
    readings = {label: cfg for (label, seed), cfg in runs.items() if label.startswith("(") and seed == 0}
    assert {cfg.rounds for cfg in readings.values()} == {120}
    assert readings["(b) fresh fired T^2"].resolved_method_args()["normalise"] == "fired"
    assert readings["(c) warm fired T^2"].resolved_method_args()["student_init"] == "warm"


def test_confirm_readings_add_fedavg_and_the_reading_at_the_confirm_seed(tmp_path):
    params = {**notebook_parameters("pkd_kd_stage_readings", "paper", tmp_path), "confirm_readings": ["(b) fresh fired T^2"]}
    keys = set(pkd.readings_runs(params))
    assert ("fedavg", 1) in keys and ("(b) fresh fired T^2", 1) in keys and ("(a) fresh batch T^2", 1) not in keys


@pytest.mark.parametrize("method_args", [None, {"warmup_rounds": 1, "expert_rounds": 1, "groups": [[0, 1]],
                                                "t_squared": True}])
def test_a_longer_run_starts_with_the_rounds_of_a_shorter_one(method_args):
    preset = {"method": "pkd", "method_args": method_args} if method_args else {}
    short = engine.run(tiny_config(preset, rounds=3), use_store=False, progress=False)
    long = engine.run(tiny_config(preset, rounds=5), use_store=False, progress=False)
    fields = ("accuracy", "loss", "class_accuracy")
    assert [[r[f] for f in fields] for r in long.rounds[:3]] == [[r[f] for f in fields] for r in short.rounds]
    assert long.rounds[4]["accuracy"] != short.rounds[2]["accuracy"] or long.rounds[4]["loss"] != short.rounds[2]["loss"]


# ---------------------------------------------------------------------- the readouts and the rule
import math  # noqa: E402
from types import SimpleNamespace  # noqa: E402

from fedlib.analysis import pkd_readings  # noqa: E402
from fedlib.errors import FedlibError  # noqa: E402


def _result(shirt_by_round, seed=0, fired=None, **summary):
    """A stored run's shape: rounds with class accuracies (class 1 is the focus) and firing rates."""
    rounds = []
    for r, shirt in enumerate(shirt_by_round):
        entry = {"round": r, "class_accuracy": [0.9, shirt]}
        if fired and r in fired:
            entry.update({"pkd_groups": [[0, 1], [1]], "expert_fired_0": fired[r][0], "expert_fired_1": fired[r][1]})
        rounds.append(entry)
    config = SimpleNamespace(seed=seed, hash=lambda: "abc")
    return SimpleNamespace(config=config, rounds=rounds, summary=summary, class_names=["a", "b"])


def test_the_gain_is_the_focus_class_window_mean_minus_fedavgs():
    fedavg, pkd = _result([0.5, 0.6, 0.7, 0.7]), _result([0.5, 0.6, 0.8, 0.9])
    assert pkd_readings.window_mean(pkd, 1, [2, 3]) == pytest.approx(85.0)
    assert pkd_readings.focus_gain(pkd, fedavg, 1, [2, 3]) == pytest.approx(15.0)


def test_a_window_past_the_run_is_an_error_not_a_shorter_mean():
    with pytest.raises(FedlibError, match="round.s. 5 "):
        pkd_readings.window_mean(_result([0.5, 0.6, 0.7, 0.7]), 1, [3, 4])


def test_a_gain_against_another_seed_is_refused_and_a_diverged_run_has_none():
    with pytest.raises(FedlibError, match="same seed"):
        pkd_readings.focus_gain(_result([0.5], seed=1), _result([0.5]), 1, [0])
    assert math.isnan(pkd_readings.window_mean(_result([0.5], diverged=True), 1, [0]))


def test_firing_shape_sums_the_experts_and_finds_the_peak():
    shape = pkd_readings.firing_shape(_result([0.5] * 4, fired={1: (0.01, 0.01), 2: (0.03, 0.02), 3: (0.01, 0.0)}))
    assert (shape.first, shape.peak, shape.peak_round, shape.last) == (0.02, 0.05, 3, 0.01)
    assert shape.rises and shape.rises_then_falls
    falling = pkd_readings.firing_shape(_result([0.5] * 3, fired={1: (0.05, 0.0), 2: (0.01, 0.0)}))
    assert not falling.rises
    assert pkd_readings.firing_shape(_result([0.5] * 3)) is None


FRESH, WARM = ["(a)", "(b)"], ["(c)"]


@pytest.mark.parametrize("gains, rises, expected", [
    ({"(a)": 5.0, "(b)": 0.0, "(c)": 0.0}, {"(a)": True}, "reading 1"),
    ({"(a)": 5.0, "(b)": 0.0, "(c)": 0.0}, {"(a)": False}, "undecided"),  # a gain, but not the paper's firing curve
    ({"(a)": 0.5, "(b)": -1.0, "(c)": 4.5}, {}, "reading 3"),
    ({"(a)": 4.5, "(b)": 0.0, "(c)": 4.5}, {"(a)": False}, "undecided"),  # the gain is not only in (c)
    ({"(a)": 1.4, "(b)": -1.5, "(c)": 0.2}, {}, "reading 2"),
    ({"(a)": -3.0, "(b)": 0.0, "(c)": 0.0}, {}, "undecided"),
    ({"(a)": 1.0, "(b)": float("nan"), "(c)": 0.0}, {}, "no verdict yet: (b)"),
])
def test_the_verdict_follows_the_rule_stated_before_the_runs(gains, rises, expected):
    assert pkd_readings.verdict(gains, rises, FRESH, WARM).startswith(expected)


def test_the_window_spread_is_the_focus_class_standard_deviation():
    fedavg = _result([0.1, 0.70, 0.74, 0.72])
    assert pkd_readings.window_spread(fedavg, 1, [1, 2, 3]) == pytest.approx(2.0)
    assert math.isnan(pkd_readings.window_spread(fedavg, 1, [3]))


def test_a_second_seed_says_whether_the_sign_held_and_the_gain_left_the_noise():
    held = pkd_readings.confirmation("(a)", -1.3, -0.4, (0, 1), spreads=(2.0, 1.5))
    assert "-1.30 points at seed 0, -0.40 at seed 1: the sign holds; both within their seed's spread, 2.00 and 1.50" in held
    flipped = pkd_readings.confirmation("(a)", -1.3, 4.5, (0, 1), spreads=(2.0, 2.0))
    assert "the sign flips; not both within" in flipped
    assert "seed 1 not run yet" in pkd_readings.confirmation("(a)", -1.3, math.nan, (0, 1), spreads=(2.0, 2.0))


def test_each_seeds_gain_is_read_against_its_own_fedavg_spread():
    # within seed 0's spread (2.0) but not seed 1's (0.3): a shared spread would call both within
    assert "not both within" in pkd_readings.confirmation("(a)", 1.0, 1.0, (0, 1), spreads=(2.0, 0.3))
    assert "both within" in pkd_readings.confirmation("(a)", 1.0, 1.0, (0, 1), spreads=(2.0, 1.0))
    unknown = pkd_readings.confirmation("(a)", 1.0, 1.0, (0, 1), spreads=(2.0, math.nan))
    assert "no within-verdict" in unknown and "within their" not in unknown
