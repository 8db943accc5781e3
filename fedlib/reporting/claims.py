"""Does a paper's claim hold in our runs? One verdict per claim, with our numbers behind it.

A notebook states each claim in words, hands over the numbers its runs gave, and prints the
verdicts; it holds no comparison logic of its own::

    verdicts = [claims.beats("FedLMD beats FedAvg", ours["fedlmd"], ours["fedavg"]),
                claims.falls("accuracy falls as the switch comes later", by_switch, compare="steps")]
    claims.show(verdicts, "profile 'quick': does each claim hold in our runs?")

A :class:`Verdict` says :data:`HOLDS`, :data:`DOES_NOT_HOLD`, :data:`UNDECIDED` (every number is
there, but the seeds' spread does not decide) or :data:`NO_VERDICT` ("no verdict yet", with a
one-line reason). Verdicts are never guessed: a missing number (NaN: a run diverged, is in no
store, or a cell ran fewer seeds than declared, see :func:`complete_cells` and :func:`per_seed`)
gives no verdict, and so does a grid too small to show what the claim is about (one value of a knob).

A comparison of two methods (:func:`beats`, :func:`beats_at`, :func:`at_least`, :func:`best_at`)
reads every seed's value: a number stands for one seed, a sequence (or a cell of :func:`per_seed`)
for one value per seed. Their difference and its bootstrap interval are a
:class:`fedlib.reporting.intervals.Difference`: the claim holds when the interval lies wholly on the
better side of zero (the method *beats* its rival), does not hold when it lies wholly on the worse
side (it *trails*), and is undecided otherwise, and always with one seed a side ("one seed: no
interval"). The printed verdict carries the interval: "+1.35 points [-0.40, +2.90], 3 seeds each:
undecided".

The checks, each a short function returning a Verdict:

- :func:`beats`, :func:`at_least` -- one method's seeds against another's (:class:`Difference`);
- :func:`within`       -- one method's seeds within a tolerance of another's;
- :func:`beats_at`     -- one label of a series against another (two values of a knob);
- :func:`best_at`      -- a label leads a series: it beats every other label;
- :func:`rises`, :func:`falls` -- a series over a parameter, read step by step, end to end or
  first third against last third, each change from its interval;
- :func:`varies_less`  -- a smaller spread over a grid than a rival's, seed by seed;
- :func:`every`        -- a claim made of several (every column, every method);
- :func:`cheaper_to_reach`, :func:`reaches` -- the cost to reach a target (PKD Tables 9-10),
  from the seeds of a cell summarised by :class:`Reach`.

Our numbers in words: :func:`number_text`, :func:`values_text`, :func:`label_text`, :func:`names_text`;
every seed's value per cell of a results frame: :func:`per_seed`.

At about 520 lines it stays one module: every check is a short function from numbers to the same
:class:`Verdict`, read the same way (an interval, then holds, does not hold or undecided), and a
notebook reaches all of them as ``claims.<check>``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from fedlib.errors import one_of
from fedlib.orchestration import experiments
from fedlib.reporting.intervals import BEATS, TRAILS, UNDECIDED, Difference, seed_mean, seed_values
from fedlib.reporting.tables import DIVERGED, NEVER, NOT_RUN

HOLDS, DOES_NOT_HOLD, NO_VERDICT = "holds", "does not hold", "no verdict yet"
MISSING = "a number is missing: not in this profile, diverged, in no store, or fewer seeds than declared"
ONE_VALUE = "one value only: nothing to compare"
TRENDS = {"steps": "every step", "ends": "the last value against the first",
          "thirds": "the mean of the last third against the first third"}


# ---------------------------------------------------------------------- the verdict
@dataclass(frozen=True)
class Verdict:
    """A paper's claim in words, whether it holds in our runs (None: undecided, or no verdict yet),
    the numbers behind it, and why there is no verdict where there is none."""

    claim: str
    holds: bool | None
    numbers: str = ""
    reason: str = ""
    undecided: bool = False  # with holds None: every number is there, the seeds' spread does not decide
    interval: str = ""  # a comparison's: the difference, its interval and seeds, and which way it points

    @property
    def word(self) -> str:
        """:data:`HOLDS`, :data:`DOES_NOT_HOLD`, :data:`UNDECIDED` or :data:`NO_VERDICT`."""
        if self.holds is None:
            return UNDECIDED if self.undecided else NO_VERDICT
        return HOLDS if self.holds else DOES_NOT_HOLD

    def text(self) -> str:
        """The verdict and the claim (and the reason for no verdict) on one line, our numbers below."""
        width = len(NO_VERDICT)
        line = f"  {self.word:<{width}}  {self.claim}" + (f" ({self.reason})" if self.reason else "")
        return line + (f"\n  {'':<{width}}  {self.numbers}" if self.numbers else "")


def no_verdict(claim: str, reason: str, numbers: str = "") -> Verdict:
    """A claim our runs cannot judge yet, and why in one line."""
    return Verdict(claim, None, numbers, reason)


def show(verdicts: Iterable[Verdict], heading: str | None = None) -> None:
    """Print ``heading`` (if any), then every verdict's :meth:`Verdict.text`."""
    if heading:
        print(heading)
    for verdict in verdicts:
        print(verdict.text())


def _missing(*values) -> bool:
    """True when any value is None or NaN; a series or a sequence of seeds' values counts when any
    of its entries does, or when it is empty."""
    for value in values:
        if isinstance(value, pd.Series):
            if any(_missing(entry) for entry in value):
                return True
        elif isinstance(value, (list, tuple, np.ndarray)):
            if len(value) == 0 or np.isnan(np.asarray(value, dtype=float)).any():
                return True
        elif value is None or pd.isna(value):
            return True
    return False


def _difference_unit(unit: str) -> str:
    """The unit of a difference: percentages differ by points."""
    return "points" if unit == "%" else unit


def _joined(*parts: str) -> str:
    return "; ".join(part for part in parts if part)


def _compared(claim: str, numbers: str, interval: str, holds: bool | None) -> Verdict:
    """A comparison's verdict (``holds`` None: undecided): the caller's numbers, then the interval."""
    return Verdict(claim, holds, _joined(numbers, interval), undecided=holds is None, interval=interval)


# ---------------------------------------------------------------------- one method against another
def beats(claim: str, value: float | Sequence[float], rival: float | Sequence[float], *, lower_is_better: bool = False,
          numbers: str | None = None, unit: str = "%", digits: int = 2) -> Verdict:
    """Holds when ``value`` beats ``rival`` (higher; lower with ``lower_is_better``): the bootstrap
    interval of the difference of their seeds' means (:class:`Difference`) lies wholly on the
    better side of zero. Does not hold when it lies wholly on the worse side; undecided when it
    holds zero or a side has one seed (a number is one seed's value: pass every seed's values, a
    sequence or a :func:`per_seed` cell, for an interval). The numbers end with the interval, in
    ``unit`` ("%": points) to ``digits`` decimals."""
    if numbers is None:
        numbers = f"{number_text(seed_mean(value), unit, digits)} vs {number_text(seed_mean(rival), unit, digits)}"
    if _missing(value, rival):
        return no_verdict(claim, MISSING, numbers)
    difference = Difference.of(value, rival, lower_is_better=lower_is_better)
    outcome = difference.outcome
    interval = f"{difference.text(_difference_unit(unit), digits)}: {outcome}"
    return _compared(claim, numbers, interval, None if outcome == UNDECIDED else outcome == BEATS)


def at_least(claim: str, value: float | Sequence[float], reference: float | Sequence[float], *, tolerance: float = 0.0,
             numbers: str | None = None, unit: str = "%") -> Verdict:
    """Holds when ``value`` is shown no more than ``tolerance`` below ``reference``: the bootstrap
    interval of the difference (:class:`Difference`) lies wholly at or above ``-tolerance``. Does
    not hold when it lies wholly below; undecided otherwise, and with one seed a side."""
    if numbers is None:
        numbers = f"{number_text(seed_mean(value), unit)} vs {number_text(seed_mean(reference), unit)}"
    if _missing(value, reference):
        return no_verdict(claim, MISSING, numbers)
    difference = Difference.of(value, reference)
    above = not math.isnan(difference.low) and difference.low >= -tolerance
    outcome = "not below" if above else "below" if difference.side(-tolerance) == TRAILS else UNDECIDED
    allowed = f", allowed -{tolerance:g}" if tolerance else ""
    interval = f"{difference.text(_difference_unit(unit))}{allowed}: {outcome}"
    return _compared(claim, numbers, interval, None if outcome == UNDECIDED else above)


def within(claim: str, value: float | Sequence[float], reference: float | Sequence[float], tolerance: float, *,
           numbers: str | None = None, unit: str = "%") -> Verdict:
    """Holds when ``value`` lies within ``tolerance`` of ``reference``, either side: the bootstrap
    interval of their difference (:class:`Difference`) lies wholly inside ±``tolerance``. Does not
    hold when it lies wholly outside, above or below; undecided otherwise, and with one seed a side."""
    if numbers is None:
        gap = ("" if _missing(value, reference)
               else f" ({seed_mean(value) - seed_mean(reference):+.2f}, allowed ±{tolerance:g})")
        numbers = f"{number_text(value, unit)} vs {number_text(reference, unit)}{gap}"
    if _missing(value, reference):
        return no_verdict(claim, MISSING, numbers)
    difference = Difference.of(value, reference)
    if math.isnan(difference.low):
        outcome = UNDECIDED
    elif -tolerance <= difference.low and difference.high <= tolerance:
        outcome = "within"
    elif difference.low > tolerance or difference.high < -tolerance:
        outcome = "outside"
    else:
        outcome = UNDECIDED
    interval = f"{difference.text(_difference_unit(unit))}, allowed ±{tolerance:g}: {outcome}"
    return _compared(claim, numbers, interval, None if outcome == UNDECIDED else outcome == "within")


# ---------------------------------------------------------------------- a label among others
def beats_at(claim: str, values: pd.Series, label, rival, *, lower_is_better: bool = False,
             numbers: str | None = None, name: Callable | None = None, unit: str = "%") -> Verdict:
    """:func:`beats` for two labels of ``values`` (two values of a knob, two methods; each entry
    one seed's value or every seed's, as :func:`per_seed` gives them); no verdict when either
    label is not among ``values``, or the two are one label (a grid of one value)."""
    name = name or label_text
    absent = [name(key) for key in (label, rival) if key not in values.index]
    if absent:
        return no_verdict(claim, f"{' and '.join(absent)} not among the values compared", numbers or "")
    if label == rival:
        return no_verdict(claim, ONE_VALUE, numbers or "")
    if numbers is None:
        numbers = (f"{number_text(seed_mean(values[label]), unit)} at {name(label)} vs "
                   f"{number_text(seed_mean(values[rival]), unit)} at {name(rival)}")
    return beats(claim, values[label], values[rival], lower_is_better=lower_is_better, numbers=numbers, unit=unit)


def best_at(claim: str, values: pd.Series, label, *, lower_is_better: bool = False, strictly: bool = False,
            numbers: str | None = None, name: Callable | None = None) -> Verdict:
    """Holds when ``label`` leads ``values`` (each entry one seed's value or every seed's, as
    :func:`per_seed` gives them): it beats every other label (:func:`beats`: higher, or lower with
    ``lower_is_better``, by an interval clear of zero). Does not hold when another label beats it;
    undecided otherwise. A lead read from the seeds' intervals is never a tie, so ``strictly``
    (kept for its callers) changes nothing. No verdict with fewer than two values, a ``label``
    that is not among them, or a value missing: the lead over the values present could be wrong."""
    name = name or label_text
    if len(values) < 2:
        return no_verdict(claim, ONE_VALUE, values_text(values, "", name=name) if numbers is None else numbers)
    if label not in values.index:
        return no_verdict(claim, f"{name(label)} not among the values compared", numbers or "")
    means = values.map(seed_mean)
    if numbers is None:
        numbers = _lead_text(means, label, lower_is_better, name)
    if _missing(values):
        return no_verdict(claim, MISSING, numbers)
    against = {other: Difference.of(values[label], values[other], lower_is_better=lower_is_better)
               for other in values.index if other != label}
    rival = _decisive_rival(against, means, lower_is_better)
    outcome = against[rival].outcome
    interval = f"against {name(rival)}: {against[rival].text()}: {outcome}"
    return _compared(claim, numbers, interval, None if outcome == UNDECIDED else outcome == BEATS)


def _decisive_rival(against: dict, means: pd.Series, lower_is_better: bool):
    """The label whose comparison decides a lead: the strongest (by mean) of those the leader
    trails, else of those it neither beats nor trails, else of all (it beats every one)."""
    for outcome in (TRAILS, UNDECIDED, BEATS):
        group = [other for other, difference in against.items() if difference.outcome == outcome]
        if group:
            strength = means[group] * (-1 if lower_is_better else 1)
            return strength.idxmax()
    raise AssertionError("no rival to compare")  # unreachable: best_at checks for two values


def _lead_text(values: pd.Series, label, lower_is_better: bool, name: Callable) -> str:
    """'FedLMD-Tf 41.67 (rank 1 of 4); best of the others FedRS 36.39 (+5.28)'."""
    sign = -1 if lower_is_better else 1
    others = values.drop(label)
    rival = (sign * others).idxmax() if others.notna().any() else None
    text = f"{name(label)} {number_text(values[label], '')}"
    if not _missing(values[label]):
        text += f" (rank {int((sign * values > sign * values[label]).sum()) + 1} of {len(values)})"
    if rival is None:
        return text
    gap = "" if _missing(values[label]) else f" ({values[label] - values[rival]:+.2f})"
    return f"{text}; best of the others {name(rival)} {number_text(values[rival], '')}{gap}"


# ---------------------------------------------------------------------- a series over a parameter
def rises(claim: str, values: pd.Series, *, compare: str = "ends", numbers: str | None = None,
          unit: str = "%") -> Verdict:
    """Holds when ``values``, read in the order of their index, go up (see :func:`falls`)."""
    return _trend(claim, values, +1, compare, numbers, unit)


def falls(claim: str, values: pd.Series, *, compare: str = "ends", numbers: str | None = None,
          unit: str = "%") -> Verdict:
    """Holds when ``values``, read in the order of their index, go down. Each entry is one seed's
    value or every seed's (:func:`per_seed`); a change is read from the bootstrap interval of its
    difference (:class:`Difference`), as :func:`beats` reads a lead. ``compare``:

    - "ends": the last point's seeds against the first's;
    - "thirds": every value of the last third of the points against every value of the first third
      (with one seed a point, the interval comes from the points' spread within each third);
    - "steps": the ends fall, and no step's interval lies wholly on the rising side.

    Holds when the interval lies wholly on the falling side, does not hold when it lies wholly on
    the other side (or, for "steps", some step does); undecided otherwise, and with one value a
    side. No verdict with fewer than two points or a value missing."""
    return _trend(claim, values, -1, compare, numbers, unit)


def _trend(claim: str, values: pd.Series, sign: int, compare: str, numbers: str | None, unit: str) -> Verdict:
    if compare not in TRENDS:
        raise one_of("compare", compare, TRENDS)
    values = values.sort_index()
    numbers = values_text(values, unit) if numbers is None else numbers
    if len(values) < 2:
        return no_verdict(claim, ONE_VALUE, numbers)
    if _missing(values):
        return no_verdict(claim, MISSING, numbers)
    points = [seed_values(value) for value in values]
    third = max(1, len(points) // 3) if compare == "thirds" else 1
    late, early = np.concatenate(points[-third:]), np.concatenate(points[:third])
    change = Difference.of(late, early, lower_is_better=sign < 0)
    outcome = change.outcome
    against = 0
    if compare == "steps":
        steps = [Difference.of(after, before, lower_is_better=sign < 0) for before, after in zip(points, points[1:])]
        against = sum(step.outcome == TRAILS for step in steps)
        if against:
            outcome = TRAILS
    direction = "rise" if sign > 0 else "fall"
    verb = {BEATS: f"{direction}s", TRAILS: f"does not {direction}", UNDECIDED: UNDECIDED}[outcome]
    read = {"ends": "last against first", "thirds": "last third against first third",
            "steps": "last against first"}[compare]
    steps_text = f", {against} step(s) the other way" if against else ""
    samples = "seeds" if any(len(point) > 1 for point in points) else "points"  # thirds of one seed a point
    interval = f"{read}: {change.text(_difference_unit(unit), samples=samples)}{steps_text}: {verb}"
    return _compared(claim, numbers, interval, None if outcome == UNDECIDED else outcome == BEATS)


def varies_less(claim: str, values: pd.Series, rival: pd.Series, *, numbers: str | None = None) -> Verdict:
    """Holds when ``values`` vary less over a grid than ``rival``: each seed's spread (max - min over
    the grid's points; entries one seed's value or every seed's, in the same seed order at every
    point) is a sample, and the bootstrap interval of the difference of the two sides' spreads
    (:class:`Difference`) lies wholly below zero. Does not hold when it lies wholly above;
    undecided otherwise, and with one seed a side. No verdict with fewer than two points on either
    side, a value missing, or points with different numbers of seeds."""
    if numbers is None:
        numbers = (f"spread: {number_text(spread(values.map(seed_mean)), '')} vs "
                   f"{number_text(spread(rival.map(seed_mean)), '')} points")
    if min(len(values), len(rival)) < 2:
        return no_verdict(claim, ONE_VALUE, numbers)
    if _missing(values, rival):
        return no_verdict(claim, MISSING, numbers)
    ours, theirs = _seed_spreads(values), _seed_spreads(rival)
    if ours is None or theirs is None:
        return no_verdict(claim, "the points ran different numbers of seeds", numbers)
    difference = Difference.of(ours, theirs, lower_is_better=True)
    outcome = difference.outcome
    verb = {BEATS: "varies less", TRAILS: "varies more", UNDECIDED: UNDECIDED}[outcome]
    interval = f"spread difference {difference.text()}: {verb}"
    return _compared(claim, numbers, interval, None if outcome == UNDECIDED else outcome == BEATS)


def _seed_spreads(values: pd.Series) -> np.ndarray | None:
    """Each seed's max - min over the points of ``values`` (None when the points' seed counts differ)."""
    curves = [seed_values(value) for value in values]
    if len({len(curve) for curve in curves}) != 1:
        return None
    stacked = np.vstack(curves)  # points x seeds
    return stacked.max(axis=0) - stacked.min(axis=0)


def spread(values: pd.Series) -> float:
    """max - min of ``values`` (NaN when one is missing; 0 for a single value)."""
    if _missing(values) or len(values) == 0:
        return float("nan")
    return float(values.max() - values.min())


# ---------------------------------------------------------------------- several at once
def every(claim: str, verdicts: Sequence[Verdict], *, numbers: str | None = None, unit: str = "cases") -> Verdict:
    """A claim made of ``verdicts`` (one per column, method, ...): it does not hold where one of
    them does not, holds where all of them do, has no verdict while one has none (or there are
    none), and is undecided where the rest hold and some are undecided. The numbers end with the
    intervals of the parts that decide it (those that do not hold, else the undecided ones, else all)."""
    if not verdicts:
        return no_verdict(claim, f"no {unit} to compare", numbers or "")
    failed = sum(v.holds is False for v in verdicts)
    undecided = sum(v.holds is None and v.undecided for v in verdicts)
    open_ = sum(v.holds is None and not v.undecided for v in verdicts)
    held = len(verdicts) - failed - undecided - open_
    counts = f"holds in {held} of {len(verdicts)} {unit}" + (f", does not hold in {failed}" if failed else "") \
        + (f", {UNDECIDED} in {undecided}" if undecided else "") + (f", no verdict yet in {open_}" if open_ else "")
    numbers = counts if numbers is None else numbers
    if failed:
        return Verdict(claim, False, _joined(numbers, _intervals(v for v in verdicts if v.holds is False)))
    if open_:
        reasons = {v.reason for v in verdicts if v.holds is None and not v.undecided}
        why = f": {reasons.pop()}" if len(reasons) == 1 else ""
        return no_verdict(claim, f"no verdict yet in {open_} of {len(verdicts)} {unit}{why}", numbers)
    if undecided:
        return Verdict(claim, None, _joined(numbers, _intervals(v for v in verdicts if v.undecided)), undecided=True)
    return Verdict(claim, True, _joined(numbers, _intervals(verdicts)))


def _intervals(verdicts: Iterable[Verdict]) -> str:
    """'base: +0.05 points, one seed: no interval: undecided; ...' for the comparisons among ``verdicts``."""
    return "; ".join(f"{v.claim}: {v.interval}" for v in verdicts if v.interval)


def complete_cells(mean: pd.DataFrame) -> pd.DataFrame:
    """A :func:`fedlib.orchestration.experiments.mean_std` mean (or a paper layout's) with NaN in
    every cell that fewer seeds ran for than were declared: the mean of some seeds is no number a
    verdict may read. Cells whose seed counts are unknown are kept."""
    complete = mean.copy()
    for row in mean.index:
        for column in mean.columns:
            counts = experiments.seed_counts(mean, row, column)
            if counts is not None and counts[0] < counts[1]:
                complete.at[row, column] = float("nan")
    return complete


def per_seed(frame: pd.DataFrame, index: str | list[str], columns: str | list[str] | None,
             value: str) -> pd.DataFrame:
    """Every seed's ``value`` per cell of a results frame, laid out as
    :func:`fedlib.orchestration.experiments.mean_std` lays out its mean (index x columns): a tuple
    in seed order, or NaN in a cell one of whose seeds diverged or is in no store (a verdict reads
    every declared seed or none, as :func:`complete_cells`)."""
    keys = experiments.cell_keys(index, columns)
    ordered = frame.sort_values("seed", kind="stable") if "seed" in frame.columns else frame
    usable = ~(experiments.flag_column(ordered, "not_run") | experiments.flag_column(ordered, "diverged"))
    cells = {}
    for key, rows in ordered.groupby(keys, sort=False):
        complete = bool(usable[rows.index].all())
        cells[key[0] if len(keys) == 1 else key] = tuple(rows[value].astype(float)) if complete else float("nan")
    seeds = pd.Series(cells, dtype=object)
    if len(keys) > 1:
        seeds.index = pd.MultiIndex.from_tuples(seeds.index, names=keys)
    else:
        seeds.index.name = keys[0]
    if columns is None:
        return seeds.to_frame(value)
    return seeds.unstack([columns] if isinstance(columns, str) else list(columns))


# ---------------------------------------------------------------------- the cost to reach a target
@dataclass(frozen=True)
class Reach:
    """How the seeds of one cell reach one target: the seeds declared, those in a store, those
    that reach the target, whether one diverged, and the mean cost of those that reach it (NaN
    where none does)."""

    declared: int
    stored: int
    reached: int
    diverged: bool
    cost: float
    costs: tuple[float, ...] = ()  # each seed's cost, of the seeds that reach the target

    @classmethod
    def of(cls, rows: pd.DataFrame) -> "Reach":
        """From a cell's rows of :func:`fedlib.reporting.tables.cost_frame` (``value``: the cost,
        inf where the target is not reached; ``not_run`` and ``diverged``: the run's flags)."""
        stored = rows[~experiments.flag_column(rows, "not_run")]
        reached = stored["value"] < math.inf  # NaN (a diverged run) is not reached
        cost = float(stored["value"][reached].mean()) if reached.any() else float("nan")
        return cls(len(rows), len(stored), int(reached.sum()),
                   bool(experiments.flag_column(stored, "diverged").any()), cost,
                   tuple(float(c) for c in stored["value"][reached]))

    @property
    def complete(self) -> bool:
        """Every declared seed is stored and none diverged: a verdict may read this cell."""
        return 0 < self.declared == self.stored and not self.diverged

    def text(self) -> str:
        """"48.1 U", "50.0 U where reached, in 2 of 3 seeds", "never", "diverged" or "not run",
        with "(k of n seeds run)" where fewer seeds are stored than declared."""
        if self.stored == 0:
            return NOT_RUN
        if self.diverged:
            return DIVERGED
        text = (NEVER if self.reached == 0 else f"{self.cost:.1f} U" if self.reached == self.stored
                else f"{self.cost:.1f} U where reached, in {self.reached} of {self.stored} seeds")
        return text + (f" ({self.stored} of {self.declared} seeds run)" if self.stored < self.declared else "")


def cheaper_to_reach(claim: str, ours: Reach, rival: Reach, *, numbers: str | None = None) -> Verdict:
    """Holds when ``ours`` reaches the target for less than ``rival``: only ours reaches it, or
    both reach it in every seed and the bootstrap interval of the difference of their seeds' costs
    (:class:`Difference`) lies wholly below zero. Does not hold when only the rival reaches it, or
    the interval lies wholly above zero; undecided otherwise (and with one seed a side). No verdict
    for a cell not complete, when neither reaches the target within the budget, or when one
    reaches it in some seeds only."""
    numbers = f"{ours.text()} vs {rival.text()}" if numbers is None else numbers
    if not (ours.complete and rival.complete):
        return no_verdict(claim, "a run diverged or is in no store", numbers)
    if ours.reached == rival.reached == 0:
        return no_verdict(claim, "neither reaches it within the budget", numbers)
    if ours.reached == 0 or rival.reached == 0:
        return Verdict(claim, rival.reached == 0, numbers)
    if ours.reached < ours.declared or rival.reached < rival.declared:
        return no_verdict(claim, "not every seed reaches it: costs not compared", numbers)
    difference = Difference.of(ours.costs, rival.costs, lower_is_better=True)
    outcome = difference.outcome
    verb = {BEATS: "costs less", TRAILS: "costs more", UNDECIDED: UNDECIDED}[outcome]
    interval = f"{difference.text('U', 1)}: {verb}"
    return _compared(claim, numbers, interval, None if outcome == UNDECIDED else outcome == BEATS)


def reaches(claim: str, cell: Reach, *, expected: bool = True, numbers: str | None = None) -> Verdict:
    """With ``expected``, holds when every seed of ``cell`` reaches the target and does not hold
    when none does; without it, the other way round. No verdict when only some seeds reach it or
    the cell is not complete."""
    numbers = cell.text() if numbers is None else numbers
    if not cell.complete:
        return no_verdict(claim, "a run diverged or is in no store", numbers)
    if 0 < cell.reached < cell.declared:
        return no_verdict(claim, f"reached in {cell.reached} of {cell.declared} seeds", numbers)
    return Verdict(claim, (cell.reached > 0) == expected, numbers)


# ---------------------------------------------------------------------- our numbers in words
def number_text(value: float | Sequence[float], unit: str = "%", digits: int = 2, missing: str = "no number") -> str:
    """'41.10%' (every seed's values: their mean); ``missing`` where a value is None or NaN."""
    return missing if _missing(value) else f"{seed_mean(value):.{digits}f}{unit}"


def values_text(values: pd.Series, unit: str = "%", digits: int = 2, missing: str = "no number",
                name: Callable | None = None) -> str:
    """'41.10% at 1, 23.50% at 4': each value with its index label (``name`` turns a label into
    words; default :func:`label_text`)."""
    name = name or label_text
    return ", ".join(f"{number_text(value, unit, digits, missing)} at {name(label)}" for label, value in values.items())


def label_text(label) -> str:
    """A label as text: a number with ``:g`` (``1.0`` -> ``1``), anything else as ``str``."""
    return f"{label:g}" if isinstance(label, Real) and not isinstance(label, bool) else str(label)


def names_text(names: Sequence, most: int = 3, noun: str = "classes") -> str:
    """Names tied at a minimum or maximum: "'Shirt'", "'Shirt', 'Coat'" or "9 classes tied"."""
    return ", ".join(map(repr, names)) if len(names) <= most else f"{len(names)} {noun} tied"
