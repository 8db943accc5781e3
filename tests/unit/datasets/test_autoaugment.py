"""AutoAugment on whole batches (fedlib/datasets/autoaugment.py): each operation equals torchvision's
functional op on each sample alone, bit for bit; the policy equals the former grouped implementation
(autoaugment_reference.py) bit for bit; and no host read, whatever the draws."""

from __future__ import annotations

import pytest
import torch

from benchmarks.op_count import OpCounts
from fedlib.datasets.augment import (
    AugmentSpec, _uniform, autoaugment_cifar10, normalize, prepare_batch, random_crop, random_hflip,
)
from fedlib.datasets import autoaugment_ops
from fedlib.datasets.autoaugment import (
    _SIGNED_OPS, BINS, CIFAR10_POLICY, NO_OP, OPS, _choices, apply_ops, apply_policy, signed_magnitude,
)
from tests.unit.datasets.autoaugment_reference import TORCHVISION_OPS, grouped_autoaugment

MEAN, STD = (0.49, 0.48, 0.45), (0.25, 0.24, 0.26)
SIZES = [(3, 32, 32), (3, 24, 20), (3, 13, 11), (1, 16, 16)]


def varied_images(n: int, channels: int, height: int, width: int, seed: int = 0) -> torch.Tensor:
    """Random uint8 images with the cases where rounding shows: grey (R = G = B), dark, low-contrast,
    a flat channel, a two-valued image (Equalize's step 0) and 0/255 extremes."""
    generator = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (n, channels, height, width), generator=generator, dtype=torch.uint8)
    kinds = torch.arange(n) % 8
    images[kinds == 1] = images[kinds == 1][:, :1].expand(-1, channels, -1, -1)  # grey
    images[kinds == 2] //= 16  # dark
    images[kinds == 3] = images[kinds == 3] // 32 + 120  # low contrast
    images[kinds == 4, 0] = 77  # one flat channel
    images[kinds == 5] = torch.where(images[kinds == 5] < 3, 10, 200).to(torch.uint8)  # nearly all 200
    images[kinds == 6] = torch.where(images[kinds == 6] < 128, 0, 255).to(torch.uint8)
    return images


def torchvision_sample(op: str, image: torch.Tensor, magnitude_bin: int, negative: bool) -> torch.Tensor:
    """torchvision's functional op on one (1, C, H, W) sample, as the former implementation called it."""
    height, width = image.shape[-2:]
    magnitude = signed_magnitude(op, magnitude_bin, negative, height, width)
    if op in ("AutoContrast", "Equalize", "Invert"):
        magnitude = 0.0
    return TORCHVISION_OPS[op](image, magnitude)


def assert_each_sample_matches(images, ops, bins, negative):
    out = apply_ops(images, ops, bins, negative)
    assert out.dtype == torch.uint8 and out.shape == images.shape
    for i in range(len(images)):
        op = int(ops[i])
        expected = images[i:i + 1] if op == NO_OP else torchvision_sample(OPS[op], images[i:i + 1], int(bins[i]),
                                                                           bool(negative[i]))
        assert torch.equal(out[i:i + 1], expected), (OPS[op] if op < NO_OP else "none", int(bins[i]),
                                                     bool(negative[i]), tuple(images.shape))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape", SIZES, ids=lambda s: "x".join(map(str, s)))
def test_each_operation_equals_torchvision_on_each_sample(op, shape):
    n = 2 * BINS * 2  # every bin with both signs, twice
    images = varied_images(n, *shape, seed=OPS.index(op))
    bins = torch.arange(n) % BINS
    negative = (torch.arange(n) // BINS) % 2 == 1
    assert_each_sample_matches(images, torch.full((n,), OPS.index(op)), bins, negative)


@pytest.mark.parametrize("shape", SIZES[:2], ids=lambda s: "x".join(map(str, s)))
def test_a_batch_of_mixed_operations_equals_torchvision_on_each_sample(shape):
    n = 96
    generator = torch.Generator().manual_seed(5)
    images = varied_images(n, *shape, seed=5)
    ops = torch.randint(0, NO_OP + 1, (n,), generator=generator)
    bins = torch.randint(0, BINS, (n,), generator=generator)
    negative = torch.rand(n, generator=generator) < 0.5
    assert_each_sample_matches(images, ops, bins, negative)


# ----------------------------------------------------------------------------- the blends' rounding, on every value

FACTORS = sorted({1.0 + signed_magnitude("Color", b, negative, 32, 32) for b in range(BINS) for negative in (0, 1)})


def torchvision_blend():
    """torchvision's ``_blend`` (the arithmetic of adjust_saturation and adjust_contrast)."""
    color = pytest.importorskip("torchvision.transforms.v2.functional._color")
    if not hasattr(color, "_blend"):
        pytest.skip("this torchvision keeps its blend elsewhere")
    return color._blend


@pytest.mark.parametrize("factor", FACTORS)
def test_color_and_sharpness_round_as_torchvision_for_every_pair_of_values(factor):
    """Every (pixel, grey) pair for Color and every (pixel, blurred) pair for Sharpness: about 0.4 %
    of them round differently if ``a * b + c`` is rounded twice, not fused as torchvision's add_."""
    shades = torch.arange(256.0)
    pixel, other = shades.repeat_interleave(256).view(1, 1, 256, 256), shades.repeat(256).view(1, 1, 256, 256)
    scale, alpha = torch.tensor([factor]), torch.tensor([1.0 - factor])
    colour = autoaugment_ops.blend(pixel, other, scale, alpha)
    assert torch.equal(colour, torchvision_blend()(pixel.to(torch.uint8), other, factor))
    sharpened = autoaugment_ops.blend(pixel, other - pixel, torch.ones(1), alpha)
    expected = pixel.clone().add_(other - pixel, alpha=1.0 - factor).clamp_(0, 255).to(torch.uint8)  # its add_
    assert torch.equal(sharpened, expected)


@pytest.mark.parametrize("pixels", [1024, 480, 143])
def test_contrast_rounds_as_torchvision_for_every_value_and_many_means(pixels):
    """Grey images of ``pixels`` pixels with means S / pixels, S over the whole range: each table
    entry is torchvision's ``_blend(value, mean, factor)``."""
    sums = torch.arange(0, 255 * pixels + 1, 389)
    grey = (sums[:, None] // pixels + (torch.arange(pixels) < sums[:, None] % pixels)).float().view(-1, 1, 1, pixels)
    shades = torch.arange(256, dtype=torch.uint8).expand(len(sums), 1, 1, 256)
    for factor in FACTORS:
        ours = autoaugment_ops.contrast_table(grey, torch.full((len(sums),), factor),
                                              torch.full((len(sums),), 1.0 - factor))
        expected = torchvision_blend()(shades, grey.mean(dim=(-3, -2, -1), keepdim=True), factor)
        assert torch.equal(ours, expected.view(len(sums), 1, 256)), factor


def test_the_fused_multiply_add_rounds_once_where_float64_would_round_twice():
    """a * b + c = 1 + 2**-24 + 2**-60: just past float32's halfway point between 1 and 1 + 2**-23,
    where a float64 sum lands on that point and then ties to even (1.0)."""
    a, c = torch.tensor([1 + 2 ** -12, -(1 + 2 ** -12)]), torch.tensor([1.0, -1.0])
    b = torch.full((2,), (1 - 2 ** -12 + 2 ** -24) * 2 ** -24)
    assert (a.double() * b.double() + c.double()).float().tolist() == [1.0, -1.0]
    assert autoaugment_ops.fused_multiply_add(a, b, c).tolist() == [1 + 2 ** -23, -(1 + 2 ** -23)]


def test_the_fused_multiply_add_equals_torchs_add_with_alpha():
    if torch.backends.cpu.get_cpu_capability() == "DEFAULT":
        pytest.skip("without AVX2, torch's CPU add_ rounds the product first")
    generator = torch.Generator().manual_seed(0)
    a, c = (torch.rand(2, 100_000, generator=generator) - 0.5) * 600
    for b in torch.rand(8, generator=generator).tolist() + [-0.9, -0.6, 0.3, 0.7]:
        expected = c.clone().add_(a, alpha=b)
        assert torch.equal(autoaugment_ops.fused_multiply_add(a, torch.full_like(a, b), c), expected), b


@pytest.mark.parametrize("n, shape", [(1, (3, 32, 32)), (7, (3, 32, 32)), (64, (3, 32, 32)), (7, (3, 64, 64)),
                                      (7, (3, 24, 20))], ids=str)
def test_the_policy_equals_the_former_grouped_implementation(n, shape):
    images = varied_images(n, *shape, seed=n)
    for seed in range(3):
        draws = _uniform((n, 5), torch.Generator().manual_seed(seed), images.device)
        assert torch.equal(autoaugment_cifar10(images, torch.Generator().manual_seed(seed)),
                           grouped_autoaugment(images, draws)), (seed, n, shape)


def test_a_large_batch_equals_the_former_implementation_and_draws_every_sub_policy():
    images = varied_images(400, 3, 32, 32, seed=11)
    draws = _uniform((400, 5), torch.Generator().manual_seed(3), images.device)
    assert len(set((draws[:, 0] * 25).long().tolist())) == 25
    assert torch.equal(apply_policy(images, draws), grouped_autoaugment(images, draws))


def test_draws_next_to_every_boundary_decide_as_the_former_python_floats():
    """Draws at and next to k/25 (the sub-policies) and each probability, as float32."""
    edges = torch.tensor([k / 25 for k in range(25)] + [p for pair in CIFAR10_POLICY for _, p, _ in pair] + [0.5])
    near = torch.cat([edges, torch.nextafter(edges, torch.ones(1)), torch.nextafter(edges, torch.zeros(1))])
    near = near.clamp(0.0, torch.nextafter(torch.ones(1), torch.zeros(1)).item()).unique()
    draws = torch.stack([near[torch.randperm(len(near), generator=torch.Generator().manual_seed(column))]
                         for column in range(5)], dim=1)
    ops, bins, negative = _choices(draws)
    for i, (pick, *chances) in enumerate(draws.tolist()):
        pair = CIFAR10_POLICY[min(int(pick * 25), 24)]
        for slot, (op, probability, magnitude_bin) in enumerate(pair):
            fires = not chances[slot] > probability
            assert int(ops[i, slot]) == (OPS.index(op) if fires else NO_OP), (pick, chances)
            assert int(bins[i, slot]) == (magnitude_bin or 0)
            assert bool(negative[i, slot]) == (op in _SIGNED_OPS and chances[2 + slot] < 0.5)
    images = varied_images(len(draws), 3, 16, 16, seed=2)
    assert torch.equal(apply_policy(images, draws), grouped_autoaugment(images, draws))


@pytest.mark.parametrize("spec", [AugmentSpec(crop_padding=4, hflip=True, autoaugment=True),
                                  AugmentSpec(autoaugment=True)])
def test_prepare_batch_draws_the_same_stream_as_before(spec):
    images = varied_images(32, 3, 32, 32, seed=9)

    def former(generator):
        x = images
        if spec.crop_padding:
            x = random_crop(x, spec.crop_padding, generator)
        if spec.hflip:
            x = random_hflip(x, generator)
        x = grouped_autoaugment(x, _uniform((len(x), 5), generator, torch.device("cpu")))
        return normalize(x, MEAN, STD)

    ours, theirs = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
    assert torch.equal(prepare_batch(images, MEAN, STD, spec, ours), former(theirs))
    assert torch.equal(torch.rand(3, generator=ours), torch.rand(3, generator=theirs))  # as many draws


# ----------------------------------------------------------------------------- no host reads


def test_the_batched_policy_runs_on_the_meta_device():
    """Meta tensors hold no values: any read of one (item, tolist, a mask's nonzero) fails."""
    images = torch.empty(64, 3, 32, 32, dtype=torch.uint8, device="meta")
    out = apply_policy(images, torch.empty(64, 5, device="meta"))
    assert out.shape == images.shape and out.dtype == torch.uint8 and out.device.type == "meta"


def test_the_batched_policy_reads_nothing_back(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a host read")

    images = varied_images(64, 3, 32, 32)
    for name in ("tolist", "item", "__bool__", "__int__", "__float__", "__index__", "numpy", "nonzero"):
        monkeypatch.setattr(torch.Tensor, name, refuse)
    monkeypatch.setattr(torch, "nonzero", refuse)
    with OpCounts() as counts:
        autoaugment_cifar10(images, torch.Generator().manual_seed(0))
    assert not counts.syncs


def test_the_op_count_is_fixed_and_below_the_grouped_one():
    """The same aten ops whatever the draws (no branch on values); the grouped version read the
    draws back and dispatched more ops, a number that varied with them."""
    images = varied_images(64, 3, 32, 32)
    autoaugment_cifar10(images, torch.Generator().manual_seed(9))  # the tables of this size, made once
    batched, grouped = set(), set()
    for seed in range(2):
        with OpCounts() as counts:
            autoaugment_cifar10(images, torch.Generator().manual_seed(seed))
        batched.add(counts.total)
        draws = _uniform((64, 5), torch.Generator().manual_seed(seed), images.device)
        with OpCounts() as counts:
            grouped_autoaugment(images, draws)
        grouped.add(counts.total)
    assert len(batched) == 1 and max(batched) < min(grouped)
