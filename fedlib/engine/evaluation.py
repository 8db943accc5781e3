"""A model's test accuracy, loss and class-wise accuracy on a run's test set (and per natural
group where there are few): what the engine records every evaluated round."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fedlib.core.state import FederatedData

# Data with at most this many named groups (Office-Caltech-10's 4 domains; not FEMNIST's
# thousands of writers) also get a per-group test accuracy every round.
MAX_REPORTED_GROUPS = 64


@torch.no_grad()
def evaluate(model: nn.Module, data: FederatedData) -> dict[str, Any]:
    """Test accuracy, mean loss and class-wise accuracy of ``model`` on the full test set, plus
    ``group_accuracy`` (one per domain, ``dataset.group_names`` order) for data with few groups."""
    was_training = model.training
    model.eval()
    correct = torch.zeros(data.num_classes, device=data.device)
    total = torch.zeros(data.num_classes, device=data.device)
    all_hits, loss_sum = [], 0.0
    for x, y in data.test_batches():
        logits = model(x)
        loss_sum += float(F.cross_entropy(logits.float(), y, reduction="sum"))
        hits = (logits.argmax(1) == y).float()
        correct.index_add_(0, y, hits)
        total.index_add_(0, y, torch.ones_like(hits))
        all_hits.append(hits)
    model.train(was_training)
    class_acc = (correct / total.clamp_min(1)).tolist()
    metrics = {
        "accuracy": float(correct.sum() / total.sum().clamp_min(1)),
        "loss": loss_sum / max(1.0, float(total.sum())),
        "class_accuracy": class_acc,
    }
    names, groups = data.dataset.group_names, data.dataset.test_groups
    if names and groups is not None and len(names) <= MAX_REPORTED_GROUPS:
        metrics["group_accuracy"] = _group_accuracy(torch.cat(all_hits).cpu(), torch.as_tensor(groups), len(names))
    return metrics


def _group_accuracy(hits: Tensor, groups: Tensor, count: int) -> list[float]:
    """Mean of ``hits`` within each group id 0..count-1 (0 for a group without test samples)."""
    correct = torch.zeros(count).index_add_(0, groups.long(), hits)
    total = torch.zeros(count).index_add_(0, groups.long(), torch.ones_like(hits))
    return (correct / total.clamp_min(1)).tolist()
