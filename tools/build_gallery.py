"""Build the HTML gallery of executed notebooks: static pages in ``figures/gallery/``.

    python tools/build_gallery.py output/quick                 # every executed notebook in a folder
    python tools/build_gallery.py output/paper/x.ipynb --note "rendered from the stores (--render-only)"
    python tools/build_gallery.py                              # rewrite index.html from index.json only
    python tools/build_gallery.py --remove paper/x.html        # drop a page (or every page of a stem: x)
    python tools/build_gallery.py --vendor-mathjax             # fetch MathJax with npm into mathjax/

Each executed notebook (the ``.ipynb`` papermill wrote, e.g. ``reproduce.sh --profile quick`` into
``output/quick/``) becomes ``<gallery>/<profile>/<stem>.html``, converted by nbconvert's HTML
exporter (JupyterLab look). A banner on top of every page names its profile, when it was executed
and any note; ``index.html`` lists the pages (title from the notebook's first heading, profile,
execution time), and ``index.json`` keeps that list, so pages can be added one build at a time.

Nothing is loaded from the network: math is typeset by the MathJax copy vendored in
``<gallery>/mathjax/`` (TeX input, SVG output: one file and no web fonts, so it also renders
from disk in browsers that refuse file:// fonts); the JupyterLab stylesheet is written once to
``<gallery>/static/``; images are embedded in the pages (data URIs) and links the notebooks make
relative to ``notebooks/`` (``../figures/x.png``) are rewritten relative to the page. The folder
works opened from disk and served as static files (GitHub Pages). ``tools/check_gallery.py``
opens it in headless Chromium.

Notebooks whose execution failed are skipped (exit status 1) unless ``--allow-failed``, which
adds them with a banner saying so. Exit status: 0 done, 1 a failed notebook skipped, 2 bad input.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from fedlib.reporting.notebook import plain_math  # noqa: E402

DEFAULT_GALLERY = REPO_ROOT / "figures" / "gallery"
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
MATHJAX_VERSION = "3.2.2"
MATHJAX_FILE = "tex-svg.js"  # the combined TeX-input, SVG-output component of MathJax's es5/ folder
PROFILE_ORDER = ("lesson", "quick", "paper", "smoke")  # the index lists the course's profile first
COURSE = REPO_ROOT / "notebooks" / "README.md"
COURSE_ROW = re.compile(r"^\| (\d+) \| \[(\w+)\]\(\2\.ipynb\)", flags=re.M)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

# The page template: JupyterLab's, minus everything it would fetch from a CDN (require.js, widget
# manager, mermaid, MathJax 2), plus the vendored MathJax 3, a shared stylesheet and the banner.
PAGE_TEMPLATE = r"""{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block notebook_css -%}
<link rel="stylesheet" href="{{ resources.gallery.static_url }}/notebook.css">
<link rel="stylesheet" href="{{ resources.gallery.static_url }}/gallery.css">
{%- endblock notebook_css -%}
{%- block html_head_js_mathjax -%}
<script>
window.MathJax = {
  tex: {inlineMath: [['$', '$'], ['\\(', '\\)']], displayMath: [['$$', '$$'], ['\\[', '\\]']],
        processEscapes: true, processEnvironments: true, tags: 'ams'},
  svg: {fontCache: 'global'},
  options: {ignoreHtmlClass: 'tex2jax_ignore', processHtmlClass: 'tex2jax_process'}
};
</script>
<script id="MathJax-script" defer src="{{ resources.mathjax_url }}"></script>
{%- endblock html_head_js_mathjax -%}
{%- block body_header -%}
{{ super() }}
<nav class="gallery-banner{{ ' gallery-failed' if resources.gallery.failed else '' }}">
<a href="{{ resources.gallery.index_url }}">&larr; all notebooks</a>
<span class="gallery-profile gallery-profile-{{ resources.gallery.profile | e }}">profile: {{ resources.gallery.profile | e }}</span>
<span>executed {{ resources.gallery.executed | e }}</span>
<span>notebook <code>{{ resources.gallery.notebook | e }}</code></span>
{%- if resources.gallery.failed %}<span class="gallery-status">execution failed: the page stops at the failing cell</span>{% endif %}
{%- if resources.gallery.note %}<span class="gallery-note">{{ resources.gallery.note | e }}</span>{% endif %}
</nav>
{%- endblock body_header -%}
"""

GALLERY_CSS = """\
/* fedlib gallery: the banner on each page and the index page */
a.anchor-link { display: none; }
.jp-Collapser { display: none; }
.jp-InputArea, .jp-InputArea-editor { overflow: hidden; }
.jp-OutputArea-output pre { line-height: inherit; font-family: inherit; }
.jp-RenderedText pre { color: var(--jp-content-font-color1); font-size: var(--jp-code-font-size); }
.gallery-banner { display: flex; flex-wrap: wrap; gap: 0.4em 1.2em; align-items: baseline; margin: 0 0 1em 0;
  padding: 0.6em 1em; border-bottom: 1px solid #d0d7de; background: #f6f8fa;
  font: 14px/1.4 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; }
.gallery-banner.gallery-failed { background: #fff1f0; }
.gallery-status { color: #b42318; font-weight: 600; }
.gallery-note { color: #57606a; }
.gallery-profile { font-weight: 600; padding: 0 0.5em; border-radius: 0.8em; background: #ddf4ff; color: #0550ae; }
.gallery-profile-quick { background: #dafbe1; color: #116329; }
.gallery-profile-paper { background: #fbefff; color: #6e40c9; }
.gallery-profile-smoke { background: #eaeef2; color: #424a53; }
body.gallery-index { max-width: 72em; margin: 2em auto; padding: 0 1em;
  font: 15px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1f2328; }
.gallery-index table { border-collapse: collapse; width: 100%; }
.gallery-index th, .gallery-index td { text-align: left; vertical-align: top; padding: 0.4em 0.7em;
  border-bottom: 1px solid #d0d7de; }
.gallery-index td.gallery-small { color: #57606a; font-size: 0.9em; }
"""


# ---------------------------------------------------------------------------------- notebooks
def notebook_title(nb: dict) -> str:
    """The notebook's first markdown heading, without its '#' (papermill's error banner skipped)."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "markdown":
            continue
        for line in _source(cell).splitlines():
            if line.startswith("#"):
                return plain_math(line.lstrip("#").strip())  # the index and the browser tab typeset no TeX
    return "(no title)"


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return source if isinstance(source, str) else "".join(source)


def execution_info(nb: dict) -> dict:
    """Profile, end of execution (UTC), seconds and failure flag from papermill's metadata."""
    papermill = nb.get("metadata", {}).get("papermill", {})
    parameters = papermill.get("parameters") or {}
    profile = parameters.get("profile") or _injected_profile(nb)
    executed = None
    if papermill.get("end_time"):
        moment = datetime.datetime.fromisoformat(papermill["end_time"]).astimezone(datetime.timezone.utc)
        executed = moment.replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
    failed = bool(papermill.get("exception")) or any(
        output.get("output_type") == "error" for cell in nb.get("cells", []) for output in cell.get("outputs", []))
    seconds = papermill.get("duration")
    return {"profile": profile, "executed": executed, "failed": failed,
            "seconds": None if seconds is None else round(float(seconds), 1), "parameters": parameters,
            "input_path": papermill.get("input_path")}


def _injected_profile(nb: dict) -> str | None:
    """``profile = "..."`` in papermill's injected-parameters cell (or the parameters cell)."""
    for tag in ("injected-parameters", "parameters"):
        for cell in nb.get("cells", []):
            if tag in cell.get("metadata", {}).get("tags", []):
                match = re.search(r"""^profile\s*=\s*["']([\w-]+)["']""", _source(cell), re.M)
                if match:
                    return match.group(1)
    return None


def _widget_text(model_id: str, state: dict) -> str | None:
    """The final text of a tqdm progress widget (an HBox of label, bar, label) from the saved state."""
    model = state.get(model_id)
    if not model:
        return None
    values = model.get("state", {})
    name = model.get("model_name", "")
    if name in ("FloatProgressModel", "IntProgressModel"):
        top = values.get("max") or 0
        done = min(max((values.get("value") or 0) / top, 0.0), 1.0) if top else 0.0
        return "|" + "\u2588" * round(10 * done) + " " * (10 - round(10 * done)) + "|"
    if name in ("HTMLModel", "LabelModel"):
        text = re.sub(r"<[^>]+>", "", values.get("value") or "")
        return html.unescape(text).replace("\xa0", " ")
    children = [ref.removeprefix("IPY_MODEL_") for ref in values.get("children", [])]
    parts = [_widget_text(child, state) for child in children]
    return "".join(part for part in parts if part) or None


def static_widgets(nb: dict) -> dict:
    """The notebook with widget outputs replaced by their final text (a static page has no widget
    manager, and loading one means a CDN) and the saved widget state dropped."""
    nb = copy.deepcopy(nb)
    state = nb.get("metadata", {}).pop("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in nb.get("cells", []):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW in data:
                view = data.pop(WIDGET_VIEW)
                text = _widget_text(view.get("model_id", ""), state) if isinstance(view, dict) else None
                if text:
                    data["text/plain"] = text.strip()
                elif not data:
                    data["text/plain"] = ""
    return nb


_MD_LINK = re.compile(r"(\]\()([^)\s]+)((?:\s+\"[^\"]*\")?\))")
_HTML_LINK = re.compile(r"""((?:href|src)\s*=\s*["'])([^"']+)(["'])""", re.I)


def rebase_url(url: str, source_dir: Path, page_dir: Path) -> str:
    """``url`` written relative to ``source_dir``, rewritten relative to ``page_dir`` (absolute
    URLs, fragments, data: URIs and site-absolute paths unchanged)."""
    if not url or url.startswith(("#", "/", "data:", "mailto:")) or re.match(r"^[A-Za-z][\w+.-]*:", url):
        return url
    path, rest = re.match(r"([^#?]*)(.*)", url, re.S).groups()  # rest: ?query#fragment
    target = os.path.normpath(os.path.join(source_dir, path))
    return Path(os.path.relpath(target, page_dir)).as_posix() + rest


def rebase_markdown_links(nb: dict, source_dir: Path, page_dir: Path) -> dict:
    """Markdown cells' relative links (markdown and HTML syntax) rewritten for a page in ``page_dir``."""
    nb = copy.deepcopy(nb)

    def fix(match: re.Match) -> str:
        return match.group(1) + rebase_url(match.group(2), source_dir, page_dir) + match.group(3)

    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            cell["source"] = _HTML_LINK.sub(fix, _MD_LINK.sub(fix, _source(cell)))
    return nb


def _source_dir(info: dict) -> Path:
    """Where the notebook's relative links point from: its original folder, else notebooks/."""
    given = info.get("input_path")
    if given and Path(given).parent.is_dir():
        return Path(given).parent.resolve()
    return NOTEBOOKS_DIR


def _repo_relative(path: str | None, stem: str) -> str:
    if path:
        try:
            return Path(path).resolve().relative_to(REPO_ROOT).as_posix()
        except ValueError:
            pass
    return f"notebooks/{stem}.ipynb"


# --------------------------------------------------------------------------------------- pages
def _exporter():
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    return HTMLExporter(template_name="lab", extra_loaders=[DictLoader({"gallery.html.j2": PAGE_TEMPLATE})],
                        template_file="gallery.html.j2")


def build_page(source: Path, gallery: Path, note: str = "", profile: str | None = None,
               allow_failed: bool = False, exporter=None) -> dict:
    """Convert one executed notebook into ``<gallery>/<profile>/<stem>.html``; returns its index entry."""
    import nbformat

    source = Path(source)
    raw = json.loads(source.read_text(encoding="utf-8"))
    info = execution_info(raw)
    if info["failed"] and not allow_failed:
        raise GalleryError(f"{source}: its execution failed; fix it, or pass --allow-failed to show the failure")
    profile = profile or info["profile"]
    if not profile:
        raise GalleryError(f"{source}: no profile in papermill's metadata; pass --profile NAME")
    if not re.fullmatch(r"[\w-]+", profile):
        raise GalleryError(f"profile {profile!r}: use letters, digits, '_' or '-'")
    stem = source.stem
    page = Path(profile) / f"{stem}.html"
    page_dir = gallery / profile
    title = notebook_title(raw)
    nb_dict = rebase_markdown_links(static_widgets(raw), _source_dir(info), page_dir.resolve())
    nb_dict.setdefault("metadata", {})["title"] = f"{title} ({profile} profile)"
    nb = nbformat.reads(json.dumps(nb_dict), as_version=4)  # joins the multi-line sources
    up = "../" * len(page.parent.parts)
    executed = info["executed"].replace("T", " ").replace("Z", " UTC") if info["executed"] else "(time not recorded)"
    notebook = _repo_relative(info["input_path"], stem)
    resources = {"metadata": {"name": stem}, "mathjax_url": f"{up}mathjax/{MATHJAX_FILE}",
                 "gallery": {"profile": profile, "executed": executed, "note": note, "failed": info["failed"],
                             "notebook": notebook, "index_url": f"{up}index.html", "static_url": f"{up}static"}}
    exporter = exporter or _exporter()
    exporter.mathjax_url = resources["mathjax_url"]
    body, _ = exporter.from_notebook_node(nb, resources=resources)
    page_dir.mkdir(parents=True, exist_ok=True)
    (gallery / page).write_text(body, encoding="utf-8")
    return {"page": page.as_posix(), "stem": stem, "title": title, "profile": profile, "notebook": notebook,
            "executed": info["executed"], "seconds": info["seconds"], "status": "failed" if info["failed"] else "ok",
            "note": note, "parameters": {k: v for k, v in info["parameters"].items() if k != "profile"}}


class GalleryError(Exception):
    """A notebook or option the gallery cannot use (one line for the user)."""


# ------------------------------------------------------------------------------------ assets
def write_static(gallery: Path, exporter=None) -> None:
    """``<gallery>/static/``: JupyterLab's notebook stylesheet (as nbconvert ships it) and the gallery's own."""
    exporter = exporter or _exporter()
    static = gallery / "static"
    static.mkdir(parents=True, exist_ok=True)
    parts = []
    for name in ("index.css", "theme-light.css"):
        found = next((Path(base) / "static" / name for base in exporter.template_paths
                      if (Path(base) / "static" / name).is_file()), None)
        if found is None:
            raise GalleryError(f"nbconvert's lab template has no static/{name}; is nbconvert >= 7 installed?")
        parts.append(f"/* {name}: nbconvert's JupyterLab template */\n" + found.read_text(encoding="utf-8"))
    _write_if_changed(static / "notebook.css", "\n".join(parts))
    _write_if_changed(static / "gallery.css", GALLERY_CSS)


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def vendor_mathjax(gallery: Path, version: str = MATHJAX_VERSION) -> Path:
    """Copy MathJax's single combined ``es5/tex-svg.js`` and its LICENSE from the npm package
    ``mathjax@version`` (``npm pack``: no install, no scripts) into ``<gallery>/mathjax/``."""
    npm = shutil.which("npm")
    if npm is None:
        raise GalleryError("npm not found: install Node.js, or copy es5/tex-svg.js and LICENSE of the npm package "
                           f"mathjax@{version} into {gallery / 'mathjax'} by hand")
    target = gallery / "mathjax"
    with tempfile.TemporaryDirectory(prefix="fedlib-mathjax-") as scratch:
        done = subprocess.run([npm, "pack", f"mathjax@{version}", "--silent", "--ignore-scripts"], cwd=scratch,
                              capture_output=True, text=True)
        tarballs = sorted(Path(scratch).glob("mathjax-*.tgz"))
        if done.returncode != 0 or not tarballs:
            raise GalleryError(f"npm pack mathjax@{version} failed: {(done.stderr or done.stdout).strip()[:300]}")
        wanted = {f"package/es5/{MATHJAX_FILE}": MATHJAX_FILE, "package/LICENSE": "LICENSE",
                  "package/package.json": "package.json"}
        with tarfile.open(tarballs[0]) as archive:
            files = {}
            for member, name in wanted.items():
                handle = archive.extractfile(member)
                if handle is None:
                    raise GalleryError(f"{tarballs[0].name} has no {member}")
                files[name] = handle.read()
    meta = json.loads(files.pop("package.json"))
    target.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (target / name).write_bytes(data)
    (target / "README.md").write_text(
        f"# MathJax {meta['version']}, vendored\n\n"
        f"`{MATHJAX_FILE}` is `es5/{MATHJAX_FILE}` of the npm package `mathjax@{meta['version']}` (MathJax's "
        "combined TeX-input, SVG-output component), unchanged, so the gallery typesets math without a CDN. "
        f"License: {meta.get('license', 'see LICENSE')} (the [LICENSE](LICENSE) beside it, copied from the package); "
        "redistribution is allowed with the license kept. Refresh with "
        f"`.venv/bin/python tools/build_gallery.py --vendor-mathjax {meta['version']}`.\n", encoding="utf-8")
    return target / MATHJAX_FILE


# ------------------------------------------------------------------------------------- index
def load_manifest(gallery: Path) -> list[dict]:
    path = gallery / "index.json"
    return json.loads(path.read_text(encoding="utf-8"))["pages"] if path.exists() else []


def course_steps(course: Path = COURSE) -> dict[str, int]:
    """Notebook stem -> its step in the course (notebooks/README.md's tables)."""
    text = course.read_text(encoding="utf-8") if course.exists() else ""
    return {stem: int(step) for step, stem in COURSE_ROW.findall(text)}


def _sort_key(entry: dict, steps: dict[str, int] | None = None) -> tuple:
    order = PROFILE_ORDER.index(entry["profile"]) if entry["profile"] in PROFILE_ORDER else len(PROFILE_ORDER)
    return order, entry["profile"], (steps or {}).get(entry["stem"], len(steps or {}) + 1), entry["stem"]


def write_index(gallery: Path, entries: list[dict]) -> None:
    """``index.json`` (the pages, sorted) and ``index.html`` (a table linking each page)."""
    steps = course_steps()
    entries = sorted((e for e in entries if (gallery / e["page"]).is_file()), key=lambda e: _sort_key(e, steps))
    _write_if_changed(gallery / "index.json", json.dumps({"pages": entries}, indent=1, sort_keys=True) + "\n")
    rows = []
    for e in entries:
        step = steps.get(e["stem"])
        executed = (e["executed"] or "").replace("T", " ").replace("Z", " UTC") or "-"
        seconds = f"{e['seconds']:.0f} s" if e.get("seconds") is not None else "-"
        status = "" if e["status"] == "ok" else '<br><span class="gallery-status">execution failed</span>'
        rows.append(
            f'<tr><td>{step if step is not None else ""}</td>'
            f'<td><a href="{html.escape(e["page"])}">{html.escape(e["title"])}</a>{status}</td>'
            f'<td><a href="../../{html.escape(e["notebook"])}"><code>{html.escape(e["stem"])}</code></a></td>'
            f'<td><span class="gallery-profile gallery-profile-{html.escape(e["profile"])}">'
            f'{html.escape(e["profile"])}</span></td>'
            f"<td>{html.escape(executed)}</td><td>{seconds}</td>"
            f'<td class="gallery-small">{html.escape(e.get("note") or "")}</td></tr>')
    profiles = ", ".join(f"{p}: {sum(e['profile'] == p for e in entries)}" for p in
                         dict.fromkeys(e["profile"] for e in entries)) or "none yet"
    if not any(e["profile"] == "quick" for e in entries):
        profiles += " (no quick-profile page yet)"
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>fedlib notebook gallery</title>
<link rel="stylesheet" href="static/gallery.css">
</head>
<body class="gallery-index">
<h1>fedlib notebook gallery</h1>
<p>The notebooks of <a href="../../notebooks/">notebooks/</a> as executed by <code>reproduce.sh</code>, with their
outputs, converted to static pages by nbconvert. Each page names the profile that produced it (lesson: the
course's settings, runs committed; smoke: digits or synthetic data, seconds; quick: real data at reduced scale,
CPU; paper: the papers' settings) and when it ran; <b>step</b> is the notebook's place in
<a href="../../notebooks/README.md">the course</a>.
Math is typeset by a vendored MathJax (<a href="mathjax/README.md">mathjax/</a>, Apache-2.0); nothing is fetched
from the network. Pages by profile: {html.escape(profiles)}.</p>
<p>Rebuild: <code>./reproduce.sh --profile quick</code>, then
<code>.venv/bin/python tools/build_gallery.py output/quick</code>; check in a browser with
<code>.venv/bin/python tools/check_gallery.py</code>.</p>
<table>
<thead><tr><th>step</th><th>notebook</th><th>source</th><th>profile</th><th>executed</th><th>took</th><th>note</th></tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody>
</table>
</body>
</html>
"""
    _write_if_changed(gallery / "index.html", page)


# -------------------------------------------------------------------------------------- build
def executed_notebooks(sources: list[str | os.PathLike]) -> list[Path]:
    """The ``.ipynb`` files given, a folder standing for the notebooks directly in it."""
    found = []
    for source in map(Path, sources):
        if source.is_dir():
            found += sorted(p for p in source.glob("*.ipynb") if not p.name.startswith("."))
        elif source.suffix == ".ipynb" and source.is_file():
            found.append(source)
        else:
            raise GalleryError(f"{source}: not an .ipynb file or a folder of them")
    return found


def build(sources: list[str | os.PathLike], gallery: str | os.PathLike = DEFAULT_GALLERY, note: str = "",
          profile: str | None = None, allow_failed: bool = False, remove: list[str] = (),
          vendor: bool = True) -> tuple[list[dict], list[Path]]:
    """Add (or replace) the pages of ``sources``, drop ``remove``, and rewrite the index; returns
    the index entries and the notebooks skipped because their execution failed (unless
    ``allow_failed``). MathJax is vendored first when missing and ``vendor`` (needs npm)."""
    gallery = Path(gallery)
    gallery.mkdir(parents=True, exist_ok=True)
    notebooks = executed_notebooks(list(sources))
    if not (gallery / "mathjax" / MATHJAX_FILE).is_file():
        if not vendor:
            raise GalleryError(f"no {gallery / 'mathjax' / MATHJAX_FILE}; run tools/build_gallery.py --vendor-mathjax")
        vendor_mathjax(gallery)
    exporter = _exporter()
    write_static(gallery, exporter)
    entries = {e["page"]: e for e in load_manifest(gallery)}
    for name in remove:
        doomed = [page for page, e in entries.items() if name in (page, e["stem"])]
        if not doomed:
            raise GalleryError(f"--remove {name}: no such page or notebook stem in {gallery / 'index.json'}")
        for page in doomed:
            (gallery / page).unlink(missing_ok=True)
            del entries[page]
    skipped = []
    for source in notebooks:
        if not allow_failed and execution_info(json.loads(source.read_text(encoding="utf-8")))["failed"]:
            print(f"skipped {source}: its execution failed (--allow-failed adds it, marked as failed)",
                  file=sys.stderr, flush=True)
            skipped.append(source)
            continue
        entry = build_page(source, gallery, note=note, profile=profile, allow_failed=allow_failed, exporter=exporter)
        entries[entry["page"]] = entry
        print(f"{entry['page']}  <- {source}  ({entry['title']})", flush=True)
    write_index(gallery, list(entries.values()))
    return load_manifest(gallery), skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/build_gallery.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="*", help="executed notebooks (.ipynb) or folders of them "
                                                   "(e.g. output/quick); none: rewrite the index only")
    parser.add_argument("--gallery", default=str(DEFAULT_GALLERY), help="gallery folder; default figures/gallery")
    parser.add_argument("--note", default="", help="a line shown on these pages and in the index (e.g. how they ran)")
    parser.add_argument("--profile", help="profile to show when papermill's metadata has none")
    parser.add_argument("--allow-failed", action="store_true", help="add notebooks whose execution failed")
    parser.add_argument("--remove", action="append", default=[], metavar="PAGE_OR_STEM",
                        help="drop a page (paper/x.html) or every page of a notebook stem; repeatable")
    parser.add_argument("--vendor-mathjax", nargs="?", const=MATHJAX_VERSION, metavar="VERSION",
                        help=f"fetch MathJax (default {MATHJAX_VERSION}) with npm into <gallery>/mathjax/ and stop")
    args = parser.parse_args(argv)
    try:
        if args.vendor_mathjax:
            path = vendor_mathjax(Path(args.gallery), args.vendor_mathjax)
            print(f"{path} ({path.stat().st_size / 1e6:.2f} MB)")
            return 0
        entries, skipped = build(args.sources, args.gallery, note=args.note, profile=args.profile,
                                 allow_failed=args.allow_failed, remove=args.remove)
    except GalleryError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{len(entries)} pages listed in {Path(args.gallery) / 'index.html'}"
          + (f"; {len(skipped)} failed notebook(s) skipped" if skipped else ""))
    return 1 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
