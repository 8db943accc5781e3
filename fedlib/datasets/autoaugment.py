"""AutoAugment (torchvision's CIFAR-10 policy) on a whole uint8 batch on its device, with no host reads.

Each sample draws five uniforms: its sub-policy, whether each of the sub-policy's two operations
fires, and each operation's sign (:func:`apply_policy`). Everything after the draws stays on the
images' device as tensors: no ``.item()``, ``.tolist()`` or mask-shaped indexing, so a CUDA stream
never waits for the host to learn which sample does what. Each sample's operation, magnitude and
sign become a row of parameter tables (:class:`_Levels`, built once per image size and device),
and :func:`apply_ops` runs three passes over the whole batch, ``torch.where`` keeping each sample's
own result: the pixel-value tables (Posterize, Solarize, Invert, Brightness, Contrast, AutoContrast,
Equalize; one ``gather``), the geometric grids (ShearX/Y, TranslateX/Y, Rotate; one
``grid_sample``) and the per-pixel blends (Color, Sharpness). The second operation sees the first
one's result. The kernels are in :mod:`fedlib.datasets.autoaugment_ops`.

Each operation equals torchvision's ``transforms.v2.functional`` op on that sample alone, bit for
bit, and the policy equals the former implementation (the batch grouped by the operation each
sample drew, one torchvision call a group, which stored runs used) bit for bit, given the same
draws (``tests/unit/datasets/test_autoaugment.py``; the former one is kept there as the reference).

Cost on a 64-image 32x32 batch, counted with a TorchDispatchMode on the CPU: 289 aten ops (232 not
views), the same whatever the draws, and no host sync, against 517 to 585 (346 not views for one
draw) after reading the draws back to the host for the grouped version. On one busy CPU thread the
batched version takes about twice the grouped one's time, as every family runs on every sample
(50 batches: 1.3 to 1.8 s of CPU time against 0.6 to 0.8 s): some 30 ms a batch, about 1 % of a
MobileNetV2 step there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
import torch

from fedlib.datasets import autoaugment_ops as batched
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
    ops, bins, negative = _choices(draws)
    out = images
    for slot in (0, 1):  # the second operation sees the first one's result, per sample
        out = apply_ops(out, ops[:, slot], bins[:, slot], negative[:, slot])
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


def _choices(draws: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each sample's two operations (NO_OP where one does not fire), magnitude bins and signs, (n, 2)
    each, as the former code decided from the draws' Python floats: sub-policy
    ``min(int(pick * 25), 24)``, an operation fires when ``chance <= probability``, is negative
    when ``sign < 0.5``."""
    tables = _policy_tables(draws.device)
    policy = (draws[:, :1] >= tables.pick_bounds).sum(dim=1)
    fires = draws[:, 1:3] <= tables.fire_bounds[policy]
    negative = tables.signed[policy] & (draws[:, 3:5] < 0.5)
    return torch.where(fires, tables.ops[policy], NO_OP), tables.bins[policy], negative


# ----------------------------------------------------------------------------- one operation per sample


def apply_ops(images: torch.Tensor, ops: torch.Tensor, bins: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
    """Each sample of a uint8 (n, C, H, W) batch through its own operation: ``ops`` (n,) indexes
    :data:`OPS` (:data:`NO_OP`: unchanged), ``bins`` (n,) its magnitude bin 0..9 (ignored by the
    operations without one) and ``negative`` (n,) bool its sign (ignored by the unsigned ones).

    Three passes over the whole batch, ``torch.where`` keeping each sample's own result: the
    pixel-value tables (seven operations, one ``gather``), the geometric grids, the per-pixel blends.
    """
    channels, height, width = images.shape[1:]
    if images.dtype != torch.uint8 or channels not in (1, 3):
        raise FedlibError(f"AutoAugment takes uint8 images of 1 or 3 channels, got {images.dtype} "
                          f"{tuple(images.shape)}")
    parameters = _levels(height, width, images.device).rows(level_index(ops, bins, negative))
    floats = images.float()
    values = images.flatten(start_dim=2).long()  # (n, C, H * W): each pixel's entry in its table
    grey = batched.greyscale(images, floats)
    out = _lookup_tables(ops, parameters, floats, grey, values).gather(-1, values).view_as(images)
    out = _per_sample(parameters.warps, batched.warp(floats, parameters.grids), out)
    sharpen = ops == OPS.index("Sharpness")
    colour = (ops == OPS.index("Color")) & (channels == 3)  # torchvision leaves a grey image's saturation alone
    return _per_sample(sharpen | colour, _per_pixel_blends(sharpen, parameters, floats, grey), out)


def level_index(ops: torch.Tensor, bins: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
    """Row of the :class:`_Levels` tables for each sample's (operation, bin, sign)."""
    return (ops * BINS + bins) * 2 + negative.long()


def _lookup_tables(ops: torch.Tensor, parameters: _Parameters, floats: torch.Tensor, grey: torch.Tensor,
                   values: torch.Tensor) -> torch.Tensor:
    """(n, C, 256): each sample's table of pixel values, the identity unless its operation is one
    that maps pixel values (Posterize, Solarize, Invert, Brightness, Contrast, AutoContrast, Equalize)."""
    kind = batched.column(ops, 2)
    tables = batched.solarize_posterize_table(parameters.threshold, parameters.keep_bits)  # the others: identity
    tables = torch.where(kind == OPS.index("Brightness"), batched.brightness_table(parameters.scale), tables)
    tables = torch.where(kind == OPS.index("Contrast"),
                         batched.contrast_table(grey, parameters.scale, parameters.alpha), tables)
    tables = torch.where(kind == OPS.index("AutoContrast"), batched.autocontrast_table(floats), tables)
    return torch.where(kind == OPS.index("Equalize"), batched.equalize_table(values), tables)


def _per_pixel_blends(sharpen: torch.Tensor, parameters: _Parameters, floats: torch.Tensor,
                      grey: torch.Tensor) -> torch.Tensor:
    """Sharpness where ``sharpen`` (n,) holds, Color (a blend with the grey image) elsewhere."""
    degenerate = torch.where(batched.column(sharpen), batched.sharpness_difference(floats), grey)
    return batched.blend(floats, degenerate, parameters.scale, parameters.alpha)


def _per_sample(chosen: torch.Tensor, result: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """``result`` for the samples where ``chosen`` (n,) holds, ``other`` elsewhere."""
    return torch.where(batched.column(chosen), result, other)


# ----------------------------------------------------------------------------- parameters per level


@dataclass(frozen=True)
class _Parameters:
    """Each sample's parameters (n,), or of every level (:class:`_Levels`)."""

    grids: torch.Tensor  # (n, H, W, 2) float32: torchvision's sampling grid (any, where not warps)
    warps: torch.Tensor  # bool: a geometric op that moves pixels (all but Rotate by 0 degrees)
    scale: torch.Tensor  # float32: the image's factor in Brightness, Color, Contrast (1 in Sharpness)
    alpha: torch.Tensor  # float32: 1 - factor, the degenerate image's weight in those four
    threshold: torch.Tensor  # float32: values >= this are inverted (Solarize; 0 for Invert; 256 never)
    keep_bits: torch.Tensor  # uint8: Posterize's mask of the high bits kept (255 for the others)


@dataclass(frozen=True)
class _Levels(_Parameters):
    """Every (operation, bin, sign)'s parameters on one device, row :func:`level_index`: built on
    the host in float64 as torchvision builds them from a Python float, stored as the float32 its
    kernels see. ``grids`` has a row per geometric level that moves pixels, ``grid_row`` says which."""

    grid_row: torch.Tensor  # long

    def rows(self, level: torch.Tensor) -> _Parameters:
        """The parameters of each sample's level (n,)."""
        return _Parameters(grids=self.grids[self.grid_row[level]], warps=self.warps[level],
                           scale=self.scale[level], alpha=self.alpha[level], threshold=self.threshold[level],
                           keep_bits=self.keep_bits[level])


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
