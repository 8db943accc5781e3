"""The data a run reads: its dataset from a source (the files, or stand-ins handed in), re-split
and capped as its config says, cached in the process; and the check that a stored run was trained
on the data here before it is served."""

from __future__ import annotations

import json
from dataclasses import replace

from fedlib import store
from fedlib.core.config import RunConfig
from fedlib.datasets.data import Dataset, apply_split, missing_dataset_message, split_option
from fedlib.datasets.data_check import (COUNT_KEYS, check_full_size, files_fingerprint, fingerprint,
                                       fingerprint_difference)
from fedlib.datasets.sources import FILES, DataSource
from fedlib.errors import FedlibError

_DATASET_CACHE: dict[tuple, Dataset] = {}


def load_run_dataset(cfg: RunConfig, source: DataSource = FILES) -> Dataset:
    """The config's dataset from ``source`` (the files unless a dry run or a benchmark hands it
    stand-ins), re-split as ``dataset_options["split"]`` says, then reduced to max_train/max_test
    samples; cached in this process under the source too."""
    key = (source, cfg.dataset, json.dumps(cfg.dataset_options, sort_keys=True), cfg.data_dir, cfg.download,
           cfg.max_train_samples, cfg.max_test_samples, cfg.seed)
    if key not in _DATASET_CACHE:
        split, options = split_option(cfg.dataset_options)
        dataset = source.load(cfg.dataset, data_dir=cfg.data_dir, download=cfg.download, **options)
        check_full_size(dataset, options, split, cfg.max_train_samples, cfg.max_test_samples)
        dataset = replace(dataset, fingerprint=dataset.fingerprint or _loaded_fingerprint(cfg, source, options, dataset))
        dataset = apply_split(dataset, split, seed=cfg.seed)
        if cfg.max_train_samples or cfg.max_test_samples:
            dataset = dataset.subset(cfg.max_train_samples, cfg.max_test_samples, seed=cfg.seed)
        _DATASET_CACHE[key] = dataset
    return _DATASET_CACHE[key]


def _loaded_fingerprint(cfg: RunConfig, source: DataSource, options: dict, dataset: Dataset) -> dict:
    """The fingerprint of ``dataset`` as ``source`` loaded it; data read from the files is kept
    (fedlib.datasets.data_check.files_fingerprint) so that serving the run later reads no image."""
    if source is not FILES:
        return fingerprint(dataset)
    value = files_fingerprint(cfg.dataset, cfg.data_dir, options, lambda: dataset)
    _SOURCE_FINGERPRINTS[_source_key(cfg)] = value
    return value


def forget_datasets() -> None:
    """Drop the datasets this process holds (a dry run frees each config's before the next)."""
    _DATASET_CACHE.clear()


_SOURCE_FINGERPRINTS: dict[tuple, dict] = {}


def _source_key(cfg: RunConfig) -> tuple:
    """What picks the loaded dataset before any re-split or cap: name, loader options, folder."""
    return cfg.dataset, json.dumps(split_option(cfg.dataset_options)[1], sort_keys=True), cfg.data_dir


def source_fingerprint(cfg: RunConfig) -> dict | None:
    """The fingerprint (fedlib.datasets.data_check.fingerprint) of the dataset ``cfg`` loads here, before
    its re-split and caps; None when the data are not here (nothing is downloaded for it). No image
    is read when a process computed it before from the same files (same names, sizes and times:
    fedlib.datasets.data_check.files_fingerprint), so serving a stored run does not load its data."""
    key = _source_key(cfg)
    if key not in _SOURCE_FINGERPRINTS:
        if missing_dataset_message(cfg.dataset, cfg.data_dir) is not None:
            return None
        options = split_option(cfg.dataset_options)[1]
        _SOURCE_FINGERPRINTS[key] = files_fingerprint(
            cfg.dataset, cfg.data_dir, options, lambda: FILES.load(cfg.dataset, data_dir=cfg.data_dir, **options))
    return _SOURCE_FINGERPRINTS[key]


def check_served_data(cfg: RunConfig, record: store.RunRecord) -> None:
    """Refuse (one line) to serve a stored run trained on data of other sizes or class counts than
    the data here; warn when only the content digest differs (the same images encoded otherwise,
    e.g. a JPEG copy). Nothing to compare when the run recorded no fingerprint (runs stored
    before fingerprints, such as the reference runs, trained on the full data) or the data are
    not here."""
    stored = record.read_meta().get("data_fingerprint")
    if not isinstance(stored, dict):
        return
    here = source_fingerprint(cfg)
    difference = None if here is None else fingerprint_difference(stored, here)
    if difference is None:
        return
    if all(stored.get(key) == here.get(key) for key in COUNT_KEYS):  # only the digest differs
        import warnings

        warnings.warn(f"run {cfg.hash()} was trained on other images of the same sizes ({difference}); served "
                      "anyway", store.ProvenanceWarning, stacklevel=4)
        return
    raise FedlibError(f"stored run {record.folder} was trained on other data than {cfg.dataset} here ({difference}); "
                      "not served: use the data it was trained on, or delete the folder to train on these")
