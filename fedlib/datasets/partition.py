"""How the training set is split over clients.

:func:`make_partition` turns a label array into a :class:`Partition`: one array of train-set
indices per client plus the (clients x classes) count matrix every label-skew method needs.
Every random choice comes from ``np.random.default_rng(seed)``, so the same inputs always give
the same partition. Clients are disjoint; they cover the train set except where a scheme says
otherwise (``balanced`` drops leftovers, ``natural`` may sample groups) or ``global_balance`` is set.

Schemes (facts from the papers and their authors' code: docs/facts.md#partitions):

- ``iid``          shuffle, split as evenly as possible.
- ``dirichlet``    FedVLS code: per class Dir(beta) over clients, clients already holding
                   >= N/num_clients samples get nothing more; redraw until every client has
                   >= min_size samples.
- ``shards``       FedNTD: shards_per_client equal shards of one class each.
- ``quantity``     FedVLS "s": classes_per_client classes each, unequal amounts; consecutive
                   clients share the same classes. ``quantity_split`` says how a class is cut
                   between its holders: ``symmetric`` (default) or the code's ``official`` rule.
- ``pathological`` PKD: classes_per_client classes each, equal amounts, every class held by
                   the same number of clients.
- ``balanced``     PKD local class-balanced: every client holds the same count of every class.
- ``natural``      one client per group id (writer, domain).

``global_balance`` (PKD Sec. 4.1: every class has the same total over the clients) first keeps the
smallest class count of every class, then lets the scheme split what is left; see
:func:`globally_balanced`. ``balanced`` is globally balanced by construction and ignores it;
``natural`` refuses it.

Within a client the indices are sorted ascending; data loaders are expected to shuffle.

At about 560 lines it stays one module: every scheme is one short function over the same
:class:`Partition` type and the same checks, and a reader compares schemes side by side here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from fedlib.errors import FedlibError, one_of

PARTITIONS = ("iid", "dirichlet", "shards", "quantity", "pathological", "balanced", "natural")
# The RunConfig partition settings each scheme reads (every scheme also reads clients, seed and the
# dataset). RunConfig.hash() covers only these, so iid runs that differ in beta are one run.
# make_partition hands a scheme only its own settings: one that read another would fail.
# global_balance is applied by make_partition before the scheme runs (see globally_balanced).
FIELDS_READ = {
    "iid": ("global_balance",),
    "dirichlet": ("beta", "min_client_size", "global_balance"),
    "shards": ("shards_per_client", "global_balance"),
    "quantity": ("classes_per_client", "quantity_split", "global_balance"),
    "pathological": ("classes_per_client", "global_balance"),
    "balanced": (),
    "natural": (),
}
# every RunConfig field some scheme reads (and only schemes): beta, min_client_size, shards_per_client, ...
SCHEME_SETTINGS = tuple(dict.fromkeys(name for names in FIELDS_READ.values() for name in names))
# make_partition's keyword for a RunConfig field, where the two differ
_KEYWORDS = {"min_client_size": "min_size"}
# what a scheme reads that is no RunConfig field: a make_partition option, the dataset's group ids
_OTHER_INPUTS = {"dirichlet": ("max_retries",), "natural": ("groups",)}
PLOT_KINDS = ("bubble", "heatmap")
# How the quantity scheme cuts a class between its holders (see _unequal_sizes, official_quantity_sizes).
QUANTITY_SPLITS = ("symmetric", "official")


@dataclass
class Partition:
    """The result of splitting a train set over clients.

    ``client_indices[k]`` holds client k's int64 indices into the train set; ``counts[k, c]`` is
    how many of them have label c. ``params`` records what produced the split (scheme
    parameters, seed, and facts such as ``dropped_samples``).
    """

    client_indices: list[np.ndarray]
    counts: np.ndarray
    scheme: str
    params: dict = field(default_factory=dict)

    @property
    def num_clients(self) -> int:
        return len(self.client_indices)

    @property
    def num_classes(self) -> int:
        return int(self.counts.shape[1])

    def sizes(self) -> np.ndarray:
        """Number of samples held by each client."""
        return self.counts.sum(axis=1)

    def summary(self) -> pd.DataFrame:
        """One row per client: size, number of classes held, vacant and majority classes.

        Vacant classes have no local sample (FedVLS). Majority classes follow FedLMD:
        n_{k,c} > n_k / C, strictly.
        """
        sizes = self.sizes()
        rows = []
        for size, class_counts in zip(sizes, self.counts):
            rows.append({
                "size": int(size),
                "classes_held": int((class_counts > 0).sum()),
                "vacant_classes": np.flatnonzero(class_counts == 0).tolist(),
                "majority_classes": np.flatnonzero(
                    class_counts > size / self.num_classes).tolist(),
            })
        table = pd.DataFrame(rows)
        table.index.name = "client"
        dropped = self.params.get("dropped_samples", 0)
        if dropped:
            how = " with global class balance" if self.params.get("global_balance") else ""
            table.attrs["note"] = f"{dropped} samples were dropped by the {self.scheme} scheme{how}"
        return table


def make_partition(scheme: str, labels: np.ndarray, num_clients: int, num_classes: int,
                   seed: int, *, beta: float = 0.5, shards_per_client: int = 2,
                   classes_per_client: int = 2, groups: np.ndarray | None = None,
                   min_size: int = 10, max_retries: int = 1000,
                   quantity_split: str = "symmetric", global_balance: bool = False) -> Partition:
    """Split the train set with labels ``labels`` over ``num_clients`` clients.

    Only the keyword arguments that ``scheme`` uses are read and recorded in ``params``:
    ``beta``, ``min_size``, ``max_retries`` (dirichlet), ``shards_per_client`` (shards),
    ``classes_per_client`` (quantity, pathological), ``quantity_split`` (quantity, one of
    :data:`QUANTITY_SPLITS`), ``groups`` (natural); ``global_balance`` (every scheme but balanced,
    which ignores it, and natural, which refuses it) splits :func:`globally_balanced`'s samples only.
    Raises FedlibError for impossible requests.
    """
    if scheme not in PARTITIONS:
        raise one_of("partition", scheme, PARTITIONS)
    check_global_balance(scheme, global_balance)
    labels = _checked_labels(labels, num_classes)
    _check_int("num_clients", num_clients, low=1, high=len(labels),
               hint="use fewer clients or a larger train set")
    # An unseeded partition could never be reproduced, so None is refused.
    _check_int("seed", seed, low=0, hint="pass the run's seed")
    rng = np.random.default_rng(seed)
    given = {"beta": beta, "shards_per_client": shards_per_client,
             "classes_per_client": classes_per_client, "groups": groups,
             "min_size": min_size, "max_retries": max_retries, "quantity_split": quantity_split,
             "global_balance": global_balance}
    options = {name: given[name] for name in scheme_inputs(scheme)}
    balance = options.pop("global_balance", False)
    if not isinstance(balance, (bool, np.bool_)):
        raise FedlibError(f"global_balance must be True or False, got {balance!r}")
    if balance:  # the scheme splits the kept samples; its indices are mapped back to the train set
        kept = globally_balanced(labels, num_classes, rng)
        client_indices, params = _SCHEMES[scheme](labels[kept], num_clients, num_classes, rng, options)
        client_indices = [kept[idx] for idx in client_indices]
        params = {**params, "global_balance": True,
                  "dropped_samples": params.get("dropped_samples", 0) + len(labels) - len(kept)}
    else:
        client_indices, params = _SCHEMES[scheme](labels, num_clients, num_classes, rng, options)
    params = {"num_clients": num_clients, "num_classes": num_classes, "seed": seed, **params}
    return _build(scheme, labels, num_classes, client_indices, params)


def globally_balanced(labels: np.ndarray, num_classes: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted train-set indices keeping the same number of samples of every class: the smallest
    class count, each class's kept samples drawn by ``rng`` without replacement. When the classes
    are equal already every index is kept and ``rng`` is not drawn from, so the partition is the one
    drawn without ``global_balance``."""
    members = _class_indices(labels, num_classes)
    smallest = min(len(m) for m in members)
    if smallest == 0:
        empty = next(c for c, m in enumerate(members) if len(m) == 0)
        raise FedlibError(f"global_balance keeps the smallest class count, but class {empty} has no "
                          "training sample; check num_classes or drop global_balance")
    if all(len(m) == smallest for m in members):
        return np.arange(len(labels))
    return np.sort(np.concatenate([rng.choice(m, smallest, replace=False) for m in members]))


def check_global_balance(scheme: str, global_balance: bool) -> None:
    """Raise FedlibError (one line) when ``global_balance`` is set on the ``natural`` scheme."""
    if scheme == "natural" and global_balance:
        raise FedlibError("global_balance cannot apply to the natural partition, which keeps each group's "
                          "(writer's, domain's) data as it is; drop global_balance")


def scheme_inputs(scheme: str) -> tuple[str, ...]:
    """The :func:`make_partition` keywords ``scheme`` reads: its :data:`FIELDS_READ` under their
    keyword names, plus its inputs that are no RunConfig field (``max_retries``, ``groups``)."""
    return tuple(_KEYWORDS.get(name, name) for name in FIELDS_READ[scheme]) + _OTHER_INPUTS.get(scheme, ())


# ---------------------------------------------------------------- validation and assembly

def _checked_labels(labels, num_classes: int) -> np.ndarray:
    _check_int("num_classes", num_classes, low=1)
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size == 0:
        raise FedlibError(f"labels must be a non-empty 1-D array, got shape {labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer):
        raise FedlibError(f"labels must be integers, got dtype {labels.dtype}; "
                          "pass class ids, not names or one-hot rows")
    if labels.min() < 0 or labels.max() >= num_classes:
        raise FedlibError(f"labels must lie in [0, {num_classes}), found "
                          f"{labels.min()}..{labels.max()}; check num_classes")
    return labels.astype(np.int64, copy=False)


def _check_int(name: str, value, low: int, high: int | None = None, hint: str = "") -> None:
    """Raise FedlibError unless value is an int in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise FedlibError(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise FedlibError(f"{name} must be {bounds}, got {value}" + (f"; {hint}" if hint else ""))


def _build(scheme: str, labels: np.ndarray, num_classes: int,
           client_indices: list[np.ndarray], params: dict) -> Partition:
    client_indices = [np.sort(np.asarray(idx, dtype=np.int64)) for idx in client_indices]
    counts = np.stack([np.bincount(labels[idx], minlength=num_classes)
                       for idx in client_indices]).astype(np.int64)
    return Partition(client_indices, counts, scheme, params)


def _class_indices(labels: np.ndarray, num_classes: int) -> list[np.ndarray]:
    """Indices of each class in train-set order."""
    return [np.flatnonzero(labels == c) for c in range(num_classes)]


def _split_by_sizes(indices: np.ndarray, sizes) -> list[np.ndarray]:
    return np.split(indices, np.cumsum(sizes)[:-1])


def _gather(pieces_per_client: list[list[np.ndarray]]) -> list[np.ndarray]:
    return [np.concatenate(pieces) if pieces else np.empty(0, np.int64)
            for pieces in pieces_per_client]


# ---------------------------------------------------------------- iid

def _iid(labels, num_clients, num_classes, rng, options):
    order = rng.permutation(len(labels))
    return np.array_split(order, num_clients), {}


# ---------------------------------------------------------------- dirichlet (FedVLS code)

def _dirichlet(labels, num_clients, num_classes, rng, options):
    beta, min_size, max_retries = options["beta"], options["min_size"], options["max_retries"]
    if not (isinstance(beta, (int, float, np.floating)) and math.isfinite(beta) and beta > 0):
        raise FedlibError(f"beta must be a positive number, got {beta!r}")
    _check_int("min_size", min_size, low=0)
    _check_int("max_retries", max_retries, low=1)
    if min_size * num_clients > len(labels):
        raise FedlibError(f"dirichlet cannot give {num_clients} clients >= {min_size} samples "
                          f"each from {len(labels)} samples; lower min_size or num_clients")
    class_sizes = np.bincount(labels, minlength=num_classes)
    for draw in range(1, max_retries + 1):
        counts = _dirichlet_counts(class_sizes, num_clients, beta, rng)
        if counts is not None and counts.sum(axis=1).min() >= min_size:
            return _deal_counts(labels, num_classes, counts, rng), {
                "beta": float(beta), "min_size": min_size, "max_retries": max_retries,
                "draws": draw}
    raise FedlibError(
        f"dirichlet(beta={beta}) gave some of the {num_clients} clients fewer than {min_size} "
        f"samples in all {max_retries} draws; raise beta, use fewer clients, lower min_size "
        "or raise max_retries")


def _dirichlet_counts(class_sizes: np.ndarray, num_clients: int, beta: float,
                      rng: np.random.Generator) -> np.ndarray | None:
    """One draw of the (clients x classes) counts, or None when a class found no taker."""
    # FedVLS code: a client that already holds N/num_clients samples gets no more.
    cap = class_sizes.sum() / num_clients
    counts = np.zeros((num_clients, len(class_sizes)), dtype=np.int64)
    for c, class_size in enumerate(class_sizes):
        proportions = rng.dirichlet(np.full(num_clients, beta))
        proportions = proportions * (counts.sum(axis=1) < cap)
        total = proportions.sum()
        if total <= 0:  # all the mass sat on full clients (tiny beta): redraw everything
            return None
        cuts = (np.cumsum(proportions / total) * class_size).astype(np.int64)[:-1]
        cuts = np.clip(cuts, 0, class_size)
        counts[:, c] = np.diff(np.concatenate(([0], cuts, [class_size])))
    return counts


def _deal_counts(labels, num_classes, counts, rng) -> list[np.ndarray]:
    """Hand each client counts[k, c] random samples of class c."""
    pieces = [[] for _ in range(counts.shape[0])]
    for c, members in enumerate(_class_indices(labels, num_classes)):
        for k, piece in enumerate(_split_by_sizes(rng.permutation(members), counts[:, c])):
            pieces[k].append(piece)
    return _gather(pieces)


# ---------------------------------------------------------------- shards (FedNTD)

def _shards(labels, num_clients, num_classes, rng, options):
    shards_per_client = options["shards_per_client"]
    _check_int("shards_per_client", shards_per_client, low=1)
    total_shards = shards_per_client * num_clients
    if total_shards % num_classes:
        raise FedlibError(
            f"shards needs shards_per_client*num_clients ({total_shards}) divisible by "
            f"num_classes ({num_classes}); change shards_per_client or num_clients")
    shards_per_class = total_shards // num_classes
    remaining = []  # remaining[c]: the unused shards of class c
    for c, members in enumerate(_class_indices(labels, num_classes)):
        if len(members) < shards_per_class:
            raise FedlibError(f"class {c} has {len(members)} samples, too few for "
                              f"{shards_per_class} shards; use fewer shards or clients")
        # Unshuffled class indices cut into (near-)equal consecutive shards, as in FedNTD.
        remaining.append(np.array_split(members, shards_per_class))
    drawn_labels = np.tile(np.arange(num_classes), shards_per_class)
    rng.shuffle(drawn_labels)
    pieces = []
    for client_labels in drawn_labels.reshape(num_clients, shards_per_client):
        pieces.append([remaining[c].pop(rng.integers(len(remaining[c])))
                       for c in client_labels])
    return _gather(pieces), {"shards_per_client": shards_per_client}


# ---------------------------------------------------------------- quantity (FedVLS "s")

def _quantity(labels, num_clients, num_classes, rng, options):
    per_client = _classes_per_client(options, num_classes)
    split = options["quantity_split"]
    if split not in QUANTITY_SPLITS:
        raise one_of("quantity_split", split, QUANTITY_SPLITS)
    holders = quantity_holders(num_clients, num_classes, per_client)
    pieces = [[] for _ in range(num_clients)]
    for c, members in enumerate(_class_indices(labels, num_classes)):
        if split == "official":
            sizes = official_quantity_sizes(len(members), len(holders[c]), num_classes, rng, c)
        else:
            sizes = _unequal_sizes(len(members), len(holders[c]), rng, c)
        for client, piece in zip(holders[c], _split_by_sizes(rng.permutation(members), sizes)):
            pieces[client].append(piece)
    params = {"classes_per_client": per_client}
    if split != "symmetric":  # recorded only when set, so existing partitions' params are unchanged
        params["quantity_split"] = split
    return _gather(pieces), params


def _classes_per_client(options: dict, num_classes: int) -> int:
    per_client = options["classes_per_client"]
    _check_int("classes_per_client", per_client, low=1, high=num_classes)
    return per_client


def quantity_holders(num_clients: int, num_classes: int, classes_per_client: int
                     ) -> list[list[int]]:
    """Which clients hold each class in the ``quantity`` scheme.

    Clients are cut into ceil(C/s) runs of consecutive clients (sizes as equal as possible);
    run g holds the s consecutive classes g*s, ..., g*s+s-1, wrapping past C-1 to 0 when s
    does not divide C. For CIFAR-10, s=2, 10 clients this is the FedVLS code's layout:
    clients 0,1 hold classes 0,1; clients 2,3 hold 2,3; ... It equals the code's layout
    whenever s divides C and s*num_clients/C divides num_clients.
    """
    num_runs = math.ceil(num_classes / classes_per_client)
    if num_clients < num_runs:
        raise FedlibError(
            f"quantity with classes_per_client={classes_per_client} needs at least {num_runs} "
            f"clients so that all {num_classes} classes are held; raise num_clients or "
            "classes_per_client")
    holders: list[list[int]] = [[] for _ in range(num_classes)]
    for run, clients in enumerate(np.array_split(np.arange(num_clients), num_runs)):
        for offset in range(classes_per_client):
            holders[(run * classes_per_client + offset) % num_classes].extend(clients.tolist())
    return holders


def _unequal_sizes(total: int, num_holders: int, rng: np.random.Generator,
                   class_id: int) -> list[int]:
    """Random unequal split of ``total`` samples: every holder but the last draws a size.

    Draws are uniform in [fair/10, 2*fair - fair/10] (mean = the fair share), capped so every
    later holder can still get fair/10; the last holder takes the rest. fair/10 is the FedVLS
    code's lower bound; its upper bound differs by dataset and can overdraw, so we use this
    symmetric one (the code's rule is ``quantity_split="official"``, :func:`official_quantity_sizes`).
    """
    if total < num_holders:
        raise FedlibError(f"class {class_id} has {total} samples but {num_holders} clients "
                          "must hold it; use fewer clients or more classes_per_client")
    fair = total / num_holders
    low = max(1, int(fair // 10))
    sizes, remaining = [], total
    for later in range(num_holders - 1, 0, -1):
        high = max(low, min(int(2 * fair) - low, remaining - low * later))
        sizes.append(int(rng.integers(low, high + 1)))
        remaining -= sizes[-1]
    return sizes + [remaining]


def official_quantity_sizes(total: int, num_holders: int, num_classes: int,
                            rng: np.random.Generator, class_id: int = 0) -> list[int]:
    """The FedVLS code's cut of one class of ``total`` samples between ``num_holders`` clients.

    The code (``system/dataset_utils.py``, ``partition_data``, "noniid-labeldir") draws
    ``num_holders - 1`` sizes at once, each uniform over the integers of
    [int(low), int(high) - 1] with low = max(fair/10, 10/num_classes) and fair =
    total/num_holders; high is ``total`` on CIFAR-10 and ``fair`` on CIFAR-100 and TinyImageNet.
    The code picks high by dataset name; here it is picked by class count (10 classes: ``total``).
    The last holder takes the rest. Holders take consecutive slices, so when the draws add up to
    more than ``total`` the later holders get what is left, possibly nothing (Python's slicing).
    """
    if total < num_holders:
        raise FedlibError(f"class {class_id} has {total} samples but {num_holders} clients "
                          "must hold it; use fewer clients or more classes_per_client")
    if num_holders == 1:
        return [total]
    fair = total / num_holders
    low = int(max(fair / 10, 10 / num_classes))
    high = int(total if num_classes == 10 else fair)
    if high <= low:
        raise FedlibError(f"class {class_id} has {total} samples, too few for the official quantity "
                          f"split over {num_holders} clients; use quantity_split='symmetric'")
    draws = rng.integers(low, high, size=num_holders - 1)
    cuts = np.minimum(np.cumsum(draws), total)
    return np.diff(np.concatenate(([0], cuts, [total]))).astype(int).tolist()


# ---------------------------------------------------------------- pathological (PKD)

def _pathological(labels, num_clients, num_classes, rng, options):
    per_client = _classes_per_client(options, num_classes)
    holders = pathological_holders(num_clients, num_classes, per_client)
    pieces = [[] for _ in range(num_clients)]
    for c, members in enumerate(_class_indices(labels, num_classes)):
        for client, piece in zip(holders[c], np.array_split(rng.permutation(members),
                                                            len(holders[c]))):
            pieces[client].append(piece)
    return _gather(pieces), {"classes_per_client": per_client}


def pathological_holders(num_clients: int, num_classes: int, classes_per_client: int
                         ) -> list[list[int]]:
    """Which clients hold each class in the ``pathological`` scheme.

    Every class gets h = num_clients*k/C holders. Slot p = 0..num_clients*k-1 has class p // h
    and goes to client p % num_clients, so a class's h slots land on distinct clients and a
    client's k slots on distinct classes. 1 class per client, 10 clients: client i holds class i.
    """
    slots = num_clients * classes_per_client
    if slots % num_classes:
        raise FedlibError(
            f"pathological needs num_clients*classes_per_client ({slots}) divisible by "
            f"num_classes ({num_classes}) so every class has the same number of holders; "
            "change num_clients or classes_per_client")
    per_class = slots // num_classes
    holders: list[list[int]] = [[] for _ in range(num_classes)]
    for slot in range(slots):
        holders[slot // per_class].append(slot % num_clients)
    return holders


# ---------------------------------------------------------------- balanced (PKD)

def _balanced(labels, num_clients, num_classes, rng, options):
    class_members = _class_indices(labels, num_classes)
    smallest = min(len(members) for members in class_members)
    per_class = smallest // num_clients
    if per_class == 0:
        raise FedlibError(f"balanced needs every class to have >= num_clients ({num_clients}) "
                          f"samples, the smallest has {smallest}; use fewer clients")
    pieces = [[] for _ in range(num_clients)]
    for members in class_members:
        chosen = rng.permutation(members)[:per_class * num_clients]
        for k, piece in enumerate(chosen.reshape(num_clients, per_class)):
            pieces[k].append(piece)
    dropped = len(labels) - per_class * num_classes * num_clients
    return _gather(pieces), {"per_class": per_class, "dropped_samples": dropped}


# ---------------------------------------------------------------- natural (writers, domains)

def _natural(labels, num_clients, num_classes, rng, options):
    groups = options["groups"]
    if groups is None:
        raise FedlibError("natural partition needs groups= (one group id per sample, "
                          "e.g. FEMNIST writer ids or domain names)")
    groups = np.asarray(groups)
    if groups.shape != labels.shape:
        raise FedlibError(f"groups must have one id per sample: {groups.shape} vs labels "
                          f"{labels.shape}")
    group_ids = np.unique(groups)
    if num_clients > len(group_ids):
        raise FedlibError(f"natural has {len(group_ids)} groups, cannot make {num_clients} "
                          f"clients; use num_clients <= {len(group_ids)}")
    if num_clients < len(group_ids):
        group_ids = group_ids[np.sort(rng.choice(len(group_ids), num_clients, replace=False))]
    client_indices = [np.flatnonzero(groups == g) for g in group_ids]
    dropped = len(labels) - sum(len(idx) for idx in client_indices)
    return client_indices, {"group_ids": group_ids.tolist(), "dropped_samples": dropped}


_SCHEMES = {"iid": _iid, "dirichlet": _dirichlet, "shards": _shards, "quantity": _quantity,
            "pathological": _pathological, "balanced": _balanced, "natural": _natural}


# ---------------------------------------------------------------- plot

def plot_partition(partition_or_counts, class_names=None, kind: str = "bubble", ax=None,
                   title: str | None = None, *, annotate: bool = False):
    """Draw clients' class counts in the style of FedVLS Fig. 3; returns the matplotlib Axes.

    ``partition_or_counts``: a Partition or a (clients x classes) count array.
    ``kind``: "bubble" (x = client, y = class, area ~ count) or "heatmap".
    ``annotate`` writes each count on the figure.
    """
    counts = _plot_counts(partition_or_counts)
    if kind not in PLOT_KINDS:
        raise one_of("plot kind", kind, PLOT_KINDS)
    if class_names is not None and len(class_names) != counts.shape[1]:
        raise FedlibError(f"class_names has {len(class_names)} names for {counts.shape[1]} "
                          "classes; pass one name per class")
    import matplotlib.pyplot as plt  # imported here so that partitioning never loads matplotlib

    if ax is None:
        _, ax = plt.subplots(figsize=(max(4.0, 0.45 * counts.shape[0] + 2), 4.5))
    draw = _bubble if kind == "bubble" else _heatmap
    draw(ax, counts, class_names, annotate)
    ax.set_xlabel("client")
    ax.set_ylabel("class")
    if title:
        ax.set_title(title)
    return ax


def _plot_counts(partition_or_counts) -> np.ndarray:
    if isinstance(partition_or_counts, Partition):
        return partition_or_counts.counts
    counts = np.asarray(partition_or_counts)
    if counts.ndim != 2 or counts.size == 0 or (counts < 0).any():
        raise FedlibError("plot_partition needs a Partition or a non-negative "
                          f"(clients x classes) count array, got shape {counts.shape}")
    return counts


def _bubble(ax, counts, class_names, annotate) -> None:
    clients, classes = np.nonzero(counts)
    values = counts[clients, classes]
    areas = 900.0 * values / max(counts.max(), 1)  # marker size is an area in points^2
    ax.scatter(clients, classes, s=areas, alpha=0.6, color="tab:blue", edgecolors="navy")
    if annotate:
        for x, y, value in zip(clients, classes, values):
            ax.annotate(str(value), (x, y), ha="center", va="center", fontsize=7)
    num_clients, num_classes = counts.shape
    ax.set_xlim(-0.7, num_clients - 0.3)
    ax.set_ylim(num_classes - 0.3, -0.7)  # class 0 on top, as in a table
    if num_clients <= 40:
        ax.set_xticks(range(num_clients))
    if class_names is not None or num_classes <= 40:
        ax.set_yticks(range(num_classes))
    if class_names is not None:
        ax.set_yticklabels(class_names)


def _heatmap(ax, counts, class_names, annotate) -> None:
    import seaborn as sns

    fmt = "d" if np.issubdtype(counts.dtype, np.integer) else ".3g"
    sns.heatmap(counts.T, ax=ax, cmap="Blues", annot=annotate, fmt=fmt,
                yticklabels=class_names if class_names is not None else "auto",
                cbar_kws={"label": "samples"})
