"""Where an analysis reads a run's final model from.

The committed reference store keeps the final model only of the runs a committed notebook analyses; the
others are metrics only, to keep the clone small. When an analysis asks for the model of a run the reference
store serves without one (a student who changed a parameter of an analysis lesson, say), the run is trained
again, once, in the working store the run was asked from, and its model is read there. A retrained run that
does not end where the committed one did (another CPU's float rounding) is said in one line: its model is
this machine's, the served metrics are the committed run's.
"""

from __future__ import annotations

import warnings
from typing import Callable

from fedlib import store
from fedlib.errors import FedlibError
from fedlib.store.provenance import ProvenanceWarning


def has_model(record: store.RunRecord) -> bool:
    """Whether ``record`` holds a final model or a resume checkpoint."""
    return any((record.folder / name).exists() for name in (store.FINAL_FILE, store.CHECKPOINT_FILE))


def model_record(result, train: Callable, rendering_only: bool) -> store.RunRecord | None:
    """The record whose model ``result``'s analyses read: its own folder, or, for a run the reference store
    serves without its model, the run trained again in ``result.working_store`` by ``train(cfg, results_dir)``
    (refused in one line while ``rendering_only``); None for a result with no folder at all."""
    if result.folder is None:
        return None
    record = store.RunRecord(result.folder)
    if has_model(record) or not _in_reference_store(record):
        return record
    key = result.config.hash()
    if result.working_store is None:
        raise FedlibError(f"run {key}'s model is not committed (the reference store keeps its metrics only) and "
                          "no working store was named to train it again in: run it with results_dir set")
    working = store.RunRecord(store.run_dir(result.config, result.working_store))
    if not working.complete:
        _retrain(result.config, working, train, rendering_only)
    _say_if_different(key, record.read_summary(), working.read_summary())
    return working


def _in_reference_store(record: store.RunRecord) -> bool:
    root = store.reference_root()
    return root is not None and store.same_folder(record.folder.parent, root)


def _retrain(cfg, working: store.RunRecord, train: Callable, rendering_only: bool) -> None:
    """Train ``cfg`` into ``working``'s store, past the reference store that serves its metrics."""
    if rendering_only:
        raise FedlibError(f"run {cfg.hash()}'s model is not committed (the reference store keeps its metrics only) "
                          "and runs are rendered only: run the notebook without --render-only to train it again")
    print(f"run {cfg.hash()}: its model is not committed (the reference store keeps its metrics only); "
          f"training it again in {working.folder.parent} for this analysis", flush=True)
    train(cfg, working.folder.parent)


def _say_if_different(key: str, committed: dict, retrained: dict) -> None:
    if committed.get("final_accuracy") != retrained.get("final_accuracy"):
        warnings.warn(f"run {key} trained again here ends at {100 * retrained['final_accuracy']:.2f} % test accuracy, "
                      f"the committed run at {100 * committed['final_accuracy']:.2f} %: the analysis reads this "
                      "machine's model, the tables the committed metrics", ProvenanceWarning, stacklevel=3)
