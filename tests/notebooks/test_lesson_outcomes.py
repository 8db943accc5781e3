"""Each lesson's declared outcome, checked against the committed lesson store (issue 44).

A lesson's ``note`` (``profiles/<notebook>.yaml``, section ``lesson``) says in prose what the lesson shows at
its scale, with numbers. Next to it, ``outcome`` declares the same thing for a machine:

    lesson:
      note: >-
        the paper's order shows at Dir(0.5), one seed: best accuracy FedAvg 92.49 ...
      outcome:
        verdict: partly          # shows | partly | does not show | stand-in | served | no claim
        numbers:                 # the note's figures a stored run gives, each as the note prints it
          - {value: "92.49", metric: best, run: {method: fedavg}}
          - {value: "6.6", metric: best, run: {method: fedavg, beta: 0.1}, minus: {method: fedvls, beta: 0.1}}

``verdict``: ``shows`` (the paper's effect shows at lesson scale), ``partly``, ``does not show``,
``stand-in`` (the paper's data are not bundled; a named stand-in runs), ``served`` (the lesson serves committed
full-scale runs), ``no claim`` (nothing trains). A verdict other than ``shows`` says why in the note's first
sentence (:data:`WHY`).

``numbers``: each ``value`` is a string, printed as in the note (its decimals are the precision checked);
``run`` picks one of the runs the lesson declares (``fedlib.paper.plan.declared_configs`` under the lesson
profile) by config fields (``method``, ``beta``, ``partition``, ``model``, ``participation``, ...;
``method_args`` matches the keys it names, a key given as null must be absent); ``minus`` (optional) picks
a second run whose metric is subtracted (a gap in points). ``metric`` (:data:`METRICS`; accuracies in %):
``best``, ``final`` (test accuracy), ``worst_class`` (lowest final class accuracy), ``class:<name>`` (one
class's final accuracy), ``class_gap`` (best - worst final class), ``best_minus_final``, ``drop_second_half``
(mean points below the best-so-far over the rounds after the half, as fedlmd_fig6 ranks curves),
``peak_worst_class`` (highest worst-class accuracy over the rounds), ``class_swing:<name>`` (largest change of
that class between consecutive rounds), ``experts_fired@<round>`` and ``peak_experts_fired`` (PKD: % of local
samples on which any expert fired, experts summed; rounds counted from 1), ``prediction_tv@<first>-<last>``
(FedLMD Fig. 2: the mean over those rounds, counted from 1, of the total-variation distance between the global
model's predicted-class mix on the test set and the test set's label mix), ``top_sampled_rounds`` (the number
of rounds whose most-predicted class is the round's most-sampled one) and ``mask_filtered@<round>`` (FedCSD Fig. 5:
% of the teacher's soft labels its adaptive mask filtered out in that round, counted from 1).

Numbers a stored run does not give (an analysis cache, a paper's figure, a count of rounds) are not declared.
Nothing trains here: the runs come from ``reference_results/`` only, and a run it lacks fails the test.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
VERDICTS = ("shows", "partly", "does not show", "stand-in", "served", "no claim")
# what the first sentence of a note whose verdict is not "shows" names as the reason (any one of them)
WHY = {
    "partly": ("this scale", "its scale", "full scale", "full-scale", "docs/results.md", "noise", "because",
               "needs", "barely learnt"),
    "does not show": ("this scale", "its scale", "full scale", "full-scale", "docs/results.md", "noise", "because",
                      "needs", "barely learnt"),
    "stand-in": ("stand-in", "not bundled"),
    "served": ("full scale", "served"),
    "no claim": ("nothing trains",),
}


def lesson_sections() -> dict[str, dict]:
    """Notebook stem -> the raw lesson section of its profiles file (with note and outcome)."""
    sections = {}
    for path in sorted((ROOT / "profiles").glob("*.yaml")):
        section = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("lesson")
        if section is not None and (ROOT / "notebooks" / f"{path.stem}.ipynb").exists():
            sections[path.stem] = section
    return sections


LESSONS = lesson_sections()
each_lesson = pytest.mark.parametrize("stem", sorted(LESSONS))


# ------------------------------------------------------------------ the lesson's runs, from the store only
def declared_runs(stem: str, tmp_path: Path, edits: dict | None = None) -> list:
    """The RunConfigs the lesson declares (no training, no data needed); ``edits``: parameters passed over
    the lesson profile, as a Try-it prompt sets them."""
    from fedlib.paper.plan import declared_configs, notebook_parameters
    from fedlib.paper.reproduce import build_overrides
    from fedlib.reporting.notebook import load_profiles

    notebook = ROOT / "notebooks" / f"{stem}.ipynb"
    overrides = build_overrides("lesson", "cpu", None, tmp_path / "results", tmp_path / "f", tmp_path / "t")
    parameters = {**load_profiles(ROOT / "profiles", stem)["lesson"], **overrides, **(edits or {})}
    configs = declared_configs(notebook, parameters)
    if configs is None and stem == "getting_started":  # its grid is in the notebook: the same two lines
        from fedlib.orchestration import experiments
        from fedlib.paper.grids import run_config

        p = notebook_parameters(notebook, parameters)
        base = run_config(p, dataset=p["dataset"], model=p["model"], partition="dirichlet", beta=p["beta"],
                          clients=p["clients"], rounds=p["rounds"], local_epochs=p["local_epochs"],
                          batch_size=p["batch_size"], lr=p["lr"], momentum=p["momentum"],
                          max_train_samples=p["max_train_samples"], results_dir=p["results_dir"])
        configs = experiments.grid(base, method=["fedavg", "fedprox"], seed=p["seeds"])
        configs = [c.replace(method_args={"mu": p["prox_mu"]}) if c.method == "fedprox" else c for c in configs]
    return list({c.hash(): c for c in configs or []}.values())


def matches(cfg, selector: dict) -> bool:
    fields = cfg.to_dict()
    for key, wanted in selector.items():
        if key == "method_args":
            args = fields.get("method_args") or {}
            if any(args.get(k) != v for k, v in wanted.items()):  # null: the key is absent
                return False
        elif fields.get(key) != wanted:
            return False
    return True


def pick(configs: list, selector: dict, stem: str):
    found = [c for c in configs if matches(c, selector)]
    assert len(found) == 1, (f"{stem}: outcome run {selector} matches {len(found)} of the lesson's "
                             f"{len(configs)} declared runs; name the fields that pick exactly one")
    return found[0]


class StoredRun:
    """A run's summary and rounds from the reference store; a run it lacks is an error, never trained."""

    def __init__(self, cfg, stem: str):
        from fedlib import store

        record = store.reference_record(cfg)
        assert record is not None, (f"{stem}: lesson run {cfg.hash()} ({cfg.method}) is not in reference_results/; "
                                    "build the lesson with tools/lesson_store.py")
        self.config = cfg  # with summary and rounds: what fedlib's readers of a RunResult use
        self.summary = record.read_summary()
        self._record = record
        self._rounds = None

    @property
    def rounds(self) -> list[dict]:
        if self._rounds is None:
            self._rounds = self._record.read_rounds()
        return self._rounds

    @property
    def meta(self) -> dict:
        return self._record.read_meta()

    def class_index(self, name: str) -> int:
        names = self.summary["class_names"]
        assert name in names, f"no class {name!r}; the classes are {names}"
        return names.index(name)


def _drop_second_half(run: StoredRun) -> float:
    accuracy = [r["accuracy"] for r in run.rounds]
    half = len(accuracy) / 2
    best, below = float("-inf"), []
    for number, value in enumerate(accuracy, 1):
        best = max(best, value)
        if number > half:
            below.append(best - value)
    return 100 * sum(below) / len(below)


def _experts_fired(entry: dict) -> float:
    return 100 * sum(v for k, v in entry.items() if k.startswith("expert_fired_"))


def _swing(run: StoredRun, name: str) -> float:
    series = [r["class_accuracy"][run.class_index(name)] for r in run.rounds if r.get("class_accuracy")]
    return 100 * max(abs(b - a) for a, b in zip(series, series[1:]))


def _fired_at(run: StoredRun, number: str) -> float:
    entry = [r for r in run.rounds if r["round"] + 1 == int(number)]
    assert entry and any(k.startswith("expert_fired_") for k in entry[0]), f"no expert firing in round {number}"
    return _experts_fired(entry[0])


def _prediction_tv(run: StoredRun, span: str) -> float:
    from fedlib.analysis.prediction_stats import PREDICTED_KEY, row_fractions, total_variation

    first, last = (int(n) for n in span.split("-"))
    counts = [r[PREDICTED_KEY] for r in run.rounds if r["round"] + 1 in range(first, last + 1)]
    assert len(counts) == last - first + 1, f"prediction counts stored for {len(counts)} of rounds {span}"
    gap = total_variation(row_fractions(counts), row_fractions(run.meta["trained_data"]["test_per_class"]))
    return float(gap.mean())


def _top_sampled_rounds(run: StoredRun, _) -> int:
    import numpy as np

    from fedlib.analysis.prediction_stats import PREDICTED_KEY, SAMPLED_KEY

    rounds = [r for r in run.rounds if PREDICTED_KEY in r]
    assert rounds, "no predicted-class counts in this run's rounds"
    sampled, predicted = (np.array([r[key] for r in rounds]) for key in (SAMPLED_KEY, PREDICTED_KEY))
    return int((sampled.argmax(axis=1) == predicted.argmax(axis=1)).sum())


def _span(text: str) -> range:
    """Rounds ``A-B`` (counted from 1, both included) as 0-based round numbers, as stored."""
    first, last = (int(n) for n in text.split("-"))
    return range(first - 1, last)


def _window_mean(run: StoredRun, argument: str) -> float:
    """``A-B:<class>``: the class's accuracy (%) averaged over rounds A-B (PKD's KD-stage readings)."""
    span, name = argument.split(":", 1)
    by_round = {r["round"]: r["class_accuracy"] for r in run.rounds if r.get("class_accuracy")}
    rounds = _span(span)
    assert all(r in by_round for r in rounds), f"class accuracies stored for {len(by_round)} rounds, not all of {span}"
    return 100 * sum(by_round[r][run.class_index(name)] for r in rounds) / len(rounds)


def _window_spread(run: StoredRun, argument: str) -> float:
    """``A-B:<class>``: the sample standard deviation (points) of the class's accuracy over rounds A-B."""
    import statistics

    span, name = argument.split(":", 1)
    values = [100 * r["class_accuracy"][run.class_index(name)] for r in run.rounds
              if r.get("class_accuracy") and r["round"] in _span(span)]
    assert len(values) == len(_span(span)), f"class accuracies stored for {len(values)} of rounds {span}"
    return statistics.stdev(values)


def _worst_class_mean(run: StoredRun, span: str) -> float:
    """``A-B``: the worst class's accuracy (%) averaged over rounds A-B (PKD's pilot score)."""
    rounds = [r for r in run.rounds if r.get("class_accuracy") and r["round"] in _span(span)]
    assert len(rounds) == len(_span(span)), f"class accuracies stored for {len(rounds)} of rounds {span}"
    return 100 * sum(min(r["class_accuracy"]) for r in rounds) / len(rounds)


def _peak_worst_class(run: StoredRun, span: str | None) -> float:
    """The highest worst-class accuracy (%) in any round, or in rounds ``A-B`` only."""
    rounds = [r for r in run.rounds if r.get("class_accuracy") and (span is None or r["round"] in _span(span))]
    assert rounds, f"no class accuracies stored for rounds {span}"
    return 100 * max(min(r["class_accuracy"]) for r in rounds)


def _cost_options(options: list[str]) -> tuple[str, int]:
    """``all`` or ``fired`` (the default) and ``from=N`` (rounds counted from 1; default: round 1)."""
    outputs = "all" if "all" in options else "fired"
    start = next((int(o.split("=")[1]) - 1 for o in options if o.startswith("from=")), 0)
    return outputs, start


def _cost_to(run: StoredRun, argument: str) -> float:
    """``T[:all][:from=N]``: PKD's cost in U until the worst class first reaches T % (Tables 9-10)."""
    from fedlib.reporting.cost_units import cost_to_reach

    target, *options = argument.split(":")
    outputs, start = _cost_options(options)
    return cost_to_reach(run, [float(target)], expert_outputs=outputs, from_round=start)[float(target)]


def _cost_total(run: StoredRun, argument: str | None) -> float:
    """``[all]``: the run's whole cost in U (Tables 9-10's unit)."""
    from fedlib.reporting.cost_units import round_cost_units

    outputs, _ = _cost_options((argument or "").split(":"))
    return float(round_cost_units(run, outputs)["cumulative"].iloc[-1])


def _mask_filtered_at(run: StoredRun, number: str) -> float:
    entry = [r for r in run.rounds if r["round"] + 1 == int(number)]
    assert entry and "mask_filtered" in entry[0], f"no mask_filtered in round {number}"
    return 100 * entry[0]["mask_filtered"]


METRICS = {  # name -> (run, argument) -> value in the note's unit
    "best": lambda run, _: 100 * run.summary["best_accuracy"],
    "final": lambda run, _: 100 * run.summary["final_accuracy"],
    "worst_class": lambda run, _: 100 * min(run.summary["class_accuracy"]),
    "class": lambda run, name: 100 * run.summary["class_accuracy"][run.class_index(name)],
    "class_gap": lambda run, _: 100 * (max(run.summary["class_accuracy"]) - min(run.summary["class_accuracy"])),
    "best_minus_final": lambda run, _: 100 * (run.summary["best_accuracy"] - run.summary["final_accuracy"]),
    "drop_second_half": lambda run, _: _drop_second_half(run),
    "peak_worst_class": _peak_worst_class,
    "window_mean": _window_mean,
    "window_spread": _window_spread,
    "worst_class_mean": _worst_class_mean,
    "cost_u": _cost_to,
    "cost_total": _cost_total,
    "class_swing": _swing,
    "experts_fired": _fired_at,
    "peak_experts_fired": lambda run, _: max(_experts_fired(r) for r in run.rounds),
    "prediction_tv": _prediction_tv,
    "top_sampled_rounds": _top_sampled_rounds,
    "mask_filtered": _mask_filtered_at,
}


def metric_value(run: StoredRun, metric: str) -> float:
    found = re.fullmatch(r"(\w+)(?:[:@](.+))?", metric)
    assert found and found.group(1) in METRICS, f"unknown metric {metric!r}; known: {sorted(METRICS)}"
    return METRICS[found.group(1)](run, found.group(2))


def same_as_printed(value: float, printed: str) -> bool:
    """Whether ``value`` rounds to ``printed`` at its decimals; a value half-way between two printed figures
    (12.75 for 12.8) may round either way: the stored accuracies are float32, good to about 1e-5 points."""
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return abs(value - float(printed)) <= 0.5 * 10 ** -decimals + FLOAT32_POINTS


FLOAT32_POINTS = 1e-5  # float32 accuracies (7 significant digits) in percentage points


def number_in(text: str, printed: str) -> bool:
    """Whether the note prints ``printed`` as a number of its own (not part of a longer one)."""
    return re.search(rf"(?<![\d.]){re.escape(printed)}(?!\.?\d)", text) is not None


def first_sentence(note: str) -> str:
    return re.split(r"(?<=[.])\s+(?=[A-Z(])", " ".join(note.split()), maxsplit=1)[0]


# ------------------------------------------------------------------ the tests
def test_every_lesson_declares_an_outcome():
    assert len(LESSONS) >= 37, "a lesson profile went missing"
    missing = [stem for stem, section in LESSONS.items() if not isinstance(section.get("outcome"), dict)]
    assert not missing, f"lessons without an outcome next to their note: {missing}"


@each_lesson
def test_the_verdict_is_an_allowed_word_and_the_note_says_why(stem):
    outcome, note = LESSONS[stem]["outcome"], LESSONS[stem]["note"]
    assert set(outcome) <= {"verdict", "numbers"}, f"{stem}: outcome keys are verdict and numbers"
    verdict = outcome.get("verdict")
    assert verdict in VERDICTS, f"{stem}: verdict {verdict!r} is none of {VERDICTS}"
    if verdict != "shows":
        sentence = first_sentence(note)
        assert any(word in sentence for word in WHY[verdict]), (
            f"{stem}: verdict {verdict!r}, but the note's first sentence names no reason (one of {WHY[verdict]}): "
            f"{sentence!r}")


@each_lesson
def test_every_declared_number_is_printed_in_the_note(stem):
    note = " ".join(LESSONS[stem]["note"].split())
    for entry in LESSONS[stem]["outcome"].get("numbers") or []:
        assert set(entry) <= {"value", "metric", "run", "minus"} and {"value", "metric", "run"} <= set(entry), \
            f"{stem}: {entry}: a number has value, metric, run and maybe minus"
        assert isinstance(entry["value"], str), f"{stem}: quote the value {entry['value']!r} as the note prints it"
        assert number_in(note, entry["value"]), f"{stem}: declared {entry['value']} is not a figure of the note"


@each_lesson
def test_every_declared_number_is_the_stored_runs(stem, tmp_path, render_only):  # render only: belt and braces,
    # nothing here calls training
    numbers = LESSONS[stem]["outcome"].get("numbers") or []
    if not numbers:
        return
    configs = declared_runs(stem, tmp_path)
    assert configs, f"{stem} declares numbers but no runs"
    wrong = numbers_unlike_the_runs(numbers, configs, stem)
    assert not wrong, f"{stem}: the note's numbers differ from the committed lesson runs: " + "; ".join(wrong)


def numbers_unlike_the_runs(numbers: list[dict], configs: list, stem: str) -> list[str]:
    """The declared numbers (value, metric, run, minus) that the stored runs among ``configs`` do not give."""
    wrong = []
    for entry in numbers:
        run = StoredRun(pick(configs, entry["run"], stem), stem)
        value = metric_value(run, entry["metric"])
        if "minus" in entry:
            value -= metric_value(StoredRun(pick(configs, entry["minus"], stem), stem), entry["metric"])
        if not same_as_printed(value, entry["value"]):
            wrong.append(f"{entry['value']} ({entry['metric']} of {entry['run']}"
                         + (f" minus {entry['minus']}" if "minus" in entry else "") + f"): stored {value:.4f}")
    return wrong


def test_a_value_rounds_as_printed():
    assert same_as_printed(92.4899, "92.49") and same_as_printed(0.5501, "0.55") and same_as_printed(88.2, "88")
    assert same_as_printed(12.75, "12.8") and same_as_printed(12.75, "12.7") and not same_as_printed(12.81, "12.7")
    assert same_as_printed(0.0, "0") and not same_as_printed(0.6, "0") and not same_as_printed(94.31, "94.30")
    assert number_in("FedAvg 92.49 and", "92.49") and not number_in("FedAvg 192.49", "92.49")
    assert not number_in("at 0.240", "0.24") and number_in("Dir(0.5).", "0.5")
