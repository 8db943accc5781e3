"""Publishing: a run with ``--publish`` writes the committed ``figures/`` and ``tables/``, and
records in each folder's ``index.json`` (rendered as its ``README.md``) which notebook, profile,
parameters, hardware and date produced each file, and how to regenerate them."""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import shlex
from pathlib import Path
from typing import Sequence

from fedlib.errors import FedlibError
from fedlib.paper.reproduce.selection import parse_parameters
from fedlib.reporting.notebook import REPO_ROOT


def index_outputs(folder: Path, kind: str, stem: str, profile: str, since: float,
                  all_stems: Sequence[str] = (), parameters: dict | None = None) -> None:
    """Record which notebook, profile, parameters over the profile (``-p``), hardware and date
    produced each output written since ``since``.

    The record lives in ``<folder>/index.json`` and is rendered as ``<folder>/README.md``. A file
    named after another notebook of ``all_stems`` (its stem a longer prefix of the file name)
    belongs to that notebook and is left alone.
    """
    if not folder.is_dir():
        return
    index_path = folder / "index.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {}
    # notebooks name their outputs after their paper and kind (pkd_table*, fedvls_fig*), which keeps a file
    # written meanwhile by a notebook of another family (run side by side) out of this notebook's entry
    family = _family(stem)
    fresh = [p for p in sorted(folder.iterdir()) if p.suffix in (".png", ".csv")
             and p.name.startswith(family) and p.stat().st_mtime >= since - 1
             and _owner(p.name, all_stems) in (None, stem)]
    stamp = datetime.date.today().isoformat()
    for path in fresh:
        index[path.name] = {"notebook": f"notebooks/{stem}.ipynb", "profile": profile,
                            "hardware": _hardware(), "date": stamp}
        if parameters:
            index[path.name]["parameters"] = parameters
    if not fresh:
        return
    index_path.write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    render_index(folder, kind)


def render_index(folder: Path, kind: str) -> None:
    """Write ``<folder>/README.md`` from ``<folder>/index.json``."""
    index = json.loads((folder / "index.json").read_text())
    title = "Figures" if kind == "figure" else "Tables"
    lines = [f"# {title}", "", publish_note(folder, kind, index), "",
             f"| {kind} | notebook | profile | parameters over the profile | hardware | date |",
             "|---|---|---|---|---|---|"]
    for name, row in sorted(index.items()):
        lines.append(f"| [{name}]({name}) | {row['notebook']} | {row['profile']} | {_parameters_text(row)} |"
                     f" {row['hardware']} | {row['date']} |")
    (folder / "README.md").write_text("\n".join(lines) + "\n")


def _parameters_text(row: dict) -> str:
    """A published file's ``-p`` parameters as the command line gives them, or "none"."""
    parameters = row.get("parameters") or {}
    return ", ".join(f"`-p {name} {_shell_value(value)}`" for name, value in parameters.items()) or "none"


def _shell_value(value) -> str:
    """``value`` as one shell word that :func:`parse_parameters` reads back to it: a string bare
    only where YAML reads it as that string (``yes`` and ``0.5`` are quoted), quotes inside kept."""
    text = value if isinstance(value, str) and _reads_as(value, value) else json.dumps(value)
    return text if re.fullmatch(r"[\w.+-]+", text) else shlex.quote(text)


def _reads_as(text: str, value) -> bool:
    """Whether ``-p NAME text`` gives ``value`` (False where it is no valid YAML)."""
    try:
        return parse_parameters([("name", text)])["name"] == value
    except FedlibError:
        return False


def publish_note(folder: Path, kind: str, index: dict) -> str:
    """How the files of a published ``folder`` are regenerated: the command, and that runs without
    ``--publish`` leave it alone."""
    kinds = f"{kind}s"
    profiles = sorted({row["profile"] for row in index.values()})
    command = ["./reproduce.sh", f"--profile {profiles[0]}" if len(profiles) == 1 else "--profile PROFILE"]
    # a render-only publication regenerates from a clone only where the runs are committed: the reference
    # store holds paper-profile runs; a quick-profile render needs the runs trained again, so say nothing
    if profiles == ["paper"] and _rendering_only():
        command.append("--render-only")
    command += ["--publish", *_folder_options(Path(folder).resolve(), kinds)]
    how = f"`{' '.join(command)}`"
    if len(profiles) > 1 or any(row.get("parameters") for row in index.values()):
        how += " with each file's profile and parameters below"
    return (f"Only a publishing run writes the {kinds} here: {how} regenerates them (add `--only NOTEBOOK` for "
            f"one notebook's) and records below the notebook, profile, parameters, hardware and date of each. Runs without "
            f"`--publish` write to `output/<profile>/{kinds}/` instead.")


def _rendering_only() -> bool:
    """Whether this process renders only (reproduce --render-only set the engine's mode)."""
    from fedlib.engine.engine import render_only  # torch: only when a note is written

    return render_only()


def _folder_options(folder: Path, kinds: str) -> list[str]:
    """The --figures/--tables options that publish into ``folder``: none for the committed folder
    itself, both for a subfolder (figures/paper goes with tables/paper), else ``folder`` as given."""
    committed = REPO_ROOT / kinds
    if folder == committed:
        return []
    if committed in folder.parents:
        name = folder.relative_to(committed).as_posix()
        return [f"--figures figures/{name}", f"--tables tables/{name}"]
    return [f"--{kinds} {folder}"]


def _owner(filename: str, stems: Sequence[str]) -> str | None:
    """The notebook stem that ``filename`` is named after (the longest prefix match), if any."""
    matches = [s for s in stems if filename.startswith(s + "_") or filename.startswith(s + ".")]
    return max(matches, key=len) if matches else None


def _family(stem: str) -> str:
    """'pkd_table1_4_class_accuracy' -> 'pkd_table'; a stem without fig/table token is its own family."""
    parts = stem.split("_")
    for i, part in enumerate(parts):
        for kind in ("fig", "table"):
            if part.startswith(kind):
                return "_".join(parts[:i] + [kind])
    return stem


def _hardware() -> str:
    """One line naming the device notebooks ran on (GPU name, else CPU cores)."""
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    return f"CPU, {os.cpu_count()} cores ({platform.machine()})"
