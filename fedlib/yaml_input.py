"""YAML read strictly: one line for a syntax error, a tab or a key given twice.

PyYAML's ``safe_load`` keeps the last of two equal keys without a word and reports a syntax error
as a multi-line traceback. :func:`load_yaml` refuses both with one :class:`FedlibError` line that
names the source and the line, so a profile or a config file says what is wrong in it.
"""

from __future__ import annotations

from typing import Any

import yaml

from fedlib.errors import FedlibError, explain


class _StrictLoader(yaml.SafeLoader):
    """safe_load's loader, refusing a mapping that gives one key twice."""


def _mapping_without_duplicates(loader: _StrictLoader, node: yaml.MappingNode) -> dict:
    loader.flatten_mapping(node)  # YAML merge keys (<<) first, as safe_load does
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        try:
            if key in seen:
                raise FedlibError(f"key {key!r} is given twice (lines {seen[key]} and {line}); keep one")
            seen[key] = line
        except TypeError:  # an unhashable key: construct_mapping reports it
            continue
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)


def load_yaml(text: str, source: str = "YAML") -> Any:
    """``text`` parsed as YAML (safe types only); FedlibError naming ``source`` for invalid
    YAML, a tab where YAML wants spaces, or a key given twice in one mapping."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except FedlibError as error:
        raise FedlibError(f"{source}: {error}") from None
    except yaml.YAMLError as error:
        hint = "; indent with spaces, not tabs" if "\t" in text else ""
        raise FedlibError(f"{source}: {explain(error)}{hint}") from None
