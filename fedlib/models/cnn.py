"""``cnn2`` (FedNTD/FedLMD) and ``convnet_s`` (PKD): one network, the CNN of McMahan et al. 2017."""

from __future__ import annotations

from torch import nn

from fedlib.models.layers import spatial_after


def cnn2(in_channels: int, image_size: int) -> tuple[nn.Module, int]:
    return _mcmahan_cnn("cnn2", in_channels, image_size)


def convnet_s(in_channels: int, image_size: int) -> tuple[nn.Module, int]:
    return _mcmahan_cnn("convnet_s", in_channels, image_size)


def _mcmahan_cnn(name: str, in_channels: int, image_size: int) -> tuple[nn.Module, int]:
    """McMahan et al. 2017's CNN: two 5x5 'same' convs (32, 64), each max-pooled, FC 512."""
    spatial = spatial_after(name, image_size, [(5, 1, 2), (2, 2, 0), (5, 1, 2), (2, 2, 0)])
    body = nn.Sequential(
        nn.Conv2d(in_channels, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * spatial * spatial, 512), nn.ReLU(),
    )
    return body, 512
