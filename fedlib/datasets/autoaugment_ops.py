"""AutoAugment's image operations on a whole uint8 batch, each sample with its own parameters.

Each function equals torchvision's ``transforms.v2.functional`` op (torchvision 0.29, uint8 images)
applied to every sample alone, bit for bit; :mod:`fedlib.datasets.autoaugment` picks each sample's
result. Parameters come per sample as tensors of shape (n,), so nothing is read back to the host.

The operations that map each pixel value through a table of its sample (Brightness, Contrast,
Posterize, Solarize, Invert) or of its sample's channel (AutoContrast, Equalize) build that table
(n, 1 or C, 256) from the 256 values and the image's statistics; one ``gather`` applies them all.
Color and Sharpness blend per pixel (:func:`blend`); the geometric ops sample a grid (:func:`warp`).
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch
import torch.nn.functional as F

SHADES = 256  # the values of a uint8 pixel


def column(values: torch.Tensor, dims: int = 3) -> torch.Tensor:
    """A per-sample (n,) tensor shaped to broadcast over ``dims`` more dimensions."""
    return values.view(-1, *([1] * dims))


# ----------------------------------------------------------------------------- lookup tables


@lru_cache(maxsize=16)
def shades(device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """The 256 pixel values 0..255 as ``dtype``: the input of every table (made once; never
    written to)."""
    return torch.arange(SHADES, device=device).to(dtype)


def solarize_posterize_table(threshold: torch.Tensor, keep_bits: torch.Tensor) -> torch.Tensor:
    """(n, 1, 256): Solarize (values >= the float32 threshold inverted; Invert is threshold 0), then
    Posterize (the mask of high bits kept). Threshold 256 and mask 255 leave values as they are."""
    values = shades(threshold.device, torch.uint8)
    solarized = torch.where(values >= column(threshold, 2), values.bitwise_not(), values)
    return solarized & column(keep_bits, 2)


def brightness_table(factor: torch.Tensor) -> torch.Tensor:
    """(n, 1, 256): torchvision's ``adjust_brightness``, the value times the float32 factor,
    clamped to [0, 255] and truncated."""
    scaled = shades(factor.device, torch.float32) * column(factor, 2)
    return scaled.clamp_(0, 255).to(torch.uint8)


def contrast_table(grey: torch.Tensor, factor: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """(n, 1, 256): torchvision's ``adjust_contrast``, ``value * factor`` (float32) plus
    ``alpha * mean(grey)`` in one rounding (its ``add_(mean, alpha=1 - factor)``), clamped, truncated."""
    mean = grey.mean(dim=(-3, -2, -1))  # as torchvision: a sum of integers, exact, over the pixels
    scaled = shades(grey.device, torch.float32) * column(factor, 2)
    blended = fused_multiply_add(column(mean, 2), column(alpha, 2), scaled)
    return blended.clamp_(0, 255).to(torch.uint8)


def autocontrast_table(floats: torch.Tensor) -> torch.Tensor:
    """(n, C, 256): torchvision's ``autocontrast``, each channel stretched from its own
    [min, max] to [0, 255] (a flat channel left alone), in its float32 steps."""
    low = floats.amin(dim=(-2, -1)).unsqueeze(-1)
    high = floats.amax(dim=(-2, -1)).unsqueeze(-1)
    flat = high == low
    inverse_scale = torch.where(flat, 1.0, (high - low).mul_(1.0 / 255))
    low = torch.where(flat, 0.0, low)
    stretched = (shades(floats.device, torch.float32) - low).div_(inverse_scale)
    return stretched.clamp_(0, 255).to(torch.uint8)


def equalize_table(values: torch.Tensor) -> torch.Tensor:
    """(n, C, 256): torchvision's ``equalize`` (PIL's table) of each channel, from its pixel values
    ``values`` (n, C, H * W) long: ``table[k] = (pixels below k + step // 2) // step``, the step
    being the pixels other than those of the channel's top value, // 255; a step of 0 (nearly one
    value) leaves the channel alone."""
    histogram = values.new_zeros(values.shape[:-1] + (SHADES,), dtype=torch.int32)
    histogram.scatter_add_(-1, values, histogram.new_ones(1).expand_as(values))
    cumulative = histogram.cumsum(dim=-1)
    top_value = cumulative.argmax(dim=-1, keepdim=True)  # the first bin that holds every pixel
    step = (values.shape[-1] - histogram.gather(-1, top_value)).div(255, rounding_mode="floor")
    table = (cumulative[..., :-1] + step // 2).div(step.clamp(min=1), rounding_mode="floor").clamp(0, 255)
    table = torch.cat([table.new_zeros(values.shape[:-1] + (1,)), table], dim=-1).to(torch.uint8)
    return torch.where(step != 0, table, shades(values.device, torch.uint8))


# ----------------------------------------------------------------------------- per pixel


def warp(floats: torch.Tensor, grids: torch.Tensor) -> torch.Tensor:
    """Nearest-neighbour sampling of each image (float) at its own (H, W, 2) grid, black outside,
    back to uint8: torchvision's ``affine``/``rotate`` given its grid (it rounds before the cast,
    which changes nothing when nearest sampling copies integers or the 0 fill)."""
    sampled = F.grid_sample(floats, grids, mode="nearest", padding_mode="zeros", align_corners=False)
    return sampled.to(torch.uint8)


def greyscale(images: torch.Tensor, floats: torch.Tensor) -> torch.Tensor:
    """torchvision's (n, 1, H, W) luma of a uint8 image, floored (of a grey image: itself)."""
    if images.shape[1] == 1:
        return floats
    red, green, blue = images.unbind(dim=1)
    return red.mul(0.2989).add_(green, alpha=0.587).add_(blue, alpha=0.114).floor_().unsqueeze(1)


def sharpness_difference(floats: torch.Tensor) -> torch.Tensor:
    """``blurred - image`` inside a one-pixel border, 0 on it: torchvision's ``adjust_sharpness``
    smoothing (1 around, 5 in the middle, / 13), rounded.

    The weighted sum S of nine integers is exact in float32 and S / 13 is never within 1/26 of a
    half, so rounding gives torchvision's value however its convolution sums the weights 1/13 and
    5/13 in float32 (fedlib turns TF32, whose 10-bit weights could cross that margin, off on CUDA)."""
    channels, height, width = floats.shape[1:]
    if height <= 2 or width <= 2:  # torchvision leaves such images alone
        return torch.zeros_like(floats)
    sums = F.conv2d(floats, _smoothing_weights(channels, floats.device), groups=channels)
    return F.pad(sums.div_(13.0).round_().sub_(floats[..., 1:-1, 1:-1]), (1, 1, 1, 1))


@lru_cache(maxsize=16)
def _smoothing_weights(channels: int, device: torch.device) -> torch.Tensor:
    """(C, 1, 3, 3) float32: 1 around, 5 in the middle, for one channel each (made once)."""
    kernel = torch.ones(3, 3, device=device)
    kernel[1, 1] = 5.0
    return kernel.expand(channels, 1, 3, 3)


def blend(floats: torch.Tensor, degenerate: torch.Tensor, factor: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """``floats * factor + degenerate * alpha`` rounded once to float32, clamped to [0, 255] and
    truncated: torchvision's Color (``degenerate`` the grey image) and Sharpness (factor 1,
    ``degenerate`` :func:`sharpness_difference`), whose ``add_(..., alpha=)`` is a fused multiply-add.

    Exact in float64, so rounded once: ``floats * factor`` is a float32 of 0 or 0.1 to 485 (a pixel
    times a factor of 0.1 to 1.9), so a multiple of 2**-27; ``alpha`` (0, or 0.1 to 0.9 in size)
    times an integer below 2**8 is a multiple of 2**-27 below 2**8; the sum needs at most 37 bits.
    Apple's MPS has no float64: there the float32 multiply-add may round twice."""
    scaled = floats * column(factor)
    if floats.device.type == "mps":
        blended = torch.addcmul(scaled, degenerate, column(alpha))
    else:
        blended = scaled.double().addcmul_(degenerate.double(), column(alpha.double())).float()
    return blended.clamp_(0, 255).to(torch.uint8)


def fused_multiply_add(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """``a * b + c`` of float32 tensors rounded once to float32 (a fused multiply-add, as torch's
    ``c.add_(a, alpha=b)`` on CUDA and AVX2/AVX-512 CPUs, with a tensor ``b``).

    ``a * b`` is exact in float64 (24 + 24 bits); the float64 sum is rounded to odd (moved one step
    towards the exact value when inexact and even, the error known from TwoSum), and a float64
    rounded to odd rounds to float32 as the exact value does (Boldo and Melquiond 2008: 53 >= 24 + 2
    bits). Apple's MPS has no float64: there the float32 multiply-add may round twice."""
    if c.device.type == "mps":
        return torch.addcmul(c, a, b)
    product = a.double() * b.double()
    addend = c.double()
    total = product + addend
    product_part = total - addend  # TwoSum: total + error == product + addend exactly
    error = (product - product_part) + (addend - (total - product_part))
    even = (total.view(torch.int64) & 1) == 0
    odd = torch.nextafter(total, error.sign() * math.inf)
    return torch.where((error != 0) & even, odd, total).float()
