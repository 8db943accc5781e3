"""The notebook runner (fedlib.reproduce) on tiny notebooks written into a temporary folder."""

import json
from pathlib import Path

import pytest

from fedlib.errors import FedlibError
from fedlib.reproduce import find_notebooks, format_summary, main, run_notebooks

nbformat = pytest.importorskip("nbformat")

PARAMETERS_CELL = """\
profile: str = "smoke"  # which profile of profiles/<stem>.yaml
device: str = "auto"  # torch device
data_dir = None  # dataset folder; None: FEDLIB_DATA or the cache
results_dir: str = "../results"  # results cache
figures_dir: str = "../figures"  # where figures go
tables_dir: str = "../tables"  # where tables go
scale: int = 1  # a notebook-specific knob set by the profile
"""

WRITES_ITS_PARAMETERS = """\
from pathlib import Path
import fedlib  # the kernel must find this checkout's fedlib
assert Path.cwd().name == "notebooks", Path.cwd()
Path(tables_dir, "seen.txt").write_text(f"{profile} {device} {scale}")
"""


def write_notebook(folder: Path, stem: str, body: str) -> Path:
    """A two-cell notebook: the tagged parameters cell, then ``body``."""
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    parameters = nbformat.v4.new_code_cell(PARAMETERS_CELL, metadata={"tags": ["parameters"]})
    notebook.cells = [nbformat.v4.new_markdown_cell(f"# {stem}"), parameters, nbformat.v4.new_code_cell(body)]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}.ipynb"
    nbformat.write(notebook, path)
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository-shaped folder: notebooks/, profiles/, tables/."""
    write_notebook(tmp_path / "notebooks", "fig1_good", WRITES_ITS_PARAMETERS)
    write_notebook(tmp_path / "notebooks", "fig2_broken", "1 / 0")
    write_notebook(tmp_path / "notebooks", "table3_other", "pass")
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "fig1_good.yaml").write_text("smoke: {scale: 3}\nquick: {scale: 5}\npaper: {scale: 7}\n")
    (tmp_path / "tables").mkdir()
    return tmp_path


def cli(repo: Path, *options: str) -> int:
    return main(["--notebooks-dir", str(repo / "notebooks"), "--kernel", "python3", *options])


@pytest.mark.notebook
def test_good_notebook_gets_profile_and_overrides(repo: Path):
    pytest.importorskip("papermill")
    runs = run_notebooks("quick", "good", notebooks_dir=repo / "notebooks", device="cpu",
                         kernel="python3", log_output=False)
    assert [(run.stem, run.status) for run in runs] == [("fig1_good", "ok")]
    assert (repo / "tables" / "seen.txt").read_text() == "quick cpu 5"
    executed = json.loads((repo / "output" / "quick" / "fig1_good.ipynb").read_text())
    injected = [c for c in executed["cells"] if "injected-parameters" in c["metadata"].get("tags", [])]
    assert "scale = 5" in "".join(injected[0]["source"])


@pytest.mark.notebook
def test_failing_notebook_exits_1_and_is_named(repo: Path, capsys):
    pytest.importorskip("papermill")
    status = cli(repo, "--only", "broken", "--out", str(repo / "executed"))
    summary = capsys.readouterr().out
    assert status == 1
    assert "1 of 1 notebooks failed: fig2_broken" in summary
    assert "ZeroDivisionError" in summary
    # it has no profiles yaml: it ran with the overrides alone, and the summary says so
    assert "no 'smoke' entry" in summary
    assert (repo / "executed" / "fig2_broken.ipynb").exists()


def test_undeclared_parameter_fails_that_notebook_only(repo: Path):
    pytest.importorskip("papermill")
    (repo / "profiles" / "table3_other.yaml").write_text("smoke: {rounds: 2}\n")
    [run] = run_notebooks("smoke", "table3", notebooks_dir=repo / "notebooks", kernel="python3")
    assert run.status == "FAILED"
    assert "rounds" in run.note and "not declared" in run.note
    assert "table3_other" in format_summary([run]).splitlines()[-1]


def test_unknown_profile_exits_2_with_one_line(repo: Path, capsys):
    assert cli(repo, "--profile", "huge") == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    assert "'huge'" in error and "smoke" in error


def test_only_filters_by_substring_glob_and_list(repo: Path):
    stems = lambda only: [p.stem for p in find_notebooks(repo / "notebooks", only)]  # noqa: E731
    assert stems(None) == ["fig1_good", "fig2_broken", "table3_other"]
    assert stems("fig") == ["fig1_good", "fig2_broken"]
    assert stems("table*") == ["table3_other"]
    assert stems("good, table3") == ["fig1_good", "table3_other"]
    assert stems("fig1_good") == ["fig1_good"]


def test_only_exact_name_selects_just_that_notebook(repo: Path):
    write_notebook(repo / "notebooks", "fig1_good_extra", "pass")
    found = lambda only: [p.stem for p in find_notebooks(repo / "notebooks", only)]  # noqa: E731
    assert found("fig1_good") == ["fig1_good"]
    assert found("fig1_g") == ["fig1_good", "fig1_good_extra"]
    with pytest.raises(FedlibError, match="'nothing'"):
        find_notebooks(repo / "notebooks", "good,nothing")


def test_only_matching_nothing_exits_2(repo: Path, capsys):
    assert cli(repo, "--only", "fig9*") == 2
    assert "fig9*" in capsys.readouterr().err


def test_list_prints_profiles_without_running(repo: Path, capsys):
    assert cli(repo, "--list") == 0
    listing = capsys.readouterr().out
    assert "fig1_good: smoke, quick, paper" in listing
    assert "fig2_broken: (no profiles yaml)" in listing
    assert not (repo / "output").exists()


def test_malformed_profiles_yaml_is_a_bad_option(repo: Path, capsys):
    (repo / "profiles" / "table3_other.yaml").write_text("- smoke\n- quick\n")
    assert cli(repo, "--only", "table3") == 2
    assert "table3_other.yaml" in capsys.readouterr().err


def test_unknown_kernel_exits_2(repo: Path, capsys):
    pytest.importorskip("jupyter_client")
    assert main(["--notebooks-dir", str(repo / "notebooks"), "--kernel", "no-such-kernel"]) == 2
    assert "no-such-kernel" in capsys.readouterr().err


def test_environment_yml_pins_match_the_lock_file():
    """conda users and reproduce.sh must get the same versions."""
    yaml = pytest.importorskip("yaml")
    root = Path(__file__).resolve().parents[1]
    lock = {}
    for line in (root / "requirements-lock.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split(";")[0].strip().split("==")
            lock[name.lower()] = version
    assert "fedlib" not in lock and {"torch", "papermill", "jupyterlab"} <= set(lock)
    environment = yaml.safe_load((root / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in environment["dependencies"] if isinstance(d, dict))
    pins = [entry.split("==") for entry in pip_section if "==" in entry]
    assert len(pins) >= 12
    for name, version in pins:
        assert lock.get(name.lower()) == version, name
    assert "python=3.11" in environment["dependencies"]


def test_index_outputs_records_fresh_files_only(tmp_path):
    import json
    import os
    import time

    from fedlib.reproduce import index_outputs

    old = tmp_path / "pkd_table9_old.csv"  # same family, written before this run
    old.write_bytes(b"x")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    since = time.time()
    (tmp_path / "pkd_table1_vs_paper.csv").write_bytes(b"x")
    (tmp_path / "pkd_table1_vs_paper.md").write_bytes(b"x")
    (tmp_path / "fedlmd_fig2.png").write_bytes(b"x")  # written meanwhile by a notebook of another family
    index_outputs(tmp_path, "table", "pkd_table1_4_class_accuracy", "quick", since)
    index = json.loads((tmp_path / "index.json").read_text())
    assert set(index) == {"pkd_table1_vs_paper.csv"}
    entry = index["pkd_table1_vs_paper.csv"]
    assert entry["notebook"] == "notebooks/pkd_table1_4_class_accuracy.ipynb" and entry["profile"] == "quick"
    readme = (tmp_path / "README.md").read_text()
    assert "pkd_table1_vs_paper.csv" in readme and "pkd_table9_old" not in readme and "fedlmd" not in readme


def test_index_outputs_leaves_files_named_after_another_notebook(tmp_path):
    import json
    import time

    from fedlib.reproduce import index_outputs

    since = time.time()
    (tmp_path / "fedcsd_fig1_drift.csv").write_bytes(b"x")  # fig1's, written while fig7 ran beside it
    (tmp_path / "fedcsd_fig7_tsne.csv").write_bytes(b"x")
    (tmp_path / "fedcsd_fig7_extra.csv").write_bytes(b"x")  # no notebook of that name: the family rule
    stems = ["fedcsd_fig1_drift", "fedcsd_fig7_tsne"]
    index_outputs(tmp_path, "table", "fedcsd_fig7_tsne", "quick", since, stems)
    index = json.loads((tmp_path / "index.json").read_text())
    assert set(index) == {"fedcsd_fig7_tsne.csv", "fedcsd_fig7_extra.csv"}
