"""``alexnet`` (FedCSD, Office-Caltech): torchvision's AlexNet layers, with a CIFAR stem for small
inputs, and its adaptive pool computed as a plain average pool where the bins are equal windows."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from fedlib.models.layers import IMAGENET_STEM_MIN_SIZE, conv3_relu, spatial_after


def uniform_window(size: int, output: int) -> tuple[int, int] | None:
    """(kernel, stride) of the plain average pool that equals an adaptive pool from ``size`` to
    ``output`` along one side, or None where the adaptive bins differ in width or spacing (or
    overlap entirely, as when it enlarges).
    Adaptive bin i spans floor(i * size / output) to ceil((i + 1) * size / output)."""
    starts = [i * size // output for i in range(output)]
    widths = {-(-(i + 1) * size // output) - start for i, start in enumerate(starts)}
    steps = {b - a for a, b in zip(starts, starts[1:])} or {size}
    uniform = len(widths) == 1 and len(steps) == 1 and min(steps) > 0
    return (widths.pop(), steps.pop()) if uniform else None


class UniformAdaptiveAvgPool(nn.Module):
    """``nn.AdaptiveAvgPool2d(output)`` computed as ``avg_pool2d(kernel, stride)`` where the adaptive
    bins are equal windows, with a deterministic CUDA backward, which adaptive pooling lacks. At
    AlexNet's own sizes (7x7 -> 6x6 at 32x32 input, 6x6 -> 6x6 at 224) the numbers are bit for bit
    the adaptive pool's, forward and backward; larger windows sum in another order (equal to float
    rounding). Sizes without equal windows fall back to the adaptive pool."""

    def __init__(self, output: int):
        super().__init__()
        self.output = output

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows, cols = uniform_window(x.shape[-2], self.output), uniform_window(x.shape[-1], self.output)
        if rows is None or cols is None:
            return F.adaptive_avg_pool2d(x, self.output)
        return F.avg_pool2d(x, (rows[0], cols[0]), (rows[1], cols[1]))

    def extra_repr(self) -> str:
        return f"output={self.output}"


def alexnet(in_channels: int, image_size: int,
            cifar_stem: bool | None = None) -> tuple[nn.Module, int]:
    if cifar_stem is None:
        cifar_stem = image_size < IMAGENET_STEM_MIN_SIZE
    if cifar_stem:
        stem = [nn.Conv2d(in_channels, 64, 3, padding=1), nn.ReLU()]
        stem_sizes = [(3, 1, 1)]
    else:
        stem = [nn.Conv2d(in_channels, 64, 11, stride=4, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2)]
        stem_sizes = [(11, 4, 2), (3, 2, 0)]
    spatial_after("alexnet", image_size, stem_sizes + [(3, 2, 0), (3, 2, 0)])
    body = nn.Sequential(
        *stem,
        nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
        *conv3_relu(192, 384), *conv3_relu(384, 256), *conv3_relu(256, 256),
        nn.MaxPool2d(3, 2),
        UniformAdaptiveAvgPool(6), nn.Flatten(),
        nn.Dropout(0.5), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(),
        nn.Dropout(0.5), nn.Linear(4096, 4096), nn.ReLU(),
    )
    return body, 4096
