"""README.md stays a few screens long and sends readers to the pages in docs/; every link between
them resolves, and the results page keeps, for each claim not reproduced, what was ruled out. Each
paper has a page in docs/papers/ that names every notebook of the paper."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
PAPER_PAGES = sorted((ROOT / "docs" / "papers").glob("*.md"))
# One page per paper, named by the prefix of its notebooks (FedED's page is FedVLS's, FedLMD-Tf's FedLMD's).
PAPERS = ("fedvls", "pkd", "fedlmd", "fedcsd")
NOT_ONE_PAPERS = {"getting_started", "cross_paper_table"}  # notebooks that belong to no single paper
PAPER_SECTIONS = ("What fedlib implements", "Settings", "Tables and figures", "What reproduces")
# Pages the README links that other branches write (issues 30 and 34): checked once they exist.
PENDING = {"docs/gpu.md", "docs/inputs.md"}
LINK = re.compile(r"\]\(([^)\s]+)\)")


def links(path: Path) -> list[str]:
    """The relative link targets of a Markdown file, anchors and web addresses left out."""
    targets = [m.group(1).split("#")[0] for m in LINK.finditer(path.read_text(encoding="utf-8"))]
    return [t for t in targets if t and not t.startswith(("http://", "https://", "mailto:"))]


def test_the_readme_fits_on_a_few_screens():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


def test_every_docs_page_and_the_course_are_linked_from_the_readme():
    linked = {str((ROOT / t).resolve().relative_to(ROOT)) for t in links(README)}
    missing = [str(p.relative_to(ROOT)) for p in PAGES if str(p.relative_to(ROOT)) not in linked]
    assert not missing, f"README.md links none of {missing}"
    assert "notebooks/README.md" in linked and "docs/results.md" in linked


@pytest.mark.parametrize("page", [README, ROOT / "notebooks" / "README.md", *PAGES, *PAPER_PAGES],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path):
    broken = []
    for target in links(page):
        path = (page.parent / target).resolve()
        if not path.exists() and str(path.relative_to(ROOT)) not in PENDING:
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)} links missing files: {broken}"


def test_each_claim_not_reproduced_says_what_was_ruled_out_and_what_remains():
    text = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    sections = re.split(r"\n### ", text)
    not_reproduced = [s for s in sections if "(not reproduced)" in s.splitlines()[0]]
    assert len(not_reproduced) >= 2  # FedVLS's MNIST lead, PKD's Fashion-MNIST gain
    for section in not_reproduced:
        assert "**Ruled out:**" in section and "**What remains" in section, section.splitlines()[0]


def test_the_results_page_shows_the_full_scale_curves_as_pictures():
    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", (ROOT / "docs" / "results.md").read_text(encoding="utf-8"))
    assert len(pictures) >= 3 and all(p.startswith("../figures/paper/") for p in pictures)
    assert all((ROOT / "docs" / p).resolve().is_file() for p in pictures)


FACTS = ROOT / "docs" / "facts.md"
# The folders that are results stores (runs as they were stored), not the project's own text.
STORES = ("reference_results/", "parked/", "results/")
TEXT_SUFFIXES = {".py", ".md", ".ipynb", ".csv", ".yaml", ".yml", ".sh", ".txt", ".toml", ".html", ".cfg"}


def project_files() -> list[Path]:
    """The repository's text files outside the results stores (git's list where git answers)."""
    try:
        listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                                capture_output=True, text=True, timeout=60)
        names = listed.stdout.splitlines() if listed.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        names = None
    if names is None:
        names = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
                 if p.is_file() and not {".git", ".venv", "output"} & set(p.relative_to(ROOT).parts)]
    return [ROOT / n for n in names if not n.startswith(STORES) and Path(n).suffix in TEXT_SUFFIXES
            and (ROOT / n).is_file()]


def heading_anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as '-'."""
    headings = re.findall(r"^#{1,6} (.+)$", path.read_text(encoding="utf-8"), flags=re.M)
    anchors = [re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings]
    assert len(set(anchors)) == len(anchors), f"{path.name}: two headings share an anchor"
    return set(anchors)


def test_no_file_cites_the_reproduction_notes_that_the_repository_lacks():
    """The facts the project relies on are docs/facts.md; the notes they came from are not in
    the repository, so nothing may send a reader there."""
    missing = "REPRODUCTION" + "_NOTES"  # spelled in two parts so this file does not cite it
    citing = [str(p.relative_to(ROOT)) for p in project_files()
              if missing in p.read_text(encoding="utf-8", errors="replace")]
    assert not citing, f"{citing} cite {missing}; link the section of docs/facts.md instead"


def test_links_into_the_facts_page_name_its_sections():
    anchors = heading_anchors(FACTS)
    broken = [f"{p.relative_to(ROOT)}: #{a}" for p in project_files()
              for a in re.findall(r"facts\.md#([\w-]+)", p.read_text(encoding="utf-8", errors="replace"))
              if a not in anchors]
    broken += [f"docs/facts.md: #{a}" for a in re.findall(r"\]\(#([\w-]+)\)", FACTS.read_text(encoding="utf-8"))
               if a not in anchors]
    assert not broken, f"links to sections docs/facts.md does not have: {broken}"


def test_every_paper_has_its_page_linked_from_the_readme():
    assert sorted(p.stem for p in PAPER_PAGES) == sorted(PAPERS)
    notebooks = {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")} - NOT_ONE_PAPERS
    orphans = sorted(n for n in notebooks if n.split("_")[0] not in PAPERS)
    assert not orphans, f"notebooks of no paper page: {orphans}; add the paper's page to docs/papers/"
    linked = {(ROOT / t).resolve() for t in links(README)}
    assert not [p.name for p in PAPER_PAGES if p.resolve() not in linked], "README.md links every paper page"


@pytest.mark.parametrize("paper", PAPERS)
def test_each_paper_page_links_every_notebook_of_its_paper_and_has_its_sections(paper: str):
    page = ROOT / "docs" / "papers" / f"{paper}.md"
    linked = {(page.parent / t).resolve() for t in links(page)}
    notebooks = sorted((ROOT / "notebooks").glob(f"{paper}_*.ipynb"))
    missing = [n.stem for n in notebooks if n.resolve() not in linked]
    assert notebooks and not missing, f"docs/papers/{paper}.md does not link {missing}"
    headings = re.findall(r"^## (.+)$", page.read_text(encoding="utf-8"), flags=re.M)
    assert [h for h in headings if h in PAPER_SECTIONS] == list(PAPER_SECTIONS), headings


def test_links_from_the_paper_pages_name_sections_that_exist():
    broken = []
    for page in PAPER_PAGES:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            path, _, anchor = target.partition("#")
            if not anchor or target.startswith(("http://", "https://")):
                continue
            file = (page.parent / path).resolve() if path else page
            if file.suffix == ".md" and anchor not in heading_anchors(file):
                broken.append(f"{page.name}: {target}")
    assert not broken, f"links to sections that do not exist: {broken}"
