"""Draw every declared run's partition over its full training set, seed by seed.

The dry run (:mod:`fedlib.orchestration.dry_run`) trains one round per config on a slice of its data, and
configs that differ only in their seed share its row. What the seed changes at full scale is the
partition: a Dirichlet split with a small beta over 100 clients may leave a client below
``min_client_size`` for one seed and not another, and a slice cannot show it. This check draws
the partition exactly as the engine would, for every distinct (data, partition, clients, seed)
the configs declare, on the real labels; where the data are missing here it says so and checks
nothing. Drawing needs only the labels: seconds for the whole paper profile.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Sequence

import pandas as pd

from fedlib.core.config import RunConfig
from fedlib.datasets.partition import FIELDS_READ, SCHEME_SETTINGS
from fedlib.errors import FedlibError, one_line

PARTITION_FIELDS = ("dataset", "dataset_options", "max_train_samples", "partition", "clients", "beta",
                    "shards_per_client", "classes_per_client", "min_client_size", "quantity_split", "global_balance",
                    "seed")
COLUMNS = PARTITION_FIELDS + ("configs", "notebooks", "status", "error", "smallest_client", "largest_client",
                              "fewest_classes", "most_classes")


def partition_key(cfg: RunConfig) -> str:
    """What the engine reads to draw ``cfg``'s partition, as one string: the scheme settings its
    scheme does not read (:data:`fedlib.datasets.partition.FIELDS_READ`) left out, as the config hash does."""
    unread = set(SCHEME_SETTINGS) - set(FIELDS_READ.get(cfg.partition, SCHEME_SETTINGS))
    return json.dumps({name: getattr(cfg, name) for name in PARTITION_FIELDS if name not in unread}, sort_keys=True)


def check_partitions(configs: dict[str, tuple], csv_path: str | os.PathLike | None = None,
                     progress: bool = True) -> pd.DataFrame:
    """Draw the partition of every distinct (data, partition, clients, seed) of ``configs``
    (hash -> (config, notebooks, ...)) over the full training set; one row per draw: ok, error
    (the partitioner's message) or 'data missing here', and the clients' smallest and largest
    sizes and class counts. The rows are written to ``csv_path`` when given."""
    from tqdm.auto import tqdm

    draws: dict[str, list] = {}
    for cfg, notebooks, *_ in configs.values():
        entry = draws.setdefault(partition_key(cfg), [cfg, 0, []])
        entry[1] += 1
        entry[2] += [stem for stem in notebooks if stem not in entry[2]]
    ordered = sorted(draws.values(), key=lambda e: (e[0].dataset, partition_key(e[0])))
    rows, loaded = [], None
    for cfg, count, notebooks in tqdm(ordered, desc="partitions", unit="draw", disable=not progress):
        if (cfg.dataset, cfg.data_dir) != loaded:  # one dataset in memory at a time
            _forget_datasets()
            loaded = (cfg.dataset, cfg.data_dir)
        rows.append(_check_one(cfg, count, notebooks))
    _forget_datasets()
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    if csv_path is not None:
        _write(frame, Path(csv_path))
    return frame


def _check_one(cfg: RunConfig, count: int, notebooks: Sequence[str]) -> dict:
    from fedlib.datasets import data
    from fedlib.engine import engine
    from fedlib.orchestration.dry_run import draw_partition

    row = {name: getattr(cfg, name) for name in PARTITION_FIELDS}
    row.update(dataset_options=json.dumps(cfg.dataset_options, sort_keys=True), configs=count,
               notebooks=";".join(notebooks), status="ok", error="")
    missing = None if cfg.dataset in ("digits", "synthetic") else data.missing_dataset_message(cfg.dataset,
                                                                                              cfg.data_dir)
    if missing:
        return {**row, "status": "data missing here", "error": one_line(missing)}
    try:
        dataset = engine.load_run_dataset(cfg)
        if cfg.clients > len(dataset.train_y):
            raise FedlibError(f"clients ({cfg.clients}) exceeds the training samples ({len(dataset.train_y)})")
        partition = draw_partition(cfg, dataset)
    except (FedlibError, ValueError) as error:
        return {**row, "status": "error", "error": one_line(error)}
    sizes, classes = partition.sizes(), (partition.counts > 0).sum(axis=1)
    return {**row, "smallest_client": int(sizes.min()), "largest_client": int(sizes.max()),
            "fewest_classes": int(classes.min()), "most_classes": int(classes.max())}


def _forget_datasets() -> None:
    from fedlib.engine import engine

    engine.forget_datasets()


def _write(frame: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(path.suffix + ".tmp")
    frame.to_csv(scratch, index=False, quoting=csv.QUOTE_MINIMAL)
    scratch.replace(path)


def summary_line(frame: pd.DataFrame) -> str:
    """'partitions: N drawn at full scale, E errors, M not checked (data missing here)'."""
    status = frame["status"]
    checked = int((status != "data missing here").sum())
    return (f"partitions: {checked} of {len(frame)} drawn over the full training set "
            f"({int((status == 'ok').sum())} ok, {int((status == 'error').sum())} errors), "
            f"{len(frame) - checked} not checked: data missing here")


def format_partitions(frame: pd.DataFrame) -> str:
    """The summary line, then every error on its own line."""
    lines = [summary_line(frame)]
    for row in frame[frame["status"] == "error"].itertuples():
        lines.append(f"partition error: {row.dataset} {row.partition} clients={row.clients} seed={row.seed} "
                     f"({row.notebooks}): {row.error}")
    return "\n".join(lines)
