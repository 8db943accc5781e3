"""What a reader of the notebooks gets without running them: the fedlib kernel that
reproduce.sh registers, a first cell that links the latest committed figures and tables, figure
code that stamps every saved figure and titles it in words, and code cells no wider than the
library's lines. Static checks (no kernel)."""

import ast
import json
import re
import shlex
from pathlib import Path

import pytest
from tests.helpers import load_notebook

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
each_notebook = pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
LINK = re.compile(r"\]\(([^)\s]+)\)")  # markdown link targets
SAVES = re.compile(r"\b(save_figure|save_tables?)\(")
# identifiers that a title must not show raw ("fashion_mnist"): plots.display_name(...) gives words
RAW_IDENTIFIERS = {"dataset", "model", "model_name", "method", "base.dataset", "data.name", "cfg.dataset"}


def code(notebook: dict) -> str:
    return "\n".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code")


def first_markdown(notebook: dict) -> str:
    return "".join(next(c for c in notebook["cells"] if c["cell_type"] == "markdown")["source"])


def calls(source: str, name: str) -> list[ast.Call]:
    """Every call of a function or method called ``name`` in ``source``."""
    return [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == name]


def title_arguments(source: str) -> list[ast.expr]:
    """The title texts of suptitle / set_title calls and of every ``title=`` keyword."""
    titles = [c.args[0] for name in ("suptitle", "set_title") for c in calls(source, name) if c.args]
    return titles + [k.value for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)
                     for k in node.keywords if k.arg == "title"]


def raw_fields(title: ast.expr) -> list[str]:
    """The f-string fields of ``title`` that insert a raw identifier such as ``{dataset}``."""
    fields = [node.value for node in ast.walk(title) if isinstance(node, ast.FormattedValue)]
    return [ast.unparse(f) for f in fields if ast.unparse(f) in RAW_IDENTIFIERS]


def registered_kernel() -> dict:
    """The --name / --display-name that reproduce.sh passes to `ipykernel install`."""
    line = next(line for line in (ROOT / "reproduce.sh").read_text().splitlines()
                if "ipykernel install" in line and not line.lstrip().startswith("#"))
    words = shlex.split(line)
    return {"name": words[words.index("--name") + 1], "display_name": words[words.index("--display-name") + 1]}


def committed_outputs(stem: str) -> list[str]:
    """The committed figures (PNG) and tables (Markdown) the indexes attribute to a notebook, as
    paths relative to notebooks/: the quick profile's (figures/, tables/) and the full-scale ones
    (figures/paper/, tables/paper/)."""
    outputs = []
    for folder, suffix in (("figures", ".png"), ("tables", ".md"), ("figures/paper", ".png"), ("tables/paper", ".md")):
        index = json.loads((ROOT / folder / "index.json").read_text())
        outputs += [f"../{folder}/{Path(name).stem}{suffix}" for name, entry in index.items()
                    if entry["notebook"] == f"notebooks/{stem}.ipynb"]
    return outputs


@each_notebook
def test_kernelspec_is_the_kernel_reproduce_sh_registers(path: Path):
    kernel = registered_kernel()
    assert kernel == {"name": "fedlib", "display_name": "Python (fedlib)"}, "the README names this kernel"
    assert load_notebook(path)["metadata"].get("kernelspec") == {**kernel, "language": "python"}


@each_notebook
def test_first_cell_links_resolve_to_committed_files(path: Path):
    for target in LINK.findall(first_markdown(load_notebook(path))):
        if "://" in target or target.startswith("#"):
            continue
        assert (path.parent / target.split("#")[0]).resolve().is_file(), f"broken link {target}"


@each_notebook
def test_first_cell_links_the_latest_figures_and_tables(path: Path):
    notebook = load_notebook(path)
    if not SAVES.search(code(notebook)):
        pytest.skip("saves no figure or table")
    text, outputs = first_markdown(notebook), committed_outputs(path.stem)
    unlinked = [o for o in outputs if f"]({o})" not in text]
    assert not unlinked, f"link {unlinked} from the first cell"
    if not outputs:
        assert "none committed yet" in text, "say that no figure or table is committed yet"


@each_notebook
def test_saved_figures_are_stamped_and_titled_in_words(path: Path):
    source = code(load_notebook(path))
    for call in calls(source, "save_figure"):
        keywords = {k.arg: ast.unparse(k.value) for k in call.keywords}
        assert keywords.get("profile") == "profile" and "runs" in keywords, \
            f"stamp the figure (profile=profile, runs=...): {ast.unparse(call)}"
    raw = [field for title in title_arguments(source) for field in raw_fields(title)]
    assert not raw, f"titles show raw identifiers {raw}; use plots.display_names(...)"


# The widest a code-cell line may be: fedlib's own lines stay within it (issue 33).
CODE_WIDTH = 120
def wide_lines(notebook: dict) -> list[str]:
    """The code-cell lines longer than CODE_WIDTH, each as 'cell N: <its start>'."""
    return [f"cell {index} ({len(line)} chars): {line[:60]}..."
            for index, cell in enumerate(notebook["cells"]) if cell["cell_type"] == "code"
            for line in "".join(cell["source"]).splitlines() if len(line) > CODE_WIDTH]


@each_notebook
def test_code_cell_lines_fit_the_width(path: Path):
    """A parameters cell is read in a browser tab and by ``papermill --help-notebook``: a comment
    that runs on for hundreds of characters is read by nobody. Wrap it under its own start, as
    the wrapped notebooks do (the first words stay on the parameter's line: papermill's help)."""
    wide = wide_lines(load_notebook(path))
    assert not wide, f"wrap these to {CODE_WIDTH} characters: {wide}"
