"""Client tables: per-client state in a run's ``extras`` (MOON's previous local models, SCAFFOLD's
control variates, FedCurv's Fisher), split out so that a checkpoint keeps one file per client, and
joined back when it is read; fingerprints tell which clients' state changed since the last write."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import tree_flatten

CLIENT_TABLE = "__client_table__"  # in checkpoint.pt's extras: where a per-client table sat


def is_client_table(value: Any) -> bool:
    """Whether ``value`` is per-client state: a non-empty dict keyed by client ids (ints) that
    holds tensors, such as MOON's previous local models or SCAFFOLD's control variates."""
    if not isinstance(value, dict) or not value:
        return False
    if not all(isinstance(k, int) and not isinstance(k, bool) for k in value):
        return False
    return any(isinstance(leaf, torch.Tensor) for leaf in tree_flatten(list(value.values()))[0])


def split_client_tables(extras: dict) -> tuple[dict, list[tuple[str, dict]]]:
    """``extras`` with every client table (in dicts at any depth) replaced by a marker holding its
    index and its keys in order, and the (path, table) pairs in index order."""
    tables: list[tuple[str, dict]] = []

    def walk(value: Any, path: str) -> Any:
        if is_client_table(value):
            tables.append((path, value))
            return {CLIENT_TABLE: len(tables) - 1, "keys": list(value)}
        if isinstance(value, dict):
            return {k: walk(v, f"{path}/{k}" if path else str(k)) for k, v in value.items()}
        return value

    return walk(extras, ""), tables


def join_client_tables(skeleton: dict, bundles: dict[int, dict] | None) -> dict:
    """The inverse of :func:`split_client_tables`: each marker becomes its table again (keys in
    their stored order) from the per-client ``bundles``; with ``bundles=None``, an empty table."""
    def walk(value: Any) -> Any:
        if isinstance(value, dict) and CLIENT_TABLE in value:
            index = value[CLIENT_TABLE]
            return {} if bundles is None else {k: bundles[k][index] for k in value["keys"]}
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    return walk(skeleton)


def client_bundles(tables: list[tuple[str, dict]]) -> dict[int, dict[int, Any]]:
    """Per client: its entry in every table that has one, keyed by the table's index."""
    bundles: dict[int, dict[int, Any]] = {}
    for index, (_, table) in enumerate(tables):
        for client, entry in table.items():
            bundles.setdefault(client, {})[index] = entry
    return bundles


def state_fingerprint(value: Any) -> tuple:
    """What identifies ``value``'s content without reading it: its structure, each tensor's
    identity and version counter (bumped by every in-place change), each other leaf's value.
    The tensors are held, so their identities cannot be reused while the fingerprint lives."""
    leaves, spec = tree_flatten(value)
    keys = tuple((id(x), x._version) if isinstance(x, torch.Tensor) else ("value", x) for x in leaves)
    return spec, keys, leaves


def same_fingerprint(a: tuple, b: tuple) -> bool:
    """Whether two fingerprints (:func:`state_fingerprint`) name the same content."""
    try:
        return a[0] == b[0] and a[1] == b[1]
    except (RuntimeError, TypeError, ValueError):  # a leaf whose == is not a plain bool
        return False

