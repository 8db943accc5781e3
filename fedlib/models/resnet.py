"""The ResNets: CIFAR ResNet-8/32/56 (He et al. 2016, zero-padding or projection shortcuts), the
common CIFAR ResNet-18, and torchvision's ResNet-18 and ResNet-50 bodies (CIFAR stem for small inputs)."""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
import torchvision
from torch import nn

from fedlib.errors import one_of
from fedlib.models.layers import IMAGENET_STEM_MIN_SIZE, conv_bn, he_init_convs


class ZeroPadShortcut(nn.Module):
    """He et al. 2016 option A: subsample by the stride, zero-pad the new channels."""

    def __init__(self, in_channels: int, out_channels: int, stride: int):
        super().__init__()
        self.stride = stride
        self.pad_front = (out_channels - in_channels) // 2
        self.pad_back = out_channels - in_channels - self.pad_front

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x[:, :, ::self.stride, ::self.stride]
        return F.pad(x, (0, 0, 0, 0, self.pad_front, self.pad_back))


class BasicBlock(nn.Module):
    """Two 3x3 conv+BN layers plus a shortcut, ReLU after the sum."""

    def __init__(self, in_channels: int, out_channels: int, stride: int, zero_pad_shortcut: bool):
        super().__init__()
        self.residual = nn.Sequential(*conv_bn(in_channels, out_channels, 3, stride), nn.ReLU(),
                                      *conv_bn(out_channels, out_channels, 3))
        if stride == 1 and in_channels == out_channels:
            self.shortcut = nn.Identity()
        elif zero_pad_shortcut:
            self.shortcut = ZeroPadShortcut(in_channels, out_channels, stride)
        else:
            self.shortcut = nn.Sequential(*conv_bn(in_channels, out_channels, 1, stride))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.residual(x) + self.shortcut(x))


def _resnet_body(in_channels: int, widths: list[int], blocks_per_stage: int,
                 zero_pad_shortcut: bool) -> nn.Sequential:
    """3x3 stride-1 stem, stages of basic blocks (stride 2 from the second), global pool."""
    layers = [*conv_bn(in_channels, widths[0], 3), nn.ReLU()]
    channels = widths[0]
    for stage, width in enumerate(widths):
        for block in range(blocks_per_stage):
            stride = 2 if stage > 0 and block == 0 else 1
            layers.append(BasicBlock(channels, width, stride, zero_pad_shortcut))
            channels = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    body = nn.Sequential(*layers)
    he_init_convs(body)
    return body


SHORTCUTS = ("zero_pad", "projection")


def cifar_resnet(depth: int) -> Callable[..., tuple[nn.Module, int]]:
    """Builder for the depth-(6n+2) CIFAR ResNet of He et al. 2016."""
    def build(in_channels: int, image_size: int,
              shortcut: str = "zero_pad") -> tuple[nn.Module, int]:
        if shortcut not in SHORTCUTS:
            raise one_of("shortcut", shortcut, SHORTCUTS)
        blocks_per_stage = (depth - 2) // 6
        zero_pad = shortcut == "zero_pad"
        return _resnet_body(in_channels, [16, 32, 64], blocks_per_stage, zero_pad), 64
    return build


def resnet18(in_channels: int, image_size: int) -> tuple[nn.Module, int]:
    return _resnet_body(in_channels, [64, 128, 256, 512], 2, False), 512


def _torchvision_resnet(model: nn.Module, in_channels: int, cifar_stem: bool) -> nn.Module:
    """Turn a torchvision ResNet into a body: new stem if needed, ``fc`` removed."""
    if cifar_stem:
        model.conv1 = nn.Conv2d(in_channels, 64, 3, stride=1, padding=1, bias=False)
        model.maxpool = nn.Identity()
    elif in_channels != 3:
        model.conv1 = nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False)
    he_init_convs(model.conv1)
    model.fc = nn.Identity()
    return model


def resnet18_imagenet(in_channels: int, image_size: int) -> tuple[nn.Module, int]:
    model = torchvision.models.resnet18(weights=None)
    return _torchvision_resnet(model, in_channels, cifar_stem=False), 512


def resnet50(in_channels: int, image_size: int,
             cifar_stem: bool | None = None) -> tuple[nn.Module, int]:
    if cifar_stem is None:
        cifar_stem = image_size < IMAGENET_STEM_MIN_SIZE
    model = torchvision.models.resnet50(weights=None)
    return _torchvision_resnet(model, in_channels, cifar_stem), 2048
