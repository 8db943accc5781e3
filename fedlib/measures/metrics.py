"""Analysis helpers: what a model predicts per class, and how far two models have drifted.

All functions take a model and tensors (or a :class:`fedlib.core.state.FederatedData`) and return
numpy arrays, so notebooks can plot them directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass
class Predictions:
    """A model's penultimate features, logits and the true labels for a set of samples."""

    features: np.ndarray  # (N, D)
    logits: np.ndarray  # (N, C)
    labels: np.ndarray  # (N,)

    @property
    def predicted(self) -> np.ndarray:
        return self.logits.argmax(1)

    @property
    def probabilities(self) -> np.ndarray:
        shifted = self.logits - self.logits.max(1, keepdims=True)
        exp = np.exp(shifted)
        return exp / exp.sum(1, keepdims=True)


@torch.no_grad()
def predict(model: nn.Module, batches) -> Predictions:
    """Run ``model`` in eval mode over an iterable of (x, y) batches."""
    was_training = model.training
    model.eval()
    features, logits, labels = [], [], []
    for x, y in batches:
        f, z = model(x, return_features=True)
        features.append(f.float().cpu())
        logits.append(z.float().cpu())
        labels.append(y.cpu())
    model.train(was_training)
    return Predictions(torch.cat(features).numpy(), torch.cat(logits).numpy(), torch.cat(labels).numpy())


def class_accuracy(pred: Predictions, num_classes: int) -> np.ndarray:
    """Accuracy on the samples of each class (NaN for a class with no samples)."""
    hits = pred.predicted == pred.labels
    totals = np.bincount(pred.labels, minlength=num_classes).astype(float)
    correct = np.bincount(pred.labels, weights=hits.astype(float), minlength=num_classes)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(totals > 0, correct / totals, np.nan)


def confusion_matrix(pred: Predictions, num_classes: int, normalise: bool = True) -> np.ndarray:
    """(C, C) counts of true class (rows) predicted as class (columns); rows sum to 1 if normalised."""
    matrix = np.zeros((num_classes, num_classes))
    np.add.at(matrix, (pred.labels, pred.predicted), 1)
    if normalise:
        matrix = matrix / np.maximum(matrix.sum(1, keepdims=True), 1)
    return matrix


def mean_softmax_per_class(pred: Predictions, num_classes: int) -> np.ndarray:
    """(C, C): row a is the average softmax output over the samples of true class a."""
    probs = pred.probabilities
    out = np.zeros((num_classes, num_classes))
    for c in range(num_classes):
        mask = pred.labels == c
        if mask.any():
            out[c] = probs[mask].mean(0)
    return out


def misclassification_probabilities(pred: Predictions, num_classes: int) -> np.ndarray:
    """(C, C): P(predicted = b | true = a), with the diagonal set to 0."""
    matrix = confusion_matrix(pred, num_classes, normalise=True)
    np.fill_diagonal(matrix, 0.0)
    return matrix


def class_feature_distances(pred: Predictions, num_classes: int) -> np.ndarray:
    """(C, C) Euclidean distances between the mean penultimate features of each pair of classes."""
    centres = np.stack([pred.features[pred.labels == c].mean(0) if (pred.labels == c).any()
                        else np.full(pred.features.shape[1], np.nan) for c in range(num_classes)])
    diff = centres[:, None, :] - centres[None, :, :]
    return np.sqrt((diff ** 2).sum(-1))


def logit_kl(reference: Tensor | np.ndarray, other: Tensor | np.ndarray) -> float:
    """Mean over samples of KL(softmax(reference) || softmax(other)) -- drift of ``other``."""
    ref = torch.as_tensor(reference, dtype=torch.float64)
    oth = torch.as_tensor(other, dtype=torch.float64)
    return float(F.kl_div(F.log_softmax(oth, 1), F.log_softmax(ref, 1), log_target=True,
                          reduction="batchmean"))


def feature_l2(reference: Tensor | np.ndarray, other: Tensor | np.ndarray) -> float:
    """Mean over samples of the Euclidean distance between two models' features."""
    ref = torch.as_tensor(reference, dtype=torch.float64)
    oth = torch.as_tensor(other, dtype=torch.float64)
    return float((ref - oth).norm(dim=1).mean())


def tsne_embedding(features: np.ndarray, seed: int = 0, perplexity: float = 30.0,
                   max_samples: int | None = 2000, labels: np.ndarray | None = None):
    """2-D t-SNE of features (scikit-learn), on a seeded subsample of at most ``max_samples``.

    Returns (embedding, indices) so labels can be matched: ``labels[indices]``.
    """
    from sklearn.manifold import TSNE
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(seed)
    indices = np.arange(len(features))
    if max_samples is not None and len(features) > max_samples:
        indices = np.sort(rng.choice(len(features), size=max_samples, replace=False))
    sample = features[indices]
    perplexity = min(perplexity, max(2.0, (len(sample) - 1) / 3))
    tsne = TSNE(n_components=2, perplexity=perplexity, random_state=seed, init="pca", n_jobs=1)
    # one thread: t-SNE's OpenMP threads slow down badly on a busy machine, and results stay identical
    with threadpool_limits(1):
        return tsne.fit_transform(sample), indices


def accuracy_spread(class_acc: np.ndarray) -> dict[str, float]:
    """Max / mean / min class accuracy and the spread Delta_max = max - min (PKD's report); NaN
    classes are ignored, and all NaN (a diverged run's accuracies) gives NaN and no worst class."""
    acc = np.asarray(class_acc, dtype=float)
    if not np.isfinite(acc).any():
        nan = float("nan")
        return {"max": nan, "mean": nan, "min": nan, "spread": nan, "worst_class": None}
    return {"max": float(np.nanmax(acc)), "mean": float(np.nanmean(acc)), "min": float(np.nanmin(acc)),
            "spread": float(np.nanmax(acc) - np.nanmin(acc)), "worst_class": int(np.nanargmin(acc))}
