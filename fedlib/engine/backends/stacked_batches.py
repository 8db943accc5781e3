"""The stacked path's batches: one local step's batches of every client of a stack, drawn at once.

Each client's batches come from its own generator (:class:`fedlib.core.state.TrainBatches`, keyed
by (seed, round, client) as on the sequential path): for each batch, the epoch's order when the
epoch begins, then the augmentation's random numbers. Those draws stay per client, in that order,
so every client gets exactly the numbers its generator gives on the sequential path. Everything
after them runs once for all the clients of a batch size: their indices and random numbers are
concatenated, the images indexed once, augmented once (every augmentation preset acts on each
sample with that sample's own numbers only: crop offsets, flip, AutoAugment's five uniforms,
Cutout's centre) and normalised once, then viewed as (clients, batch, ...). The result is bit for
bit the per-client draw (:func:`draw_per_client`, kept as the reference and for what cannot
draw at once: :func:`together_reason`).

A step's clients are grouped by batch size (the last batch of an epoch may be smaller), largest
first, each group in stack order; each group is drawn at once.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from fedlib.core.state import TrainBatches

Group = tuple[list[int], Tensor, Tensor]  # stack positions, x (m, B, ...), y (m, B)


def together_reason(iterators: Sequence) -> str | None:
    """Why these clients' batches cannot be drawn at once (None when they can): each must be a
    :class:`TrainBatches` and all of them of the same dataset."""
    if not all(isinstance(it, TrainBatches) for it in iterators):
        return "a client's batches are not TrainBatches"
    if any(it.client.data is not iterators[0].client.data for it in iterators):
        return "the clients' batches come from different datasets"
    return None


def draw_batches(iterators: Sequence, active: int) -> list[Group]:
    """The next batch of each of the first ``active`` clients, grouped by batch size: drawn at
    once (:func:`draw_together`) where :func:`together_reason` allows, else client by client."""
    if together_reason(iterators[:active]) is None:
        return draw_together(iterators, active)
    return draw_per_client(iterators, active)


def _size_groups(sizes: list[int]) -> list[list[int]]:
    """Stack positions grouped by batch size, largest size first, positions ascending."""
    return [[i for i, s in enumerate(sizes) if s == size] for size in sorted(set(sizes), reverse=True)]


def draw_per_client(iterators: Sequence, active: int) -> list[Group]:
    """Each client's next batch drawn, augmented and normalised alone, then stacked per size."""
    batches = [next(iterators[i]) for i in range(active)]
    groups = _size_groups([len(y) for _, y in batches])
    return [(members, torch.stack([batches[i][0] for i in members]), torch.stack([batches[i][1] for i in members]))
            for members in groups]


def draw_together(iterators: Sequence[TrainBatches], active: int) -> list[Group]:
    """Each client's next indices and random numbers from its own generator, in its order; then
    per batch size one indexing, augmentation and normalisation of all those clients' images."""
    drawn = []
    for it in iterators[:active]:
        idx = next(it.indices)
        drawn.append((idx, it.client.data.train_draws(len(idx), it.generator)))
    data = iterators[0].client.data
    groups = []
    for members in _size_groups([len(idx) for idx, _ in drawn]):
        idx = torch.cat([drawn[i][0] for i in members])
        draws = {key: torch.cat([drawn[i][1][key] for i in members]) for key in drawn[members[0]][1]}
        shape = (len(members), len(idx) // len(members))
        x = data.augment_drawn(data.train_x[idx], draws)
        groups.append((members, x.unflatten(0, shape), data.train_y[idx].unflatten(0, shape)))
    return groups
