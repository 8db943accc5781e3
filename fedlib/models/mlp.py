"""``mlp``: FedVLS's MNIST network, 784-200-200-C with ReLU (McMahan et al. 2017's "2NN")."""

from __future__ import annotations

from torch import nn


def mlp(in_channels: int, image_size: int) -> tuple[nn.Module, int]:
    body = nn.Sequential(
        nn.Flatten(),
        nn.Linear(in_channels * image_size * image_size, 200), nn.ReLU(),
        nn.Linear(200, 200), nn.ReLU(),
    )
    return body, 200
