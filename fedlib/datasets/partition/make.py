"""The entry point of partitioning: :func:`make_partition` runs the scheme asked for (one module
each beside this one) on a label array, seeded, with ``global_balance`` applied first; the table of
schemes and the RunConfig settings each reads."""

from __future__ import annotations

import numpy as np

from fedlib.datasets.partition import balanced, dirichlet, iid, natural, pathological, quantity, shards
from fedlib.datasets.partition.base import Partition, build, check_int, checked_labels, class_indices
from fedlib.errors import FedlibError, one_of

# The schemes by name, in the order PARTITIONS lists them.
SCHEMES = {module.NAME: module for module in (iid, dirichlet, shards, quantity, pathological, balanced, natural)}
PARTITIONS = tuple(SCHEMES)
# The RunConfig partition settings each scheme reads (every scheme also reads clients, seed and the
# dataset). RunConfig.hash() covers only these, so iid runs that differ in beta are one run.
# make_partition hands a scheme only its own settings: one that read another would fail.
# global_balance is applied by make_partition before the scheme runs (see globally_balanced).
FIELDS_READ = {name: module.FIELDS for name, module in SCHEMES.items()}
# every RunConfig field some scheme reads (and only schemes): beta, min_client_size, shards_per_client, ...
SCHEME_SETTINGS = tuple(dict.fromkeys(name for names in FIELDS_READ.values() for name in names))
# make_partition's keyword for a RunConfig field, where the two differ
_KEYWORDS = {"min_client_size": "min_size"}


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
    labels = checked_labels(labels, num_classes)
    check_int("num_clients", num_clients, low=1, high=len(labels),
               hint="use fewer clients or a larger train set")
    # An unseeded partition could never be reproduced, so None is refused.
    check_int("seed", seed, low=0, hint="pass the run's seed")
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
        client_indices, params = SCHEMES[scheme].split(labels[kept], num_clients, num_classes, rng, options)
        client_indices = [kept[idx] for idx in client_indices]
        params = {**params, "global_balance": True,
                  "dropped_samples": params.get("dropped_samples", 0) + len(labels) - len(kept)}
    else:
        client_indices, params = SCHEMES[scheme].split(labels, num_clients, num_classes, rng, options)
    params = {"num_clients": num_clients, "num_classes": num_classes, "seed": seed, **params}
    return build(scheme, labels, num_classes, client_indices, params)


def globally_balanced(labels: np.ndarray, num_classes: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted train-set indices keeping the same number of samples of every class: the smallest
    class count, each class's kept samples drawn by ``rng`` without replacement. When the classes
    are equal already every index is kept and ``rng`` is not drawn from, so the partition is the one
    drawn without ``global_balance``."""
    members = class_indices(labels, num_classes)
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
    return tuple(_KEYWORDS.get(name, name) for name in FIELDS_READ[scheme]) + SCHEMES[scheme].OTHER_INPUTS

