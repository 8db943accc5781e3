"""The usual federated loop, written the way most released FL code writes it (the baseline).

Per round: for each client in turn, ``copy.deepcopy`` the global model, build a torch
``DataLoader`` over a ``Subset`` of the training set whose ``__getitem__`` turns one uint8
image into a PIL image and runs torchvision transforms on it, and take one small batch per
step; then average the deep-copied state dicts. The local objective is the fedlib method's own
``objective`` hook (same loss, same teachers), so the two sides do the same arithmetic and
differ only in how the work is organised.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset, Subset
from torchvision import transforms

from fedlib.algorithms.base import Algorithm, ClientContext, ClientUpdate
from fedlib.core.state import ServerState, sample_clients


class PILImages(Dataset):
    """uint8 images (N, C, H, W) served one PIL image at a time through ``transform``."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, transform: Any):
        self.images = images.permute(0, 2, 3, 1).contiguous().numpy()  # HWC, as PIL wants
        self.labels = labels.tolist()
        self.transform = transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int):
        array = self.images[index]
        image = Image.fromarray(array[:, :, 0] if array.shape[2] == 1 else array)
        return self.transform(image), self.labels[index]


def torchvision_transform(server: ServerState) -> Any:
    """The torchvision equivalent of the run's augmentation preset (crop+flip or none)."""
    dataset = server.data.dataset
    steps = []
    if server.data.augmentation is not None and dataset.image_shape[0] == 3:
        size = dataset.image_shape[1]
        steps += [transforms.RandomCrop(size, padding=4), transforms.RandomHorizontalFlip()]
    steps += [transforms.ToTensor(), transforms.Normalize(dataset.mean, dataset.std)]
    return transforms.Compose(steps)


def naive_client(server: ServerState, algorithm: Algorithm, train_set: PILImages, client_id: int,
                 lr: float) -> ClientUpdate:
    """Deep copy, DataLoader over a Subset, one small batch per step."""
    cfg = server.cfg
    client = server.data.client(client_id)
    local = copy.deepcopy(server.model)
    local.train()
    if client.num_samples == 0:  # a DataLoader cannot shuffle an empty Subset
        return ClientUpdate(client_id, copy.deepcopy(local.state_dict()), 0, 0)
    loader = DataLoader(Subset(train_set, client.indices.tolist()), batch_size=cfg.batch_size, shuffle=True)
    ctx = ClientContext(client_id=client_id, round=server.round, class_counts=client.class_counts,
                        num_samples=client.num_samples, data=client, lr=lr)
    algorithm.client_context(server, ctx)
    optimizer = algorithm.make_optimizer(local, lr, cfg.momentum, cfg.weight_decay)
    steps = 0
    for _ in range(cfg.local_epochs):
        for x, y in loader:
            x, y = x.to(server.device), y.to(server.device)
            optimizer.zero_grad()
            algorithm.objective(local, x, y, ctx).backward()
            optimizer.step()
            steps += 1
    update = ClientUpdate(client_id, copy.deepcopy(local.state_dict()), client.num_samples, steps,
                          metrics=dict(ctx.metrics))
    algorithm.client_upload(local, ctx, update)
    return update


def naive_round(server: ServerState, algorithm: Algorithm, train_set: PILImages) -> None:
    """One round: the method's begin_round, sequential clients, then its aggregation and end-of-round update."""
    cfg = server.cfg
    algorithm.begin_round(server)
    clients = sample_clients(cfg.seed, server.round, cfg.clients, cfg.participation)
    server.round_clients = clients
    lr = cfg.lr * cfg.lr_decay ** server.round
    updates = [naive_client(server, algorithm, train_set, k, lr) for k in clients]
    server.model.load_state_dict(algorithm.aggregate(server, updates))
    algorithm.end_round(server, updates)


def naive_train_set(server: ServerState) -> PILImages:
    """The run's training set as a per-sample PIL dataset."""
    dataset = server.data.dataset
    return PILImages(dataset.train_x, dataset.train_y, torchvision_transform(server))
