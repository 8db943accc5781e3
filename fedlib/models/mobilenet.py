"""``mobilenetv2`` (FedVLS): the 32x32 variant of FedVLS's code."""

from __future__ import annotations

import torch
from torch import nn

from fedlib.models.layers import conv_bn

# (expansion, out_channels, blocks, stride of the first block), FedVLS's 32x32 variant.
MOBILENETV2_STAGES = ((1, 16, 1, 1), (6, 24, 2, 1), (6, 32, 3, 2), (6, 64, 4, 2),
                      (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


class InvertedResidual(nn.Module):
    """1x1 expand, 3x3 depthwise, 1x1 linear projection; residual whenever stride is 1."""

    def __init__(self, in_channels: int, out_channels: int, expansion: int, stride: int):
        super().__init__()
        hidden = expansion * in_channels
        self.residual = nn.Sequential(
            *conv_bn(in_channels, hidden, 1), nn.ReLU(),
            *conv_bn(hidden, hidden, 3, stride, groups=hidden), nn.ReLU(),
            *conv_bn(hidden, out_channels, 1),
        )
        # Strided blocks have no shortcut at all (so no unused parameters either).
        self.shortcut: nn.Module | None = None
        if stride == 1:
            self.shortcut = nn.Identity() if in_channels == out_channels else nn.Sequential(
                *conv_bn(in_channels, out_channels, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.residual(x)
        if self.shortcut is not None:  # fixed at construction, not a tensor-value branch
            out = out + self.shortcut(x)
        return out


def mobilenetv2(in_channels: int, image_size: int) -> tuple[nn.Module, int]:
    layers = [*conv_bn(in_channels, 32, 3), nn.ReLU()]
    channels = 32
    for expansion, width, blocks, first_stride in MOBILENETV2_STAGES:
        for block in range(blocks):
            stride = first_stride if block == 0 else 1
            layers.append(InvertedResidual(channels, width, expansion, stride))
            channels = width
    layers += [*conv_bn(channels, 1280, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    return nn.Sequential(*layers), 1280
