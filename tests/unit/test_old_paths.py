"""No module has two names (issue 46): the flat paths of earlier releases (a module straight under
``fedlib``) and the paths of the one-time run package (``fedlib.core.engine``, ``fedlib.core.store``,
the registry's names under ``fedlib.algorithms``) no longer import, and nothing in the repository
names one as a module path any more.

FORMER below is the table the import hook held, with the names the folders-are-layers move retired,
kept only here, so that a former name cannot come back as a module, and so that a test, tool,
notebook, script or page that still types one fails here rather than for a user. Three flat names
of the first table (``fedlib.models``, ``fedlib.store``, ``fedlib.engine``) are layers again and so
left it.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import fedlib

ROOT = Path(__file__).resolve().parents[2]

# A former flat path -> the module that holds its code now.
FORMER = {
    "fedlib.data": "fedlib.datasets.data", "fedlib.data_check": "fedlib.datasets.data_check",
    "fedlib.partition": "fedlib.datasets.partition", "fedlib.augment": "fedlib.datasets.augment",
    "fedlib.metrics": "fedlib.measures.metrics", "fedlib.weak_classes": "fedlib.measures.weak_classes",
    "fedlib.determinism": "fedlib.core.determinism",
    "fedlib.config": "fedlib.core.config", "fedlib.state": "fedlib.core.state",
    "fedlib.client_training": "fedlib.algorithms.client_training", "fedlib.backend_choice": "fedlib.engine.backend_choice",
    "fedlib.threaded": "fedlib.engine.backends.threaded", "fedlib.stacked": "fedlib.engine.backends.stacked",
    "fedlib.class_gap": "fedlib.analysis.class_gap", "fedlib.drift": "fedlib.analysis.drift",
    "fedlib.local_update": "fedlib.analysis.local_update", "fedlib.pkd_readings": "fedlib.analysis.pkd_readings",
    "fedlib.prediction_stats": "fedlib.analysis.prediction_stats",
    "fedlib.experiments": "fedlib.orchestration.experiments", "fedlib.executor": "fedlib.orchestration.executor",
    "fedlib.resources": "fedlib.orchestration.resources", "fedlib.timing": "fedlib.orchestration.timing",
    "fedlib.dry_run": "fedlib.orchestration.dry_run", "fedlib.partition_check": "fedlib.orchestration.partition_check",
    "fedlib.notebook": "fedlib.reporting.notebook", "fedlib.parameters": "fedlib.reporting.parameters",
    "fedlib.paper_numbers": "fedlib.reporting.paper_numbers", "fedlib.plots": "fedlib.reporting.plots",
    "fedlib.tables": "fedlib.reporting.tables", "fedlib.report": "fedlib.reporting.report",
    "fedlib.grids": "fedlib.paper.grids", "fedlib.plan": "fedlib.paper.plan",
    "fedlib.reproduce": "fedlib.paper.reproduce",
    "fedlib.cli": "fedlib.commands.cli", "fedlib.listing": "fedlib.commands.listing",
    "fedlib.export": "fedlib.commands.export",
    # issue 46: the folders are the layers
    "fedlib.core.store": "fedlib.store", "fedlib.core.models": "fedlib.models",
    "fedlib.core.engine": "fedlib.engine.engine", "fedlib.core.run_data": "fedlib.engine.run_data",
    "fedlib.core.evaluation": "fedlib.engine.evaluation", "fedlib.core.backend_choice": "fedlib.engine.backend_choice",
    "fedlib.core.backends": "fedlib.engine.backends",
    "fedlib.core.client_training": "fedlib.algorithms.client_training",
    # the registry's names were fedlib.algorithms's; the registry is fedlib.core.registry now
    **{f"fedlib.algorithms.{name}": "fedlib.core.registry" for name in (
        "register", "unregister", "method_names", "get_class", "compose", "canonical_method", "part_order",
        "method_class", "resolve_hparams", "check_method", "build_algorithm")},
}


# ---------------------------------------------------------------------- nothing imports
@pytest.mark.parametrize("old", sorted(FORMER))
def test_a_former_path_does_not_import(old):
    importlib.import_module(FORMER[old])  # the new path does, and importing it makes no alias
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)
    assert old not in sys.modules
    parent, _, leaf = old.rpartition(".")
    if parent in sys.modules:  # nor ``from fedlib import timing``, ``from fedlib.core import store``
        assert not hasattr(sys.modules[parent], leaf)


def test_a_former_package_takes_no_submodule_with_it():
    import fedlib.paper.grids.pkd  # noqa: F401

    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("fedlib.grids.pkd")


def test_import_fedlib_stays_light_and_python_m_refuses_a_former_path():
    code = "import sys, fedlib; print(sorted(m for m in sys.modules if m.startswith('fedlib')))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "['fedlib', 'fedlib.errors']", done.stderr
    done = subprocess.run([sys.executable, "-m", "fedlib.reproduce", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0 and "No module named" in done.stderr, done.stdout


# ---------------------------------------------------------------------- nothing names one
SKIPPED_FOLDERS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".ipynb_checkpoints", ".pytest_cache",
                   ".carry", "output", "reference_results", "results", "parked", "figures", "tables",
                   "logs"}  # logs/: a session's own notes and logs, git-ignored (never in a clone)
SCANNED = {".py", ".ipynb", ".sh", ".md", ".yml", ".yaml", ".toml", ".json"}
LEAVES = sorted((old.partition(".")[2] for old in FORMER), key=len, reverse=True)
# a whole dotted name (fedlib.data, fedlib.data.x), never part of a longer one (fedlib.datasets.data,
# fedlib.data_root, myfedlib.data); this file, which holds FORMER, is not scanned
DOTTED = re.compile(r"(?<![\w.])fedlib\.(" + "|".join(map(re.escape, LEAVES)) + r")(?!\w)")
FROM_FEDLIB = re.compile(r"\bfrom\s+(fedlib(?:\.\w+)*)\s+import\s+\(?\s*((?:\w+(?:\s+as\s+\w+)?\s*,\s*)*\w+(?:\s+as\s+\w+)?)")


def former_names_in(text: str) -> list[str]:
    """The former paths that ``text`` names: as a dotted name, or as ``from fedlib import name``."""
    found = [f"fedlib.{m.group(1)}" for m in DOTTED.finditer(text)]
    for m in FROM_FEDLIB.finditer(text):
        names = [item.split()[0] for item in m.group(2).split(",")]
        found += [f"{m.group(1)}.{name}" for name in names if f"{m.group(1)}.{name}" in FORMER]
    return found


def scanned_text(path: Path) -> str:
    """What a reader runs or reads of ``path``: a notebook's code and Markdown cells, not its outputs."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix != ".ipynb":
        return text
    cells = json.loads(text).get("cells", [])
    return "\n".join("".join(cell.get("source", "")) for cell in cells if cell.get("cell_type") in ("code", "markdown"))


def scanned_files(root: Path = ROOT):
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(s for s in subfolders if s not in SKIPPED_FOLDERS)
        for name in sorted(files):
            path = Path(folder, name)
            if path.suffix in SCANNED and path != Path(__file__).resolve():
                yield path


def test_the_scan_finds_whole_dotted_names_and_from_fedlib_imports():
    sample = "\n".join([
        "import fedlib.timing", "x = 'fedlib.grids.pkd'", "python -m fedlib.reproduce --list",
        "from fedlib import errors, timing as s, data", "from fedlib import (\n    errors,\n    plots,\n)",
        "from fedlib.core import config, store",
    ])
    assert former_names_in(sample) == ["fedlib.timing", "fedlib.grids", "fedlib.reproduce", "fedlib.timing",
                                       "fedlib.data", "fedlib.plots", "fedlib.core.store"]
    clean = "\n".join([
        "import fedlib.orchestration.timing", "fedlib.datasets.data.data_root", "fedlib.datasets.data_check",
        "from fedlib import errors, store", "from fedlib.core import config, state", "fedlib.data_root",
        "myfedlib.data", "fedlib.paper.grids.pkd", "fedlib.reporting.tables", "fedlib.store.record",
    ])
    assert former_names_in(clean) == []


def test_no_file_names_a_former_path():
    found = {}
    for path in scanned_files():
        names = former_names_in(scanned_text(path))
        if names:
            found[str(path.relative_to(ROOT))] = sorted({f"{n} (now {FORMER[n]})" for n in names})
    assert not found, f"these still name a former module path: {found}"


def test_no_gallery_page_shows_a_former_path():
    """The gallery's rendered pages show the notebooks' code: a page built before a move still shows
    the former imports, which a reader who copies a cell runs into. Tags are stripped first (the code
    is syntax-highlighted), so a dotted name split over several spans is still found."""
    import html

    found = {}
    for page in sorted((ROOT / "figures" / "gallery").rglob("*.html")):
        text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8", errors="replace")))
        names = former_names_in(text)
        if names:
            found[str(page.relative_to(ROOT))] = sorted(set(names))
    assert not found, f"these gallery pages show a former module path (rebuild them): {found}"
