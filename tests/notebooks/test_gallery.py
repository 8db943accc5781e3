"""The notebook gallery (tools/build_gallery.py): local MathJax, pages marked with their profile, an
index listing them; and the committed figures/gallery/ fetches nothing from the network. The
browser check (tools/check_gallery.py) runs only where Chromium is installed."""

import json
import os
import re
from pathlib import Path

import pytest

from tools import build_gallery, check_gallery

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "figures" / "gallery"
WIDGET_STATE = {"state": {
    "box": {"model_name": "HBoxModel", "state": {"children": ["IPY_MODEL_label", "IPY_MODEL_bar", "IPY_MODEL_tail"]}},
    "label": {"model_name": "HTMLModel", "state": {"value": "runs: 100%"}},
    "bar": {"model_name": "FloatProgressModel", "state": {"value": 4, "max": 4}},
    "tail": {"model_name": "HTMLModel", "state": {"value": "&nbsp;4/4 [00:01&lt;00:00]"}},
}}


def executed_notebook(folder: Path, stem: str = "demo", profile: str = "quick", failed: bool = False) -> Path:
    """A small notebook as papermill leaves it: metadata, an injected profile, outputs, a widget."""
    source_dir = folder / "notebooks"
    source_dir.mkdir(parents=True, exist_ok=True)
    outputs = [{"output_type": "stream", "name": "stdout", "text": ["accuracy 0.91\n"]},
               {"output_type": "display_data", "metadata": {},
                "data": {"application/vnd.jupyter.widget-view+json": {"model_id": "box", "version_major": 2,
                                                                     "version_minor": 0},
                         "text/plain": ["runs:   0%|          | 0/4"]}}]
    if failed:
        outputs.append({"output_type": "error", "ename": "ValueError", "evalue": "boom", "traceback": ["boom"]})
    nb = {
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "fedlib", "display_name": "Python (fedlib)", "language": "python"},
                     "widgets": {"application/vnd.jupyter.widget-state+json": WIDGET_STATE},
                     "papermill": {"parameters": {"profile": profile}, "end_time": "2026-01-02T03:04:05.6+00:00",
                                   "duration": 12.34, "exception": failed or None,
                                   "input_path": str(source_dir / f"{stem}.ipynb")}},
        "cells": [
            {"cell_type": "markdown", "id": "a", "metadata": {},
             "source": ["# Demo: a proximal term\n", "\n", "FedProx adds $\\frac{\\mu}{2}\\lVert w - w_g \\rVert^2$; ",
                        "figure [x.png](../figures/x.png), [web](https://example.org/page)."]},
            {"cell_type": "code", "id": "b", "metadata": {"tags": ["injected-parameters"]}, "execution_count": 1,
             "source": f'profile = "{profile}"', "outputs": []},
            {"cell_type": "code", "id": "c", "metadata": {}, "execution_count": 2, "source": "print(0.91)",
             "outputs": outputs},
        ],
    }
    path = folder / "out" / f"{stem}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb))
    return path


@pytest.fixture
def gallery(tmp_path):
    """An empty gallery with a stand-in for the vendored MathJax (no npm in the tests)."""
    folder = tmp_path / "gallery"
    (folder / "mathjax").mkdir(parents=True)
    (folder / "mathjax" / build_gallery.MATHJAX_FILE).write_text("/* MathJax stand-in */\n")
    return folder


def external_assets(page: str) -> list[str]:
    """Scripts and stylesheets of ``page`` that a browser would fetch from another host."""
    urls = re.findall(r"<script\b[^>]*\bsrc=\"([^\"]+)\"", page) + re.findall(r"<link\b[^>]*\bhref=\"([^\"]+)\"", page)
    return [url for url in urls if re.match(r"^(https?:)?//", url)]


def test_page_uses_the_local_mathjax_and_names_its_profile(tmp_path, gallery):
    source = executed_notebook(tmp_path)
    entries, skipped = build_gallery.build([source.parent], gallery, note="a test build", vendor=False)
    assert skipped == []
    page = (gallery / "quick" / "demo.html").read_text()
    scripts = re.findall(r"<script\b[^>]*\bsrc=\"([^\"]+)\"", page)
    assert scripts == ["../mathjax/tex-svg.js"]  # relative, local, and the only script loaded
    assert (gallery / "quick" / scripts[0]).resolve() == (gallery / "mathjax" / "tex-svg.js").resolve()
    assert external_assets(page) == []
    assert "http" not in "".join(scripts)
    assert "inlineMath: [['$', '$']" in page  # MathJax 3 reads $...$ as the notebooks write it
    assert r"\frac{\mu}{2}" in page  # the TeX is left for MathJax, not mangled by the markdown renderer
    assert "profile: quick" in page and "2026-01-02 03:04:05 UTC" in page and "a test build" in page
    assert 'href="../../figures/x.png"' in page  # ../figures/x.png from notebooks/, rebased to the page
    assert 'href="https://example.org/page"' in page
    assert "runs: 100%|" in page and "4/4" in page  # the progress widget as its final text
    assert "widget-view+json" not in page and "widget-state+json" not in page
    assert (gallery / "static" / "notebook.css").stat().st_size > 10_000
    assert [e["page"] for e in entries] == ["quick/demo.html"]
    assert entries[0] | {"parameters": None} == {
        "page": "quick/demo.html", "stem": "demo", "title": "Demo: a proximal term", "profile": "quick",
        "notebook": entries[0]["notebook"], "executed": "2026-01-02T03:04:05Z", "seconds": 12.3, "status": "ok",
        "note": "a test build", "parameters": None}


def test_index_lists_every_page_and_keeps_earlier_builds(tmp_path, gallery):
    build_gallery.build([executed_notebook(tmp_path, "demo", "quick")], gallery, vendor=False)
    build_gallery.build([executed_notebook(tmp_path, "other", "smoke")], gallery, vendor=False)
    index = (gallery / "index.html").read_text()
    assert 'href="quick/demo.html"' in index and 'href="smoke/other.html"' in index
    assert index.count("Demo: a proximal term") == 2
    assert external_assets(index) == []
    listed = [e["page"] for e in json.loads((gallery / "index.json").read_text())["pages"]]
    assert listed == ["quick/demo.html", "smoke/other.html"]  # quick first
    build_gallery.build([], gallery, remove=["other"], vendor=False)
    assert not (gallery / "smoke" / "other.html").exists()
    assert 'smoke/other.html' not in (gallery / "index.html").read_text()


def test_failed_execution_is_skipped_unless_asked(tmp_path, gallery):
    source = executed_notebook(tmp_path, failed=True)
    entries, skipped = build_gallery.build([source], gallery, vendor=False)
    assert (entries, skipped) == ([], [source]) and not (gallery / "quick" / "demo.html").exists()
    assert build_gallery.main([str(source), "--gallery", str(gallery)]) == 1
    build_gallery.build([source], gallery, allow_failed=True, vendor=False)
    assert "execution failed" in (gallery / "quick" / "demo.html").read_text()
    assert "execution failed" in (gallery / "index.html").read_text()


def test_missing_mathjax_is_an_error_without_vendoring(tmp_path):
    with pytest.raises(build_gallery.GalleryError, match="--vendor-mathjax"):
        build_gallery.build([executed_notebook(tmp_path)], tmp_path / "empty", vendor=False)


def test_raw_tex_finds_math_mathjax_missed():
    assert check_gallery.raw_tex("<p>a term $\\frac{a}{b}$ here</p>")
    assert check_gallery.raw_tex("<p>$x^2$</p>")
    assert not check_gallery.raw_tex("<p><mjx-container>$\\frac{a}{b}$</mjx-container> costs $5 and $6</p>")
    assert not check_gallery.raw_tex("<pre>echo $\\HOME$</pre><code>$a_b$</code>")


@pytest.mark.skipif(not (COMMITTED / "index.json").is_file(), reason="no committed gallery")
def test_committed_gallery_is_self_contained():
    pages = json.loads((COMMITTED / "index.json").read_text())["pages"]
    assert pages
    index = (COMMITTED / "index.html").read_text()
    assert (COMMITTED / "mathjax" / build_gallery.MATHJAX_FILE).is_file()
    assert (COMMITTED / "mathjax" / "LICENSE").is_file()
    for entry in pages:
        assert f'href="{entry["page"]}"' in index
        page = (COMMITTED / entry["page"]).read_text()
        assert external_assets(page) == [], entry["page"]
        mathjax = re.search(r"<script\b[^>]*\bsrc=\"([^\"]*mathjax[^\"]*)\"", page).group(1)
        assert not re.match(r"^(https?:)?//", mathjax)
        assert ((COMMITTED / entry["page"]).parent / mathjax).is_file(), mathjax
        assert f"profile: {entry['profile']}" in page


@pytest.mark.slow
@pytest.mark.skipif(check_gallery.find_chromium() is None, reason="no Chromium (apt-get install chromium)")
@pytest.mark.skipif(not (COMMITTED / "index.json").is_file(), reason="no committed gallery")
def test_committed_gallery_renders_in_chromium(tmp_path, capsys):
    """Screenshots go to $FEDLIB_GALLERY_SCREENSHOTS when set (CI keeps them as artefacts)."""
    out = Path(os.environ.get("FEDLIB_GALLERY_SCREENSHOTS") or tmp_path)
    assert check_gallery.main(["--out", str(out)]) == 0, capsys.readouterr().out
    assert (out / "index.png").is_file()


def test_titles_read_as_plain_text_where_no_tex_is_typeset():
    cell = {"cell_type": "markdown", "source": "# Figs. 3 and 4 — the weight $\\mu$, the temperature $\\tau$\n"}
    assert build_gallery.notebook_title({"cells": [cell]}) == "Figs. 3 and 4 — the weight μ, the temperature τ"


def test_the_index_numbers_the_lesson_pages_by_their_course_step():
    """The gallery's lesson pages in the course's order, each with its step (notebooks/README.md)."""
    index = (COMMITTED / "index.html").read_text(encoding="utf-8")
    steps = [int(s) for s in re.findall(r'<tr><td>(\d+)</td><td><a href="lesson/', index)]
    assert steps and steps == sorted(steps), "lesson pages out of course order"
    lessons = len(re.findall(r'<td><a href="lesson/', index))
    assert len(steps) == lessons, "a lesson page has no step"
