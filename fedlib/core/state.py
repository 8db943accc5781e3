"""Run state and data types, the top of the core's vocabulary: what every layer above talks about.

- :func:`keyed_seed`, :func:`sample_clients`: randomness is keyed, not streamed. The clients of
  round r come from (seed, r); client k's data order, augmentation and dropout in round r from
  (seed, r, k); so a run resumed at round r continues exactly as an uninterrupted one.
- :class:`FederatedData`, :class:`ClientData`: the dataset on the run's device (uint8; batches
  are indexed, augmented and normalised there) and one client's slice of it.
- :class:`ServerState`: what the server holds between rounds, and where a method keeps its state.

Nothing here knows the methods, the local training, the backends or the engine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np
import torch
from torch import Tensor, nn

from fedlib.core.config import RunConfig
from fedlib.datasets.augment import AugmentSpec, apply_augmentation, draw_augmentation, prepare_batch
from fedlib.datasets.data import Dataset
from fedlib.datasets.partition import Partition
from fedlib.models import build_model


# ====================================================================== seeds
def keyed_seed(*keys: int) -> int:
    """A 63-bit seed derived from a tuple of integers (seed, round, client, ...)."""
    return int(np.random.SeedSequence([int(k) for k in keys]).generate_state(2, np.uint64)[0] >> np.uint64(1))


def sample_clients(seed: int, round_index: int, num_clients: int, participation: float) -> list[int]:
    """The clients of one round: ceil-free rounding of participation * K, at least one, sorted."""
    count = max(1, int(round(participation * num_clients)))
    if count >= num_clients:
        return list(range(num_clients))
    rng = np.random.default_rng([seed, round_index])
    return sorted(int(k) for k in rng.choice(num_clients, size=count, replace=False))


# ====================================================================== data on the device
# Test images per evaluation batch. On a CPU a batch of 1,000 CIFAR images leaves the caches
# (cnn2's first activation alone is 131 MB): a batch of 100 evaluated cnn2 1.5-1.7x faster on
# one core, with the same predictions and the loss equal to float rounding (benchmarks/RESULTS-cpu.md).
EVAL_BATCH = {"cuda": 1000, "cpu": 100}


def eval_batch_size(device: torch.device) -> int:
    """Test images per evaluation batch on ``device`` (:data:`EVAL_BATCH`; 1,000 elsewhere)."""
    return EVAL_BATCH.get(torch.device(device).type, 1000)


class FederatedData:
    """The dataset on the run's device plus the partition of its training set."""

    def __init__(self, dataset: Dataset, partition: Partition, augmentation: AugmentSpec | None,
                 device: torch.device, memory_format: torch.memory_format = torch.contiguous_format,
                 drop_last: bool = False):
        self.dataset = dataset
        self.drop_last = drop_last  # clients' training epochs skip their last partial batch
        self.memory_format = memory_format  # of every batch handed to a model
        self.partition = partition
        self.augmentation = augmentation
        self.device = device
        self.train_x = dataset.train_x.to(device)
        self.train_y = dataset.train_y.to(device)
        self.test_x = dataset.test_x.to(device)
        self.test_y = dataset.test_y.to(device)
        self.num_classes = dataset.num_classes

    def client(self, client_id: int) -> ClientData:
        indices = torch.as_tensor(self.partition.client_indices[client_id], dtype=torch.long, device=self.device)
        counts = torch.as_tensor(self.partition.counts[client_id], dtype=torch.float32, device=self.device)
        return ClientData(self, indices, counts, drop_last=self.drop_last)

    def normalise(self, x_uint8: Tensor, generator: torch.Generator | None = None, train: bool = False) -> Tensor:
        spec = self.augmentation if train else None
        x = prepare_batch(x_uint8, self.dataset.mean, self.dataset.std, spec, generator)
        return x.contiguous(memory_format=self.memory_format) if x.dim() == 4 else x

    def train_draws(self, count: int, generator: torch.Generator) -> dict[str, Tensor]:
        """The random numbers with which ``normalise(x, generator, train=True)`` augments ``count``
        training images, drawn from ``generator`` as it draws them (:func:`draw_augmentation`)."""
        height, width = self.train_x.shape[-2:]
        return draw_augmentation(self.augmentation, count, height, width, generator, self.device)

    def augment_drawn(self, x_uint8: Tensor, draws: dict[str, Tensor]) -> Tensor:
        """Training images augmented with ``draws`` (:meth:`train_draws`, or several clients'
        concatenated) and normalised: what ``normalise(x, generator, train=True)`` gives."""
        x = apply_augmentation(x_uint8, self.dataset.mean, self.dataset.std, self.augmentation, draws)
        return x.contiguous(memory_format=self.memory_format) if x.dim() == 4 else x

    def test_batches(self, batch_size: int | None = None) -> Iterator[tuple[Tensor, Tensor]]:
        """The test set in batches of ``batch_size`` (default: :func:`eval_batch_size` of the device)."""
        batch_size = batch_size or eval_batch_size(self.device)
        for start in range(0, len(self.test_y), batch_size):
            x = self.test_x[start:start + batch_size]
            yield self.normalise(x), self.test_y[start:start + batch_size]


@dataclass
class ClientData:
    """One client's slice of the training set."""

    data: FederatedData
    indices: Tensor  # (n_k,) indices into the training set, on the device
    class_counts: Tensor  # (C,) float
    drop_last: bool = False  # skip each epoch's last partial batch, as torch's DataLoader(drop_last=True)

    @property
    def num_samples(self) -> int:
        return int(self.indices.numel())

    def steps_per_epoch(self, batch_size: int) -> int:
        """Mini-batches per epoch: ceil(n/B), or floor(n/B) with ``drop_last``."""
        if self.drop_last:
            return self.num_samples // batch_size
        return math.ceil(self.num_samples / batch_size)

    def train_batches(self, batch_size: int, epochs: int, generator: torch.Generator) -> TrainBatches:
        """Shuffled, augmented mini-batches; the last batch of an epoch may be smaller (or is
        dropped with ``drop_last``)."""
        return TrainBatches(self, self.batch_indices(batch_size, epochs, generator), generator)

    def batch_indices(self, batch_size: int, epochs: int, generator: torch.Generator) -> Iterator[Tensor]:
        """The training-set indices of each mini-batch: each epoch's order is drawn from
        ``generator`` when its first batch is asked for."""
        for _ in range(epochs):
            order = self.indices[torch.randperm(self.num_samples, generator=generator, device=generator.device)]
            for start in range(0, self.steps_per_epoch(batch_size) * batch_size, batch_size):
                yield order[start:start + batch_size]

    def eval_batches(self, batch_size: int = 500) -> Iterator[tuple[Tensor, Tensor]]:
        """The local data in a fixed order, normalised but not augmented."""
        for start in range(0, self.num_samples, batch_size):
            idx = self.indices[start:start + batch_size]
            yield self.data.normalise(self.data.train_x[idx]), self.data.train_y[idx]


class TrainBatches:
    """A client's training batches, an iterator of (x, y): each batch's indices, then its
    augmentation's random numbers, drawn from one generator. Its parts are open so that the
    stacked path can draw many clients' batches at once with the same numbers
    (:mod:`fedlib.engine.backends.stacked_batches`)."""

    def __init__(self, client: ClientData, indices: Iterator[Tensor], generator: torch.Generator):
        self.client, self.indices, self.generator = client, indices, generator

    def __iter__(self) -> TrainBatches:
        return self

    def __next__(self) -> tuple[Tensor, Tensor]:
        idx = next(self.indices)
        data = self.client.data
        return data.normalise(data.train_x[idx], self.generator, train=True), data.train_y[idx]


# ====================================================================== server state
@dataclass
class ServerState:
    """What the server holds between rounds.

    Methods keep their state in exactly two places. ``extras`` is what an exact resume needs
    (saved in every checkpoint). ``cache`` is what can be rebuilt from the global model and
    ``extras`` (teachers' modules, per-round totals, scratch models): never checkpointed, and
    never anything a resumed run would compute differently. Nothing lives on ``Algorithm``
    instances or elsewhere on the server.

    Per-client state lives in *client tables*: dicts keyed by client id (int) holding tensors,
    anywhere in ``extras`` (``extras["scaffold_c_clients"][k]``). The store writes them one file
    per client and rewrites a client's file only when its entry changed: replace the entry, or
    change its tensors in place (version counters see that), never through ``.data``. A finished
    run keeps only ``model`` and the rest of ``extras`` (its client tables come back empty).
    """

    cfg: RunConfig
    model: nn.Module  # the global model
    data: FederatedData
    device: torch.device
    round: int = 0
    extras: dict[str, Any] = field(default_factory=dict)
    hparams: dict[str, Any] = field(default_factory=dict)  # the method's resolved hyperparameters
    round_clients: list[int] = field(default_factory=list)  # the clients sampled this round
    cache: dict[str, Any] = field(default_factory=dict, repr=False)  # rebuildable, not checkpointed

    @property
    def num_classes(self) -> int:
        return self.data.num_classes

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        """The dtype of the local forward passes under autocast (None: plain fp32)."""
        return torch.bfloat16 if self.cfg.precision == "bf16" else None

    def local_model(self) -> nn.Module:
        """One reusable local model loaded with the global state (no deep copy per client)."""
        scratch = self.cache.get("scratch_model")
        if scratch is None:
            scratch = self.cache["scratch_model"] = self.new_model()
        scratch.load_state_dict(self.model.state_dict())
        return scratch

    def new_model(self, num_classes: int | None = None) -> nn.Module:
        """A fresh model of the run's architecture (e.g. for teachers or PKD's experts)."""
        model = build_run_model(self.cfg, self.data.dataset, num_classes)
        return model.to(self.device, memory_format=self.data.memory_format)


def build_run_model(cfg: RunConfig, dataset: Dataset, num_classes: int | None = None) -> nn.Module:
    """A fresh model of ``cfg.model`` for ``dataset``'s images (``num_classes`` outputs, default all)."""
    channels, height, _ = dataset.image_shape
    return build_model(cfg.model, num_classes or dataset.num_classes, in_channels=channels, image_size=height)
