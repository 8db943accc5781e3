"""``--list``: per notebook, the paper's figure or table it reproduces, and per profile the datasets
it reads and the cost its profile yaml notes. Reads files only: no torch, nothing runs."""

from __future__ import annotations

import ast
import functools
import json
import re
from pathlib import Path

from fedlib.errors import FedlibError
from fedlib.paper.reproduce.selection import find_notebooks
from fedlib.reporting.notebook import cell_defaults, load_profiles, plain_math


def format_listing(notebooks_dir: Path, profiles_dir: Path, only: str | None = None) -> str:
    """Per notebook: its title (the paper's figure or table), then one line per profile with the
    datasets it reads and the cost note its yaml gives. Reads files only: no torch, nothing runs."""
    blocks = ["notebook: paper figure or table\n  profile  datasets it reads (digits, synthetic: no files)"
              "  # cost, as profiles/<notebook>.yaml notes it"]
    for notebook in find_notebooks(notebooks_dir, only):
        profiles = load_profiles(profiles_dir, notebook.stem)
        notes = _profile_notes(Path(profiles_dir) / f"{notebook.stem}.yaml")
        defaults = _literal_parameters(notebook)
        lines = [f"{notebook.stem}: {_title(notebook)}"]
        width = max([len(name) for name in profiles] + [0])
        for name, values in profiles.items():
            data = ", ".join(_datasets({**defaults, **values})) or "-"
            lines.append(f"  {name:<{width}}  {data}" + (f"  # {notes[name]}" if notes.get(name) else ""))
        blocks.append("\n".join(lines if profiles else lines + ["  (no profiles yaml)"]))
    return "\n".join(blocks)


def _title(notebook: Path) -> str:
    """The first markdown heading of ``notebook``, without its '#', its ``$\\mu$`` math as plain μ."""
    for cell in json.loads(notebook.read_text(encoding="utf-8")).get("cells", []):
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("#"):
                    return plain_math(line.lstrip("#").strip())
    return "(no title)"


def _literal_parameters(notebook: Path) -> dict:
    """The parameters cell's literal values; empty when the notebook has no such cell."""
    try:
        return cell_defaults(notebook)
    except FedlibError:
        return {}


def _profile_notes(path: Path) -> dict[str, str]:
    """Profile name -> the comment on its line in the yaml (``quick:  # CPU, ~5 min``), with the
    comment-only lines that continue it right below."""
    if not path.exists():
        return {}
    notes, last = {}, None
    for line in path.read_text().splitlines():
        match = re.match(r"([A-Za-z_][\w-]*):\s*#\s*(.*)$", line)
        more = re.match(r"\s+#\s*(.*)$", line)
        if match:
            last = match.group(1)
            notes[last] = match.group(2).strip()
        elif more and last is not None:
            notes[last] += " " + more.group(1).strip()
        else:
            last = None
    return notes


@functools.cache
def _dataset_names() -> tuple[str, ...]:
    """fedlib.datasets.catalogue.DATASETS, read once from its source (the listing imports no torch):
    the name each ``DatasetInfo(...)`` record of the catalogue opens with, in their order."""
    tree = ast.parse((Path(__file__).parents[2] / "datasets" / "catalogue.py").read_text(encoding="utf-8"))
    records = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
               and getattr(node.func, "id", None) == "DatasetInfo"]
    return tuple(ast.literal_eval(node.args[0]) for node in sorted(records, key=lambda n: (n.lineno, n.col_offset)))


PER_DATASET_GRIDS = ("betas",)  # parameters whose keys are the datasets a notebook trains: {cifar100: [0.5], ...}


def _datasets(value, key: str = "") -> list[str]:
    """The dataset names in a notebook's parameters: strings held under a key naming a dataset,
    and the keys of a per-dataset grid (:data:`PER_DATASET_GRIDS`; lookup tables such as
    ``models: {cifar10: cnn2, ...}`` name datasets a profile may not read, and do not count)."""
    if isinstance(value, dict):
        found = [str(k) for k in value if key in PER_DATASET_GRIDS and str(k) in _dataset_names()]
        found += [name for k, v in value.items() for name in _datasets(v, str(k))]
    elif isinstance(value, (list, tuple)):
        found = [name for item in value for name in _datasets(item, key)]
    else:
        found = [value] if isinstance(value, str) and "dataset" in key else []
    return list(dict.fromkeys(found))
