"""fedlib.reporting.intervals: the difference of two methods' seed means and its percentile bootstrap
interval, checked against intervals worked out by hand; the same on every call; none with one seed."""

import math

import pytest

from fedlib.errors import FedlibError
from fedlib.reporting import intervals


def test_the_interval_at_two_seeds_each_runs_from_the_worst_pairing_to_the_best():
    difference = intervals.Difference.of((1.0, 3.0), (0.0, 2.0))  # each extreme resample: 1/16 > 2.5 %
    assert (difference.mean, difference.low, difference.high) == (1.0, -1.0, 3.0)
    assert difference.seeds == (2, 2)


def test_the_interval_is_the_bootstraps_percentiles_not_the_range():
    # mean of 4 draws from (1, 2, 3, 4): P(<= 1.25) = 5/256 < 2.5 % < P(<= 1.5) = 15/256, symmetric above
    difference = intervals.Difference.of((1.0, 2.0, 3.0, 4.0), (0.0, 0.0, 0.0, 0.0))
    assert (difference.low, difference.high) == (1.5, 3.5)
    narrow = intervals.Difference.of((1.0, 2.0, 3.0, 4.0), (0.0, 0.0, 0.0, 0.0), level=0.5)
    assert difference.low < narrow.low <= narrow.high < difference.high


def test_the_interval_is_the_same_on_every_call_and_moves_with_the_generators_seed():
    ours = (95.30, 96.67, 94.15, 95.90, 96.10, 94.80, 95.50, 96.30)  # eight seeds: the percentiles interpolate
    theirs = (89.09, 94.52, 83.07, 90.20, 91.70, 86.40, 88.80, 92.00)
    first, second = intervals.Difference.of(ours, theirs), intervals.Difference.of(ours, theirs)
    assert first == second
    others = {intervals.Difference.of(ours, theirs, seed=s).low for s in range(1, 6)}
    assert others != {first.low}, "the interval comes from the resamples, not a formula"


def test_one_seed_a_side_has_no_interval():
    assert math.isnan(intervals.Difference.of(31.4, 30.3).low)
    assert math.isnan(intervals.Difference.of([31.4], (30.3, 31.0, 32.0)).high)
    assert intervals.Difference.of(31.4, 30.3).outcome == intervals.UNDECIDED


def test_bad_interval_settings_stop_with_one_line():
    for kwargs in ({"level": 1.0}, {"level": 0.0}, {"resamples": 0}):
        with pytest.raises(FedlibError, match="level|resample") as error:
            intervals.Difference.of((1.0, 2.0), (0.0, 1.0), **kwargs)
        assert "\n" not in str(error.value)


def test_side_reads_the_interval_against_a_margin_in_the_better_direction():
    higher = intervals.Difference(1.0, 0.5, 1.5, (3, 3))
    assert (higher.side(), higher.side(0.5), higher.side(2.0)) == (intervals.BEATS, intervals.UNDECIDED,
                                                                   intervals.TRAILS)
    lower = intervals.Difference(1.0, 0.5, 1.5, (3, 3), lower_is_better=True)
    assert (lower.side(), lower.side(2.0)) == (intervals.TRAILS, intervals.BEATS)


def test_text_prints_the_difference_its_interval_and_the_seeds():
    assert intervals.Difference(1.35, -0.4, 2.9, (3, 3)).text() == "+1.35 points [-0.40, +2.90], 3 seeds each"
    assert intervals.Difference(-0.5, -0.9, -0.1, (3, 2)).text("", 1) == "-0.5 [-0.9, -0.1], 3 and 2 seeds"
    assert intervals.Difference.of(31.4, 30.3).text() == "+1.10 points, one seed: no interval"


def test_seed_values_read_a_number_as_one_seed_and_a_sequence_as_one_per_seed():
    assert list(intervals.seed_values(3.0)) == [3.0]
    assert list(intervals.seed_values((1, 2, 3))) == [1.0, 2.0, 3.0]
    assert math.isnan(intervals.seed_mean(None)) and math.isnan(intervals.seed_mean((1.0, float("nan"))))
    assert intervals.seed_mean([1.0, 2.0]) == 1.5
