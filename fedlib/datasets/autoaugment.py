"""AutoAugment (torchvision's CIFAR-10 policy) on a whole uint8 batch on its device, with no host reads.

Each sample draws five uniforms: its sub-policy, whether each of the sub-policy's two operations
fires, and each operation's sign (:func:`apply_policy`). Everything after the draws stays on the
images' device as tensors: there is no ``.item()``, ``.tolist()`` or mask-shaped indexing, so a
CUDA stream is never stalled to ask which sample does what. Instead every operation family runs on
the whole batch with per-sample parameters looked up from tables (:class:`_Levels`, built once per
image size and device) and ``torch.where`` keeps each sample's own result (:func:`apply_ops`); the
second operation sees the first one's result.

Each operation equals torchvision's ``transforms.v2.functional`` op on that sample alone, bit for
bit (``tests/unit/datasets/test_autoaugment.py``): the geometric ops sample torchvision's own grids
(nearest, black fill); Brightness, Color, Contrast and Sharpness blend with torchvision's rounding,
including the fused multiply-add of its ``add_(..., alpha=)`` (:func:`_fused_multiply_add`);
Posterize, Solarize and Invert are bit masks and thresholds; AutoContrast and Equalize run per
sample and channel. So the batch equals the former per-group implementation (grouped by the
operation each sample drew, one torchvision call a group), which stored runs used.

Cost, counted with a TorchDispatchMode on a 64-image 32x32 batch: 195 aten ops and no host sync,
whatever the draws, against 561 ops and a host read of the draws for the grouped version (its count
varied with the draws). On one CPU thread, 50 such batches take about 0.25 s against 0.60 s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

from fedlib.errors import FedlibError

# AutoAugment's CIFAR-10 policy (Cubuk et al. 2019, as in torchvision): pairs of
# (operation, probability, magnitude bin of 0..9 or None).
CIFAR10_POLICY = (
    (("Invert", 0.1, None), ("Contrast", 0.2, 6)),
    (("Rotate", 0.7, 2), ("TranslateX", 0.3, 9)),
    (("Sharpness", 0.8, 1), ("Sharpness", 0.9, 3)),
    (("ShearY", 0.5, 8), ("TranslateY", 0.7, 9)),
    (("AutoContrast", 0.5, None), ("Equalize", 0.9, None)),
    (("ShearY", 0.2, 7), ("Posterize", 0.3, 7)),
    (("Color", 0.4, 3), ("Brightness", 0.6, 7)),
    (("Sharpness", 0.3, 9), ("Brightness", 0.7, 9)),
    (("Equalize", 0.6, None), ("Equalize", 0.5, None)),
    (("Contrast", 0.6, 7), ("Sharpness", 0.6, 5)),
    (("Color", 0.7, 7), ("TranslateX", 0.5, 8)),
    (("Equalize", 0.3, None), ("AutoContrast", 0.4, None)),
    (("TranslateY", 0.4, 3), ("Sharpness", 0.2, 6)),
    (("Brightness", 0.9, 6), ("Color", 0.2, 8)),
    (("Solarize", 0.5, 2), ("Invert", 0.0, None)),
    (("Equalize", 0.2, None), ("AutoContrast", 0.6, None)),
    (("Equalize", 0.2, None), ("Equalize", 0.6, None)),
    (("Color", 0.9, 9), ("Equalize", 0.6, None)),
    (("AutoContrast", 0.8, None), ("Solarize", 0.2, 8)),
    (("Brightness", 0.1, 3), ("Color", 0.7, 0)),
    (("Solarize", 0.4, 5), ("AutoContrast", 0.9, None)),
    (("TranslateY", 0.9, 9), ("TranslateY", 0.7, 9)),
    (("AutoContrast", 0.9, None), ("Solarize", 0.8, 3)),
    (("Equalize", 0.8, None), ("Invert", 0.1, None)),
    (("TranslateY", 0.7, 9), ("AutoContrast", 0.9, None)),
)
# The operations, numbered for tensors; each family is a run of numbers.
OPS = ("ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate",  # geometric
       "Brightness", "Color", "Contrast", "Sharpness",  # blends with a degenerate image
       "Posterize", "Solarize", "Invert",  # per pixel
       "AutoContrast", "Equalize")  # per sample and channel
NO_OP = len(OPS)  # the number of a sample whose operation did not fire: it is left as it is
BINS = 10  # magnitude bins 0..9
_SIGNED_OPS = {"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate",
               "Brightness", "Color", "Contrast", "Sharpness"}
_HAS_MAGNITUDE = set(OPS) - {"AutoContrast", "Equalize", "Invert"}
_GEOMETRIC = range(OPS.index("ShearX"), OPS.index("Rotate") + 1)
_BLENDS = range(OPS.index("Brightness"), OPS.index("Sharpness") + 1)


def op_magnitude(op: str, magnitude_bin: int | None, height: int, width: int) -> float:
    """The unsigned magnitude of bin 0..9 on AutoAugment's scale for ``op``."""
    if magnitude_bin is None:
        return 0.0
    level = magnitude_bin / 9
    if op in ("ShearX", "ShearY"):
        return 0.3 * level
    if op in ("TranslateX", "TranslateY"):  # 150 px of a 331 px image, scaled to this size
        return 150.0 / 331.0 * (width if op == "TranslateX" else height) * level
    if op == "Rotate":
        return 30.0 * level
    if op == "Posterize":  # bits kept: 8 down to 4
        return float(8 - round(magnitude_bin * 4 / 9))
    if op == "Solarize":  # threshold: 255 down to 0
        return 255.0 * (1 - level)
    return 0.9 * level  # Brightness, Color, Contrast, Sharpness: factor 1 +- this


def signed_magnitude(op: str, magnitude_bin: int | None, negative: bool, height: int, width: int) -> float:
    """:func:`op_magnitude`, negated for a signed operation whose sign draw came out negative."""
    magnitude = op_magnitude(op, magnitude_bin, height, width)
    return -magnitude if negative and op in _SIGNED_OPS else magnitude


# ----------------------------------------------------------------------------- the policy as tensors


def apply_policy(images: torch.Tensor, draws: torch.Tensor) -> torch.Tensor:
    """AutoAugment's CIFAR-10 policy on a uint8 batch, given each sample's five uniforms ``draws``
    (n, 5): sub-policy, whether operation 1 and 2 fire, the sign of operation 1 and 2."""
    out = images
    for slot in (0, 1):  # the second operation sees the first one's result, per sample
        out = apply_ops(out, *_slot_choices(draws, slot))
    return out


@dataclass(frozen=True)
class _PolicyTables:
    """:data:`CIFAR10_POLICY` as tensors on one device, with the float32 bounds on the float32 draws
    that decide as the former code's Python floats did (exactly, on any device, without float64)."""

    pick_bounds: torch.Tensor  # (24,) float32: pick >= pick_bounds[k - 1]  <=>  int(pick * 25) >= k
    ops: torch.Tensor  # (25, 2) long: index into OPS
    bins: torch.Tensor  # (25, 2) long: magnitude bin (0 for an operation without one)
    fire_bounds: torch.Tensor  # (25, 2) float32: chance <= fire_bounds  <=>  chance <= probability
    signed: torch.Tensor  # (25, 2) bool: the operation takes a random sign


@lru_cache(maxsize=8)
def _policy_tables(device: torch.device) -> _PolicyTables:
    pairs, count = CIFAR10_POLICY, len(CIFAR10_POLICY)
    return _PolicyTables(
        pick_bounds=torch.tensor([_float32_at_least(Fraction(k, count)) for k in range(1, count)], device=device),
        ops=torch.tensor([[OPS.index(op) for op, _, _ in pair] for pair in pairs], device=device),
        bins=torch.tensor([[b or 0 for _, _, b in pair] for pair in pairs], device=device),
        fire_bounds=torch.tensor([[_float32_at_most(Fraction(p)) for _, p, _ in pair] for pair in pairs],
                                 dtype=torch.float32, device=device),
        signed=torch.tensor([[op in _SIGNED_OPS for op, _, _ in pair] for pair in pairs], device=device))


def _float32_at_least(bound: Fraction) -> float:
    """The smallest float32 that is >= ``bound``."""
    value = np.float32(bound)
    while Fraction(float(value)) < bound:
        value = np.nextafter(value, np.float32(np.inf))
    while Fraction(float(below := np.nextafter(value, np.float32(-np.inf)))) >= bound:
        value = below
    return float(value)


def _float32_at_most(bound: Fraction) -> float:
    """The largest float32 that is <= ``bound``."""
    return -_float32_at_least(-bound)


def _slot_choices(draws: torch.Tensor, slot: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each sample's operation (NO_OP where it does not fire), magnitude bin and sign for ``slot``,
    as the former code decided from the draws' Python floats: sub-policy ``min(int(pick * 25), 24)``,
    fires when ``chance <= probability``, negative when ``sign < 0.5``."""
    tables = _policy_tables(draws.device)
    policy = (draws[:, :1] >= tables.pick_bounds).sum(dim=1)
    fires = draws[:, 1 + slot] <= tables.fire_bounds[policy, slot]
    negative = tables.signed[policy, slot] & (draws[:, 3 + slot] < 0.5)
    ops = torch.where(fires, tables.ops[policy, slot], NO_OP)
    return ops, tables.bins[policy, slot], negative


# ----------------------------------------------------------------------------- one operation per sample


def apply_ops(images: torch.Tensor, ops: torch.Tensor, bins: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
    """Each sample of a uint8 (n, C, H, W) batch through its own operation: ``ops`` (n,) indexes
    :data:`OPS` (:data:`NO_OP`: unchanged), ``bins`` (n,) its magnitude bin 0..9 (ignored by the
    operations without one) and ``negative`` (n,) bool its sign (ignored by the unsigned ones).

    Every family runs on the whole batch and ``torch.where`` keeps each sample's own result.
    """
    n, channels, height, width = images.shape
    if images.dtype != torch.uint8 or channels not in (1, 3):
        raise FedlibError(f"AutoAugment takes uint8 images of 1 or 3 channels, got {images.dtype} {tuple(images.shape)}")
    levels = _levels(height, width, images.device)
    level = level_index(ops, bins, negative)
    floats = images.float()
    out = _pixel_ops(images, levels.threshold[level], levels.keep_bits[level])  # the rest unchanged
    warps = (ops >= _GEOMETRIC.start) & (ops < _GEOMETRIC.stop) & levels.warps[level]
    out = _per_sample(warps, _warp(floats, levels.grids[levels.grid_row[level]]), out)
    blends = (ops >= _BLENDS.start) & (ops < _BLENDS.stop)
    if channels == 1:  # torchvision leaves a grey image's saturation alone
        blends &= ops != OPS.index("Color")
    out = _per_sample(blends, _blend(images, floats, ops, levels.scale[level], levels.alpha[level]), out)
    out = _per_sample(ops == OPS.index("AutoContrast"), _autocontrast(floats), out)
    return _per_sample(ops == OPS.index("Equalize"), _equalize(images), out)


def level_index(ops: torch.Tensor, bins: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
    """Row of the :class:`_Levels` tables for each sample's (operation, bin, sign)."""
    return (ops * BINS + bins) * 2 + negative.long()


def _per_sample(chosen: torch.Tensor, result: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """``result`` for the samples where ``chosen`` (n,) holds, ``other`` elsewhere."""
    return torch.where(chosen.view(-1, 1, 1, 1), result, other)


# ----------------------------------------------------------------------------- parameters per level


@dataclass(frozen=True)
class _Levels:
    """Every (operation, bin, sign)'s parameters as tensors on one device, row :func:`level_index`.

    Built on the host in float64 as torchvision builds them from a Python float, then stored as the
    float32 that its kernels see.
    """

    grids: torch.Tensor  # (G, H, W, 2) float32: torchvision's sampling grid of each geometric level
    grid_row: torch.Tensor  # long: the level's row of grids (0 for the other operations)
    warps: torch.Tensor  # bool: the level moves pixels (all geometric ones but Rotate by 0 degrees)
    scale: torch.Tensor  # float32: the blend's factor on the image (1 for Sharpness)
    alpha: torch.Tensor  # float32: 1 - factor, the weight of the degenerate image
    threshold: torch.Tensor  # float32: pixels >= this are inverted (Solarize; 0 for Invert; 256 never)
    keep_bits: torch.Tensor  # uint8: Posterize's mask of the high bits kept (255 for the others)


@lru_cache(maxsize=16)
def _levels(height: int, width: int, device: torch.device) -> _Levels:
    rows = [_level(op, magnitude_bin, negative, height, width)
            for op in OPS + ("none",) for magnitude_bin in range(BINS) for negative in (False, True)]
    grids, grid_row = [], []
    for row in rows:
        grid_row.append(len(grids) if row["matrix"] is not None else 0)
        if row["matrix"] is not None:
            grids.append(_sampling_grid(row["matrix"], height, width, device))

    def column(name, dtype):
        return torch.tensor([row[name] for row in rows], device=device).to(dtype)

    return _Levels(grids=torch.cat(grids), grid_row=torch.tensor(grid_row, device=device),
                   warps=column("warps", torch.bool), scale=column("scale", torch.float32),
                   alpha=column("alpha", torch.float32), threshold=column("threshold", torch.float32),
                   keep_bits=column("keep_bits", torch.uint8))


def _level(op: str, magnitude_bin: int, negative: bool, height: int, width: int) -> dict:
    """One row of :class:`_Levels` (``matrix``: the geometric op's, or None), in float64 as the
    former code computed it from :func:`op_magnitude`."""
    m = signed_magnitude(op, magnitude_bin, negative, height, width) if op in _HAS_MAGNITUDE else 0.0
    matrix = _geometric_matrix(op, m, height, width)
    factor = 1.0 + m  # Brightness, Color, Contrast, Sharpness
    return {"matrix": matrix, "warps": matrix is not None,
            "scale": 1.0 if op == "Sharpness" else factor, "alpha": 1.0 - factor,
            "threshold": {"Solarize": m, "Invert": 0.0}.get(op, 256.0),
            "keep_bits": _posterize_mask(int(m)) if op == "Posterize" else 255}


def _posterize_mask(bits: int) -> int:
    """The uint8 mask that keeps the ``bits`` highest bits."""
    return 255 if bits >= 8 else ((1 << bits) - 1) << (8 - bits)


def _geometric_matrix(op: str, magnitude: float, height: int, width: int) -> list[float] | None:
    """torchvision's inverse affine matrix for a geometric op (None: another op, or no movement).

    As ``TF.affine(shear=..., center=[0, 0])`` (shear about the top-left corner, as PIL),
    ``TF.affine(translate=[int(m), 0])`` and ``TF.rotate(m)`` (counter-clockwise about the centre;
    by 0 degrees a copy)."""
    if op in ("ShearX", "ShearY"):
        degrees = math.degrees(math.atan(magnitude))
        shear = (degrees, 0.0) if op == "ShearX" else (0.0, degrees)
        return _inverse_affine_matrix((0.0 - width * 0.5, 0.0 - height * 0.5), 0.0, (0.0, 0.0), shear)
    if op in ("TranslateX", "TranslateY"):
        shift = float(int(magnitude))
        return _inverse_affine_matrix((0.0, 0.0), 0.0, (shift, 0.0) if op == "TranslateX" else (0.0, shift),
                                      (0.0, 0.0))
    if op == "Rotate":
        angle = magnitude % 360
        if angle in (90.0, 180.0, 270.0):  # torchvision's rot90 paths; AutoAugment stays within 30 degrees
            raise FedlibError(f"rotation by {angle} degrees is not built")
        return None if angle == 0 else _inverse_affine_matrix((0.0, 0.0), -angle, (0.0, 0.0), (0.0, 0.0))
    return None


def _inverse_affine_matrix(center: tuple[float, float], angle: float, translate: tuple[float, float],
                           shear: tuple[float, float]) -> list[float]:
    """The output-to-input affine map at scale 1, in torchvision's operation order (float64)."""
    rot, sx, sy = math.radians(angle), math.radians(shear[0]), math.radians(shear[1])
    cx, cy = center
    cos_sy, tan_sx = math.cos(sy), math.tan(sx)
    cx_plus_tx, cy_plus_ty = cx + translate[0], cy + translate[1]
    a = math.cos(rot - sy) / cos_sy
    b = -(a * tan_sx + math.sin(rot))
    c = math.sin(rot - sy) / cos_sy
    d = math.cos(rot) - c * tan_sx
    matrix = [d, -b, 0.0, -c, a, 0.0]
    matrix[2] += cx - matrix[0] * cx_plus_tx - matrix[1] * cy_plus_ty
    matrix[5] += cy - matrix[3] * cx_plus_tx - matrix[4] * cy_plus_ty
    return matrix


def _sampling_grid(matrix: list[float], height: int, width: int, device: torch.device) -> torch.Tensor:
    """(1, H, W, 2) grid_sample coordinates of ``matrix``, computed as torchvision computes them
    (float32, pixel centres, normalised after the matrix), so nearest sampling picks its pixels."""
    theta = torch.tensor(matrix, dtype=torch.float32, device=device).reshape(1, 2, 3)
    base = torch.empty(1, height, width, 3, dtype=torch.float32, device=device)
    base[..., 0].copy_(torch.linspace((1.0 - width) * 0.5, (width - 1.0) * 0.5, steps=width, device=device))
    base[..., 1].copy_(torch.linspace((1.0 - height) * 0.5, (height - 1.0) * 0.5, steps=height,
                                      device=device).unsqueeze_(-1))
    base[..., 2].fill_(1)
    half_size = torch.tensor([0.5 * width, 0.5 * height], dtype=torch.float32, device=device)
    rescaled = theta.transpose(1, 2).div_(half_size)
    return base.view(1, height * width, 3).bmm(rescaled).view(1, height, width, 2)


# ----------------------------------------------------------------------------- the operation families


def _pixel_ops(images: torch.Tensor, threshold: torch.Tensor, keep_bits: torch.Tensor) -> torch.Tensor:
    """Solarize (invert pixels >= the sample's float32 threshold; Invert is threshold 0) and
    Posterize (keep the sample's high bits); the thresholds and masks of other samples change nothing."""
    solarized = torch.where(images >= threshold.view(-1, 1, 1, 1), images.bitwise_not(), images)
    return solarized & keep_bits.view(-1, 1, 1, 1)


def _warp(floats: torch.Tensor, grids: torch.Tensor) -> torch.Tensor:
    """Nearest-neighbour sampling of each image at its own grid, black outside, back to uint8.

    torchvision rounds before the cast; nearest sampling only copies integers (or the 0 fill)."""
    sampled = F.grid_sample(floats, grids, mode="nearest", padding_mode="zeros", align_corners=False)
    return sampled.to(torch.uint8)


def _blend(images: torch.Tensor, floats: torch.Tensor, ops: torch.Tensor, scale: torch.Tensor,
           alpha: torch.Tensor) -> torch.Tensor:
    """Brightness, Color, Contrast and Sharpness at once, as torchvision computes each: the image
    times ``scale`` in float32, plus ``alpha`` times a degenerate image in one rounding (its
    ``add_(degenerate, alpha=1 - factor)`` is a fused multiply-add), clamped to [0, 255], truncated.

    The degenerate image is per pixel the grey image (Color) or ``blurred - image`` inside a
    one-pixel border (Sharpness, whose scale is 1), per sample the grey image's mean (Contrast),
    and nothing for Brightness (the image times the factor alone). :func:`_exact_sum` adds them."""
    kind = ops.view(-1, 1, 1, 1)
    grey = _greyscale(images, floats)
    per_pixel = torch.where(kind == OPS.index("Sharpness"), _sharpness_difference(floats),
                            grey * (kind == OPS.index("Color")))
    mean_term = grey.mean(dim=(-3, -2, -1)).double() * alpha.double()  # exact: 24 + 24 bits
    per_sample = torch.where(ops == OPS.index("Contrast"), _rounded_addend(mean_term), 0.0)
    blended = _exact_sum(floats * scale.view(-1, 1, 1, 1), per_sample.view(-1, 1, 1, 1), per_pixel,
                         alpha.view(-1, 1, 1, 1))
    return blended.clamp_(0, 255).to(torch.uint8)


def _exact_sum(scaled: torch.Tensor, per_sample: torch.Tensor, per_pixel: torch.Tensor,
               alpha: torch.Tensor) -> torch.Tensor:
    """``scaled + per_sample + per_pixel * alpha`` (one of the last two 0) rounded once to float32.

    Exact in float64, so rounded once: the float32 ``scaled`` is 0 or at least 0.1 (a pixel times a
    factor of 0.1 to 1.9) and below 2**9, so a multiple of 2**-27; ``alpha`` (0 or 0.1 to 0.9 in
    size) times an integer ``per_pixel`` below 2**8 is a multiple of 2**-27 below 2**8; the sum
    spans at most 37 bits, ``per_sample`` (a multiple of 2**-42, :func:`_rounded_addend`) at most
    52. Apple's MPS has no float64: there the sum is float32, rounded twice, which can put a
    blended pixel one level off torchvision's on that device."""
    if scaled.device.type == "mps":
        return torch.addcmul(scaled + per_sample.float(), per_pixel, alpha)
    return (scaled.double() + per_sample).addcmul_(per_pixel.double(), alpha.double()).float()


def _rounded_addend(addend: torch.Tensor) -> torch.Tensor:
    """A float64 addend cut to a multiple of 2**-40, then moved 2**-42 towards the part cut off.

    Added to a float32 ``s`` (a multiple of 2**-27 below 2**9) it rounds to float32 as the exact
    ``s + addend`` does wherever that is 1/4 or more in size (smaller sums end as 0 either way):
    there float32's halfway points lie on the 2**-40 grid, so the cut moves the sum past none of
    them, and on one the 2**-42 step decides the side as the cut-off part did."""
    high = (addend * 2.0 ** 40).round_().mul_(2.0 ** -40)
    return high + (addend - high).sign_().mul_(2.0 ** -42)


def _greyscale(images: torch.Tensor, floats: torch.Tensor) -> torch.Tensor:
    """torchvision's (n, 1, H, W) luma of a uint8 image, floored (a grey image: itself)."""
    if images.shape[1] == 1:
        return floats
    red, green, blue = images.unbind(dim=1)
    return red.mul(0.2989).add_(green, alpha=0.587).add_(blue, alpha=0.114).floor_().unsqueeze(1)


def _sharpness_difference(floats: torch.Tensor) -> torch.Tensor:
    """``blurred - image`` inside a one-pixel border (0 on it): torchvision's smoothing kernel
    (1 around, 5 in the middle, / 13), rounded.

    The sum of nine integers is exact in float32 and S / 13 is never within 1/26 of a half, so
    rounding it gives torchvision's value however its kernel sums the weights 1/13 and 5/13."""
    n, channels, height, width = floats.shape
    if height <= 2 or width <= 2:  # torchvision leaves such images alone
        return torch.zeros_like(floats)
    kernel = torch.ones(3, 3, dtype=floats.dtype, device=floats.device)
    kernel[1, 1] = 5.0
    sums = F.conv2d(floats, kernel.expand(channels, 1, 3, 3), groups=channels)
    difference = sums.div_(13.0).round_().sub_(floats[..., 1:-1, 1:-1])
    return F.pad(difference, (1, 1, 1, 1))


def _autocontrast(floats: torch.Tensor) -> torch.Tensor:
    """Stretch each sample's channel to [0, 255] (a flat channel is left alone), as torchvision."""
    low = floats.amin(dim=(-2, -1), keepdim=True)
    high = floats.amax(dim=(-2, -1), keepdim=True)
    flat = high == low
    inverse_scale = torch.where(flat, 1.0, (high - low).mul_(1.0 / 255))
    low = torch.where(flat, 0.0, low)
    return (floats - low).div_(inverse_scale).clamp_(0, 255).to(torch.uint8)


def _equalize(images: torch.Tensor) -> torch.Tensor:
    """Histogram equalisation of each sample's channel with PIL's lookup table, as torchvision:
    ``lut[k] = (cumulative count below k + step // 2) // step``, the step being the pixels not of
    the channel's top value // 255; a channel whose step is 0 (nearly one value) is left alone."""
    flat = images.flatten(start_dim=-2).long()  # (n, C, H * W)
    histogram = flat.new_zeros(images.shape[:-2] + (256,), dtype=torch.int32)
    histogram.scatter_add_(-1, flat, histogram.new_ones(1).expand_as(flat))
    cumulative = histogram.cumsum(dim=-1)
    top_value = cumulative.argmax(dim=-1, keepdim=True)  # the first bin that holds every pixel
    step = (flat.shape[-1] - histogram.gather(-1, top_value)).div(255, rounding_mode="floor")
    lut = (cumulative[..., :-1] + step // 2).div(step.clamp(min=1), rounding_mode="floor").clamp(0, 255)
    lut = torch.cat([lut.new_zeros(images.shape[:-2] + (1,)), lut], dim=-1).to(torch.uint8)
    equalized = lut.gather(-1, flat).view_as(images)
    return torch.where(step.ne(0).unsqueeze(-1), equalized, images)
