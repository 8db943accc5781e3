"""The import structure of fedlib: its layers are its folders, they import one way, and no cycle.

A layer is a subpackage of fedlib (the ground floor is the few modules straight under ``fedlib``).
A module may import only modules of its own layer or a layer below. Every import counts: at the
top of a module, inside functions and under ``if TYPE_CHECKING``. ``import fedlib.a.b`` and
``from fedlib.a import b`` are edges to the module ``fedlib.a.b`` only (Python runs the package
``fedlib.a`` on the way, but that is no dependency).
"""

from __future__ import annotations

import ast
from pathlib import Path

import fedlib

PACKAGE = Path(fedlib.__file__).parent

# The layers, bottom first: (name, what it holds). A name holds the module of that name and, when
# it is a package other than fedlib itself, every module under it. Every layer but the ground
# floor is one folder of fedlib, named as the layer (commands also holds ``python -m fedlib``'s
# __main__, which is the command line).
LAYERS = [
    ("ground", {"fedlib", "fedlib.errors", "fedlib.yaml_input", "fedlib.folders"}),
    ("datasets", {"fedlib.datasets"}),
    ("measures", {"fedlib.measures"}),
    ("models", {"fedlib.models"}),
    ("core", {"fedlib.core"}),
    ("algorithms", {"fedlib.algorithms"}),
    ("store", {"fedlib.store"}),
    ("engine", {"fedlib.engine"}),
    ("analysis", {"fedlib.analysis"}),
    ("orchestration", {"fedlib.orchestration"}),
    ("reporting", {"fedlib.reporting"}),
    ("paper", {"fedlib.paper"}),
    ("commands", {"fedlib.commands", "fedlib.__main__"}),
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


def import_base(node: ast.ImportFrom, package: str) -> str:
    """The absolute module a ``from ... import`` reads from (a relative one climbs from ``package``)."""
    if not node.level:
        return node.module or ""
    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
    return ".".join(anchor + ([node.module] if node.module else []))


def imports_of(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``source`` (the text of ``module``) imports anywhere."""
    package = module if is_package else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = import_base(node, package)
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


def _holder(names: set[str], module: str) -> str | None:
    """The longest name of ``names`` that holds ``module`` (itself, or a package above it)."""
    held = [n for n in names if module == n or (n != "fedlib" and module.startswith(n + "."))]
    return max(held, key=len) if held else None


def _index_of(groups: list[tuple[str, set[str]]], module: str) -> int | None:
    best = [(len(h), i) for i, (_, names) in enumerate(groups) if (h := _holder(names, module))]
    return max(best)[1] if best else None


def layer_of(graph: dict[str, set[str]]) -> dict[str, int]:
    """Module -> its layer's index in LAYERS, for the modules a layer holds."""
    return {m: i for m in graph if (i := _index_of(LAYERS, m)) is not None}


# ---------------------------------------------------------------------- the scan itself
def test_the_scan_counts_deferred_and_type_checking_imports():
    source = '''
from typing import TYPE_CHECKING
import fedlib.algorithms.pkd
from fedlib import store
from fedlib.core.registry import register
from fedlib.algorithms import fedlmd
from fedlib.core.config import RunConfig
from . import listing
if TYPE_CHECKING:
    from fedlib.core.state import ServerState
def later():
    from fedlib.engine.engine import run
    import fedlib.engine.backends.threaded as threads
'''
    known = {"fedlib", "fedlib.core", "fedlib.core.registry", "fedlib.algorithms", "fedlib.algorithms.pkd", "fedlib.algorithms.fedlmd",
             "fedlib.core.config", "fedlib.commands.listing", "fedlib.engine.engine", "fedlib.core.state",
             "fedlib.store", "fedlib.engine.backends.threaded", "fedlib.commands.cli"}
    found = imports_of(source, "fedlib.commands.cli", False, known)
    assert found == {"fedlib.algorithms.pkd", "fedlib.store", "fedlib.core.registry", "fedlib.algorithms.fedlmd",
                     "fedlib.core.config", "fedlib.commands.listing", "fedlib.core.state", "fedlib.engine.engine",
                     "fedlib.engine.backends.threaded"}


def test_find_cycle_names_the_loop():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


# ---------------------------------------------------------------------- fedlib
def test_no_import_cycle_inside_fedlib():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_every_module_is_in_a_layer():
    graph = import_graph()
    layers = layer_of(graph)
    assert not sorted(set(graph) - set(layers)), "modules in no layer (put them in a subpackage)"
    loose = sorted(m for m, path in package_modules().items() if path.parent == PACKAGE
                   and path.name != "__init__.py" and m not in LAYERS[0][1] | {"fedlib.__main__"})
    assert not loose, f"modules outside a subpackage: {loose}"


def test_every_layer_is_a_folder_of_existing_modules():
    modules = package_modules()
    named = {m for _, held in LAYERS for m in held}
    assert not sorted(named - set(modules)), "LAYERS names modules that do not exist"
    for name, held in LAYERS[1:]:
        assert f"fedlib.{name}" in held and modules[f"fedlib.{name}"].name == "__init__.py", name
        assert held - {f"fedlib.{name}"} <= {"fedlib.__main__"}, f"layer {name} holds more than its folder"
    folders = {path.parent.name for m, path in modules.items() if path.parent.parent == PACKAGE}
    assert folders == {name for name, _ in LAYERS[1:]}, "every folder of fedlib is a layer"


def test_layers_point_one_way():
    graph = import_graph()
    layers = layer_of(graph)
    upward = [f"{m} ({LAYERS[layers[m]][0]}) -> {t} ({LAYERS[layers[t]][0]})"
              for m in sorted(graph) for t in sorted(graph[m]) if layers[t] > layers[m]]
    assert not upward, "imports into a higher layer:\n" + "\n".join(upward)


def test_methods_backends_and_local_training_never_reach_the_round_loop_or_the_store():
    graph = import_graph()
    methods = [m for m in graph if m.startswith("fedlib.algorithms")]
    assert "fedlib.algorithms.pkd" in methods and "fedlib.algorithms.base" in methods
    backends = [m for m in graph if m.startswith("fedlib.engine.backends")]
    assert "fedlib.engine.backends.stacked" in backends
    above = {m for m in graph if m == "fedlib.engine.engine" or _holder({"fedlib.store"}, m)}
    assert "fedlib.store.record" in above
    for module in methods + backends + ["fedlib.core.state", "fedlib.algorithms.client_training"]:
        assert not reachable(graph, module) & above, module
    assert not reachable(graph, "fedlib.core.registry") & set(methods), "the registry loads methods by name only"


# ---------------------------------------------------------------------- module size
LONG_MODULE_LINES = 500  # one concept per module: a longer one says at its top why it stays whole


def test_a_long_module_says_why_it_stays_one_module():
    unexplained = []
    for module, path in package_modules().items():
        source = path.read_text(encoding="utf-8")
        docstring = ast.get_docstring(ast.parse(source)) or ""
        if len(source.splitlines()) > LONG_MODULE_LINES and "stays one module" not in docstring:
            unexplained.append(f"{module} ({len(source.splitlines())} lines)")
    assert not unexplained, f"split these by concept, or say at the top why each stays one module: {unexplained}"


# ---------------------------------------------------------------------- no patching
def fedlib_module_names(tree: ast.AST, known: set[str]) -> set[str]:
    """The local names a module binds to fedlib modules (``from fedlib.engine import engine``,
    ``import fedlib.store as store``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update((alias.asname or alias.name.split(".")[0]) for alias in node.names
                         if alias.name in known and alias.asname)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fedlib"):
            names.update(alias.asname or alias.name for alias in node.names
                         if f"{node.module}.{alias.name}" in known)
    return names


def patched_attributes(source: str, known: set[str]) -> list[str]:
    """Where ``source`` assigns to an attribute of a fedlib module it imported (``engine.x = ...``,
    ``setattr(engine, ...)``)."""
    tree = ast.parse(source)
    modules = fedlib_module_names(tree, known)
    found = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id in modules:
                found.append(f"line {node.lineno}: {target.value.id}.{target.attr} = ...")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
                and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in modules):
            found.append(f"line {node.lineno}: setattr({node.args[0].id}, ...)")
    return found


def test_no_fedlib_module_assigns_to_another_modules_attributes():
    modules = package_modules()
    known = set(modules)
    patches = {module: found for module, path in modules.items()
               if (found := patched_attributes(path.read_text(encoding="utf-8"), known))}
    assert not patches, f"hand the value in as an argument instead of patching a module: {patches}"


def test_the_patch_scan_sees_a_patch():
    known = {"fedlib.engine.engine", "fedlib.datasets.data"}
    source = ("from fedlib.engine import engine\nimport fedlib.datasets.data as data\n"
              "engine.load_dataset = None\nsetattr(data, 'x', 1)\nlocal = object()\nlocal.y = 2\n")
    assert patched_attributes(source, known) == ["line 3: engine.load_dataset = ...", "line 4: setattr(data, ...)"]
