"""The model zoo: every network the five papers train, behind one interface.

Every model is a :class:`FedModel`: a feature extractor ``body`` that ends in a flat
(B, D) representation, followed by one ``classifier`` (``nn.Linear(D, C)``). Methods that
distil or compare features (MOON, FedProto, FedCSD's feature distance, PKD's class distances)
read ``features`` from ``model(x, return_features=True)``; everything else uses the logits.

Architectures and the choices we made where the papers leave room:

- ``mlp``: FedVLS's MNIST network, 784-200-200-C with ReLU (McMahan et al. 2017's "2NN",
  199,210 parameters for MNIST). The first layer takes ``in_channels * image_size**2`` inputs.
- ``lenet5`` (PKD): conv5x5->6, max-pool, conv5x5->16, max-pool, FC 120, 84, C, ReLU. For
  inputs of 28x28 or smaller the first conv pads by 2, as classic LeNet-5 does for MNIST, so
  a 28x28 digit is seen as 32x32 and the count is LeNet-5's 61,706 (10 classes, grey) either
  way; 32x32 inputs are not padded. Override with ``first_padding``.
- ``simple_cnn`` (FedCSD's FEMNIST network): MOON's "simple CNN" (Li et al. 2021, code
  ``SimpleCNN``/``SimpleCNNMNIST``), LeNet-5's layers with no padding at any input size: on a
  28x28 grey image the FC layer reads 16x4x4 = 256 values (44,426 parameters for 10 classes),
  where ``lenet5`` pads to 32x32 and reads 400 (61,706). On 32x32 inputs the two are one network.
- ``cnn2`` (FedNTD/FedLMD) and ``convnet_s`` (PKD): the same network. PKD says ConvNet-S is
  the CNN of McMahan et al. 2017, which is exactly the FedNTD "2-conv CNN" (1,663,370
  parameters on MNIST, 2,156,490 on CIFAR-10). Both names are kept so configs read like papers.
- ``vgg9``: FedMA's VGG-9 without BatchNorm (3x3 convs 32-64 | 128-128 | 256-256, FC 512-512).
- ``resnet8/32/56``: CIFAR ResNets of He et al. 2016 (basic blocks at every depth, 16/32/64
  channels, parameter-free zero-padding "option A" shortcuts). ``shortcut="projection"``
  gives 1x1 conv + BN shortcuts instead ("option B"; ResNet-8 then has the 78,042 parameters
  often quoted for FL ResNet-8, against 75,290 with option A).
- ``resnet18``: the common CIFAR ResNet-18 (3x3 stride-1 stem, no max-pool, 1x1 projection
  shortcuts), written here. ``resnet18_imagenet`` is torchvision's ResNet-18 unchanged (FedVLS).
- ``resnet50`` (FedCSD): torchvision's ResNet-50 body; inputs smaller than 64 pixels get the
  CIFAR stem (3x3 stride-1 conv, no max-pool). Override with ``cifar_stem``.
- ``mobilenetv2`` (FedVLS): the 32x32 variant of FedVLS's code: stride-1 stem of 32 channels,
  ReLU (not ReLU6), an expansion conv in every block, a residual in every stride-1 block
  (1x1 conv + BN when channels change), 1x1 conv to 1280, BN, ReLU, global average pool.
- ``alexnet`` (FedCSD, Office-Caltech): torchvision's AlexNet layers (no BatchNorm). Inputs
  smaller than 64 pixels, where the 11x11 stride-4 stem leaves nothing, get the CIFAR stem
  instead (3x3 stride-1 conv, first max-pool dropped); the adaptive 6x6 pool keeps the
  classifier, and so the parameter count, the same as torchvision's. Override with ``cifar_stem``.

Grey images work everywhere through ``in_channels=1``. Weights use PyTorch's default
initialisation, except the ResNets, whose convolutions use He (fan-out) initialisation as in
He et al. 2016 and torchvision. Seed torch before :func:`build_model` for reproducible weights.
"""

from __future__ import annotations

import inspect
import numbers
from typing import Callable

import torch
import torch.nn.functional as F
import torchvision
from torch import nn

from fedlib.errors import FedlibError, one_of

MODELS: tuple[str, ...] = (
    "mlp", "lenet5", "simple_cnn", "cnn2", "convnet_s", "vgg9", "resnet8", "resnet32", "resnet56",
    "resnet18", "resnet18_imagenet", "resnet50", "mobilenetv2", "alexnet",
)

# Inputs at least this large keep the ImageNet stems of resnet50 and alexnet.
IMAGENET_STEM_MIN_SIZE = 64


class FedModel(nn.Module):
    """A feature extractor ``body`` (ending in a flat (B, D) tensor) and a linear ``classifier``.

    ``forward`` only calls submodules, so it works unchanged under
    ``torch.func.functional_call``; the only state it mutates is BatchNorm running statistics.
    """

    def __init__(self, body: nn.Module, classifier: nn.Linear, arch: str = ""):
        super().__init__()
        self.body = body
        self.classifier = classifier
        self.arch = arch

    @property
    def feature_dim(self) -> int:
        """Width D of the penultimate representation (the classifier's input)."""
        return self.classifier.in_features

    @property
    def num_classes(self) -> int:
        """Number of logits the classifier produces."""
        return self.classifier.out_features

    def forward(self, x: torch.Tensor, return_features: bool = False):
        """Logits (B, C); with ``return_features=True`` the pair (features (B, D), logits)."""
        features = self.body(x)
        logits = self.classifier(features)
        if return_features:
            return features, logits
        return logits


def has_dropout(model: nn.Module) -> bool:
    """Whether ``model`` holds a dropout layer (its training draws from the global RNG)."""
    return any(isinstance(m, nn.modules.dropout._DropoutNd) for m in model.modules())


def has_batchnorm(model: nn.Module) -> bool:
    """Whether ``model`` holds a BatchNorm layer (its training updates running statistics)."""
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of parameter entries (BatchNorm buffers are not parameters and are not counted)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def replace_classifier(model: FedModel, num_classes: int) -> FedModel:
    """Give ``model`` a fresh ``Linear(feature_dim, num_classes)`` last layer, in place.

    PKD's experts are "the same network with |g| outputs": build one with
    ``build_model(name, len(group))``, or start from a trained body with
    ``replace_classifier(copy.deepcopy(global_model), len(group))``.
    """
    _check_positive_int("num_classes", num_classes)
    old = model.classifier.weight
    model.classifier = nn.Linear(model.feature_dim, int(num_classes)).to(old.device, old.dtype)
    return model


def build_model(name: str, num_classes: int, in_channels: int = 3, image_size: int = 32,
                **options) -> FedModel:
    """Build the network ``name`` (one of :data:`MODELS`) for square inputs of ``image_size``.

    ``options`` are model-specific keywords (``first_padding`` for lenet5, ``shortcut`` for
    resnet8/32/56, ``cifar_stem`` for resnet50 and alexnet); an option the model does not take
    raises :class:`FedlibError`.
    """
    if name not in _BUILDERS:
        raise one_of("model", name, MODELS)
    for arg, value in (("num_classes", num_classes), ("in_channels", in_channels),
                       ("image_size", image_size)):
        _check_positive_int(arg, value)
    builder = _BUILDERS[name]
    _check_options(name, builder, options)
    body, feature_dim = builder(int(in_channels), int(image_size), **options)
    return FedModel(body, nn.Linear(feature_dim, int(num_classes)), arch=name)


# ----------------------------------------------------------------------------- validation

def _check_positive_int(arg: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise FedlibError(f"{arg} must be a positive integer, got {value!r}")


def _check_options(name: str, builder: Callable, options: dict) -> None:
    accepted = [p for p in inspect.signature(builder).parameters
                if p not in ("in_channels", "image_size")]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise FedlibError(f"model {name!r} takes no option(s) {', '.join(unknown)}; "
                          f"accepted options: {', '.join(accepted) or 'none'}")


def _out_size(size: int, kernel: int, stride: int = 1, padding: int = 0) -> int:
    """Spatial size after one conv or pool layer (floor mode, as PyTorch computes it)."""
    return (size + 2 * padding - kernel) // stride + 1


def _spatial_after(name: str, image_size: int, layers: list[tuple[int, int, int]]) -> int:
    """Chain ``(kernel, stride, padding)`` layers; a size that vanishes raises FedlibError."""
    def final(size: int) -> int:
        for kernel, stride, padding in layers:
            size = _out_size(size, kernel, stride, padding)
            if size < 1:
                return 0
        return size

    spatial = final(image_size)
    if spatial < 1:
        smallest = next(s for s in range(1, 1025) if final(s) >= 1)
        raise FedlibError(f"model {name!r} cannot take {image_size}x{image_size} inputs; "
                          f"use image_size >= {smallest}")
    return spatial


# ----------------------------------------------------------------------------- small nets

def _mlp(in_channels: int, image_size: int) -> tuple[nn.Module, int]:
    body = nn.Sequential(
        nn.Flatten(),
        nn.Linear(in_channels * image_size * image_size, 200), nn.ReLU(),
        nn.Linear(200, 200), nn.ReLU(),
    )
    return body, 200


def _lenet5(in_channels: int, image_size: int,
            first_padding: int | None = None) -> tuple[nn.Module, int]:
    if first_padding is None:
        first_padding = 2 if image_size <= 28 else 0  # MNIST's 28x28 seen as 32x32
    return _lenet_body("lenet5", in_channels, image_size, first_padding)


def _simple_cnn(in_channels: int, image_size: int) -> tuple[nn.Module, int]:
    return _lenet_body("simple_cnn", in_channels, image_size, first_padding=0)


def _lenet_body(name: str, in_channels: int, image_size: int, first_padding: int) -> tuple[nn.Module, int]:
    """conv5x5 -> 6, max-pool, conv5x5 -> 16, max-pool, FC 120, FC 84 (ReLU after each)."""
    conv_pool = [(5, 1, first_padding), (2, 2, 0), (5, 1, 0), (2, 2, 0)]
    spatial = _spatial_after(name, image_size, conv_pool)
    body = nn.Sequential(
        nn.Conv2d(in_channels, 6, 5, padding=first_padding), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * spatial * spatial, 120), nn.ReLU(),
        nn.Linear(120, 84), nn.ReLU(),
    )
    return body, 84


def _cnn2(in_channels: int, image_size: int) -> tuple[nn.Module, int]:
    return _mcmahan_cnn("cnn2", in_channels, image_size)


def _convnet_s(in_channels: int, image_size: int) -> tuple[nn.Module, int]:
    return _mcmahan_cnn("convnet_s", in_channels, image_size)


def _mcmahan_cnn(name: str, in_channels: int, image_size: int) -> tuple[nn.Module, int]:
    """McMahan et al. 2017's CNN: two 5x5 'same' convs (32, 64), each max-pooled, FC 512."""
    spatial = _spatial_after(name, image_size, [(5, 1, 2), (2, 2, 0), (5, 1, 2), (2, 2, 0)])
    body = nn.Sequential(
        nn.Conv2d(in_channels, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * spatial * spatial, 512), nn.ReLU(),
    )
    return body, 512


def _conv3_relu(in_channels: int, out_channels: int) -> list[nn.Module]:
    return [nn.Conv2d(in_channels, out_channels, 3, padding=1), nn.ReLU()]


def _vgg9(in_channels: int, image_size: int) -> tuple[nn.Module, int]:
    spatial = _spatial_after("vgg9", image_size, [(2, 2, 0)] * 3)  # 3x3 convs keep the size
    body = nn.Sequential(
        *_conv3_relu(in_channels, 32), *_conv3_relu(32, 64), nn.MaxPool2d(2),
        *_conv3_relu(64, 128), *_conv3_relu(128, 128), nn.MaxPool2d(2), nn.Dropout2d(0.05),
        *_conv3_relu(128, 256), *_conv3_relu(256, 256), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.1),
        nn.Linear(256 * spatial * spatial, 512), nn.ReLU(),
        nn.Linear(512, 512), nn.ReLU(), nn.Dropout(0.1),
    )
    return body, 512


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


def _alexnet(in_channels: int, image_size: int,
             cifar_stem: bool | None = None) -> tuple[nn.Module, int]:
    if cifar_stem is None:
        cifar_stem = image_size < IMAGENET_STEM_MIN_SIZE
    if cifar_stem:
        stem = [nn.Conv2d(in_channels, 64, 3, padding=1), nn.ReLU()]
        stem_sizes = [(3, 1, 1)]
    else:
        stem = [nn.Conv2d(in_channels, 64, 11, stride=4, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2)]
        stem_sizes = [(11, 4, 2), (3, 2, 0)]
    _spatial_after("alexnet", image_size, stem_sizes + [(3, 2, 0), (3, 2, 0)])
    body = nn.Sequential(
        *stem,
        nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
        *_conv3_relu(192, 384), *_conv3_relu(384, 256), *_conv3_relu(256, 256),
        nn.MaxPool2d(3, 2),
        UniformAdaptiveAvgPool(6), nn.Flatten(),
        nn.Dropout(0.5), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(),
        nn.Dropout(0.5), nn.Linear(4096, 4096), nn.ReLU(),
    )
    return body, 4096


# ----------------------------------------------------------------------------- ResNets

def _conv_bn(in_channels: int, out_channels: int, kernel: int, stride: int = 1,
             groups: int = 1) -> list[nn.Module]:
    conv = nn.Conv2d(in_channels, out_channels, kernel, stride, padding=kernel // 2,
                     groups=groups, bias=False)
    return [conv, nn.BatchNorm2d(out_channels)]


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
        self.residual = nn.Sequential(*_conv_bn(in_channels, out_channels, 3, stride), nn.ReLU(),
                                      *_conv_bn(out_channels, out_channels, 3))
        if stride == 1 and in_channels == out_channels:
            self.shortcut = nn.Identity()
        elif zero_pad_shortcut:
            self.shortcut = ZeroPadShortcut(in_channels, out_channels, stride)
        else:
            self.shortcut = nn.Sequential(*_conv_bn(in_channels, out_channels, 1, stride))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.residual(x) + self.shortcut(x))


def _resnet_body(in_channels: int, widths: list[int], blocks_per_stage: int,
                 zero_pad_shortcut: bool) -> nn.Sequential:
    """3x3 stride-1 stem, stages of basic blocks (stride 2 from the second), global pool."""
    layers = [*_conv_bn(in_channels, widths[0], 3), nn.ReLU()]
    channels = widths[0]
    for stage, width in enumerate(widths):
        for block in range(blocks_per_stage):
            stride = 2 if stage > 0 and block == 0 else 1
            layers.append(BasicBlock(channels, width, stride, zero_pad_shortcut))
            channels = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    body = nn.Sequential(*layers)
    _he_init_convs(body)
    return body


def _he_init_convs(module: nn.Module) -> None:
    for layer in module.modules():
        if isinstance(layer, nn.Conv2d):
            nn.init.kaiming_normal_(layer.weight, mode="fan_out", nonlinearity="relu")


SHORTCUTS = ("zero_pad", "projection")


def _cifar_resnet(depth: int) -> Callable[..., tuple[nn.Module, int]]:
    """Builder for the depth-(6n+2) CIFAR ResNet of He et al. 2016."""
    def build(in_channels: int, image_size: int,
              shortcut: str = "zero_pad") -> tuple[nn.Module, int]:
        if shortcut not in SHORTCUTS:
            raise one_of("shortcut", shortcut, SHORTCUTS)
        blocks_per_stage = (depth - 2) // 6
        zero_pad = shortcut == "zero_pad"
        return _resnet_body(in_channels, [16, 32, 64], blocks_per_stage, zero_pad), 64
    return build


def _resnet18(in_channels: int, image_size: int) -> tuple[nn.Module, int]:
    return _resnet_body(in_channels, [64, 128, 256, 512], 2, False), 512


def _torchvision_resnet(model: nn.Module, in_channels: int, cifar_stem: bool) -> nn.Module:
    """Turn a torchvision ResNet into a body: new stem if needed, ``fc`` removed."""
    if cifar_stem:
        model.conv1 = nn.Conv2d(in_channels, 64, 3, stride=1, padding=1, bias=False)
        model.maxpool = nn.Identity()
    elif in_channels != 3:
        model.conv1 = nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False)
    _he_init_convs(model.conv1)
    model.fc = nn.Identity()
    return model


def _resnet18_imagenet(in_channels: int, image_size: int) -> tuple[nn.Module, int]:
    model = torchvision.models.resnet18(weights=None)
    return _torchvision_resnet(model, in_channels, cifar_stem=False), 512


def _resnet50(in_channels: int, image_size: int,
              cifar_stem: bool | None = None) -> tuple[nn.Module, int]:
    if cifar_stem is None:
        cifar_stem = image_size < IMAGENET_STEM_MIN_SIZE
    model = torchvision.models.resnet50(weights=None)
    return _torchvision_resnet(model, in_channels, cifar_stem), 2048


# ----------------------------------------------------------------------------- MobileNetV2

# (expansion, out_channels, blocks, stride of the first block), FedVLS's 32x32 variant.
MOBILENETV2_STAGES = ((1, 16, 1, 1), (6, 24, 2, 1), (6, 32, 3, 2), (6, 64, 4, 2),
                      (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


class InvertedResidual(nn.Module):
    """1x1 expand, 3x3 depthwise, 1x1 linear projection; residual whenever stride is 1."""

    def __init__(self, in_channels: int, out_channels: int, expansion: int, stride: int):
        super().__init__()
        hidden = expansion * in_channels
        self.residual = nn.Sequential(
            *_conv_bn(in_channels, hidden, 1), nn.ReLU(),
            *_conv_bn(hidden, hidden, 3, stride, groups=hidden), nn.ReLU(),
            *_conv_bn(hidden, out_channels, 1),
        )
        # Strided blocks have no shortcut at all (so no unused parameters either).
        self.shortcut: nn.Module | None = None
        if stride == 1:
            self.shortcut = nn.Identity() if in_channels == out_channels else nn.Sequential(
                *_conv_bn(in_channels, out_channels, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.residual(x)
        if self.shortcut is not None:  # fixed at construction, not a tensor-value branch
            out = out + self.shortcut(x)
        return out


def _mobilenetv2(in_channels: int, image_size: int) -> tuple[nn.Module, int]:
    layers = [*_conv_bn(in_channels, 32, 3), nn.ReLU()]
    channels = 32
    for expansion, width, blocks, first_stride in MOBILENETV2_STAGES:
        for block in range(blocks):
            stride = first_stride if block == 0 else 1
            layers.append(InvertedResidual(channels, width, expansion, stride))
            channels = width
    layers += [*_conv_bn(channels, 1280, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    return nn.Sequential(*layers), 1280


_BUILDERS: dict[str, Callable[..., tuple[nn.Module, int]]] = {
    "mlp": _mlp,
    "lenet5": _lenet5,
    "simple_cnn": _simple_cnn,
    "cnn2": _cnn2,
    "convnet_s": _convnet_s,
    "vgg9": _vgg9,
    "resnet8": _cifar_resnet(8),
    "resnet32": _cifar_resnet(32),
    "resnet56": _cifar_resnet(56),
    "resnet18": _resnet18,
    "resnet18_imagenet": _resnet18_imagenet,
    "resnet50": _resnet50,
    "mobilenetv2": _mobilenetv2,
    "alexnet": _alexnet,
}
