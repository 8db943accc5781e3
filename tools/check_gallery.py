"""Open the notebook gallery in headless Chromium: it renders, and the math renders.

    python tools/check_gallery.py                         # index.html and the first page with math
    python tools/check_gallery.py --all                   # index.html and every page
    python tools/check_gallery.py --page smoke/getting_started.html --out output/gallery_check

For ``index.html`` and one notebook page (or each given, or all), Chromium (``chromium``, ``chromium-browser``,
``google-chrome`` or ``$CHROMIUM``) takes a screenshot and dumps the DOM after scripts ran, with
every host name resolving nowhere, so anything fetched from a CDN would fail. Checks:

* the index links every page of ``index.json``, and each link's file exists;
* each screenshot is not blank;
* the page holds MathJax output (``mjx-container`` elements), no MathJax error, and no TeX left
  as raw ``$...$`` text outside code (a math span of the notebook's markdown that MathJax
  missed would stay as such).

Screenshots and DOM dumps go to ``output/gallery_check/`` (git ignores output/). Exit status:
0 all checks passed, 1 a check failed, 2 no Chromium or no gallery.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_GALLERY = REPO_ROOT / "figures" / "gallery"
DEFAULT_OUT = REPO_ROOT / "output" / "gallery_check"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """The Chromium (or Chrome) executable: ``$CHROMIUM``, else the first of BROWSERS on PATH."""
    given = os.environ.get("CHROMIUM")
    if given:
        return shutil.which(given) or (given if Path(given).is_file() else None)
    return next((found for found in map(shutil.which, BROWSERS) if found), None)


def _chromium(browser: str, url: str, *args: str, budget_ms: int, timeout: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="fedlib-chromium-") as profile:
        command = [browser, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars", "--no-first-run",
                   "--disable-extensions", "--disable-background-networking", f"--user-data-dir={profile}",
                   "--host-resolver-rules=MAP * ~NOTFOUND",  # offline: a CDN request cannot succeed
                   f"--virtual-time-budget={budget_ms}", *args, url]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def screenshot(browser: str, page: Path, png: Path, size: str = "1280,2400", budget_ms: int = 20000,
               timeout: float = 180) -> None:
    """Save a screenshot of ``page`` (a file) as ``png``, scripts run for ``budget_ms`` virtual ms."""
    png.parent.mkdir(parents=True, exist_ok=True)
    png.unlink(missing_ok=True)
    done = _chromium(browser, page.resolve().as_uri(), f"--screenshot={png.resolve()}", f"--window-size={size}",
                     budget_ms=budget_ms, timeout=timeout)
    if not png.is_file():
        raise CheckError(f"Chromium wrote no screenshot of {page} (exit {done.returncode}): "
                         f"{done.stderr.strip()[-400:]}")


def dump_dom(browser: str, page: Path, budget_ms: int = 20000, timeout: float = 180) -> str:
    """The DOM of ``page`` serialised after its scripts ran."""
    done = _chromium(browser, page.resolve().as_uri(), "--dump-dom", budget_ms=budget_ms, timeout=timeout)
    if done.returncode != 0 or "<html" not in done.stdout:
        raise CheckError(f"Chromium could not dump {page} (exit {done.returncode}): {done.stderr.strip()[-400:]}")
    return done.stdout


class CheckError(Exception):
    """Chromium did not deliver what a check needs."""


def inked_fraction(png: Path) -> float:
    """Share of the screenshot's pixels that are not (near) white."""
    from PIL import Image

    with Image.open(png) as image:
        grey = image.convert("L")
        histogram = grey.histogram()
    return 1.0 - sum(histogram[245:]) / max(sum(histogram), 1)


_STRIPPED = re.compile(r"<(script|style|pre|code|mjx-container|textarea)\b.*?</\1>", re.S | re.I)
_RAW_TEX = re.compile(r"\$\$?[^$<>\n]*\\[A-Za-z]+[^$<>\n]*\$\$?|\$[^$\s<>][^$<>\n]*[\^_][^$<>\n]*\$")


def raw_tex(dom: str) -> list[str]:
    """TeX left as text: ``$...$`` holding a backslash macro, ``^`` or ``_``, outside code and MathJax output."""
    text = html.unescape(re.sub(r"<[^>]+>", " ", _STRIPPED.sub(" ", dom)))
    return _RAW_TEX.findall(text)


def check_index(dom: str, gallery: Path) -> list[str]:
    """Problems of the rendered index: a page of index.json it does not link, a link to no file."""
    problems = []
    pages = [entry["page"] for entry in json.loads((gallery / "index.json").read_text())["pages"]]
    links = set(re.findall(r'<a [^>]*href="([^"#]+)"', dom))
    for page in pages:
        if page not in links:
            problems.append(f"index.html does not link {page}")
        elif not (gallery / page).is_file():
            problems.append(f"index.html links {page}, which does not exist")
    if not pages:
        problems.append("index.json lists no page")
    return problems


def check_math(dom: str) -> tuple[int, list[str]]:
    """(MathJax output elements, problems) of a rendered notebook page."""
    problems = []
    containers = len(re.findall(r"<mjx-container\b", dom))
    if containers == 0:
        problems.append("no mjx-container: MathJax did not typeset anything (did its script load?)")
    if re.search(r"data-mjx-error|<mjx-merror\b|<merror\b", dom):
        problems.append("MathJax reported a TeX error (merror in the page)")
    left = raw_tex(dom)
    if left:
        problems.append(f"{len(left)} math spans left as raw TeX, e.g. {left[0][:80]!r}")
    return containers, problems


def first_page_with_math(gallery: Path) -> str | None:
    """The first page of index.json whose HTML holds a ``$...$`` span with a TeX macro."""
    for entry in json.loads((gallery / "index.json").read_text())["pages"]:
        text = (gallery / entry["page"]).read_text(encoding="utf-8", errors="replace")
        if re.search(r"\$[^$\n]*\\[A-Za-z]+[^$\n]*\$", _STRIPPED.sub(" ", text)):
            return entry["page"]
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/check_gallery.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--gallery", default=str(DEFAULT_GALLERY), help="gallery folder; default figures/gallery")
    parser.add_argument("--page", action="append", help="page to check, relative to the gallery; repeatable "
                                                        "(default: the first page with math)")
    parser.add_argument("--all", action="store_true", help="check every page index.json lists")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="screenshots and DOM dumps; default "
                                                                "output/gallery_check")
    parser.add_argument("--window-size", default="1280,2400", help="notebook page screenshot size WIDTH,HEIGHT; "
                                                                   "default 1280,2400")
    parser.add_argument("--index-size", default="1280,800", help="index screenshot size; default 1280,800")
    parser.add_argument("--budget-ms", type=int, default=20000, help="virtual time for scripts (MathJax); "
                                                                     "default 20000")
    args = parser.parse_args(argv)
    gallery, out = Path(args.gallery), Path(args.out)
    browser = find_chromium()
    if browser is None:
        print("error: no Chromium found (apt-get install chromium, or set $CHROMIUM)", file=sys.stderr)
        return 2
    if not (gallery / "index.json").is_file():
        print(f"error: no gallery in {gallery} (build it: tools/build_gallery.py)", file=sys.stderr)
        return 2
    if args.all:
        pages = [entry["page"] for entry in json.loads((gallery / "index.json").read_text())["pages"]]
    else:
        pages = args.page or [first_page_with_math(gallery)]
    if None in pages:
        print(f"error: no page of {gallery} holds math; pass --page", file=sys.stderr)
        return 2
    targets = [("index", gallery / "index.html")]
    targets += [(Path(page).with_suffix("").as_posix().replace("/", "__"), gallery / page) for page in pages]
    problems = []
    try:
        for name, path in targets:
            png, dom_file = out / f"{name}.png", out / f"{name}.dom.html"
            screenshot(browser, path, png, args.index_size if name == "index" else args.window_size, args.budget_ms)
            dom = dump_dom(browser, path, args.budget_ms)
            dom_file.write_text(dom, encoding="utf-8")
            inked = inked_fraction(png)
            if inked < 0.005:
                problems.append(f"{png}: blank ({inked:.2%} of the pixels not white)")
            if name == "index":
                problems += check_index(dom, gallery)
                print(f"{path}: screenshot {png} ({inked:.1%} inked)")
            else:
                containers, found = check_math(dom)
                problems += found
                print(f"{path}: screenshot {png} ({inked:.1%} inked), {containers} MathJax formulas")
    except (CheckError, subprocess.TimeoutExpired) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for problem in problems:
        print(f"FAIL: {problem}")
    print("gallery check: " + ("ok" if not problems else f"{len(problems)} problem(s)"))
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
