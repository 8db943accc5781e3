"""The interface every model of the zoo has: :class:`FedModel` (a feature extractor ``body`` and one
linear ``classifier``), what a model holds (dropout, BatchNorm, parameter count), and a fresh last layer."""

from __future__ import annotations

import numbers

import torch
from torch import nn

from fedlib.errors import FedlibError


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
    check_positive_int("num_classes", num_classes)
    old = model.classifier.weight
    model.classifier = nn.Linear(model.feature_dim, int(num_classes)).to(old.device, old.dtype)
    return model


def check_positive_int(arg: str, value) -> None:
    """FedlibError unless ``value`` is a positive integer (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise FedlibError(f"{arg} must be a positive integer, got {value!r}")
