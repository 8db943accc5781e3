"""Data sources: where the engine gets a dataset by name.

A run normally reads the real files (:data:`FILES`). A dry run, a timing probe or a benchmark
trains on stand-ins of the same shape instead, and says so by handing the engine another source
(``engine.run(cfg, source=...)``) rather than by replacing the engine's loader. A source is a
frozen value: the engine keys its dataset cache by it, so a stand-in is never served to a run
that asked for the files, and it refuses to store a run whose source is not real.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from fedlib.datasets.data import Dataset, load_dataset, stand_in_dataset


@dataclass(frozen=True)
class DataSource:
    """The real files, found (or downloaded) as :func:`fedlib.datasets.data.load_dataset` does."""

    real = True  # runs on it may be stored and served

    def load(self, name: str, data_dir: str | os.PathLike | None = None, download: bool = False,
             **options) -> Dataset:
        """Dataset ``name`` with loader ``options`` (as ``load_dataset`` takes them)."""
        return load_dataset(name, data_dir=data_dir, download=download, **options)

    def describe(self) -> str:
        """A few words for messages."""
        return "the data files"


FILES = DataSource()


@dataclass(frozen=True)
class StandIns(DataSource):
    """Stand-ins of each dataset's shape (:func:`fedlib.datasets.data.stand_in_dataset`): ``train``
    and ``test`` samples, ``groups`` natural groups (None: the dataset's own count), pixels of
    ``image_size`` when set. ``names`` limits the stand-ins to those datasets (the rest come from
    the files); None stands in for every dataset."""

    train: int
    test: int
    seed: int = 0
    groups: int | None = None
    image_size: int | None = None
    names: tuple[str, ...] | None = None

    real = False

    def load(self, name: str, data_dir: str | os.PathLike | None = None, download: bool = False,
             **options) -> Dataset:
        if self.names is not None and name not in self.names:
            return FILES.load(name, data_dir=data_dir, download=download, **options)
        if self.image_size:
            options = {**options, "image_size": self.image_size}
        return stand_in_dataset(name, self.train, self.test, seed=self.seed, groups=self.groups, **options)

    def describe(self) -> str:
        which = "every dataset" if self.names is None else ", ".join(self.names)
        return f"stand-ins of {which} ({self.train} train / {self.test} test images)"
