"""Building blocks the model families share: spatial sizes through a stack of layers (a size that
vanishes is refused), 3x3 conv + ReLU, conv + BatchNorm, He initialisation, and the input size
from which the ImageNet stems are kept."""

from __future__ import annotations

from torch import nn

from fedlib.errors import FedlibError

# Inputs at least this large keep the ImageNet stems of resnet50 and alexnet.
IMAGENET_STEM_MIN_SIZE = 64


def out_size(size: int, kernel: int, stride: int = 1, padding: int = 0) -> int:
    """Spatial size after one conv or pool layer (floor mode, as PyTorch computes it)."""
    return (size + 2 * padding - kernel) // stride + 1


def spatial_after(name: str, image_size: int, layers: list[tuple[int, int, int]]) -> int:
    """Chain ``(kernel, stride, padding)`` layers; a size that vanishes raises FedlibError."""
    def final(size: int) -> int:
        for kernel, stride, padding in layers:
            size = out_size(size, kernel, stride, padding)
            if size < 1:
                return 0
        return size

    spatial = final(image_size)
    if spatial < 1:
        smallest = next(s for s in range(1, 1025) if final(s) >= 1)
        raise FedlibError(f"model {name!r} cannot take {image_size}x{image_size} inputs; "
                          f"use image_size >= {smallest}")
    return spatial


def conv3_relu(in_channels: int, out_channels: int) -> list[nn.Module]:
    return [nn.Conv2d(in_channels, out_channels, 3, padding=1), nn.ReLU()]


def conv_bn(in_channels: int, out_channels: int, kernel: int, stride: int = 1,
            groups: int = 1) -> list[nn.Module]:
    conv = nn.Conv2d(in_channels, out_channels, kernel, stride, padding=kernel // 2,
                     groups=groups, bias=False)
    return [conv, nn.BatchNorm2d(out_channels)]


def he_init_convs(module: nn.Module) -> None:
    for layer in module.modules():
        if isinstance(layer, nn.Conv2d):
            nn.init.kaiming_normal_(layer.weight, mode="fan_out", nonlinearity="relu")
