"""The former AutoAugment of ``fedlib/datasets/augment.py`` (to fedlib c526de5), kept as the reference
that the batched one in ``fedlib/datasets/autoaugment.py`` must equal bit for bit.

It read the draws back to the host, grouped the batch by the (operation, signed magnitude) each
sample drew and transformed every group with one ``torchvision.transforms.v2.functional`` call.
"""

from __future__ import annotations

import math

import torch
import torchvision.transforms.v2.functional as TF

from fedlib.datasets.autoaugment import _SIGNED_OPS, CIFAR10_POLICY, op_magnitude


def _shear(images: torch.Tensor, degrees_x: float, degrees_y: float) -> torch.Tensor:
    return TF.affine(images, angle=0.0, translate=[0, 0], scale=1.0,
                     shear=[degrees_x, degrees_y], center=[0, 0])


def _translate(images: torch.Tensor, dx: int, dy: int) -> torch.Tensor:
    return TF.affine(images, angle=0.0, translate=[dx, dy], scale=1.0, shear=[0.0, 0.0])


# torchvision's functional op for each operation at a signed magnitude
TORCHVISION_OPS = {
    "ShearX": lambda x, m: _shear(x, math.degrees(math.atan(m)), 0.0),
    "ShearY": lambda x, m: _shear(x, 0.0, math.degrees(math.atan(m))),
    "TranslateX": lambda x, m: _translate(x, int(m), 0),
    "TranslateY": lambda x, m: _translate(x, 0, int(m)),
    "Rotate": lambda x, m: TF.rotate(x, m),
    "Brightness": lambda x, m: TF.adjust_brightness(x, 1.0 + m),
    "Color": lambda x, m: TF.adjust_saturation(x, 1.0 + m),
    "Contrast": lambda x, m: TF.adjust_contrast(x, 1.0 + m),
    "Sharpness": lambda x, m: TF.adjust_sharpness(x, 1.0 + m),
    "Posterize": lambda x, m: TF.posterize(x, int(m)),
    "Solarize": lambda x, m: TF.solarize(x, m),
    "AutoContrast": lambda x, m: TF.autocontrast(x),
    "Equalize": lambda x, m: TF.equalize(x),
    "Invert": lambda x, m: TF.invert(x),
}


def grouped_autoaugment(images: torch.Tensor, draws: torch.Tensor) -> torch.Tensor:
    """The former ``autoaugment_cifar10`` given its (n, 5) draws (it drew them with ``_uniform``)."""
    n, _, height, width = images.shape
    draws = draws.cpu()  # grouping needs host values
    out = images.clone()
    for slot in (0, 1):  # the second operation sees the first one's result, per sample
        groups: dict[tuple[str, float], list[int]] = {}
        for i, (pick, *chances) in enumerate(draws.tolist()):
            policy_id = min(int(pick * len(CIFAR10_POLICY)), len(CIFAR10_POLICY) - 1)
            op, probability, magnitude_bin = CIFAR10_POLICY[policy_id][slot]
            if chances[slot] > probability:
                continue
            magnitude = op_magnitude(op, magnitude_bin, height, width)
            if op in _SIGNED_OPS and chances[2 + slot] < 0.5:
                magnitude = -magnitude
            groups.setdefault((op, magnitude), []).append(i)
        for (op, magnitude), members in groups.items():
            index = torch.tensor(members, device=images.device)
            out[index] = TORCHVISION_OPS[op](out[index], magnitude)
    return out
