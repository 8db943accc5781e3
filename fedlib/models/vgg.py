"""``vgg9``: FedMA's VGG-9 without BatchNorm."""

from __future__ import annotations

from torch import nn

from fedlib.models.layers import conv3_relu, spatial_after


def vgg9(in_channels: int, image_size: int) -> tuple[nn.Module, int]:
    spatial = spatial_after("vgg9", image_size, [(2, 2, 0)] * 3)  # 3x3 convs keep the size
    body = nn.Sequential(
        *conv3_relu(in_channels, 32), *conv3_relu(32, 64), nn.MaxPool2d(2),
        *conv3_relu(64, 128), *conv3_relu(128, 128), nn.MaxPool2d(2), nn.Dropout2d(0.05),
        *conv3_relu(128, 256), *conv3_relu(256, 256), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.1),
        nn.Linear(256 * spatial * spatial, 512), nn.ReLU(),
        nn.Linear(512, 512), nn.ReLU(), nn.Dropout(0.1),
    )
    return body, 512
