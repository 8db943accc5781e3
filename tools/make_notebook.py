"""Turn a percent-format script into a clean notebook (no outputs).

    python tools/make_notebook.py draft.py notebooks/name.ipynb

Cells start with ``# %%`` (code) or ``# %% [markdown]`` (markdown, lines prefixed by ``# ``).
``# %% tags=["parameters"]`` tags a code cell. Handy for drafting a notebook in an editor; the
committed ``.ipynb`` is the source of truth afterwards.
"""

import json
import re
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stamp_defaults  # noqa: E402

HEADER = re.compile(r"^# %%(?P<md> \[markdown\])?(?: tags=(?P<tags>\[.*\]))?\s*$")


def cells_from_script(text: str) -> list:
    cells, kind, tags, lines = [], None, [], []

    def flush():
        if kind is None:
            return
        body = "\n".join(lines).strip("\n")
        if kind == "markdown":
            body = "\n".join(re.sub(r"^# ?", "", line) for line in body.splitlines())
            cell = nbformat.v4.new_markdown_cell(body)
        else:
            cell = nbformat.v4.new_code_cell(body)
        if tags:
            cell.metadata["tags"] = tags
        cells.append(cell)

    for line in text.splitlines():
        match = HEADER.match(line)
        if match:
            flush()
            kind = "markdown" if match.group("md") else "code"
            tags = json.loads(match.group("tags")) if match.group("tags") else []
            lines = []
        else:
            lines.append(line)
    flush()
    return cells


def main(source: str, target: str) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = cells_from_script(Path(source).read_text())
    # the kernel reproduce.sh registers (tests/notebooks/test_notebook_reader.py checks every notebook's)
    notebook.metadata["kernelspec"] = {"name": "fedlib", "display_name": "Python (fedlib)", "language": "python"}
    notebook.metadata["language_info"] = {"name": "python"}
    nbformat.validate(notebook)
    stamped = stamp_defaults.stamped(json.loads(nbformat.writes(notebook)))  # what JupyterLab edits are told from
    Path(target).write_text(json.dumps(stamped, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:3])
