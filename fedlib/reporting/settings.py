"""A run's setting in the papers' vocabulary (``partition=dirichlet;beta=0.05``), the key every
table joins our numbers and the paper's on, and the same setting in words for a reader."""

from __future__ import annotations

from fedlib.core.config import RunConfig


def setting_label(cfg: RunConfig) -> str:
    """A config's partition in the vocabulary of ``fedlib/reporting/paper_results`` (its README).

    ``partition=dirichlet;beta=0.05``, ``partition=shards;s=2``, ``partition=quantity;s=2``,
    ``partition=pathological;classes_per_client=1``, ``partition=balanced``, ...
    """
    extra = {"dirichlet": f"beta={cfg.beta:g}", "shards": f"s={cfg.shards_per_client}",
             "quantity": f"s={cfg.classes_per_client}",
             "pathological": f"classes_per_client={cfg.classes_per_client}"}.get(cfg.partition)
    return f"partition={cfg.partition}" + (f";{extra}" if extra else "")


def setting_words(setting: str) -> str:
    """A :func:`setting_label` for a reader: ``partition=dirichlet;beta=0.05`` -> ``Dir(β=0.05)``,
    ``partition=shards;s=2`` -> ``shards, s=2``, ``partition=balanced`` -> ``balanced``; any other
    field follows as ``key=value``."""
    fields = dict(part.split("=", 1) for part in setting.split(";") if "=" in part)
    partition = fields.pop("partition", "")
    if partition == "dirichlet" and "beta" in fields:
        partition = f"Dir(β={fields.pop('beta')})"
    return ", ".join([partition] * bool(partition) + [f"{key}={value}" for key, value in fields.items()])
