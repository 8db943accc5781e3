"""Registry of federated methods: one file per method, looked up by name.

``build_algorithm("fedlmd+fedprox", {"beta": 1.0, "mu": 0.01}, dataset="cifar10")`` composes
methods with ``+`` (see :mod:`fedlib.algorithms.base` for which hooks combine and how).

The registry is part of the run's vocabulary in the core, below :mod:`fedlib.core.config`, which
resolves method names and arguments through it: it imports neither the contract
(:mod:`fedlib.algorithms.base`) nor any method statically. The method modules of
``fedlib.algorithms`` are loaded by name on first use, and every class here is a subclass of
``base.Algorithm``, asked for its contract through its own class methods.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from fedlib.errors import FedlibError, one_of

# the package of the method files, loaded by name (a string: the registry imports no method), and
# its modules that are not methods: the contract and local training
METHODS_PACKAGE = "fedlib.algorithms"
NOT_METHODS = {"base", "client_training"}

_REGISTRY: dict[str, type] = {}
_ALIASES: dict[str, str] = {}
_LOADED = False


def register(cls: type | None = None, *, aliases: tuple[str, ...] = ()):
    """Class decorator: make a method selectable by its ``name`` (and aliases)."""

    def wrap(klass: type) -> type:
        _REGISTRY[klass.name] = klass
        for alias in aliases:
            _ALIASES[alias] = klass.name
        return klass

    return wrap(cls) if cls is not None else wrap


def unregister(*names: str) -> None:
    """Forget the methods registered under ``names`` (a test's or an exercise's own; unknown names
    are ignored) and the aliases that point at them."""
    for name in names:
        _REGISTRY.pop(name, None)
        for alias in [a for a, target in _ALIASES.items() if target == name]:
            del _ALIASES[alias]


def _load_all() -> None:
    """Import every method module of :data:`METHODS_PACKAGE` once so their @register calls run."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for info in pkgutil.iter_modules(importlib.import_module(METHODS_PACKAGE).__path__):
        if info.name not in NOT_METHODS and not info.name.startswith("_"):
            importlib.import_module(f"{METHODS_PACKAGE}.{info.name}")


def method_names(include_aliases: bool = True) -> list[str]:
    """Every registered method name (and alias)."""
    _load_all()
    return sorted(set(_REGISTRY) | (set(_ALIASES) if include_aliases else set()))


def get_class(name: str) -> type:
    """The class registered under ``name`` (alias resolved); FedlibError if unknown."""
    _load_all()
    canonical = _ALIASES.get(name, name)
    if canonical not in _REGISTRY:
        raise one_of("method", name, method_names())
    return _REGISTRY[canonical]


def compose(parts: list[type]) -> type:
    """One class whose hooks come from ``parts`` (first part first in the MRO)."""
    if len(parts) == 1:
        return parts[0]
    for hook in parts[0].exclusive_hooks:
        owners = [p.name for p in parts if p.hook_owner(hook) is not None]
        if len(owners) > 1:
            raise FedlibError(f"cannot combine {' and '.join(owners)}: both define the {hook!r} hook")
    defaults: dict[str, Any] = {}
    for part in parts:
        clash = set(defaults) & set(part.defaults)
        if clash:
            raise FedlibError(f"cannot combine methods sharing hyperparameter(s) {sorted(clash)}")
        defaults.update(part.defaults)
    dataset_defaults: dict[str, dict] = {}
    for part in parts:
        for dataset, values in part.dataset_defaults.items():
            dataset_defaults.setdefault(dataset, {}).update(values)
    choices = {k: v for part in parts for k, v in part.choices.items()}
    ranges = {k: v for part in parts for k, v in part.ranges.items()}
    later = {k: v for part in parts for k, v in part.later_defaults.items()}
    name = "+".join(p.name for p in parts)
    body = {"name": name, "paper": "; ".join(p.paper for p in parts), "defaults": defaults,
            "dataset_defaults": dataset_defaults, "choices": choices, "ranges": ranges,
            "later_defaults": later,
            "result_revision": classmethod(lambda cls, hp: sum(p.result_revision(hp) for p in parts)),
            "short_run": classmethod(lambda cls, args, rounds: _joined_short_runs(parts, args, rounds)),
            "short_run_missed": classmethod(lambda cls, rounds: "; ".join(
                filter(None, (p.short_run_missed(rounds) for p in parts))))}
    try:
        return type(name, tuple(parts), body)
    except TypeError as exc:  # inconsistent MRO, e.g. a part that already includes another
        raise FedlibError(f"cannot combine {name}: {exc}") from None


def _joined_short_runs(parts: list[type], method_args: dict, rounds: int) -> tuple[dict, int, str]:
    """A composition's short run: every part's argument changes, the most rounds any part needs,
    their notes."""
    changes, most, notes = {}, rounds, []
    for part in parts:
        part_changes, part_rounds, note = part.short_run(method_args, rounds)
        changes.update(part_changes)
        most = max(most, part_rounds)
        notes += [note] if note else []
    return changes, most, "; ".join(notes)


def canonical_method(method: str) -> str:
    """The one spelling of a method string: parts stripped, aliases resolved, FedAvg parts of a
    composition dropped (``" feded + fedavg "`` -> ``"fedvls"``), and the parts of a composition in
    one order (``fedprox+fedlmd`` -> ``fedlmd+fedprox``, see :func:`part_order`) unless a part's
    ``order_matters`` says why its order changes what is computed (MOON); unknown names are left
    as they are for the validation to report."""
    parts = [part.strip() for part in method.split("+")]
    _load_all()
    parts = [_ALIASES.get(part, part) for part in parts]
    kept = [part for part in parts if part != "fedavg"] or ["fedavg"]
    if all(part in _REGISTRY for part in kept) and not any(_REGISTRY[part].order_matters for part in kept):
        kept.sort(key=part_order)
    return "+".join(kept)


def part_order(name: str) -> tuple[int, str]:
    """Where part ``name`` stands in a composition: by the first of the exclusive hooks (in the
    contract's order: loss, penalty, before_step, train_step, aggregate, ...) it takes over, so
    the local objective's parts come first and the server's last (``fedlmd+fedprox+fedavgm``,
    ``fedvls+fedexp``), as the stored runs have them. Two parts cannot share an exclusive hook;
    the name breaks any other tie. The hooks every part runs (setup, client_context, ...) then
    run in this order, which changes nothing unless a part says ``order_matters``."""
    klass = _REGISTRY[name]
    owned = [i for i, hook in enumerate(klass.exclusive_hooks) if klass.hook_owner(hook) is not None]
    return (min(owned, default=len(klass.exclusive_hooks)), name)


def method_class(method: str) -> type:
    """The (possibly composed) class for a method string such as ``"fedvls+fedexp"``."""
    parts = [get_class(part.strip()) for part in method.split("+")]
    return compose(parts)


def resolve_hparams(klass: type, args: dict[str, Any], dataset: str | None = None) -> dict[str, Any]:
    """Defaults <- the paper's per-dataset defaults <- the user's arguments, type-checked."""
    unknown = sorted(set(args) - set(klass.defaults))
    if unknown:
        valid = ", ".join(sorted(klass.defaults)) or "none"
        raise FedlibError(f"method {klass.name!r} has no argument(s) {unknown}; its arguments: {valid}")
    values = dict(klass.defaults)
    values.update(klass.dataset_defaults.get(dataset or "", {}))
    for key, value in args.items():
        values[key] = _coerce(klass.name, key, value, klass.defaults[key])
    for key, allowed in klass.choices.items():
        if values.get(key) not in allowed:
            raise FedlibError(f"{klass.name} argument {key}={values.get(key)!r} is not one of {list(allowed)}")
    for key, allowed in klass.ranges.items():
        if key in values and not allowed.contains(values[key]):
            raise FedlibError(f"{klass.name} argument {key}={values[key]!r} is outside its allowed range {allowed}")
    return values


def _coerce(method: str, key: str, value: Any, default: Any) -> Any:
    """Convert a CLI string (or any value) to the type of the default; a whole number given for a
    float argument becomes a float, so ``mu=1`` and ``mu=1.0`` are one argument (and one hash)."""
    if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            raise FedlibError(f"{method} argument {key}={value} is too large for a float") from None
    if default is None or not isinstance(value, str) or isinstance(default, str):
        return value
    try:
        if isinstance(default, bool):
            if value.lower() in ("1", "true", "yes", "on"):
                return True
            if value.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if isinstance(default, (list, tuple)):
            import json

            return json.loads(value)
        return type(default)(value)
    except ValueError:
        raise FedlibError(f"{method} argument {key}={value!r} must be of type {type(default).__name__}") from None


def check_method(method: str, args: dict[str, Any], dataset: str | None = None, cfg: Any = None) -> None:
    """Validate a method string and its arguments, and (given the RunConfig) the method's
    requirements on the run's other settings (used by RunConfig)."""
    klass = method_class(method)
    hparams = resolve_hparams(klass, args, dataset)
    if cfg is not None:
        klass.check_run(hparams, cfg)


def build_algorithm(method: str, args: dict[str, Any] | None = None, dataset: str | None = None) -> Any:
    """Instantiate a method (or composition), an ``Algorithm``, with its resolved hyperparameters."""
    klass = method_class(method)
    return klass(resolve_hparams(klass, dict(args or {}), dataset))


__all__ = ["register", "unregister", "method_names", "get_class", "method_class", "canonical_method", "compose",
           "build_algorithm", "check_method", "resolve_hparams"]
