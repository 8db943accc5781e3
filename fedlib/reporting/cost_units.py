"""PKD Tables 9-10: the computation, in the paper's units U, a run needs to reach a minimum (or
mean) class accuracy, counted from the work each stored round logged (local training, expert
training and the experts' outputs), one row per (run, target)."""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from fedlib.engine.engine import RunResult
from fedlib.errors import FedlibError, one_of
from fedlib.orchestration.experiments import run_flags
from fedlib.reporting.settings import setting_label

EXPERT_OUTPUTS = ("fired", "all")
TARGET_TOLERANCE = 1e-4  # percentage points: class accuracies are float32 ratios (8 % may read 7.9999998)
COST_CURVES = {"min_class_accuracy": min, "mean_class_accuracy": lambda v: sum(v) / len(v)}


def round_cost_units(result: RunResult, expert_outputs: str = "fired") -> pd.DataFrame:
    """The computation of every round in PKD's unit U, counted from what the run logged.

    U is one FedAvg local-training round (PKD Eq. 3): E forward + backward passes over all N
    training samples of the clients. One row per round (0-based ``round``) with

    - ``local``: the round's local sample passes (``local_samples``, logged by the engine) / (E N);
      for runs stored before that metric existed, E times the stored sample counts of the
      round's clients (``clients`` and ``partition_counts``), the same number;
    - ``experts``: PKD's expert training, logged in the round it ran as ``pkd_expert_cost``
      (Eq. 5: the group samples the experts trained on, times E_exp / E, over the expert
      rounds' clients' samples -- N when every client takes part);
    - ``distillation``: PKD's expert outputs, a forward pass counted as 1/3 of a training pass
      (Eq. 6) -- on the samples that fired an expert (``expert_fired_<g>``, the paper's
      accounting, ``expert_outputs="fired"``) or on every local sample, which is what fedlib's
      implementation evaluates (``"all"``);
    - ``total`` and the running ``cumulative``.

    As in the paper, a teacher's outputs in other methods (FedCodl) and FedProx's proximal term
    are not counted, nor is PKD's weak-class discovery pass. A placeholder of a run that is in no
    store (render-only) has no rounds: an empty frame.
    """
    if expert_outputs not in EXPERT_OUTPUTS:
        raise one_of("expert_outputs", expert_outputs, EXPERT_OUTPUTS)
    if run_flags(result)["not_run"]:
        return pd.DataFrame(columns=["round", "local", "experts", "distillation", "total", "cumulative"])
    counts = result.summary.get("partition_counts")
    if not counts:
        raise FedlibError(f"run {result.config.hash()} stored no partition_counts; rerun it to count its cost")
    client_samples = [sum(row) for row in counts]
    epochs = result.config.local_epochs
    unit = epochs * sum(client_samples)  # sample passes of one FedAvg round of every client
    rows = []
    for entry in result.rounds:
        samples = entry.get("local_samples")
        if samples is None:
            samples = epochs * sum(client_samples[k] for k in entry["clients"])
        local = samples / unit
        groups = entry.get("pkd_groups") or []
        fired = sum(entry.get(f"expert_fired_{g}", 0.0) for g in range(len(groups)))
        per_sample = fired if expert_outputs == "fired" else len(groups)
        rows.append({"round": entry["round"], "local": local, "experts": float(entry.get("pkd_expert_cost", 0.0)),
                     "distillation": local * per_sample / 3})
    frame = pd.DataFrame(rows, columns=["round", "local", "experts", "distillation"])
    frame["total"] = frame["local"] + frame["experts"] + frame["distillation"]
    frame["cumulative"] = frame["total"].cumsum()
    return frame


def cost_to_reach(result: RunResult, targets: Sequence[float], curve: str = "min_class_accuracy",
                  expert_outputs: str = "fired", from_round: int = 0) -> dict[float, float]:
    """Cumulative cost in U (:func:`round_cost_units`) when ``curve`` first reaches each target.

    ``targets`` are in percent; ``curve`` is the per-round ``min_class_accuracy`` (PKD Tables
    9-10) or ``mean_class_accuracy`` of the evaluated rounds. The cost counts every round up to
    and including the one whose evaluation reached the target; ``inf`` where the run never
    does (the paper's '-'). Only rounds from ``from_round`` (0-based) on may reach a target: PKD's
    Table 9 reads its targets once partial KD runs, after warm-up and experts (Sec. 4.5). NaN for
    every target of a run that diverged or is in no store: its curve is no result.
    """
    if curve not in COST_CURVES:
        raise one_of("curve", curve, COST_CURVES)
    if any(run_flags(result).values()):
        return {target: float("nan") for target in targets}
    cumulative = round_cost_units(result, expert_outputs).set_index("round")["cumulative"]
    reached = [(entry["round"], 100 * COST_CURVES[curve](entry["class_accuracy"]))
               for entry in result.rounds if entry.get("class_accuracy") and entry["round"] >= from_round]
    costs = {}
    for target in targets:
        first = next((r for r, value in reached if value >= target - TARGET_TOLERANCE), None)
        costs[target] = float("inf") if first is None else float(cumulative[first])
    return costs


def cost_frame(results: Sequence[RunResult], targets: Sequence[float], labels: dict[str, str] | None = None,
               extra_setting: dict[str, str] | None = None, target_names: Sequence | None = None,
               expert_outputs: str = "fired", from_round: dict[str, int] | None = None) -> pd.DataFrame:
    """PKD Tables 9-10: one row per (run, target) with the cost in U to reach it (``value``).

    The ``setting`` is the run's partition, ``extra_setting`` (as in :func:`class_metric_frame`),
    ``metric=cost_u`` and ``target_min=<name>``: ``target_names`` name the columns (default: the
    targets themselves), so a reduced profile's targets can stand in, in order, for the paper's;
    the ``target`` column keeps the threshold actually used. ``from_round`` maps a run hash to
    the first round that may reach a target (:func:`cost_to_reach`; default 0). ``not_run`` and
    ``diverged`` carry the run's flags; such a run's costs are NaN.
    """
    names = list(target_names) if target_names is not None else list(targets)
    if len(names) != len(targets):
        raise FedlibError(f"{len(targets)} targets but {len(names)} target_names; give one name per target")
    rows = []
    for result in results:
        cfg = result.config
        extra = (extra_setting or {}).get(cfg.hash(), "")
        costs = cost_to_reach(result, targets, expert_outputs=expert_outputs,
                              from_round=(from_round or {}).get(cfg.hash(), 0))
        for target, name in zip(targets, names):
            name = name if isinstance(name, str) else f"{name:g}"
            setting = ";".join(p for p in (setting_label(cfg), extra, "metric=cost_u", f"target_min={name}") if p)
            rows.append({"hash": cfg.hash(), "label": (labels or {}).get(cfg.hash(), cfg.method),
                         "dataset": cfg.dataset, "seed": cfg.seed, "setting": setting, "metric": "cost_u",
                         "target": target, "value": costs[target], **run_flags(result)})
    return pd.DataFrame(rows)
