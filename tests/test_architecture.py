"""The import structure of fedlib: no import cycle, and the floors of a run point one way.

Every import counts: at the top of a module, inside functions and under ``if TYPE_CHECKING``.
``import fedlib.a.b`` and ``from fedlib.a import b`` are edges to the module ``fedlib.a.b``
only (Python runs the package ``fedlib.a`` on the way, but that is no dependency).
"""

from __future__ import annotations

import ast
from pathlib import Path

import fedlib

PACKAGE = Path(fedlib.__file__).parent

# The floors of a run, bottom first. A module on a floor may import (directly or through any
# other module) only modules of its own floor or below. Every fedlib.algorithms module that is
# not the registry or the contract is a method, on the "methods" floor.
FLOORS = [
    ("foundations", {"fedlib", "fedlib.errors", "fedlib.yaml_input", "fedlib.data", "fedlib.data_check",
                     "fedlib.partition", "fedlib.models", "fedlib.augment", "fedlib.determinism"}),
    ("method registry", {"fedlib.algorithms"}),
    ("config", {"fedlib.config"}),
    ("run state", {"fedlib.state"}),
    ("method contract", {"fedlib.algorithms.base", "fedlib.algorithms._common"}),
    ("local training", {"fedlib.client_training"}),
    ("methods", set()),
    ("backends", {"fedlib.threaded", "fedlib.stacked", "fedlib.backend_choice"}),
    ("results store", {"fedlib.store"}),
    ("engine", {"fedlib.engine"}),
]


# ---------------------------------------------------------------------- the scan
def package_modules(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module under ``root`` by dotted name (a package under its own name)."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def imports_of(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``source`` (the text of ``module``) imports anywhere."""
    package = module if is_package else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: climb from the importing package
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in known else base)
    return (found & known) - {module}


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    modules = package_modules(root)
    known = set(modules)
    return {name: imports_of(path.read_text(), name, path.name == "__init__.py", known)
            for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path [a, b, ..., a], or None when the graph has none."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        path.append(node)
        for target in sorted(graph[node]):
            if target in path:
                return path[path.index(target):] + [target]
            if target not in done:
                cycle = visit(target)
                if cycle:
                    return cycle
        path.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        if start not in done:
            cycle = visit(start)
            if cycle:
                return cycle
    return None


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen, todo = set(), [start]
    while todo:
        for target in graph[todo.pop()] - seen:
            seen.add(target)
            todo.append(target)
    return seen


def floor_of(graph: dict[str, set[str]]) -> dict[str, int]:
    """Module -> its floor's index, for the modules FLOORS places."""
    floors = {module: index for index, (_, modules) in enumerate(FLOORS) for module in modules}
    methods = [index for index, (name, _) in enumerate(FLOORS) if name == "methods"][0]
    for module in graph:
        if module.startswith("fedlib.algorithms.") and module not in floors:
            floors[module] = methods
    return floors


# ---------------------------------------------------------------------- the scan itself
def test_the_scan_counts_deferred_and_type_checking_imports():
    source = '''
from typing import TYPE_CHECKING
import fedlib.algorithms.pkd
from fedlib import store
from fedlib.algorithms import register, fedlmd
from fedlib.config import RunConfig
from . import data
if TYPE_CHECKING:
    from fedlib.state import ServerState
def later():
    from fedlib.engine import run
    import fedlib.threaded as threads
'''
    known = {"fedlib", "fedlib.algorithms", "fedlib.algorithms.pkd", "fedlib.algorithms.fedlmd", "fedlib.config",
             "fedlib.data", "fedlib.engine", "fedlib.state", "fedlib.store", "fedlib.threaded", "fedlib.cli"}
    found = imports_of(source, "fedlib.cli", False, known)
    assert found == {"fedlib.algorithms.pkd", "fedlib.store", "fedlib.algorithms", "fedlib.algorithms.fedlmd",
                     "fedlib.config", "fedlib.data", "fedlib.state", "fedlib.engine", "fedlib.threaded"}


def test_find_cycle_names_the_loop():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


# ---------------------------------------------------------------------- fedlib
def test_no_import_cycle_inside_fedlib():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_every_floor_names_existing_modules():
    modules = set(package_modules())
    missing = sorted(m for _, floor in FLOORS for m in floor if m not in modules)
    assert not missing, f"FLOORS names modules that do not exist: {missing}"


def test_floors_point_one_way():
    graph = import_graph()
    floors = floor_of(graph)
    upward = []
    for module, floor in sorted(floors.items()):
        for target in sorted(reachable(graph, module)):
            if floors.get(target, -1) > floor:
                upward.append(f"{module} ({FLOORS[floor][0]}) -> {target} ({FLOORS[floors[target]][0]})")
    assert not upward, "imports that climb a floor:\n" + "\n".join(upward)


def test_methods_and_backends_never_reach_the_engine():
    graph = import_graph()
    methods = [m for m in graph if m.startswith("fedlib.algorithms")]
    assert "fedlib.algorithms.pkd" in methods and "fedlib.algorithms.base" in methods
    for module in methods + ["fedlib.state", "fedlib.client_training", "fedlib.threaded", "fedlib.stacked"]:
        assert not reachable(graph, module) & {"fedlib.engine", "fedlib.store"}, module
    assert not reachable(graph, "fedlib.algorithms") & set(methods), "the registry loads methods by name only"
