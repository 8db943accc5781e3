"""docs/ARCHITECTURE.md says what the code is: every module in its layer, the layers in the order of
tests/unit/test_architecture.py's LAYERS, the picture and the layers' imports as the code has them,
and every ``module.function`` it names still there.

The layers and the picture come from tools/import_graph.py, which reads the layers and the import
scan from tests/unit/test_architecture.py; refresh the page with ``python tools/import_graph.py write``.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "ARCHITECTURE.md"
TOOL = ROOT / "tools" / "import_graph.py"
FILE_SUFFIXES = (".py", ".sh", ".md", ".yaml", ".ipynb", ".csv", ".json", ".jsonl", ".pt")


def load_tool():
    spec = importlib.util.spec_from_file_location("fedlib_import_graph_tool", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # before it runs: dataclasses look their module up
    spec.loader.exec_module(module)
    return module


tool = load_tool()
REFRESH = "refresh the page: python tools/import_graph.py write"


@pytest.fixture(scope="module")
def graph():
    return tool.import_graph()


@pytest.fixture(scope="module")
def page():
    return PAGE.read_text(encoding="utf-8")


def section(page: str, heading: str) -> str:
    """The text under ``## heading`` up to the next ``## `` heading."""
    return page.split(f"\n## {heading}", 1)[1].split("\n## ", 1)[0]


FENCED = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def backticked(text: str) -> list[str]:
    """The inline code spans of ``text`` (fenced blocks left out)."""
    return re.findall(r"`([^`\n]+)`", FENCED.sub("", text))


def references(page: str) -> list[str]:
    """What the page names in code: its inline code spans, and the dotted names of its plain
    (not Mermaid) fenced blocks."""
    blocks = [body for kind, body in FENCED.findall(page) if kind != "mermaid"]
    return backticked(page) + [m for body in blocks for m in re.findall(r"\b[a-z_]+(?:\.[A-Za-z_]\w*)+", body)]


def layer_rows(page: str) -> dict[str, str]:
    """Layer name -> the modules cell of its row in the layers table, in the page's order."""
    rows = {}
    for line in section(page, "The layers").splitlines():
        match = re.match(r"\|\s*\*\*(.+?)\*\*\s*\|([^|]*)\|", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def named_files(cell: str, folder: str = "") -> set[str]:
    """The module files a table cell (or paragraph) names, relative to fedlib/."""
    return {folder + token for token in backticked(cell) if token.endswith(".py") and "NAME" not in token}


def methods_paragraph(page: str) -> str:
    return section(page, "The layers").split("The methods (`algorithms/`):", 1)[1].split("\n\n", 1)[0]


# ---------------------------------------------------------------------- the tool
def test_reduce_edges_drops_only_implied_arrows():
    assert tool.reduce_edges({(2, 1), (1, 0), (2, 0)}) == {(2, 1), (1, 0)}
    assert tool.reduce_edges({(2, 0), (1, 0)}) == {(2, 0), (1, 0)}


def test_a_module_no_layer_owns_is_named(graph):
    with pytest.raises(ValueError, match="fedlib.brand_new"):
        tool.layers({**graph, "fedlib.brand_new": set()})


def test_the_tool_runs_from_the_command_line():
    done = subprocess.run([sys.executable, str(TOOL), "sizes"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("| layer | modules | lines | largest module |")
    bad = subprocess.run([sys.executable, str(TOOL), "nonsense"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and "usage" in bad.stderr


def test_the_size_table_counts_every_line_of_fedlib(graph):
    files = sorted((ROOT / "fedlib").rglob("*.py"))
    rows = tool.sizes(graph).splitlines()
    total = rows[-1].split("|")
    assert total[1].strip() == "**all of fedlib**"
    assert int(total[2]) == len(files)
    assert int(total[3].replace(",", "")) == sum(len(f.read_text(encoding="utf-8").splitlines()) for f in files)
    assert sum(int(r.split("|")[2]) for r in rows[2:-1]) == len(files)


# ---------------------------------------------------------------------- the page against the code
def test_the_layers_are_in_the_order_of_the_architecture_test(graph, page):
    layers = tool.layers(graph)
    assert list(layer_rows(page)) == [layer.name for layer in layers], \
        "the layers table must list the layers of tools/import_graph.py, bottom first"
    assert [layer.name for layer in layers] == [name for name, _ in tool.rules().LAYERS]


def test_every_layer_row_names_exactly_its_modules(graph, page):
    rows = layer_rows(page)
    for layer in tool.layers(graph):
        files = {tool.module_path(m).as_posix() for m in layer.modules}
        shown = named_files(rows[layer.name])
        if layer.name == "algorithms":  # the methods are listed under the table
            shown |= named_files(methods_paragraph(page), "algorithms/")
        assert shown == files, f"layer {layer.name!r}: the page names {sorted(shown - files)} that it does not " \
                               f"hold, and misses {sorted(files - shown)}"


def test_the_page_names_every_module(graph, page):
    tokens = set(backticked(page)) | named_files(methods_paragraph(page), "algorithms/")
    missing = sorted(m for m in graph if tool.module_path(m).as_posix() not in tokens)
    assert not missing, f"docs/ARCHITECTURE.md does not name {missing}"


def test_the_picture_is_the_import_graph(graph, page):
    shown = tool.generated_block(page, "mermaid")
    assert shown is not None, "the page lost its picture's markers"
    assert shown == tool.mermaid(graph), REFRESH


def test_the_size_table_lists_the_layers(graph, page):
    shown = tool.generated_block(page, "sizes")
    assert shown is not None, "the page lost its size table's markers"
    first_column = [line.split("|")[1].strip() for line in shown.splitlines()[2:]]
    assert first_column == [layer.name for layer in tool.layers(graph)] + ["**all of fedlib**"], REFRESH


def test_imports_point_down_the_layers(graph):
    upward = tool.upward_edges(graph, tool.layers(graph))
    assert not upward, "imports into a higher layer (move the module, or the import):\n" + \
        "\n".join(f"{m} -> {t}" for m, t in upward)


def module_named(dotted: str, modules: set[str]) -> str | None:
    """The one fedlib module that ``dotted`` names, in full or by its last parts (``engine``,
    ``grids.base``: the page names modules as their layer's code calls them; a module before the
    package of its name), else None."""
    found = [m for m in modules if m == "fedlib." + dotted or m.endswith("." + dotted)]
    if len(found) > 1:  # ``engine`` is the module fedlib.engine.engine, not its package
        found = [m for m in found if m != "fedlib." + dotted]
    return found[0] if len(found) == 1 else None


def test_every_function_the_page_names_exists(page):
    modules = set(tool.rules().package_modules())
    checked, broken = 0, []
    for token in references(page):
        name = token.split("(", 1)[0]
        if not re.fullmatch(r"[A-Za-z_][\w.]*\.[\w.]+", name) or name.endswith(FILE_SUFFIXES):
            continue
        parts = name.removeprefix("fedlib.").split(".")
        for cut in range(len(parts), 0, -1):
            module = module_named(".".join(parts[:cut]), modules)
            if module:
                break
        else:
            continue  # not a fedlib name (server.extras, model.parameters)
        value = importlib.import_module(module)
        try:
            for attribute in parts[cut:]:
                value = getattr(value, attribute)
        except AttributeError:
            broken.append(token)
        checked += 1
    assert not broken, f"docs/ARCHITECTURE.md names what the code no longer has: {broken}"
    assert checked >= 30, f"only {checked} references checked: the page's names were not found"
