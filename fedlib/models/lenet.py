"""``lenet5`` (PKD) and ``simple_cnn`` (FedCSD's FEMNIST network, MOON's "simple CNN"): LeNet-5's
layers, padded for small inputs (``lenet5``) or never (``simple_cnn``)."""

from __future__ import annotations

from torch import nn

from fedlib.models.layers import spatial_after


def lenet5(in_channels: int, image_size: int,
           first_padding: int | None = None) -> tuple[nn.Module, int]:
    if first_padding is None:
        first_padding = 2 if image_size <= 28 else 0  # MNIST's 28x28 seen as 32x32
    return _lenet_body("lenet5", in_channels, image_size, first_padding)


def simple_cnn(in_channels: int, image_size: int) -> tuple[nn.Module, int]:
    return _lenet_body("simple_cnn", in_channels, image_size, first_padding=0)


def _lenet_body(name: str, in_channels: int, image_size: int, first_padding: int) -> tuple[nn.Module, int]:
    """conv5x5 -> 6, max-pool, conv5x5 -> 16, max-pool, FC 120, FC 84 (ReLU after each)."""
    conv_pool = [(5, 1, first_padding), (2, 2, 0), (5, 1, 0), (2, 2, 0)]
    spatial = spatial_after(name, image_size, conv_pool)
    body = nn.Sequential(
        nn.Conv2d(in_channels, 6, 5, padding=first_padding), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * spatial * spatial, 120), nn.ReLU(),
        nn.Linear(120, 84), nn.ReLU(),
    )
    return body, 84
