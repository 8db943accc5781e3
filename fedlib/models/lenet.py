"""``lenet5`` (PKD) and ``simple_cnn`` (FedCSD's FEMNIST network, MOON's "simple CNN"): LeNet-5's
layers, padded for small inputs (``lenet5``) or never (``simple_cnn``); ``lenet5_classic``: ``lenet5``
with LeNet-5's original tanh and average pooling (a reading of what the PKD paper ran)."""

from __future__ import annotations

from torch import nn

from fedlib.models.layers import spatial_after


def lenet5(in_channels: int, image_size: int,
           first_padding: int | None = None) -> tuple[nn.Module, int]:
    return _lenet_body("lenet5", in_channels, image_size, _padding(first_padding, image_size))


def lenet5_classic(in_channels: int, image_size: int,
                   first_padding: int | None = None) -> tuple[nn.Module, int]:
    """``lenet5``'s layers with tanh after each and 2x2 average pooling (LeCun et al. 1998, whose
    subsampling layers also had a trainable scale and bias per map, left out here): the same 61,706
    parameters for 10 classes."""
    return _lenet_body("lenet5_classic", in_channels, image_size, _padding(first_padding, image_size),
                       nn.Tanh, nn.AvgPool2d)


def _padding(first_padding: int | None, image_size: int) -> int:
    """The first conv's padding: as given, else 2 for inputs of 28x28 or smaller (MNIST's 28x28 seen as 32x32)."""
    return (2 if image_size <= 28 else 0) if first_padding is None else first_padding


def simple_cnn(in_channels: int, image_size: int) -> tuple[nn.Module, int]:
    return _lenet_body("simple_cnn", in_channels, image_size, first_padding=0)


def _lenet_body(name: str, in_channels: int, image_size: int, first_padding: int,
                activation: type[nn.Module] = nn.ReLU, pool: type[nn.Module] = nn.MaxPool2d) -> tuple[nn.Module, int]:
    """conv5x5 -> 6, pool, conv5x5 -> 16, pool, FC 120, FC 84, ``activation`` after each conv and FC
    (default ReLU and 2x2 max-pooling)."""
    conv_pool = [(5, 1, first_padding), (2, 2, 0), (5, 1, 0), (2, 2, 0)]
    spatial = spatial_after(name, image_size, conv_pool)
    body = nn.Sequential(
        nn.Conv2d(in_channels, 6, 5, padding=first_padding), activation(), pool(2),
        nn.Conv2d(6, 16, 5), activation(), pool(2),
        nn.Flatten(),
        nn.Linear(16 * spatial * spatial, 120), activation(),
        nn.Linear(120, 84), activation(),
    )
    return body, 84
