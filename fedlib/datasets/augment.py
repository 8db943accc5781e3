"""Batch augmentation on the run's device: uint8 images in, normalised float32 out.

There is no DataLoader and no PIL in the training loop: the engine indexes a uint8 batch that
already lives on the device and calls :func:`prepare_batch`. Every random choice is drawn per
sample from the given ``torch.Generator``, so one seed always yields the same batch. The drawing
(:func:`draw_augmentation`) is apart from the applying (:func:`apply_augmentation`), so several
batches' numbers, each from its own generator, can augment their concatenated images in one pass.

Order, as in the papers' transform pipelines: random crop with zero (or reflect) padding ->
horizontal flip -> AutoAugment (uint8) -> scale to [0, 1] and normalise -> Cutout. Cutout comes
after normalisation as in the FedNTD/FedLMD code, so the cut square is 0 in normalised units (the
dataset's mean colour), not black. Evaluation batches use normalisation only (``spec=None``).

Presets and where the papers' code uses them: ``crop_flip_autoaugment`` is FedVLS on CIFAR-10/100
(its ``--auto_aug`` defaults to True), ``autoaugment`` alone FedVLS on TinyImageNet (64x64, no
crop or flip); ``crop_flip_cutout`` is FedNTD/FedLMD on MNIST, CIFAR-10/100, and
``reflect_crop_flip`` their CINIC-10 pipeline (reflect-pad 4, random 32x32 crop, flip, no Cutout).

AutoAugment follows torchvision's CIFAR-10 policy (25 sub-policies, 10 magnitude bins, nearest
interpolation, black fill), on the whole batch at once with per-sample parameters
(:mod:`fedlib.datasets.autoaugment`): each sample's result is, bit for bit, that of torchvision's
functional ops on that sample alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch

from fedlib.datasets.autoaugment import CIFAR10_POLICY, apply_policy, op_magnitude  # noqa: F401 (re-exported)
from fedlib.datasets.catalogue import dataset_info
from fedlib.errors import FedlibError, one_of


@dataclass(frozen=True)
class AugmentSpec:
    """Which training-time augmentations to apply."""

    crop_padding: int = 0  # RandomCrop(size, padding) when > 0
    hflip: bool = False
    cutout: int = 0  # side of the Cutout square (16 for FedNTD/FedLMD CIFAR); 0 = off
    autoaugment: bool = False  # AutoAugment, CIFAR-10 policy
    padding_mode: str = "constant"  # how the crop pads: "constant" (zeros) or "reflect" (mirror, edge excluded)

    def __post_init__(self):
        if self.crop_padding < 0 or self.cutout < 0:
            raise FedlibError(
                f"crop_padding and cutout must be >= 0, got {self.crop_padding} and {self.cutout}")
        if self.padding_mode not in PADDING_MODES:
            raise one_of("padding_mode", self.padding_mode, PADDING_MODES)


PADDING_MODES = ("constant", "reflect")


AUGMENTATIONS: dict[str, AugmentSpec] = {
    "none": AugmentSpec(),
    "crop_flip": AugmentSpec(crop_padding=4, hflip=True),
    "crop_flip_cutout": AugmentSpec(crop_padding=4, hflip=True, cutout=16),
    "crop_flip_autoaugment": AugmentSpec(crop_padding=4, hflip=True, autoaugment=True),
    "autoaugment": AugmentSpec(autoaugment=True),
    "reflect_crop_flip": AugmentSpec(crop_padding=4, hflip=True, padding_mode="reflect"),
}

# The augmentation each paper's own code uses on colour images.
_PAPER_AUGMENTATION = {
    "fedvls": "crop_flip_autoaugment", "feded": "crop_flip_autoaugment",
    "fedntd": "crop_flip_cutout", "fedlmd": "crop_flip_cutout",
    "pkd": "crop_flip", "fedcsd": "crop_flip",
}
# Datasets on which a paper's code departs from its usual colour pipeline: the dataset's record
# (fedlib.datasets.catalogue.DatasetInfo.paper_augmentation).


def augment_spec(name: str) -> AugmentSpec:
    """The named preset from :data:`AUGMENTATIONS`."""
    if name not in AUGMENTATIONS:
        raise one_of("augmentation", name, AUGMENTATIONS)
    return AUGMENTATIONS[name]


def default_augmentation(dataset: str, method_paper: str | None = None) -> str:
    """Preset name for a dataset: "none" for grey/toy data, "crop_flip" for colour images.

    ``method_paper`` (fedvls, feded, fedntd, fedlmd, pkd, fedcsd) picks that paper's own
    colour-image pipeline, e.g. AutoAugment for FedVLS (alone on TinyImageNet) and Cutout for
    FedNTD/FedLMD (none on CINIC-10).
    """
    info = dataset_info(dataset)
    paper = None if method_paper is None else method_paper.lower()
    if paper is not None and paper not in _PAPER_AUGMENTATION:
        raise one_of("method paper", method_paper, _PAPER_AUGMENTATION)
    if info.augmentation == "none" or paper is None:
        return info.augmentation
    return info.paper_augmentation.get(paper, _PAPER_AUGMENTATION[paper])


def prepare_batch(
    x_uint8: torch.Tensor,
    mean: tuple[float, ...],
    std: tuple[float, ...],
    spec: AugmentSpec | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Augment (when ``spec`` is given) and normalise a uint8 ``(B, C, H, W)`` batch.

    Runs on the batch's device; randomness comes from ``generator`` (any device).
    """
    if x_uint8.dtype != torch.uint8 or x_uint8.ndim != 4:
        raise FedlibError(
            f"prepare_batch expects a uint8 (B, C, H, W) batch, "
            f"got {x_uint8.dtype} {tuple(x_uint8.shape)}")
    n, _, height, width = x_uint8.shape
    draws = draw_augmentation(spec, n, height, width, generator, x_uint8.device)
    return apply_augmentation(x_uint8, mean, std, spec, draws)


def draw_augmentation(spec: AugmentSpec | None, n: int, height: int, width: int,
                      generator: torch.Generator | None, device) -> dict[str, torch.Tensor]:
    """Every random number :func:`prepare_batch` uses on ``n`` samples of ``height`` x ``width``,
    drawn from ``generator`` in its order: crop offsets (n, 2), flip uniforms (n,), AutoAugment
    uniforms (n, 5), Cutout centre rows (n, 1) then columns (n, 1). Each value is one sample's,
    so the draws of several batches concatenated (``torch.cat`` per key) augment their
    concatenated images exactly as each batch alone (:func:`apply_augmentation`)."""
    draws: dict[str, torch.Tensor] = {}
    if spec is None:
        return draws
    if spec.crop_padding > 0:
        draws["crop"] = _randint(2 * spec.crop_padding + 1, (n, 2), generator, device)
    if spec.hflip:
        draws["flip"] = _uniform((n,), generator, device)
    if spec.autoaugment:
        draws["autoaugment"] = _uniform((n, 5), generator, device)
    if spec.cutout > 0:
        draws["cutout_y"] = _randint(height, (n, 1), generator, device)
        draws["cutout_x"] = _randint(width, (n, 1), generator, device)
    return draws


def apply_augmentation(x_uint8: torch.Tensor, mean: tuple[float, ...], std: tuple[float, ...],
                       spec: AugmentSpec | None, draws: dict[str, torch.Tensor]) -> torch.Tensor:
    """Augment and normalise a uint8 batch with the random numbers of :func:`draw_augmentation`
    (no randomness drawn here): every operation acts on each sample with its own numbers only."""
    images = x_uint8
    if spec is not None and spec.crop_padding > 0:
        images = crop_at(images, spec.crop_padding, draws["crop"], spec.padding_mode)
    if spec is not None and spec.hflip:
        images = flip_where(images, draws["flip"])
    if spec is not None and spec.autoaugment:
        images = apply_policy(images, draws["autoaugment"])
    batch = normalize(images, mean, std)
    if spec is not None and spec.cutout > 0:
        batch = cutout_at(batch, spec.cutout, draws["cutout_y"], draws["cutout_x"])
    return batch


# ----------------------------------------------------------------------------- randomness


def _uniform(shape: tuple[int, ...], generator: torch.Generator | None, device) -> torch.Tensor:
    """Uniform [0, 1) numbers drawn on the generator's own device, then moved to ``device``."""
    source_device = generator.device if generator is not None else device
    return torch.rand(shape, generator=generator, device=source_device).to(device)


def _randint(
    high: int, shape: tuple[int, ...], generator: torch.Generator | None, device
) -> torch.Tensor:
    source_device = generator.device if generator is not None else device
    return torch.randint(0, high, shape, generator=generator, device=source_device).to(device)


# ----------------------------------------------------------------------------- simple transforms


@lru_cache(maxsize=64)
def _channel_tensor(values: tuple[float, ...], device: torch.device) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32, device=device).view(1, -1, 1, 1)


def normalize(x_uint8: torch.Tensor, mean: tuple[float, ...], std: tuple[float, ...]) -> torch.Tensor:
    """``(x / 255 - mean) / std`` per channel, as float32."""
    if len(mean) != x_uint8.shape[1] or len(std) != x_uint8.shape[1]:
        raise FedlibError(
            f"mean/std have {len(mean)}/{len(std)} values but the batch has {x_uint8.shape[1]} channels")
    mean_t = _channel_tensor(tuple(float(v) for v in mean), x_uint8.device)
    std_t = _channel_tensor(tuple(float(v) for v in std), x_uint8.device)
    return (x_uint8.float() / 255.0 - mean_t) / std_t


def random_crop(
    images: torch.Tensor, padding: int, generator: torch.Generator | None = None,
    padding_mode: str = "constant",
) -> torch.Tensor:
    """RandomCrop(size, padding): pad once (zeros, or a mirror image for ``padding_mode="reflect"``),
    then cut each sample at its own offset."""
    offsets = _randint(2 * padding + 1, (images.shape[0], 2), generator, images.device)
    return crop_at(images, padding, offsets, padding_mode)


def crop_at(images: torch.Tensor, padding: int, offsets: torch.Tensor, padding_mode: str = "constant") -> torch.Tensor:
    """Pad once, then cut each sample at its own (row, column) offset ``offsets`` (n, 2)."""
    n, _, height, width = images.shape
    padded = pad_images(images, padding, padding_mode)
    rows = offsets[:, :1] + torch.arange(height, device=images.device)  # (n, H)
    cols = offsets[:, 1:] + torch.arange(width, device=images.device)  # (n, W)
    batch = torch.arange(n, device=images.device)[:, None, None]
    # Advanced indices around the channel slice put their dims first: (n, H, W, C).
    crops = padded[batch, :, rows[:, :, None], cols[:, None, :]]
    return crops.permute(0, 3, 1, 2).contiguous()


def pad_images(images: torch.Tensor, padding: int, mode: str = "constant") -> torch.Tensor:
    """Pad H and W by ``padding`` on each side: zeros, or ``torch.nn.functional.pad``'s reflect
    (mirror without repeating the edge pixel), done by indexing so any dtype and device works."""
    if mode == "constant":
        return torch.nn.functional.pad(images, (padding, padding, padding, padding))
    if mode != "reflect":
        raise one_of("padding_mode", mode, PADDING_MODES)
    height, width = images.shape[-2:]
    if padding >= min(height, width):
        raise FedlibError(f"reflect padding {padding} needs images larger than {padding} pixels, "
                          f"got {height}x{width}")
    rows = _reflected_indices(height, padding, images.device)
    cols = _reflected_indices(width, padding, images.device)
    return images[:, :, rows[:, None], cols[None, :]]


def _reflected_indices(size: int, padding: int, device) -> torch.Tensor:
    """Source index of each padded position: -1 -> 1, size -> size - 2 (the edge is the mirror)."""
    positions = torch.arange(-padding, size + padding, device=device).abs()
    return torch.where(positions > size - 1, 2 * (size - 1) - positions, positions)


def random_hflip(images: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Mirror each sample left-right with probability 1/2."""
    return flip_where(images, _uniform((images.shape[0],), generator, images.device))


def flip_where(images: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Mirror left-right the samples whose uniform (n,) is below 1/2."""
    return torch.where((uniforms < 0.5)[:, None, None, None], images.flip(-1), images)


def cutout(batch: torch.Tensor, size: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Cutout (DeVries & Taylor): zero a ``size`` square around a uniform centre, clipped at edges."""
    n, _, height, width = batch.shape
    centre_y = _randint(height, (n, 1), generator, batch.device)
    centre_x = _randint(width, (n, 1), generator, batch.device)
    return cutout_at(batch, size, centre_y, centre_x)


def cutout_at(batch: torch.Tensor, size: int, centre_y: torch.Tensor, centre_x: torch.Tensor) -> torch.Tensor:
    """Zero a ``size`` square around each sample's centre (rows and columns (n, 1)), clipped at edges."""
    _, _, height, width = batch.shape
    rows = torch.arange(height, device=batch.device)
    cols = torch.arange(width, device=batch.device)
    in_rows = (rows >= centre_y - size // 2) & (rows < centre_y + size // 2)  # (n, H)
    in_cols = (cols >= centre_x - size // 2) & (cols < centre_x + size // 2)  # (n, W)
    square = in_rows[:, :, None] & in_cols[:, None, :]
    return batch.masked_fill(square[:, None], 0.0)


# ----------------------------------------------------------------------------- AutoAugment


def autoaugment_cifar10(images: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """AutoAugment (CIFAR-10 policy) on a uint8 batch, each sample its own sub-policy
    (:mod:`fedlib.datasets.autoaugment`: the whole batch at once on its device, no host reads).

    Five uniforms a sample, drawn as every other choice here: on the generator's device, then moved
    to the images' (with no generator, from the images' device's global generator)."""
    return apply_policy(images, _uniform((images.shape[0], 5), generator, images.device))
