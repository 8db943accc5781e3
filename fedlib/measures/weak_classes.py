"""Weak-class analysis (PKD, Gan et al., Sec. 2.2 and 3.1): which classes a model confuses.

PKD's stage 2 looks at the warmed-up global model's outputs on the clients' training data and
finds groups of *weak classes*: classes whose samples are predicted as one another far more
often than as anything else (paper Fig. 7a) and whose mean penultimate features lie close
together (Fig. 4a, 7b). FashionMNIST gives {T-shirt, Shirt} and {Pullover, Coat, Shirt}.

The functions here are plain tensor functions, reusable from notebooks:

- :func:`class_statistics` — one pass of a model over (x, y) batches: per-class sums of the
  softmax outputs, of the hard predictions and of the features. Sums add up across clients, so
  the server aggregates the clients' statistics by adding them.
- :func:`misclassification_probabilities` — P[a, b], the probability that a sample of class a is
  predicted as b: the mean softmax probability of b ("soft", the output probabilities of
  Fig. 4b/7a) or the fraction of argmax predictions ("hard", the prediction matrix of Fig. 4c).
- :func:`feature_distances` — Euclidean distance between the class-mean features (Fig. 4a).
- :func:`weak_pairs` and :func:`discover_groups` — the deterministic grouping rule below.

The rule (our design; the paper only says the weak pairs stand out "markedly"):

1. symmetric confusion s[a, b] = (P[a, b] + P[b, a]) / 2 for a != b;
2. a pair is *weak* when s[a, b] >= ``confusion_ratio`` * max s (relative, so the same ratio
   works for MNIST's ~1% confusions and CIFAR-10's ~10%) and, when distances are given, the
   pair's feature distance is within the lowest ``distance_quantile`` of all pair distances;
3. weak pairs are edges of a graph on the classes; groups are its maximal cliques
   (``"cliques"``, default: every two classes in a group confuse each other, so FashionMNIST's
   overlapping {0, 6} and {2, 4, 6} come out separately), or each weak class with all its
   partners (``"stars"``, MNIST's "8 with {3, 5}"), or connected components (``"components"``);
4. groups are ranked worst first by the mean accuracy of their classes (ties: smaller class
   indices first) and the first ``max_groups`` are kept (the paper's "G worst groups").

Check on real data: a LeNet-5 trained on 12,000 FashionMNIST images for 1 to 4 epochs (60-85%
accuracy on the weak classes) gives exactly {0, 6} and {2, 4, 6} with the defaults (soft
confusion, ratio 0.5, distance quantile 0.5, cliques) after every epoch; on MNIST the stars
contain {3, 5, 8} and {4, 9}, where cliques split them into pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import torch
from torch import Tensor, nn

from fedlib.errors import FedlibError, one_of

GROUPINGS = ("cliques", "stars", "components")


@dataclass
class ClassStatistics:
    """Per-class sums from one pass of a model over labelled data (they add across clients)."""

    counts: Tensor  # (C,) samples per true class
    prob_sums: Tensor  # (C, C) row a: summed softmax outputs over samples of class a
    pred_counts: Tensor  # (C, C) row a: how often samples of class a were predicted as b
    feature_sums: Tensor  # (C, D) summed penultimate features per true class

    def __add__(self, other: "ClassStatistics") -> "ClassStatistics":
        return ClassStatistics(self.counts + other.counts, self.prob_sums + other.prob_sums,
                               self.pred_counts + other.pred_counts, self.feature_sums + other.feature_sums)

    @property
    def class_accuracy(self) -> Tensor:
        """(C,) fraction of each class's samples predicted correctly (0 for absent classes)."""
        return self.pred_counts.diagonal() / self.counts.clamp_min(1)


@torch.no_grad()
def class_statistics(model: nn.Module, batches: Iterable[tuple[Tensor, Tensor]],
                     num_classes: int) -> ClassStatistics:
    """Run ``model`` (in eval mode) over ``batches`` and sum its outputs per true class."""
    was_training = model.training
    model.eval()
    stats = None
    for x, labels in batches:
        features, logits = model(x, return_features=True)
        one_hot = torch.nn.functional.one_hot(labels, num_classes).double()
        preds = torch.nn.functional.one_hot(logits.argmax(1), num_classes).double()
        batch = ClassStatistics(one_hot.sum(0), one_hot.T @ logits.double().softmax(1),
                                one_hot.T @ preds, one_hot.T @ features.double().flatten(1))
        stats = batch if stats is None else stats + batch
    model.train(was_training)
    if stats is None:
        raise FedlibError("class_statistics got no batches; pass the clients' non-empty local data")
    return stats


def misclassification_probabilities(stats: ClassStatistics, kind: str = "soft") -> Tensor:
    """(C, C) P[a, b]: probability that a sample of class a is predicted as b (rows sum to 1).

    ``kind="soft"`` averages the softmax outputs, ``"hard"`` counts argmax predictions.
    Rows of classes without samples are all zero.
    """
    if kind not in ("soft", "hard"):
        raise one_of("confusion kind", kind, ("soft", "hard"))
    sums = stats.prob_sums if kind == "soft" else stats.pred_counts
    return sums / stats.counts.clamp_min(1).unsqueeze(1)


def feature_distances(stats: ClassStatistics) -> Tensor:
    """(C, C) Euclidean distance between class-mean features; NaN where a class has no samples."""
    means = stats.feature_sums / stats.counts.clamp_min(1).unsqueeze(1)
    distances = torch.cdist(means.unsqueeze(0), means.unsqueeze(0)).squeeze(0)
    absent = stats.counts == 0
    distances[absent, :] = float("nan")
    distances[:, absent] = float("nan")
    return distances


def symmetric_confusion(confusion: Tensor) -> Tensor:
    """s[a, b] = (P[a, b] + P[b, a]) / 2 with a zero diagonal."""
    symmetric = (confusion + confusion.T) / 2
    return symmetric.fill_diagonal_(0.0)


def weak_pairs(confusion: Tensor, distances: Tensor | None = None, confusion_ratio: float = 0.5,
               distance_quantile: float = 0.5) -> Tensor:
    """(C, C) symmetric bool adjacency of weak class pairs (rule steps 1-2 of the module doc)."""
    if not 0.0 < confusion_ratio <= 1.0:
        raise FedlibError(f"confusion_ratio must be in (0, 1], got {confusion_ratio}")
    if not 0.0 < distance_quantile <= 1.0:
        raise FedlibError(f"distance_quantile must be in (0, 1], got {distance_quantile}")
    scores = symmetric_confusion(confusion.double())
    top = scores.max()
    if top <= 0:  # nothing is ever confused: no weak pairs
        return torch.zeros_like(scores, dtype=torch.bool)
    edges = scores >= confusion_ratio * top
    if distances is not None and distance_quantile < 1.0:
        edges &= _close_pairs(distances.double(), distance_quantile)
    return edges.fill_diagonal_(False)


def _close_pairs(distances: Tensor, quantile: float) -> Tensor:
    """Pairs whose (finite) distance is at most the given quantile of all off-diagonal pairs."""
    off_diagonal = ~torch.eye(len(distances), dtype=torch.bool, device=distances.device)
    finite = torch.isfinite(distances) & off_diagonal
    if not finite.any():
        return finite
    cutoff = torch.quantile(distances[finite], quantile)
    return finite & (distances <= cutoff)


def discover_groups(confusion: Tensor, distances: Tensor | None = None, *,
                    confusion_ratio: float = 0.5, distance_quantile: float = 0.5,
                    grouping: str = "cliques", max_groups: int | None = None,
                    class_accuracy: Tensor | None = None) -> list[list[int]]:
    """Weak-class groups (sorted class lists), worst first, by the rule in the module doc.

    ``class_accuracy`` ranks the groups; by default the diagonal of ``confusion`` is used.
    """
    edges = weak_pairs(confusion, distances, confusion_ratio, distance_quantile)
    neighbours = {a: set(torch.nonzero(edges[a]).flatten().tolist()) for a in range(len(edges))}
    builders = {"cliques": maximal_cliques, "stars": star_groups, "components": connected_components}
    if grouping not in builders:
        raise one_of("grouping", grouping, GROUPINGS)
    groups = builders[grouping](neighbours)
    accuracy = confusion.diagonal() if class_accuracy is None else class_accuracy
    ranked = sorted(groups, key=lambda g: (float(accuracy[g].double().mean()), g))
    return ranked if max_groups is None else ranked[:max_groups]


def maximal_cliques(neighbours: dict[int, set[int]]) -> list[list[int]]:
    """Every maximal clique of at least two classes (Bron-Kerbosch with pivoting)."""
    cliques: list[list[int]] = []

    def expand(clique: set[int], candidates: set[int], excluded: set[int]) -> None:
        if not candidates and not excluded:
            if len(clique) >= 2:
                cliques.append(sorted(clique))
            return
        pivot = max(candidates | excluded, key=lambda v: (len(neighbours[v] & candidates), -v))
        for vertex in sorted(candidates - neighbours[pivot]):
            expand(clique | {vertex}, candidates & neighbours[vertex], excluded & neighbours[vertex])
            candidates = candidates - {vertex}
            excluded = excluded | {vertex}

    expand(set(), set(neighbours), set())
    return sorted(cliques)


def star_groups(neighbours: dict[int, set[int]]) -> list[list[int]]:
    """Each class with all its weak partners; groups contained in another group are dropped."""
    stars = {tuple(sorted({a} | partners)) for a, partners in neighbours.items() if partners}
    kept = [s for s in stars if not any(set(s) < set(other) for other in stars)]
    return sorted(list(s) for s in kept)


def connected_components(neighbours: dict[int, set[int]]) -> list[list[int]]:
    """Connected components of the weak-pair graph with at least two classes."""
    seen: set[int] = set()
    components = []
    for start in sorted(neighbours):
        if start in seen or not neighbours[start]:
            continue
        component, frontier = set(), [start]
        while frontier:
            vertex = frontier.pop()
            if vertex not in component:
                component.add(vertex)
                frontier.extend(neighbours[vertex] - component)
        seen |= component
        components.append(sorted(component))
    return sorted(components)


def check_groups(groups: object, num_classes: int) -> list[list[int]]:
    """Validate user-given groups: a list of lists of >= 2 distinct class indices in [0, C)."""
    hint = 'give groups as a list of lists of class indices, e.g. [[0, 6], [2, 4, 6]]'
    if not isinstance(groups, (list, tuple)):
        raise FedlibError(f"groups must be a list of lists, got {groups!r}; {hint}")
    checked = []
    for group in groups:
        if not isinstance(group, (list, tuple)) or not all(isinstance(c, int) and not isinstance(c, bool)
                                                         for c in group):
            raise FedlibError(f"group {group!r} is not a list of class indices; {hint}")
        if len(set(group)) != len(group) or len(group) < 2:
            raise FedlibError(f"group {list(group)} needs at least two distinct classes; {hint}")
        if min(group) < 0 or max(group) >= num_classes:
            raise FedlibError(f"group {list(group)} has a class outside 0..{num_classes - 1}; {hint}")
        checked.append(sorted(group))
    return checked
