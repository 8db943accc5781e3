"""A run's setting in the papers' vocabulary (``partition=dirichlet;beta=0.05``), the key every
table joins our numbers and the paper's on, and the same setting in words for a reader; a partition
in words (:func:`partition_words`), the one place every caller (figure titles, tables, the command
line's listings) writes it."""

from __future__ import annotations

from fedlib.core.config import RunConfig

# the partition schemes' display names (also in fedlib.reporting.plots.DISPLAY_NAMES)
PARTITION_NAMES = {
    "iid": "IID", "dirichlet": "Dirichlet", "shards": "shards", "quantity": "quantity skew",
    "pathological": "pathological", "balanced": "balanced", "natural": "natural (by writer or domain)",
}


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
        partition = partition_words(partition, beta=fields.pop("beta"))
    return ", ".join([partition] * bool(partition) + [f"{key}={value}" for key, value in fields.items()])


def partition_words(partition: str, *, beta=None, shards_per_client=None, classes_per_client=None,
                    quantity_split: str = "symmetric", compact: bool = False) -> str:
    """A partition and its parameter in words.

    For a reader: ``Dir(β=0.5)``, ``quantity skew, 2 classes per client``, ``pathological, 2 classes per
    client``, ``shards, 2 per client``, else the scheme's display name (``IID``). ``compact`` (the
    command line's columns and file names): ``dirichlet(0.5)``, ``shards(s=2)``,
    ``quantity(s=2,official)``, ``pathological(c=1)``, else the scheme's name. ``beta`` may be a
    number (written ``:g``) or the text of a setting label (written as it is).
    """
    if compact:
        return _compact_words(partition, beta, shards_per_client, classes_per_client, quantity_split)
    if partition == "dirichlet":
        return f"Dir(β={_number(beta)})"
    if partition in ("quantity", "pathological"):
        return f"{PARTITION_NAMES[partition]}, {classes_per_client} classes per client"
    if partition == "shards":
        return f"shards, {shards_per_client} per client"
    return PARTITION_NAMES.get(partition, partition)


def _compact_words(partition: str, beta, shards_per_client, classes_per_client, quantity_split: str) -> str:
    if partition == "dirichlet":
        return f"dirichlet({_number(beta)})"
    if partition == "shards":
        return f"shards(s={shards_per_client})"
    if partition == "quantity":
        official = ",official" if quantity_split == "official" else ""
        return f"quantity(s={classes_per_client}{official})"
    if partition == "pathological":
        return f"pathological(c={classes_per_client})"
    return partition


def _number(value) -> str:
    """A number as ``:g`` writes it (0.5, 1e-05); text (from a setting label) as it is."""
    return str(value) if isinstance(value, str) else f"{value:g}"
