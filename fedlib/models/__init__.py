"""The model zoo: every network the five papers train, behind one interface.

One file per model family (``mlp``, ``lenet``, ``cnn``, ``vgg``, ``alexnet``, ``resnet``, ``mobilenet``),
each a body builder per network; ``base`` holds :class:`FedModel` and what is asked of a model,
``layers`` the blocks the families share. This package holds the names the rest of fedlib uses:
:data:`MODELS`, :func:`build_model` and the :mod:`fedlib.models.base` interface.

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
  way; 32x32 inputs are not padded. Override with ``first_padding``. ``lenet5_classic`` is the same
  network with LeNet-5's original tanh and average pooling (the PKD paper does not say which it ran;
  ``tools/probes/pkd_fedavg_baseline``).
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
from typing import Callable

from torch import nn

from fedlib.errors import FedlibError, one_of
from fedlib.models import alexnet, cnn, lenet, mlp, mobilenet, resnet, vgg
from fedlib.models.base import (FedModel, check_positive_int, count_parameters, has_batchnorm, has_dropout,
                                replace_classifier)

__all__ = ["MODELS", "FedModel", "build_model", "count_parameters", "has_batchnorm", "has_dropout",
           "replace_classifier"]

MODELS: tuple[str, ...] = (
    "mlp", "lenet5", "simple_cnn", "cnn2", "convnet_s", "vgg9", "resnet8", "resnet32", "resnet56",
    "resnet18", "resnet18_imagenet", "resnet50", "mobilenetv2", "alexnet", "lenet5_classic",
)


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
        check_positive_int(arg, value)
    builder = _BUILDERS[name]
    _check_options(name, builder, options)
    body, feature_dim = builder(int(in_channels), int(image_size), **options)
    return FedModel(body, nn.Linear(feature_dim, int(num_classes)), arch=name)


def _check_options(name: str, builder: Callable, options: dict) -> None:
    accepted = [p for p in inspect.signature(builder).parameters
                if p not in ("in_channels", "image_size")]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise FedlibError(f"model {name!r} takes no option(s) {', '.join(unknown)}; "
                          f"accepted options: {', '.join(accepted) or 'none'}")


# model name -> its body builder: (in_channels, image_size, **options) -> (body, feature width)
_BUILDERS: dict[str, Callable[..., tuple[nn.Module, int]]] = {
    "mlp": mlp.mlp,
    "lenet5": lenet.lenet5,
    "lenet5_classic": lenet.lenet5_classic,
    "simple_cnn": lenet.simple_cnn,
    "cnn2": cnn.cnn2,
    "convnet_s": cnn.convnet_s,
    "vgg9": vgg.vgg9,
    "resnet8": resnet.cifar_resnet(8),
    "resnet32": resnet.cifar_resnet(32),
    "resnet56": resnet.cifar_resnet(56),
    "resnet18": resnet.resnet18,
    "resnet18_imagenet": resnet.resnet18_imagenet,
    "resnet50": resnet.resnet50,
    "mobilenetv2": mobilenet.mobilenetv2,
    "alexnet": alexnet.alexnet,
}
