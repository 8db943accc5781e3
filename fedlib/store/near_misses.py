"""Stored runs that differ from a config in one or two settings.

When a render-only cell reads "not run", the run asked for is often in a store under a setting the
caller left out (a ``-p settings`` entry without ``min_client_size``, say). :func:`near_runs` finds
the stored runs of the same method and seed that differ from the config in at most a few hashed
fields, and :func:`describe_near` says which fields, so the render names the run it missed instead
of leaving the cell blank without a word.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

from fedlib.core.config import RunConfig
from fedlib.errors import FedlibError
from fedlib.store.paths import reference_root
from fedlib.store.record import RunRecord, list_runs

SAME_IN_EVERY_NEAR_RUN = ("method", "seed")  # a run of another method or seed is another row, not a near miss


def flat_fields(cfg: RunConfig) -> dict[str, Any]:
    """``cfg``'s hashed fields with ``method_args`` spread out as ``method_args.NAME``."""
    values = dict(cfg.hashed_fields())
    for name, value in values.pop("method_args", {}).items():
        values[f"method_args.{name}"] = value
    return values


def field_differences(asked: RunConfig, stored: RunConfig) -> dict[str, tuple[Any, Any]]:
    """Field -> (stored value, asked value) for every hashed field in which the two differ
    (a field only one of them has reads None on the other side)."""
    a, s = flat_fields(asked), flat_fields(stored)
    return {k: (s.get(k), a.get(k)) for k in sorted(set(a) | set(s)) if a.get(k) != s.get(k)}


def stored_records(results_dir: str | os.PathLike | None = None) -> list[RunRecord]:
    """Every complete run of the reference store and of the working store ``results_dir``, each hash
    once (the reference store's record where both hold it)."""
    root = reference_root()
    records = (list_runs(root) if root is not None else []) + list_runs(results_dir)
    return list({record.folder.name: record for record in reversed(records)}.values())  # a hash once: the reference's


def near_runs(cfg: RunConfig, records: Iterable[RunRecord], most: int = 2) -> list[tuple[RunRecord, dict]]:
    """The records of ``cfg``'s method and seed whose config differs from ``cfg`` in 1 to ``most``
    hashed fields, fewest differences first; a record whose config no longer reads is skipped."""
    asked = {name: getattr(cfg, name) for name in SAME_IN_EVERY_NEAR_RUN}
    found = []
    for record in records:
        try:
            stored = record.read_config()
        except (FedlibError, OSError, ValueError, TypeError):
            continue
        if any(getattr(stored, name) != value for name, value in asked.items()):
            continue
        differences = field_differences(cfg, stored)
        if 0 < len(differences) <= most:
            found.append((record, differences))
    return sorted(found, key=lambda pair: (len(pair[1]), pair[0].folder.name))


def describe_near(cfg: RunConfig, near: list[tuple[RunRecord, dict]]) -> str:
    """One line: the config that no store holds and the closest stored run, by the fields that differ."""
    record, differences = near[0]
    fields = ", ".join(f"{name} {stored!r} (asked: {asked!r})" for name, (stored, asked) in differences.items())
    more = f"; {len(near) - 1} more stored runs differ in as few fields" if len(near) > 1 and \
        len(near[1][1]) == len(differences) else ""
    return (f"{cfg.hash()} ({cfg.method}, {cfg.dataset}, seed {cfg.seed}) is in no store, but run "
            f"{record.folder.name} differs from it only in {fields}{more}")
