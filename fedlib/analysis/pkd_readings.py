"""Which reading of PKD's unstated choices explains the paper's gain? The readouts and the rule.

The PKD paper leaves three things open that fedlib had to choose (see
``notebooks/pkd_kd_stage_readings.ipynb``): where the KD stage starts (the warmed-up model or a
fresh one), how the KD loss is scaled (divided by the batch or by the fired samples), and, behind
both, how fast the baseline itself learns. The experiment runs each reading at the paper's
setting and reads three numbers per run, fixed before any run was looked at:

- the focus class's accuracy (Shirt on Fashion-MNIST) averaged over a window of late rounds,
  minus FedAvg's on the same seed and window (:func:`focus_gain`);
- the shape of the firing-rate curve: does it rise after the first KD round, then fall
  (:func:`firing_shape`; the paper's Fig. 11 says it "increases rapidly at the onset")?
- the cost in U at which the worst class first reaches each target (``tables.cost_to_reach``).

:func:`verdict` applies the rule stated in the notebook to those readouts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from fedlib.analysis import class_gap
from fedlib.errors import FedlibError

GAIN_POINTS = 4.0  # a reading "explains" the gain when it adds at least this much to the focus class
LEVEL_POINTS = 1.5  # every reading within this of FedAvg: the gain is in none of them


@dataclass(frozen=True)
class FiringShape:
    """The firing-rate curve of one PKD run (fraction of local samples an expert fired on)."""

    first: float  # in the first KD round
    peak: float
    peak_round: int  # 1-based, as the figures count
    last: float

    @property
    def rises(self) -> bool:
        """Whether some later round fires more than the first KD round."""
        return self.peak > self.first

    @property
    def rises_then_falls(self) -> bool:
        """The paper's Fig. 11 shape: up after the onset, down by the end."""
        return self.rises and self.last < self.peak


def window_mean(result, class_index: int, rounds: Sequence[int]) -> float:
    """Accuracy (%) of class ``class_index`` averaged over ``rounds`` (0-based, as stored); NaN for
    a run that diverged or is in no store. A round missing from the run is an error, not a
    shorter mean."""
    if result.summary.get("not_run") or result.summary.get("diverged"):
        return math.nan
    by_round = {r["round"]: r["class_accuracy"] for r in result.rounds if r.get("class_accuracy")}
    missing = [r for r in rounds if r not in by_round]
    if missing:
        raise FedlibError(f"run {result.config.hash()} has no class accuracy for round(s) "
                          f"{', '.join(str(r + 1) for r in missing[:5])} (counted from 1); "
                          f"it has {len(by_round)} evaluated rounds")
    return 100 * sum(by_round[r][class_index] for r in rounds) / len(rounds)


def focus_gain(result, fedavg, class_index: int, rounds: Sequence[int]) -> float:
    """:func:`window_mean` of ``result`` minus FedAvg's, in points; the two must share a seed."""
    if result.config.seed != fedavg.config.seed:
        raise FedlibError(f"a gain is read against FedAvg on the same seed: {result.config.seed} "
                          f"vs {fedavg.config.seed}")
    return window_mean(result, class_index, rounds) - window_mean(fedavg, class_index, rounds)


def firing_shape(result, last_round: int | None = None) -> FiringShape | None:
    """The firing-rate curve (all experts together, :func:`fedlib.analysis.class_gap.expert_activation`) of a
    PKD run, up to ``last_round`` (0-based, inclusive); None for a run with no KD rounds (FedAvg,
    not stored, or diverged early)."""
    if not any("pkd_groups" in r for r in result.rounds):
        return None
    rates = class_gap.expert_activation(result).sum(axis=1)  # indexed by round, counted from 1
    if last_round is not None:
        rates = rates.loc[:last_round + 1]
    if rates.empty:
        return None
    return FiringShape(float(rates.iloc[0]), float(rates.max()), int(rates.idxmax()), float(rates.iloc[-1]))


def verdict(gains: Mapping[str, float], rises: Mapping[str, bool], fresh: Sequence[str],
            warm_rescaled: Sequence[str]) -> str:
    """The notebook's rule, applied to the focus-class gains (points over FedAvg) of the readings.

    ``fresh`` names the readings that start the KD stage from a fresh model (reading 1),
    ``warm_rescaled`` those that keep the warm start but rescale the loss (reading 3). A gain of
    ``GAIN_POINTS`` or more in a fresh reading whose firing curve rises points to reading 1; a
    gain only in a warm rescaled reading to reading 3; every gain within ``LEVEL_POINTS`` of
    FedAvg to reading 2 (the baseline). Anything else is undecided, and says why.
    """
    asked = [*fresh, *warm_rescaled]
    missing = [name for name in asked if name not in gains or math.isnan(gains[name])]
    if missing:
        return f"no verdict yet: {', '.join(missing)} not run (or diverged)"
    big = [name for name in asked if gains[name] >= GAIN_POINTS]
    fresh_rising = [name for name in fresh if name in big and rises.get(name)]
    if fresh_rising:
        return (f"reading 1 (where the KD stage starts): {', '.join(fresh_rising)} gains "
                f"{', '.join(f'{gains[n]:+.2f}' for n in fresh_rising)} points with a rising firing curve")
    if big and all(name in warm_rescaled for name in big):
        return (f"reading 3 (the KD loss scale): only {', '.join(big)} gains "
                f"{', '.join(f'{gains[n]:+.2f}' for n in big)} points")
    if all(abs(gains[name]) <= LEVEL_POINTS for name in asked):
        return ("reading 2 (the baseline learns faster than the paper's): every reading is within "
                f"{LEVEL_POINTS} points of FedAvg; next test: the baseline's model or the share of clients per round")
    return ("undecided: " + ", ".join(f"{name} {gains[name]:+.2f}" for name in asked) +
            f" points; no reading gains {GAIN_POINTS}+ with the shape the rule asks, and not all are level")


def confirmation(label: str, first: float, second: float, seeds: tuple[int, int],
                 spreads: tuple[float, float]) -> str:
    """What a second seed says of a reading: its gain on each seed (points over FedAvg on that seed),
    whether the sign held, and whether each gain is within its own seed's spread, the standard
    deviation of that seed's FedAvg focus class over the window's rounds (:func:`window_spread`, points).

    Each seed is read against its own FedAvg: a gain at the second seed is compared with how much the
    focus class moves in the second seed's FedAvg run, not the first's. A spread not known (NaN: that
    seed's FedAvg not run) gives no within-verdict."""
    if math.isnan(second):
        return f"{label}: seed {seeds[1]} not run yet (seed {seeds[0]}: {first:+.2f} points)"
    held = "the sign holds" if (first >= 0) == (second >= 0) else "the sign flips"
    numbers = f"{spreads[0]:.2f} and {spreads[1]:.2f} points"
    if any(math.isnan(s) for s in spreads):
        within = f"no within-verdict: a seed's FedAvg spread is not known ({numbers})"
    else:
        inside = [abs(g) <= s for g, s in zip((first, second), spreads)]
        within = ("both within" if all(inside) else "not both within") + f" their seed's spread, {numbers}"
    return (f"{label}: {first:+.2f} points at seed {seeds[0]}, {second:+.2f} at seed {seeds[1]}: {held}; "
            f"{within}, the standard deviation of each seed's FedAvg focus class over the window")


def window_spread(result, class_index: int, rounds: Sequence[int]) -> float:
    """The standard deviation (points) of class ``class_index``'s accuracy over ``rounds`` (0-based): how much
    the focus class moves from round to round, against which a gain is read; NaN for fewer than two rounds."""
    by_round = {r["round"]: r["class_accuracy"][class_index] for r in result.rounds if r.get("class_accuracy")}
    values = [100 * by_round[r] for r in rounds if r in by_round]
    if len(values) < 2:
        return math.nan
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
