"""A notebook's parameters checked against the kinds its parameters cell declares.

The literal a parameters cell gives a name is its declaration: ``seeds = [0, 1, 2]`` takes a
non-empty list of whole numbers, ``rounds = {"mnist": 100}`` a mapping, ``lr = 0.01`` one number.
:func:`check_parameters` holds the values a notebook runs with (its profile's, ``-p`` values
through papermill or ``reproduce.sh``) to those kinds, and the names inside a list of datasets,
methods, models or partitions to the registries, each mistake as one line, before a grid is
built from them. ``None`` is accepted for any one-value parameter (the grids read it as "the
default" or "all"); a parameter declared ``None`` takes anything.
"""

from __future__ import annotations

from typing import Any

from fedlib.errors import FedlibError, one_of

# parameter name -> the registry its names (or the names in its list or mapping values) come from
_NAME_KINDS = {"dataset": "dataset", "datasets": "dataset", "lam_datasets": "dataset", "ablation_dataset": "dataset",
               "table4_dataset": "dataset", "model": "model", "models": "model", "backbones": "model",
               "partition": "partition", "partitions": "partition", "methods": "method"}
# list parameters for which an empty list means "none" (no extra runs), not a mistake
_MAY_BE_EMPTY = {"confirm_readings"}


def check_parameters(stem: str, declared: dict, values: dict) -> None:
    """Raise FedlibError (one line) for a value of ``values`` whose kind differs from the literal
    ``declared`` (the parameters cell's) gives it, an empty list where the cell's is not, a list
    naming a value twice, or an unknown dataset, method, model or partition name."""
    for name, value in values.items():
        if name in declared:
            _check_kind(f"{stem}: parameter {name}", declared[name], value, name in _MAY_BE_EMPTY)
            _check_names(f"{stem}: parameter {name}", name, value)


def _kind(value: Any) -> str | None:
    """'bool', 'int', 'float', 'str', 'list' or 'dict' (None for None and other types)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (list, tuple)):
        return "list"
    for kind in (int, float, str, dict):
        if isinstance(value, kind):
            return kind.__name__
    return None


_WANTED = {"bool": "True or False", "int": "a whole number", "float": "a number", "str": "a string",
           "list": "a list", "dict": "a mapping"}
_ITEMS = {"bool": "True or False values", "int": "whole numbers", "float": "numbers", "str": "strings"}


def _fits(declared: str, value: Any) -> bool:
    kind = _kind(value)
    return kind == declared or (declared == "float" and kind == "int")


def _check_kind(where: str, default: Any, value: Any, empty_ok: bool = False) -> None:
    declared = _kind(default)
    if declared is None or (value is None and declared not in ("list", "dict")):
        return
    if not _fits(declared, value):
        example = f" like {_example(default)}" if declared in ("list", "dict") else ""
        raise FedlibError(f"{where} takes {_WANTED[declared]}{example}, got {value!r} ({type(value).__name__})")
    if declared == "list":
        _check_list(where, list(default), list(value), empty_ok)
    elif declared == "dict":
        kinds = {_kind(v) for v in default.values()} - {None}
        if len(kinds) == 1 and kinds < {"bool", "int", "float", "str"}:
            wanted = kinds.pop()
            for key, item in value.items():
                if item is not None and not _fits(wanted, item):
                    raise FedlibError(f"{where}[{key!r}] takes {_WANTED[wanted]}, got {item!r}")


def _check_list(where: str, default: list, value: list, empty_ok: bool = False) -> None:
    if default and not value and not empty_ok:
        raise FedlibError(f"{where} is an empty list; give at least one value, like {_example(default)}")
    kinds = {_kind(item) for item in default}
    if len(kinds) == 1 and kinds < {"bool", "int", "float", "str"}:
        wanted = kinds.pop()
        for item in value:
            if not _fits(wanted, item):
                raise FedlibError(f"{where} takes a list of {_ITEMS[wanted]} like {_example(default)}; "
                                  f"{item!r} is not one")
    seen = []
    for item in value:
        if item in seen:
            raise FedlibError(f"{where} lists {item!r} twice ({value}): every value once, or the same run is "
                              "counted as several")
        seen.append(item)


def _example(default: Any) -> str:
    import json

    return json.dumps(default if not isinstance(default, tuple) else list(default))[:80]


def _check_names(where: str, name: str, value: Any) -> None:
    """The names in a dataset/model/method/partition parameter (one, a list, or a mapping's values)."""
    kind = _NAME_KINDS.get(name)
    if kind is None or value is None:
        return
    names = value if isinstance(value, (list, tuple)) else list(value.values()) if isinstance(value, dict) else [value]
    for item in names:
        if isinstance(item, str):
            _check_name(where, kind, item)


def _check_name(where: str, kind: str, item: str) -> None:
    if kind == "method":
        from fedlib.core.registry import method_class

        try:
            method_class(item)
        except FedlibError as error:
            raise FedlibError(f"{where}: {error}") from None
        return
    from fedlib import models
    from fedlib.datasets import data, partition

    valid = {"dataset": data.DATASETS, "model": models.MODELS, "partition": partition.PARTITIONS}[kind]
    if item not in valid:
        raise FedlibError(f"{where}: {one_of(kind, item, valid)}")
