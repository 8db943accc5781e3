"""Record each notebook's parameters cell values in the cell's metadata (``fedlib_defaults``).

    python tools/stamp_defaults.py            # stamp notebooks/*.ipynb in place
    python tools/stamp_defaults.py --check    # exit 1 listing notebooks whose stamp differs from the cell
    python tools/stamp_defaults.py a.ipynb    # only these files

In JupyterLab, ``fedlib.reporting.notebook.apply_profile`` keeps a value the reader edited over the profile's;
it tells an edit from a default by comparing the cell with this stamp, which editing the cell's text
(and JupyterLab's autosave) leaves as it was. Run it after changing a parameters cell on purpose.
Files are written the way Jupyter writes them (indent 1, trailing newline).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fedlib.reporting.notebook import DEFAULTS_KEY, defaults_stamp  # noqa: E402


def stamped(notebook: dict) -> dict:
    """The notebook with its parameters cell's values recorded in that cell's metadata."""
    for cell in notebook.get("cells", []):
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            cell["metadata"][DEFAULTS_KEY] = defaults_stamp("".join(cell["source"]))
            return notebook
    return notebook


def main(argv: list[str] | None = None) -> int:
    """Stamp (or with --check, only report) the given notebooks; default notebooks/*.ipynb."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks; default notebooks/*.ipynb")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a stamp is stale")
    args = parser.parse_args(argv)
    stale = []
    for path in args.paths or sorted((ROOT / "notebooks").glob("*.ipynb")):
        text = path.read_text(encoding="utf-8")
        fresh = json.dumps(stamped(json.loads(text)), indent=1, ensure_ascii=False) + "\n"
        if fresh == text:
            continue
        stale.append(path)
        if not args.check:
            path.write_text(fresh, encoding="utf-8")
    for path in stale:
        print(f"{'stale stamp' if args.check else 'stamped'}: {path}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
