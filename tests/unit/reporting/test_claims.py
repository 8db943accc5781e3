"""fedlib.reporting.claims: each kind of claim holds, does not hold, is undecided (the seeds' spread
does not decide) or gets no verdict yet, and a missing or partial number never yields a verdict.
Also the paper's setting strings, read in one place."""

import math

import pandas as pd
import pytest

from fedlib.errors import FedlibError
from fedlib.orchestration import experiments
from fedlib.reporting import claims, intervals
from fedlib.reporting.paper_numbers import load_paper_results, setting_field, setting_values
from fedlib.reporting.tables import DIVERGED, NEVER, NOT_RUN

NAN = float("nan")


def by(values: dict) -> pd.Series:
    """A series of numbers indexed by a knob's values (or labels)."""
    return pd.Series(list(values.values()), index=list(values))


# ---------------------------------------------------------------------- the verdict itself
def test_a_verdict_names_itself_in_the_four_words():
    assert claims.Verdict("c", True).word == claims.HOLDS == "holds"
    assert claims.Verdict("c", False).word == claims.DOES_NOT_HOLD == "does not hold"
    assert claims.Verdict("c", None).word == claims.NO_VERDICT == "no verdict yet"
    assert claims.Verdict("c", None, undecided=True).word == claims.UNDECIDED == "undecided"


def test_text_puts_the_reason_beside_the_claim_and_the_numbers_under_it():
    text = claims.no_verdict("FedLMD beats FedAvg", "a run is missing", "31.00% vs no number").text()
    first, second = text.splitlines()
    assert first == "  no verdict yet  FedLMD beats FedAvg (a run is missing)"
    assert second.strip() == "31.00% vs no number"
    assert second.index("31") == first.index("FedLMD"), "numbers align under the claim"
    assert claims.Verdict("c", True).text() == "  holds           c", "no numbers: one line"


def test_show_prints_the_heading_then_each_verdict(capsys):
    claims.show([claims.Verdict("a", True), claims.Verdict("b", False)], "profile 'smoke':")
    assert capsys.readouterr().out.splitlines() == ["profile 'smoke':", "  holds           a",
                                                    "  does not hold   b"]


# ---------------------------------------------------------------------- one method against another
def test_clearly_separated_seeds_beat():
    verdict = claims.beats("FedAvg beats FedVLS", (95.30, 96.67, 94.15), (89.09, 93.52, 83.07))
    assert verdict.holds is True and verdict.word == claims.HOLDS
    difference = intervals.Difference.of((95.30, 96.67, 94.15), (89.09, 93.52, 83.07))
    assert 0 < difference.low < difference.mean < difference.high
    assert verdict.numbers.endswith(f"{difference.text()}: beats")


def test_reversed_seeds_trail():
    verdict = claims.beats("FedVLS beats FedAvg", (89.09, 93.52, 83.07), (95.30, 96.67, 94.15))
    assert verdict.holds is False and verdict.numbers.endswith("3 seeds each: trails")


def test_overlapping_seeds_are_undecided_and_print_their_interval():
    verdict = claims.beats("c", (72.0, 73.4, 74.1), (73.3, 72.1, 71.5))
    assert verdict.holds is None and verdict.undecided and verdict.word == claims.UNDECIDED
    difference = intervals.Difference.of((72.0, 73.4, 74.1), (73.3, 72.1, 71.5))
    assert difference.low < 0 < difference.high
    assert verdict.numbers == (f"73.17% vs 72.30%; +0.87 points [{difference.low:+.2f}, {difference.high:+.2f}], "
                               "3 seeds each: undecided")


def test_one_seed_each_is_undecided_however_large_the_gap():
    verdict = claims.beats("c", 31.4, 10.3)
    assert verdict.holds is None and verdict.undecided
    assert verdict.numbers == "31.40% vs 10.30%; +21.10 points, one seed: no interval: undecided"
    lopsided = claims.beats("c", [31.4], (10.3, 11.0, 12.0))
    assert lopsided.holds is None and "1 and 3 seeds (one side has one seed: no interval)" in lopsided.numbers


def test_beats_with_lower_is_better_reverses_the_comparison():
    assert claims.beats("closer", (0.20, 0.21), (0.30, 0.31), lower_is_better=True).holds is True
    assert claims.beats("closer", (0.30, 0.31), (0.20, 0.21), lower_is_better=True).holds is False
    assert claims.beats("c", (0.30, 0.31), (0.20, 0.21)).holds is True


def test_identical_seeds_do_not_beat_each_other():
    assert claims.beats("c", (30.3, 30.3), (30.3, 30.3)).holds is None, "a tie is not a win"


def test_the_caller_numbers_keep_the_interval_after_them():
    verdict = claims.beats("c", (2.0, 3.0), (0.0, 1.0), numbers="")
    assert verdict.numbers == "+2.00 points [+1.00, +3.00], 2 seeds each: beats"
    shares = claims.beats("c", (0.5, 0.6), (0.1, 0.2), numbers="share", unit="")
    assert shares.numbers == "share; +0.40 [+0.30, +0.50], 2 seeds each: beats"


@pytest.mark.parametrize("value, rival", [(NAN, 30.0), (30.0, NAN), (None, 30.0)])
def test_beats_gives_no_verdict_when_a_number_is_missing(value, rival):
    verdict = claims.beats("c", value, rival)
    assert verdict.holds is None and verdict.reason == claims.MISSING
    assert "no number" in verdict.numbers


def test_at_least_holds_on_a_tie_and_within_its_tolerance():
    assert claims.at_least("c", (70.0, 70.0), (70.0, 70.0)).holds is True
    assert claims.at_least("c", (69.6, 69.7), (70.0, 70.0), tolerance=0.5).holds is True
    below = claims.at_least("c", (69.3, 69.4), (70.0, 70.0), tolerance=0.5)
    assert below.holds is False and below.numbers.endswith("allowed -0.5: below")
    assert claims.at_least("c", (69.4, 70.4), (70.0, 70.0), tolerance=0.5).undecided
    assert claims.at_least("c", 70.0, 70.0).undecided, "one seed: no interval"
    assert claims.at_least("c", NAN, 70.0).holds is None


def test_within_reads_the_interval_of_the_difference_against_the_tolerance():
    inside = claims.within("c", (75.2, 75.4), (75.7, 75.5), 1.0)
    assert inside.holds is True and inside.numbers.endswith("allowed ±1: within")
    assert claims.within("c", (76.2, 76.4), (75.7, 75.5), 1.0).holds is True, "either side"
    outside = claims.within("c", (73.7, 73.6), (75.7, 75.8), 1.0)
    assert outside.holds is False and outside.numbers.endswith("outside")
    straddling = claims.within("c", (74.0, 75.6), (75.7, 75.7), 1.0)
    assert straddling.undecided, "the interval reaches past the tolerance: undecided"
    assert claims.within("c", 75.2, 75.7, 1.0).undecided, "one seed: no interval"
    assert "allowed ±1" in claims.within("c", 73.7, 75.7, 1.0).numbers
    assert claims.within("c", 73.7, NAN, 1.0).holds is None


# ---------------------------------------------------------------------- a label among others
def seeds(values: dict) -> pd.Series:
    """A series of per-seed tuples indexed by labels, as claims.per_seed gives a column."""
    return pd.Series(list(values.values()), index=list(values), dtype=object)


def test_best_at_holds_when_the_label_beats_every_other():
    values = seeds({"fedavg": (36.1, 36.5), "fedrs": (36.4, 36.0), "fedlmd_tf": (41.7, 41.2)})
    assert claims.best_at("c", values, "fedlmd_tf").holds is True
    assert claims.best_at("c", values, "fedrs").holds is False, "fedlmd_tf beats it"
    close = seeds({"fedavg": (36.1, 36.5), "fedrs": (36.4, 36.0), "fedlmd_tf": (36.0, 36.9)})
    assert claims.best_at("c", close, "fedlmd_tf").undecided


def test_best_at_with_one_seed_is_undecided_even_for_a_clear_leader():
    values = by({"fedavg": 36.1, "fedrs": 36.4, "fedlmd_tf": 41.7})
    verdict = claims.best_at("c", values, "fedlmd_tf")
    assert verdict.holds is None and verdict.undecided and intervals.ONE_SEED in verdict.numbers
    assert claims.best_at("c", by({0.001: 18.0, 1.0: 18.0}), 0.001, strictly=True).undecided


def test_best_at_names_the_rival_that_decides():
    values = seeds({"a": (50.0, 51.0), "wide": (40.0, 70.0), "tight": (55.0, 55.5)})
    verdict = claims.best_at("a leads", values, "a")
    assert verdict.holds is False and "against tight: -4.75 points" in verdict.numbers, "the one it trails"
    leader = claims.best_at("tight leads", values, "tight")
    assert leader.undecided and "against wide:" in leader.numbers


def test_beats_at_compares_two_labels_and_names_one_the_grid_lacks():
    mus = seeds({0.001: (18.0, 18.5), 1.0: (12.0, 12.5)})
    verdict = claims.beats_at("mu = 1 below mu = 0.001", mus, 0.001, 1.0, name=lambda v: f"mu = {v:g}")
    assert verdict.holds is True
    assert verdict.numbers == ("18.25% at mu = 0.001 vs 12.25% at mu = 1; +6.00 points [+5.50, +6.50], "
                               "2 seeds each: beats")
    assert claims.beats_at("c", mus, 1.0, 0.001).holds is False
    lacking = claims.beats_at("c", by({0.001: 18.0, 0.1: 12.0}), 0.001, 1.0, name=lambda v: f"mu = {v:g}")
    assert lacking.holds is None and lacking.reason == "mu = 1 not among the values compared"
    assert claims.beats_at("c", by({0.001: NAN, 1.0: 12.0}), 0.001, 1.0).reason == claims.MISSING
    assert claims.beats_at("c", seeds({0.001: (18.0, NAN), 1.0: (12.0, 1.0)}), 0.001, 1.0).reason == claims.MISSING
    assert claims.beats_at("first above last", mus, 1.0, 1.0).reason == claims.ONE_VALUE, "a grid of one value"


def test_best_at_with_lower_is_better_picks_the_smallest():
    drops = seeds({"fedavg": (1.39, 1.2), "fedlmd": (0.0, 0.1)})
    assert claims.best_at("least drop", drops, "fedlmd", lower_is_better=True).holds is True
    assert claims.best_at("least drop", drops, "fedavg", lower_is_better=True).holds is False


def test_best_at_names_the_rank_and_the_strongest_rival():
    numbers = claims.best_at("c", by({"fedavg": 36.11, "fedrs": 36.39, "fedlmd_tf": 30.28}), "fedlmd_tf").numbers
    assert numbers == ("fedlmd_tf 30.28 (rank 3 of 3); best of the others fedrs 36.39 (-6.11); "
                       "against fedrs: -6.11 points, one seed: no interval: undecided")


def test_best_at_gives_no_verdict_on_a_single_value_an_absent_label_or_a_missing_number():
    assert claims.best_at("c", by({5: 31.0}), 5).reason == claims.ONE_VALUE
    one_of_seeds = claims.best_at("c", seeds({5: (31.0, 32.0)}), 5)
    assert one_of_seeds.reason == claims.ONE_VALUE and one_of_seeds.numbers == "31.50 at 5", "the seeds' mean"
    assert "not among" in claims.best_at("c", by({1: 30.0, 2: 31.0}), 10).reason
    partial = claims.best_at("c", by({"fedavg": NAN, "fedlmd_tf": 41.7}), "fedlmd_tf")
    assert partial.holds is None, "the missing rival could have been the best"


# ---------------------------------------------------------------------- a series over a parameter
def test_falls_by_ends_reads_the_last_points_seeds_against_the_firsts():
    switch = by({0: (31.39, 31.2), 2: (34.17, 34.0), 4: (30.28, 30.1)})
    assert claims.falls("c", switch).holds is True
    assert claims.rises("c", switch).holds is False
    assert "last against first: -1.11 points [" in claims.falls("c", switch).numbers


def test_a_trend_of_one_seed_a_point_is_undecided_by_ends():
    verdict = claims.falls("c", by({0: 31.39, 2: 34.17, 4: 30.28}))
    assert verdict.undecided and "one seed: no interval" in verdict.numbers


def test_a_trend_whose_seeds_overlap_is_undecided():
    assert claims.falls("c", by({0: (31.0, 35.0), 4: (30.0, 34.0)})).undecided


def test_falls_by_steps_needs_the_ends_to_fall_and_no_step_clearly_up():
    up_then_down = by({0: (31.39, 31.3), 2: (34.17, 34.1), 4: (30.28, 30.2)})
    verdict = claims.falls("c", up_then_down, compare="steps")
    assert verdict.holds is False and "1 step(s) the other way" in verdict.numbers
    flat_then_down = by({0: (34.0, 34.1), 2: (34.0, 34.1), 4: (30.0, 30.1)})
    assert claims.falls("c", flat_then_down, compare="steps").holds is True
    assert claims.falls("c", by({0: (30.0, 30.1), 2: (30.0, 30.1)}), compare="steps").undecided, \
        "a flat line does not fall"


def test_trends_read_the_series_in_the_order_of_its_index():
    assert claims.rises("c", by({4: (40.0, 40.1), 0: (30.0, 30.1), 2: (35.0, 35.1)}), compare="steps").holds is True


def test_falls_by_thirds_reads_the_points_of_each_third_as_samples():
    rate = by(dict(enumerate([50.0, 60.0, 55.0, 40.0, 45.0, 44.0])))  # thirds (50, 60) -> (45, 44)
    verdict = claims.falls("c", rate, compare="thirds")
    assert verdict.holds is True and "last third against first third: -10.50 points [" in verdict.numbers
    assert verdict.numbers.endswith("2 points each: falls"), "the samples are the points, not seeds"
    assert claims.falls("c", rate, compare="ends").undecided, "one seed at each end"
    noisy = by(dict(enumerate([50.0, 30.0, 45.0, 44.0, 49.0, 33.0])))  # thirds (50, 30) -> (49, 33)
    assert claims.falls("c", noisy, compare="thirds").undecided


def test_a_trend_gives_no_verdict_on_one_value_or_a_missing_one():
    assert claims.rises("c", by({1.0: 30.0})).reason == claims.ONE_VALUE
    assert claims.falls("c", by({0: 31.0, 2: NAN, 4: 30.0}), compare="steps").holds is None


def test_an_unknown_way_to_read_a_trend_stops_with_one_line():
    with pytest.raises(FedlibError, match="compare"):
        claims.rises("c", by({1: 1.0, 2: 2.0}), compare="slope")


def test_varies_less_compares_each_seeds_spread():
    steady, swinging = by({1: (31.39, 31.0), 2: (31.39, 31.2)}), by({1: (30.28, 30.0), 2: (27.5, 27.0)})
    verdict = claims.varies_less("c", steady, swinging)
    assert verdict.holds is True and verdict.numbers.startswith("spread: 0.10 vs 2.89 points")
    assert "varies less" in verdict.numbers
    assert claims.varies_less("c", swinging, steady).holds is False
    assert claims.varies_less("c", steady, steady).undecided, "a tie is no lead"


def test_varies_less_of_one_seed_is_undecided_and_of_mixed_seed_counts_has_no_verdict():
    assert claims.varies_less("c", by({1: 31.39, 2: 31.39}), by({1: 30.28, 2: 27.5})).undecided
    mixed = claims.varies_less("c", by({1: (31.0, 31.1), 2: 31.0}), by({1: (30.0, 30.1), 2: (20.0, 20.1)}))
    assert mixed.holds is None and "different numbers of seeds" in mixed.reason


def test_varies_less_gives_no_verdict_on_a_grid_of_one_value_or_a_missing_number():
    assert claims.varies_less("c", by({1: 31.0}), by({1: 30.0})).reason == claims.ONE_VALUE
    assert claims.varies_less("c", by({1: 31.0, 2: NAN}), by({1: 30.0, 2: 20.0})).holds is None


# ---------------------------------------------------------------------- several at once
def test_every_fails_on_one_counterexample_even_with_others_open():
    verdict = claims.every("c", [claims.Verdict("a", True), claims.Verdict("b", None), claims.Verdict("d", False)],
                           unit="columns")
    assert verdict.holds is False
    assert verdict.numbers == "holds in 1 of 3 columns, does not hold in 1, no verdict yet in 1"


def test_every_passes_on_the_reason_its_open_parts_share():
    one_value = claims.no_verdict("a", claims.ONE_VALUE)
    verdict = claims.every("c", [one_value, one_value], unit="methods")
    assert verdict.reason == f"no verdict yet in 2 of 2 methods: {claims.ONE_VALUE}"
    mixed = claims.every("c", [one_value, claims.no_verdict("b", claims.MISSING)], unit="methods")
    assert mixed.reason == "no verdict yet in 2 of 2 methods"


def test_every_is_undecided_where_the_rest_hold():
    parts = [claims.Verdict("a", True), claims.Verdict("b", None, undecided=True)]
    verdict = claims.every("c", parts, unit="columns")
    assert verdict.undecided and verdict.numbers == "holds in 1 of 2 columns, undecided in 1"
    assert claims.every("c", [*parts, claims.Verdict("d", None)]).undecided is False, "a missing part: no verdict"
    assert claims.every("c", [*parts, claims.Verdict("d", False)]).holds is False


def test_every_ends_with_the_intervals_of_the_parts_that_decide_it():
    held, open_ = claims.beats("a", (3.0, 4.0), (0.0, 1.0)), claims.beats("b", 1.0, 0.0)
    verdict = claims.every("c", [held, open_], unit="columns")
    assert verdict.numbers == ("holds in 1 of 2 columns, undecided in 1; "
                               "b: +1.00 points, one seed: no interval: undecided")
    failed = claims.beats("d", (0.0, 1.0), (3.0, 4.0))
    assert claims.every("c", [held, open_, failed]).numbers.endswith(
        "; d: -3.00 points [-4.00, -2.00], 2 seeds each: trails")
    assert claims.every("c", [held]).numbers == ("holds in 1 of 1 cases; "
                                                 "a: +3.00 points [+2.00, +4.00], 2 seeds each: beats")


def test_every_gives_no_verdict_while_one_part_is_open_or_none_exists():
    assert claims.every("c", [claims.Verdict("a", True), claims.Verdict("b", None)]).holds is None
    nothing = claims.every("c", [], unit="variants")
    assert nothing.holds is None and nothing.reason == "no variants to compare" and nothing.numbers == ""
    assert claims.every("c", [claims.Verdict("a", True), claims.Verdict("b", True)]).holds is True


def test_complete_cells_blank_the_cells_that_ran_fewer_seeds_than_declared():
    frame = pd.DataFrame({"label": ["fedavg"] * 2 + ["pkd"] * 2, "setting": ["s"] * 4, "seed": [0, 1, 0, 1],
                          "value": [60.0, 62.0, 70.0, NAN], "not_run": [False, False, False, True]})
    mean, _ = experiments.mean_std(frame, "label", "setting", "value")
    assert mean.at["pkd", "s"] == 70.0, "mean_std shows the stored seed's number"
    complete = claims.complete_cells(mean)
    assert complete.at["fedavg", "s"] == 61.0 and math.isnan(complete.at["pkd", "s"])
    assert claims.best_at("c", complete["s"], "pkd").holds is None


def test_per_seed_lays_out_every_seed_in_seed_order_and_blanks_an_incomplete_cell():
    frame = pd.DataFrame({"label": ["fedavg", "fedavg", "pkd", "pkd", "moon", "moon"], "setting": ["s"] * 6,
                          "seed": [1, 0, 0, 1, 0, 1], "value": [62.0, 60.0, 70.0, NAN, 50.0, 51.0],
                          "not_run": [False, False, False, True, False, False],
                          "diverged": [False] * 5 + [True]})
    values = claims.per_seed(frame, "label", "setting", "value")
    assert values.at["fedavg", "s"] == (60.0, 62.0)
    assert pd.isna(values.at["pkd", "s"]) and pd.isna(values.at["moon", "s"])
    assert claims.beats("c", values.at["fedavg", "s"], (50.0, 51.0)).holds is True
    assert claims.best_at("c", values["s"], "fedavg").reason == claims.MISSING
    alone = claims.per_seed(frame, "label", None, "value")
    assert list(alone.columns) == ["value"] and alone.at["fedavg", "value"] == (60.0, 62.0)


# ---------------------------------------------------------------------- the cost to reach a target
def cost_rows(*values, not_run=(), diverged=()) -> pd.DataFrame:
    """One cell's rows of tables.cost_frame: one cost per seed (inf: never reached)."""
    return pd.DataFrame({"seed": range(len(values)), "value": values,
                         "not_run": [s in not_run for s in range(len(values))],
                         "diverged": [s in diverged for s in range(len(values))]})


def test_reach_summarises_the_seeds_of_a_cell_in_words():
    assert claims.Reach.of(cost_rows(3.0, 5.0)).text() == "4.0 U"
    assert claims.Reach.of(cost_rows(3.0, math.inf)).text() == "3.0 U where reached, in 1 of 2 seeds"
    assert claims.Reach.of(cost_rows(math.inf)).text() == NEVER
    assert claims.Reach.of(cost_rows(NAN, 3.0, diverged={0})).text() == DIVERGED
    assert claims.Reach.of(cost_rows(NAN, not_run={0})).text() == NOT_RUN
    assert claims.Reach.of(cost_rows(3.0, NAN, not_run={1})).text() == "3.0 U (1 of 2 seeds run)"


def test_cheaper_to_reach_compares_the_seeds_costs_where_every_seed_reaches_the_target():
    pkd, fedavg = claims.Reach.of(cost_rows(3.7, 3.9)), claims.Reach.of(cost_rows(3.0, 3.1))
    cheaper = claims.cheaper_to_reach("FedAvg needs less than PKD", fedavg, pkd)
    assert cheaper.holds is True and cheaper.numbers.endswith("2 seeds each: costs less")
    assert claims.cheaper_to_reach("PKD needs less than FedAvg", pkd, fedavg).holds is False
    assert claims.cheaper_to_reach("c", pkd, pkd).undecided, "the same cost is not less"
    one_seed = claims.cheaper_to_reach("c", claims.Reach.of(cost_rows(3.0)), claims.Reach.of(cost_rows(3.7)))
    assert one_seed.undecided and "one seed: no interval" in one_seed.numbers


def test_cheaper_to_reach_when_only_one_side_reaches_the_target():
    reached, never = claims.Reach.of(cost_rows(40.0)), claims.Reach.of(cost_rows(math.inf))
    assert claims.cheaper_to_reach("c", reached, never).holds is True
    assert claims.cheaper_to_reach("c", never, reached).holds is False


def test_cheaper_to_reach_gives_no_verdict_when_neither_reaches_some_seeds_miss_or_a_run_is_missing():
    never = claims.Reach.of(cost_rows(math.inf))
    assert claims.cheaper_to_reach("c", never, never).reason == "neither reaches it within the budget"
    some = claims.Reach.of(cost_rows(3.0, math.inf))
    assert claims.cheaper_to_reach("c", some, claims.Reach.of(cost_rows(5.0, 6.0))).holds is None
    partial = claims.Reach.of(cost_rows(3.0, NAN, not_run={1}))
    assert claims.cheaper_to_reach("c", partial, claims.Reach.of(cost_rows(5.0, 6.0))).holds is None
    diverged = claims.Reach.of(cost_rows(NAN, diverged={0}))
    assert claims.cheaper_to_reach("c", claims.Reach.of(cost_rows(5.0)), diverged).holds is None


def test_reaches_holds_for_every_seed_and_its_opposite_for_none():
    every_seed, no_seed = claims.Reach.of(cost_rows(3.0, 4.0)), claims.Reach.of(cost_rows(math.inf, math.inf))
    assert claims.reaches("c", every_seed).holds is True and claims.reaches("c", no_seed).holds is False
    assert claims.reaches("c", no_seed, expected=False).holds is True
    assert claims.reaches("c", claims.Reach.of(cost_rows(3.0, math.inf))).reason == "reached in 1 of 2 seeds"
    assert claims.reaches("c", claims.Reach.of(cost_rows(NAN, not_run={0}))).holds is None


# ---------------------------------------------------------------------- our numbers in words
def test_numbers_in_words():
    assert claims.values_text(by({1: 31.39, 2: NAN})) == "31.39% at 1, no number at 2"
    assert claims.values_text(by({0.001: 18.0}), missing="diverged") == "18.00% at 0.001"
    assert claims.number_text(NAN, missing="diverged") == "diverged"
    assert claims.names_text(["Shirt", "Coat"]) == "'Shirt', 'Coat'"
    assert claims.names_text(list("abcdefghi")) == "9 classes tied"


# ---------------------------------------------------------------------- the paper's setting strings
def test_setting_field_reads_one_key_of_each_setting():
    settings = ["partition=dirichlet;beta=0.5;lam=0.1", "partition=dirichlet;beta=0.5"]
    assert setting_field(settings, "lam") == ["0.1", None]


def test_setting_values_keeps_the_order_and_the_matching_settings_only():
    settings = ["p=balanced;metric=cost_u;target_min=40", "p=balanced;metric=cost_u;target_min=50",
                "p=balanced;metric=min", "p=balanced;metric=cost_u;target_min=40"]
    assert setting_values(settings, "target_min", metric="cost_u") == ["40", "50"]
    assert setting_values(settings, "target_min", metric="min") == []


def test_setting_values_reads_pkd_table_9s_target_columns():
    paper = load_paper_results(paper="pkd", table=9)
    assert setting_values(paper["setting"], "target_min", metric="cost_u") == ["40", "50", "60", "65", "70"]


def test_a_setting_that_is_not_key_value_pairs_stops_with_one_line():
    with pytest.raises(FedlibError, match="key=value"):
        setting_field(["partition=dirichlet;beta"], "beta")
