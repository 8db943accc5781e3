"""FedAvg (McMahan et al., AISTATS 2017): local SGD on cross-entropy, sample-weighted averaging.

Everything lives in :class:`fedlib.algorithms.base.Algorithm`, whose hooks *are* FedAvg; this
file only registers it under its name.
"""

from fedlib.algorithms.base import Algorithm
from fedlib.core.registry import register


@register
class FedAvg(Algorithm):
    """Local cross-entropy; the server averages full states weighted by n_k."""

    name = "fedavg"
