"""Export the results store to TensorBoard, so stored runs can be browsed and compared there.

One TensorBoard run per stored run, in ``OUT/<method>/<dataset>-<model>/<partition>/<hash>``:

- scalars per round (step = round, counted from 1): ``accuracy/test`` and ``class_accuracy/<k>_<name>``
  (in %), ``loss/test``, ``group_accuracy/<k>`` where a run has domains, the engine's
  ``train/lr``, ``train/local_steps``, ``train/local_samples``, ``train/seconds``, and every other
  numeric per-round metric of the method as ``method/<name>``;
- the run's config and the method's resolved hyperparameters as TensorBoard hparams, with
  ``hparams/final_accuracy`` and ``hparams/best_accuracy`` (in %) as the metrics to compare; a
  run that diverged has the hparam ``diverged`` true and the metric ``hparams/diverged`` 1, and
  no accuracy at all, neither metric nor per-round scalar (its accuracies are no result; its
  loss and training scalars show where it broke);
- one event file at the top of OUT declaring every hyperparameter and metric (TensorBoard's HParams
  dashboard reads the experiment from there), and ``fedlib_hparams.json`` beside it, which keeps
  that declaration whole when a later export to the same OUT adds other runs.

Written with tensorboardX (``pip install 'fedlib[export]'``: about 0.5 MB with protobuf), else with
torch.utils.tensorboard when the ``tensorboard`` package is installed. Exporting again replaces the
event files fedlib wrote for the same runs (files ending in ``.fedlib``); nothing else is touched.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable

from fedlib.commands.listing import StoredRun, is_number, partition_label
from fedlib.errors import FedlibError

EXTRA = "export"
FILE_SUFFIX = ".fedlib"  # ends the names of the event files fedlib writes (and may replace)
ENGINE_TRAIN_METRICS = ("lr", "local_steps", "local_samples", "seconds")
_NOT_EXPORTED = ("round", "clients", "accuracy", "loss", "class_accuracy", "group_accuracy", "diverged")
DECLARED_FILE = "fedlib_hparams.json"  # at the top of OUT: every hparam any export there declared
FINAL_TAG, BEST_TAG = "hparams/final_accuracy", "hparams/best_accuracy"
ACCURACY_TAGS = ("accuracy/", "class_accuracy/", "group_accuracy/")  # per-round tags a diverged run goes without
DIVERGED_TAG = "hparams/diverged"  # 1 for a run that diverged, 0 for a finished one
METRICS = {FINAL_TAG: 0.0, BEST_TAG: 0.0, DIVERGED_TAG: 0.0}  # the metrics the hparams dashboard compares


def summary_api() -> tuple[type, Callable]:
    """(SummaryWriter, hparams) from tensorboardX, else from torch.utils.tensorboard; one line
    naming the extra to install when neither is there."""
    try:
        from tensorboardX import SummaryWriter
        from tensorboardX.summary import hparams
    except ImportError:
        try:
            from torch.utils.tensorboard import SummaryWriter
            from torch.utils.tensorboard.summary import hparams
        except ImportError:
            raise FedlibError(f"fedlib export --to tensorboard needs tensorboardX: pip install 'fedlib[{EXTRA}]' "
                              "(or pip install tensorboardX)") from None
    return SummaryWriter, hparams


def run_path(run: StoredRun) -> Path:
    """The run's folder under OUT: method / dataset-model / partition / hash (safe characters)."""
    cfg = run.config
    parts = [cfg.method, f"{cfg.dataset}-{cfg.model}", partition_label(cfg), run.hash]
    return Path(*[safe_name(part) for part in parts])


def safe_name(text: str) -> str:
    """``text`` with every character other than letters, digits, '+', '-', '.', '=' and '_' as '_'."""
    return re.sub(r"[^A-Za-z0-9+\-.=_]", "_", text).strip("._") or "_"


def hparams_of(run: StoredRun) -> dict[str, Any]:
    """The run's config (location fields left out) and the method's resolved hyperparameters
    (``method.<name>``), as TensorBoard hparam values: numbers, strings, booleans; ``diverged``
    says whether a finished run diverged."""
    values = {k: _hparam_value(v) for k, v in run.config.hashed_fields().items() if k != "method_args"}
    values["partition_label"] = partition_label(run.config)
    resolved = (run.summary or {}).get("method_hparams") or run.record.read_meta().get("method_hparams") or {}
    values.update({f"method.{k}": _hparam_value(v) for k, v in sorted(resolved.items())})
    values["hash"] = run.hash
    values["diverged"] = bool(run.summary.get("diverged", False)) if run.summary else None  # None: unfinished
    return values


def _hparam_value(value: Any) -> Any:
    """A number, string, bool or None as it is (None is left out of the session, so a field keeps
    one type across runs); anything else as compact JSON."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def round_scalars(record: dict, class_names: list[str]) -> dict[str, float]:
    """One round's scalars by tag (accuracies in %; groups, whose names the store does not keep,
    by their index)."""
    scalars = {}
    if is_number(record.get("accuracy")):
        scalars["accuracy/test"] = 100 * record["accuracy"]
    if is_number(record.get("loss")):
        scalars["loss/test"] = record["loss"]
    for k, acc in enumerate(record.get("class_accuracy") or []):
        name = class_names[k] if k < len(class_names) else str(k)
        scalars[f"class_accuracy/{k:02d}_{safe_name(name)}"] = 100 * acc
    for k, acc in enumerate(record.get("group_accuracy") or []):
        scalars[f"group_accuracy/{k:02d}"] = 100 * acc
    for key, value in record.items():
        if key not in _NOT_EXPORTED and is_number(value):
            scalars[f"{'train' if key in ENGINE_TRAIN_METRICS else 'method'}/{key}"] = value
    return scalars


def export_tensorboard(runs: list[StoredRun], out: str | Path) -> list[Path]:
    """Write one TensorBoard run per stored run (corrupt ones skipped) under ``out``, plus the
    experiment file at its top; returns the run folders written."""
    writer_class, hparams = summary_api()
    out = Path(out)
    readable = [run for run in runs if run.config is not None]
    written, all_hparams = [], _declared_hparams(out)
    for run in readable:
        values = hparams_of(run)
        for key, value in values.items():
            if all_hparams.get(key) is None:  # a run with a value declares the field's type
                all_hparams[key] = value
        written.append(_write_run(writer_class, hparams, run, out / run_path(run), values))
    _write_experiment(writer_class, hparams, out, all_hparams)
    return written


def _declared_hparams(out: Path) -> dict[str, Any]:
    """The hparams (name -> an example value) that earlier exports to ``out`` declared, so the
    experiment file keeps covering their runs when a later export adds others."""
    path = out / DECLARED_FILE
    try:
        values = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return values if isinstance(values, dict) else {}


def _write_run(writer_class: type, hparams: Callable, run: StoredRun, folder: Path, values: dict) -> Path:
    """The run's scalars per round and its hparams session, in ``folder``."""
    _remove_earlier_export(folder)
    rounds = run.record.read_rounds()
    summary = run.summary or {}
    class_names, diverged = summary.get("class_names") or [], bool(summary.get("diverged", False))
    start = _start_time(run, rounds)
    writer = writer_class(str(folder), filename_suffix=FILE_SUFFIX)
    try:
        for record in rounds:
            step, walltime = record["round"] + 1, start + float(record.get("seconds") or 0.0)
            for tag, value in round_scalars(record, class_names).items():
                if not (diverged and tag.startswith(ACCURACY_TAGS)):
                    writer.add_scalar(tag, value, step, walltime=walltime)
        _, session_start, session_end = hparams(values, METRICS)
        file_writer = writer._get_file_writer()
        file_writer.add_summary(session_start)
        if summary:
            _write_metrics(writer, summary, rounds[-1]["round"] + 1 if rounds else 0)
            file_writer.add_summary(session_end)
    finally:
        writer.close()
    return folder


def _write_metrics(writer, summary: dict, step: int) -> None:
    """A finished run's hparams metrics: whether it diverged, and its accuracies unless it did."""
    diverged = bool(summary.get("diverged", False))
    writer.add_scalar(DIVERGED_TAG, float(diverged), step)
    if not diverged:
        writer.add_scalar(FINAL_TAG, 100 * summary["final_accuracy"], step)
        writer.add_scalar(BEST_TAG, 100 * summary["best_accuracy"], step)


def _write_experiment(writer_class: type, hparams: Callable, out: Path, all_hparams: dict) -> None:
    """The experiment declaration (every hparam and the two metrics) at the top of ``out``."""
    _remove_earlier_export(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / DECLARED_FILE).write_text(json.dumps(all_hparams, indent=1, sort_keys=True) + "\n")
    experiment, _, _ = hparams(all_hparams, METRICS)
    writer = writer_class(str(out), filename_suffix=FILE_SUFFIX)
    try:
        writer._get_file_writer().add_summary(experiment)
    finally:
        writer.close()


def _start_time(run: StoredRun, rounds: list[dict]) -> float:
    """When the run started training (its last write minus its training seconds), so the
    relative-time axis shows training time."""
    end = run.record.finished_at() or run.record.last_modified()
    seconds = rounds[-1].get("seconds") if rounds else 0.0
    return end - float(seconds or 0.0)


def _remove_earlier_export(folder: Path) -> None:
    """Delete the event files an earlier export wrote in ``folder`` (only fedlib's own)."""
    if folder.is_dir():
        for path in folder.glob(f"events.out.tfevents.*{FILE_SUFFIX}"):
            path.unlink()
