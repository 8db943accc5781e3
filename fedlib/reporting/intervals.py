"""How far apart are two methods, given their seeds? The difference of means and its interval.

A claim that one method beats another (:mod:`fedlib.reporting.claims`) reads every seed's value of
each: :func:`seed_values` takes a number as one seed's value and a sequence as one value per seed.
:class:`Difference` is the difference of the two means with a 95 % percentile bootstrap interval
(:func:`bootstrap_interval`: each side's seeds resampled with replacement, 10,000 times, from a
generator with a fixed seed, so the same numbers give the same interval on every call), and says
which way it points: :data:`BEATS` when the interval lies wholly on the better side of zero,
:data:`TRAILS` when wholly on the worse side, :data:`UNDECIDED` otherwise.

A side with one seed has no spread to resample, so there is no interval and the outcome is
undecided ("one seed: no interval"): one run of each method says nothing of how far a second seed
would move it. With two or three seeds a side the interval is the bootstrap's, which understates
the uncertainty of so few values; at two seeds each it reaches from the worst pairing of seeds to
the best, so "beats" then means every seed of one above every seed of the other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fedlib.errors import FedlibError

BEATS, TRAILS, UNDECIDED = "beats", "trails", "undecided"  # how one method's seeds stand against another's
LEVEL, RESAMPLES = 0.95, 10_000  # the interval's coverage and the bootstrap's number of resamples
ONE_SEED = "one seed: no interval"


def seed_values(value) -> np.ndarray:
    """``value`` as an array of per-seed values: a number is one seed's, a sequence (list, tuple,
    array, Series) holds one per seed; None is one missing value."""
    if isinstance(value, pd.Series):
        value = value.to_numpy()
    if isinstance(value, (list, tuple, np.ndarray)):
        return np.asarray(value, dtype=float).ravel()
    return np.array([float("nan") if value is None else float(value)])


def seed_mean(value) -> float:
    """The mean of ``value``'s seeds (NaN when one is missing, or there are none)."""
    values = seed_values(value)
    return float(values.mean()) if len(values) and not np.isnan(values).any() else float("nan")


def bootstrap_interval(ours: np.ndarray, theirs: np.ndarray, *, level: float = LEVEL,
                       resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """The percentile bootstrap interval of mean(ours) - mean(theirs) at coverage ``level``: each
    side's values resampled with replacement, independently, ``resamples`` times, from a generator
    seeded with ``seed`` (the same values give the same interval on every call)."""
    if not 0 < level < 1:
        raise FedlibError(f"level={level!r}: an interval's coverage lies strictly between 0 and 1 (0.95)")
    if resamples < 1:
        raise FedlibError(f"resamples={resamples!r}: the bootstrap needs at least one resample (10000)")
    rng = np.random.default_rng(seed)
    ours_means = ours[rng.integers(0, len(ours), (resamples, len(ours)))].mean(axis=1)
    theirs_means = theirs[rng.integers(0, len(theirs), (resamples, len(theirs)))].mean(axis=1)
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(ours_means - theirs_means, [tail, 100 - tail])
    return float(low), float(high)


@dataclass(frozen=True)
class Difference:
    """One method's seeds against another's: the difference of their means, its bootstrap interval
    (NaN bounds where a side has one seed) and the seeds on each side."""

    mean: float
    low: float
    high: float
    seeds: tuple[int, int]
    lower_is_better: bool = False

    @classmethod
    def of(cls, value, rival, *, lower_is_better: bool = False, level: float = LEVEL,
           resamples: int = RESAMPLES, seed: int = 0) -> "Difference":
        """``value``'s seeds minus ``rival``'s (see :func:`seed_values`); no interval with one seed a side."""
        ours, theirs = seed_values(value), seed_values(rival)
        mean, sizes = seed_mean(ours) - seed_mean(theirs), (len(ours), len(theirs))
        if min(sizes) < 2:
            return cls(mean, float("nan"), float("nan"), sizes, lower_is_better)
        low, high = bootstrap_interval(ours, theirs, level=level, resamples=resamples, seed=seed)
        return cls(mean, low, high, sizes, lower_is_better)

    def side(self, margin: float = 0.0) -> str:
        """:data:`BEATS` when the interval lies wholly on the better side of ``margin`` (above it;
        below it with ``lower_is_better``), :data:`TRAILS` when wholly on the worse side, else
        (or without an interval) :data:`UNDECIDED`."""
        if math.isnan(self.low):
            return UNDECIDED
        sign = -1 if self.lower_is_better else 1
        low, high = sorted((sign * self.low, sign * self.high))
        return BEATS if low > sign * margin else TRAILS if high < sign * margin else UNDECIDED

    @property
    def outcome(self) -> str:
        """:meth:`side` of zero: beats, trails or undecided."""
        return self.side()

    def text(self, unit: str = "points", digits: int = 2, samples: str = "seeds") -> str:
        """'+1.35 points [-0.40, +2.90], 3 seeds each', or '+1.35 points, one seed: no interval'
        (``samples`` names what each side's values are when they are not seeds: "rounds")."""
        ours, theirs = self.seeds
        head = f"{self.mean:+.{digits}f} {unit}".rstrip()
        sizes = f"{ours} {samples} each" if ours == theirs else f"{ours} and {theirs} {samples}"
        if ours == theirs == 1:
            return f"{head}, {ONE_SEED}"
        if math.isnan(self.low):
            return f"{head}, {sizes} (one side has {ONE_SEED})"
        return f"{head} [{self.low:+.{digits}f}, {self.high:+.{digits}f}], {sizes}"
