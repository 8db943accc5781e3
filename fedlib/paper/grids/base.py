"""What every grid builds on: a RunConfig where the notebook runs, and one grid per method.

A notebook's parameters (what :func:`fedlib.reporting.notebook.apply_profile` returns: the parameters cell
with the profile and any ``-p`` values applied) say where its runs happen; :func:`run_config`
is the one place that reads ``device`` and ``data_dir`` from them.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from fedlib.core.config import RunConfig
from fedlib.orchestration import experiments


def run_config(params: Mapping, *shared: str, **fields) -> RunConfig:
    """A RunConfig on the notebook's device and data folder: each field named in ``shared``
    takes the parameter of the same name, ``fields`` win over both.

    ``run_config(params, "clients", "lr", dataset="digits")`` is
    ``RunConfig(clients=params["clients"], lr=params["lr"], dataset="digits", device=..., data_dir=...)``.
    """
    values = {name: params[name] for name in shared}
    return RunConfig(**{**values, "device": params["device"], "data_dir": params["data_dir"], **fields})


def method_grid(base: RunConfig, methods: Sequence[str], method_args: dict[str, dict] | None = None,
                **axes: Sequence) -> list[RunConfig]:
    """``experiments.grid`` over ``axes`` for every method, each with its own arguments.

    ``method_args`` maps a method name to the arguments the paper uses for it (e.g. FedNTD's
    beta in FedVLS's appendix); methods without an entry keep fedlib's defaults.
    """
    configs = []
    for method in methods:
        args = dict((method_args or {}).get(method, {}))
        configs += experiments.grid(base.replace(method=method, method_args=args), **axes)
    return configs


def distinct(configs: Sequence[RunConfig]) -> list[RunConfig]:
    """``configs`` with each run (config hash) once, where it first appears; configs that are one
    run but spelled differently (a default passed explicitly) keep the last spelling."""
    return list({cfg.hash(): cfg for cfg in configs}.values())
