"""What one call of the runner selects: the notebooks (``--only``), their profiles, and the
parameters passed to each (the profile's name, ``-p NAME VALUE``, the device and the folders),
checked against the parameters cell every notebook declares."""

from __future__ import annotations

import ast
import datetime
import fnmatch
import json
import os
from pathlib import Path
from typing import Sequence

import yaml

from fedlib.errors import FedlibError, one_of
from fedlib.folders import user_folder
from fedlib.reporting.notebook import REPO_ROOT, check_unpublished, load_profiles, repo_path

STANDARD_PROFILES = ("smoke", "quick", "paper")
# Parameters the runner itself sets; every notebook's parameters cell declares them.
OVERRIDE_NAMES = ("profile", "device", "data_dir", "results_dir", "figures_dir", "tables_dir")


def find_notebooks(notebooks_dir: Path, only: str | None = None) -> list[Path]:
    """Notebooks in ``notebooks_dir``, sorted, kept if their stem matches any pattern of ``only``.

    ``only`` holds comma-separated patterns. A pattern equal to a notebook's stem selects just
    that notebook; one with ``*``, ``?`` or ``[`` is a glob on the stems; any other is a
    substring. A pattern that matches nothing is an error (a typo would otherwise reproduce less
    than asked).
    """
    notebooks = sorted(Path(notebooks_dir).glob("*.ipynb"))
    if not notebooks:
        raise FedlibError(f"no notebooks (*.ipynb) in {notebooks_dir}; pass --notebooks-dir DIR")
    if only is None:
        return notebooks
    if not only.strip(" ,"):
        raise FedlibError("--only was given no notebook names; leave it out to run every notebook")
    selected: set[Path] = set()
    for pattern in (p.strip() for p in only.split(",") if p.strip()):
        matches = _matching(notebooks, pattern)
        if not matches:
            stems = ", ".join(nb.stem for nb in notebooks)
            raise FedlibError(f"--only pattern {pattern!r} matches no notebook; notebooks: {stems}")
        selected.update(matches)
    return sorted(selected)


def _matching(notebooks: list[Path], pattern: str) -> list[Path]:
    exact = [nb for nb in notebooks if nb.stem == pattern]
    if exact:
        return exact
    if any(char in pattern for char in "*?["):
        return [nb for nb in notebooks if fnmatch.fnmatchcase(nb.stem, pattern)]
    return [nb for nb in notebooks if pattern in nb.stem]


def _absolute(path: str | os.PathLike | None, name: str) -> str | None:
    """``path`` (the option ``name``) made absolute against where you stand, ``~`` expanded."""
    folder = user_folder(path, name)
    return None if folder is None else str(folder.resolve())


def build_overrides(
    profile: str,
    device: str | None = None,
    data_dir: str | os.PathLike | None = None,
    results_dir: str | os.PathLike | None = None,
    figures_dir: str | os.PathLike | None = None,
    tables_dir: str | os.PathLike | None = None,
    parameters: dict | None = None,
) -> dict:
    """What the runner passes to every notebook: the profile's name, ``parameters`` (``-p NAME
    VALUE``) and the options given; one left at None is not passed (the notebook's default holds).

    No profile values: the notebook applies its profile itself. Folders given as options become
    absolute, as a relative path on the command line means one relative to where you stand.
    """
    if parameters and "profile" in parameters:
        raise FedlibError("choose the profile with --profile, not -p profile")
    overrides = {"profile": profile, **(parameters or {})}
    if device is not None:
        overrides["device"] = device
    folders = {"data_dir": data_dir, "results_dir": results_dir, "figures_dir": figures_dir, "tables_dir": tables_dir}
    overrides.update({name: _absolute(folder, f"--{name[:-4]}") for name, folder in folders.items()
                      if folder is not None})
    return overrides


def parse_parameters(pairs: Sequence[Sequence[str]] | None) -> dict:
    """``-p NAME VALUE`` pairs as a dict, each VALUE read as YAML (``[0, 1]``, ``{cifar10: 10}``,
    ``0.01``, ``1e-5``, ``null``; anything else stays a string, ``none`` and dates such as
    ``2026-11-23`` included)."""
    parameters = {}
    for name, text in pairs or ():
        if not text.strip():  # YAML reads it as null: a value left out by mistake would run the default
            raise FedlibError(f"-p {name} {text!r} gives no value; give one, or write null for None")
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as error:
            problem = getattr(error, "problem", None) or "invalid YAML"
            raise FedlibError(f"-p {name} {text!r}: not valid YAML ({problem})") from None
        if isinstance(value, datetime.date):  # a date is no parameter value: keep the text
            value = text
        if isinstance(value, str):  # YAML reads 1e-5 (no dot) as a string; Python does not
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                pass
        parameters[name] = value
    return parameters


def check_parameter_names(notebooks: Sequence[Path], names: Sequence[str]) -> None:
    """Refuse a ``-p`` name some selected notebook does not declare, listing that notebook's parameters."""
    for notebook in notebooks:
        declared = declared_parameters(notebook)
        unknown = sorted(set(names) - declared)
        if unknown:
            raise FedlibError(f"{notebook.stem} has no parameter {', '.join(unknown)}; its parameters: "
                              f"{', '.join(sorted(declared))} (narrow the selection with --only)")


def declared_parameters(notebook: Path) -> set[str]:
    """Names assigned at top level of the notebook's cell tagged ``parameters`` (empty if none).

    Read with :mod:`ast` rather than papermill's inspector, which insists on kernelspec metadata
    even when the kernel is given on the command line.
    """
    cells = json.loads(Path(notebook).read_text(encoding="utf-8")).get("cells", [])
    tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if not tagged:
        return set()
    source = tagged[0]["source"]
    names = set()
    for node in ast.parse(source if isinstance(source, str) else "".join(source)).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        names.update(target.id for target in targets if isinstance(target, ast.Name))
    return names


def check_profile(profile: str, profiles: dict[str, dict]) -> None:
    """Refuse a profile that is neither a standard one nor in a selected notebook's profile yaml."""
    known = set(STANDARD_PROFILES).union(*(set(p) for p in profiles.values()))
    if profile not in known:
        raise one_of("profile", profile, known)


def select_notebooks(profile, only, notebooks_dir, profiles_dir, device, data_dir, results_dir, figures_dir,
                     tables_dir, publish=False, parameters=None) -> tuple[list[Path], dict, dict, Path]:
    """The notebooks, their profiles and the parameters the runner passes, options checked.

    Publishing writes the committed ``figures/`` and ``tables/`` unless other folders are given;
    otherwise a folder inside them is refused (their index must say what produced each file)."""
    notebooks_dir = Path(notebooks_dir or REPO_ROOT / "notebooks").resolve()
    root = notebooks_dir.parent
    notebooks = find_notebooks(notebooks_dir, only)
    profiles = {nb.stem: load_profiles(Path(profiles_dir or root / "profiles"), nb.stem) for nb in notebooks}
    check_profile(profile, profiles)
    check_parameter_names(notebooks, list(parameters or {}))
    if publish:  # -p figures_dir (relative: against the repository) counts as --figures
        given = {name: repo_path(value, root) for name, value in (parameters or {}).items()
                 if name in ("figures_dir", "tables_dir") and value}
        figures_dir = figures_dir or given.get("figures_dir") or root / "figures"
        tables_dir = tables_dir or given.get("tables_dir") or root / "tables"
    overrides = build_overrides(profile, device, data_dir, results_dir, figures_dir, tables_dir, parameters)
    check_unpublished(overrides, root, publishing=publish)
    return notebooks, profiles, overrides, root


def user_parameters(overrides: dict) -> dict:
    """The ``-p NAME VALUE`` parameters among the runner's ``overrides`` (not the profile, device or folders)."""
    return {name: value for name, value in overrides.items() if name not in OVERRIDE_NAMES}
