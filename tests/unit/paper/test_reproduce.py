"""The notebook runner (fedlib.paper.reproduce) on tiny notebooks written into a temporary folder."""

import json
import os
import re
from pathlib import Path

import pytest

from fedlib.errors import FedlibError
from fedlib.paper import reproduce
from fedlib.paper.reproduce import command_line, find_notebooks, format_summary, main, run_notebooks
from tests.helpers import ROOT, declared

nbformat = pytest.importorskip("nbformat")

PARAMETERS_CELL = """\
profile: str = "smoke"  # which profile of profiles/<stem>.yaml
device: str = "auto"  # torch device
data_dir = None  # dataset folder; None: FEDLIB_DATA or the cache
results_dir: str = "results"  # results cache
figures_dir = None  # where figures go; None: output/<profile>/figures
tables_dir = None  # where tables go; None: output/<profile>/tables
scale: int = 1  # a notebook-specific knob set by the profile
"""

WRITES_ITS_PARAMETERS = """\
from pathlib import Path
from fedlib.reporting.notebook import apply_profile  # the kernel must find this checkout's fedlib
apply_profile("fig1_good", globals())
assert Path.cwd().name == "notebooks", Path.cwd()
Path(tables_dir).mkdir(parents=True, exist_ok=True)
Path(tables_dir, "seen.txt").write_text(f"{profile} {device} {scale}")
Path(tables_dir, "fig1_good.csv").write_text("a,b")
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
def test_good_notebook_applies_its_profile_and_writes_nothing_committed(repo: Path):
    pytest.importorskip("papermill")
    runs = run_notebooks("quick", "good", notebooks_dir=repo / "notebooks", device="cpu",
                         kernel="python3", log_output=False)
    assert [(run.stem, run.status) for run in runs] == [("fig1_good", "ok")]
    # the notebook applied profiles/fig1_good.yaml itself; its outputs went to the ignored output/
    assert (repo / "output" / "quick" / "tables" / "seen.txt").read_text() == "quick cpu 5"
    assert list((repo / "tables").iterdir()) == []
    executed = json.loads((repo / "output" / "quick" / "fig1_good.ipynb").read_text())
    injected = [c for c in executed["cells"] if "injected-parameters" in c["metadata"].get("tags", [])]
    assert "scale" not in "".join(injected[0]["source"]), "the runner passes the profile's name, not its values"


@pytest.mark.notebook
def test_a_notebook_without_the_asked_extra_profile_is_skipped_and_says_so(repo: Path):
    pytest.importorskip("papermill")
    profiles = repo / "profiles" / "fig1_good.yaml"
    profiles.write_text(profiles.read_text() + "lesson: {scale: 2, note: the lesson scale}\n")
    runs = run_notebooks("lesson", "good,other", notebooks_dir=repo / "notebooks", kernel="python3", log_output=False)
    assert [(run.stem, run.status) for run in runs] == [("fig1_good", "ok"), ("table3_other", "skipped")]
    assert (repo / "output" / "lesson" / "tables" / "seen.txt").read_text() == "lesson auto 2"  # note: no parameter
    assert runs[1].note == "it has no lesson profile (profiles/table3_other.yaml)"


@pytest.mark.notebook
def test_publish_writes_the_committed_folders_and_their_index(repo: Path):
    pytest.importorskip("papermill")
    [run] = run_notebooks("quick", "good", notebooks_dir=repo / "notebooks", kernel="python3", log_output=False,
                          publish=True, parameters={"scale": 9})
    assert run.ok, run.note
    assert (repo / "tables" / "seen.txt").read_text() == "quick auto 9"  # -p wins over the profile
    index = json.loads((repo / "tables" / "index.json").read_text())
    assert index["fig1_good.csv"]["profile"] == "quick"


@pytest.mark.notebook
def test_injected_folders_name_no_absolute_path_of_the_checkout(repo: Path, tmp_path_factory, monkeypatch):
    pytest.importorskip("papermill")
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))  # the caller stands outside the repository
    [run] = run_notebooks("quick", "good", notebooks_dir=repo / "notebooks", kernel="python3", log_output=False,
                          publish=True, results_dir=repo / "results", data_dir=repo / "data")
    assert run.ok, run.note
    assert (repo / "tables" / "seen.txt").read_text() == "quick auto 5"  # the folders still resolve
    executed = json.loads(run.output_path.read_text())
    [injected] = [c for c in executed["cells"] if "injected-parameters" in c["metadata"].get("tags", [])]
    source = "".join(injected["source"])
    assert 'tables_dir = "tables"' in source and 'results_dir = "results"' in source and 'data_dir = "data"' in source
    assert str(repo) not in source and '"/' not in source
    assert str(repo) not in json.dumps(executed["metadata"]["papermill"]["parameters"])


def test_portable_parameters_keeps_folders_outside_the_repository(tmp_path: Path):
    from fedlib.paper.reproduce import portable_parameters

    notebook = tmp_path / "repo" / "notebooks" / "fig1.ipynb"
    given = {"profile": "quick", "figures_dir": str(tmp_path / "repo" / "output" / "quick" / "figures"),
             "results_dir": str(tmp_path / "elsewhere"), "tables_dir": "tables", "device": "/dev/null"}
    assert portable_parameters(given, notebook) == {**given, "figures_dir": "output/quick/figures"}
    # a notebook outside a notebooks/ folder: its kernel resolves against another root, so nothing changes
    assert portable_parameters(given, tmp_path / "repo" / "fig1.ipynb") == given


def test_committed_folder_without_publish_exits_2(repo: Path, capsys):
    assert cli(repo, "--only", "good", "--tables", str(repo / "tables")) == 2
    assert cli(repo, "--only", "good", "-p", "figures_dir", "figures/sub") == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 2 and all("--publish" in line for line in errors)


def test_unknown_parameter_name_exits_2_listing_the_parameters(repo: Path, capsys):
    assert cli(repo, "--only", "good", "-p", "rounds", "3") == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    assert "fig1_good has no parameter rounds" in error and "scale" in error and "tables_dir" in error


def test_bad_yaml_value_and_profile_as_parameter_exit_2(repo: Path, capsys):
    assert cli(repo, "--only", "good", "-p", "scale", "[1, 2") == 2
    assert cli(repo, "--only", "good", "-p", "profile", "quick") == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 2 and "-p scale" in errors[0] and "--profile" in errors[1]


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


def test_list_prints_title_data_and_cost_without_running(repo: Path, capsys):
    (repo / "profiles" / "fig1_good.yaml").write_text(
        "smoke:  # seconds on a CPU\n  scale: 3\nquick:\n  scale: 5\n  dataset: cifar10\npaper: {scale: 7}\n")
    assert cli(repo, "--list") == 0
    listing = capsys.readouterr().out.splitlines()
    start = listing.index("fig1_good: fig1_good")  # the notebook's first heading
    assert listing[start + 1].split() == ["smoke", "-", "#", "seconds", "on", "a", "CPU"]
    assert listing[start + 2].split() == ["quick", "cifar10"]
    assert listing[start + 3].split() == ["paper", "-"]
    assert "fig2_broken: fig2_broken" in listing and "  (no profiles yaml)" in listing
    assert not (repo / "output").exists()


def test_the_listing_reads_the_catalogues_dataset_names_from_its_source():
    """--list imports no torch, so it reads the dataset names from catalogue.py's source: they must
    be the catalogue's, in its order (a record written another way would drop out silently)."""
    from fedlib.datasets.catalogue import DATASETS
    from fedlib.paper.reproduce.notebook_listing import _dataset_names

    assert _dataset_names() == DATASETS


def test_list_reads_every_real_notebook_without_torch():
    import subprocess
    import sys

    code = ("import sys; from fedlib.paper.reproduce import main; main(['--list']); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    listing = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "getting_started: Getting started" in listing
    assert re.search(r"\n  quick +fashion_mnist  # real Fashion-MNIST", listing)
    assert re.search(r"\n  lesson +mnist  # MNIST", listing)
    assert "$" not in listing and "temperature τ" in listing, "titles' math reads as plain letters"
    fig5 = listing.split("fedcsd_fig5_mask_filter:")[1].splitlines()[1:5]
    assert [line.split("#")[0].split() for line in fig5] == [["smoke", "synthetic"], ["lesson", "mnist"],
                                                             ["quick", "cifar10"],
                                                             ["paper", "cifar100,", "femnist"]], "betas' datasets"
    assert "except PKD: its 25 expert rounds" in listing, "a note continued on the next comment line is whole"


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
    root = Path(__file__).resolve().parents[3]
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

    from fedlib.paper.reproduce import index_outputs

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

    from fedlib.paper.reproduce import index_outputs

    since = time.time()
    (tmp_path / "fedcsd_fig1_drift.csv").write_bytes(b"x")  # fig1's, written while fig7 ran beside it
    (tmp_path / "fedcsd_fig7_tsne.csv").write_bytes(b"x")
    (tmp_path / "fedcsd_fig7_extra.csv").write_bytes(b"x")  # no notebook of that name: the family rule
    stems = ["fedcsd_fig1_drift", "fedcsd_fig7_tsne"]
    index_outputs(tmp_path, "table", "fedcsd_fig7_tsne", "quick", since, stems)
    index = json.loads((tmp_path / "index.json").read_text())
    assert set(index) == {"fedcsd_fig7_tsne.csv", "fedcsd_fig7_extra.csv"}


def test_committed_readmes_name_the_publishing_command_that_regenerates_them():
    import re
    import shlex

    from fedlib.paper.reproduce import build_parser
    from fedlib.reporting.notebook import REPO_ROOT

    readmes = [p for kind in ("figures", "tables") for p in (REPO_ROOT / kind).rglob("README.md")
               if (p.parent / "index.json").exists()]
    assert len(readmes) >= 2
    for readme in readmes:
        text = readme.read_text()
        index = json.loads((readme.parent / "index.json").read_text())
        [command] = re.findall(r"`(\./reproduce\.sh [^`]*)`", text)
        args = build_parser().parse_args(shlex.split(command)[1:])
        assert args.publish, readme
        profiles = {row["profile"] for row in index.values()}
        assert args.profile == (profiles.pop() if len(profiles) == 1 else "PROFILE"), readme
        kind = readme.relative_to(REPO_ROOT).parts[0]
        given = getattr(args, kind)  # --figures / --tables: this very folder, else the default one
        assert (REPO_ROOT / given if given else REPO_ROOT / kind) == readme.parent, readme


def test_publish_note_for_a_subfolder_names_both_folders():
    from fedlib.engine import engine
    from fedlib.paper.reproduce import publish_note
    from fedlib.reporting.notebook import REPO_ROOT

    engine.set_render_only(True)  # as reproduce --render-only sets it
    note = publish_note(REPO_ROOT / "tables" / "paper", "table", {"a.csv": {"profile": "paper"}})
    assert "`./reproduce.sh --profile paper --render-only --publish --figures figures/paper --tables tables/paper`" in note
    # a quick-profile render from the working store: a clone has none of its runs, so the note says train them
    note = publish_note(REPO_ROOT / "tables", "table", {"a.csv": {"profile": "quick"}})
    assert "`./reproduce.sh --profile quick --publish`" in note
    engine.set_render_only(False)
    note = publish_note(REPO_ROOT / "figures", "figure", {"a.png": {"profile": "quick"}, "b.png": {"profile": "smoke"}})
    assert "`./reproduce.sh --profile PROFILE --publish` with each file's profile and parameters below" in note


def test_reproduce_refuses_an_empty_only_and_a_missing_data_folder(tmp_path, capsys):
    from fedlib.paper import reproduce

    assert reproduce.main(["--list", "--only", ""]) == 2
    assert "no notebook names" in capsys.readouterr().err
    assert reproduce.main(["--list", "--data", str(tmp_path / "nowhere")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_threads_reach_the_notebooks_kernels_on_the_serial_path(monkeypatch):
    """--threads without --executor used to be dropped: the kernels trained on every core."""
    from fedlib.orchestration import environment
    from fedlib.orchestration.resources import THREADS_ENV
    from fedlib.paper import reproduce

    monkeypatch.delenv(THREADS_ENV, raising=False)  # restored (unset) after the test
    assert reproduce.main(["--list", "--threads", "1"]) == 0
    assert os.environ[THREADS_ENV] == "1"  # what the kernels papermill starts inherit
    assert environment.modes_from(os.environ)["threads"] == 1  # what their set-up reads


# ---------------------------------------------------------------------- render-only: what is left out
def skip_reason(stem: str, tmp_path: Path, stored_hashes: set[str] | None, monkeypatch) -> str | None:
    """``render_skip_reason`` for a committed notebook under its smoke profile, with the store
    holding exactly ``stored_hashes`` (None: all of them)."""
    from fedlib import store
    from fedlib.paper.reproduce import build_overrides, load_profiles, render_skip_reason
    from fedlib.store import serving

    monkeypatch.setattr(serving, "run_state", lambda cfg, results_dir=None: store.RunState.COMPLETE
                        if stored_hashes is None or cfg.hash() in stored_hashes else store.RunState.ABSENT)
    overrides = build_overrides("smoke", "cpu", None, tmp_path / "r", tmp_path / "f", tmp_path / "t")
    entry = load_profiles(ROOT / "profiles", stem)["smoke"]
    return render_skip_reason(ROOT / "notebooks" / f"{stem}.ipynb", entry, overrides, ROOT)


def declared_hashes(stem: str, tmp_path: Path) -> list[str]:
    return list(dict.fromkeys(cfg.hash() for cfg in declared(stem, "smoke", tmp_path)))


def test_render_only_skips_a_notebook_no_store_holds_and_a_figure_missing_a_run(tmp_path, monkeypatch, render_only):
    table, figure = "pkd_table1_4_class_accuracy", "pkd_fig3_6_9_class_accuracy_rounds"
    assert "no store holds any of its 4 runs" in skip_reason(table, tmp_path, set(), monkeypatch)
    one = set(declared_hashes(table, tmp_path)[:1])
    assert skip_reason(table, tmp_path, one, monkeypatch) is None, "a table renders its other cells as 'not run'"
    some = set(declared_hashes(figure, tmp_path)[:3])
    assert "needs all its 4 runs; 3 stored" in skip_reason(figure, tmp_path, some, monkeypatch)
    assert skip_reason(figure, tmp_path, None, monkeypatch) is None
    assert "trains its own runs" in skip_reason("getting_started", tmp_path, None, monkeypatch)
    assert skip_reason("fedvls_fig3_partitions", tmp_path, set(), monkeypatch) is None, "it trains nothing"


def test_outside_render_only_nothing_is_skipped(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDLIB_RENDER_ONLY", "1")  # read by a kernel's set-up, not here: no mode set
    assert skip_reason("pkd_table1_4_class_accuracy", tmp_path, set(), monkeypatch) is None


def test_a_skipped_notebook_is_counted_but_is_no_failure():
    from fedlib.paper.reproduce import NotebookRun

    runs = [NotebookRun("a", "ok", 1.0, Path("a.ipynb")),
            NotebookRun("b", "skipped", 0.0, Path("b.ipynb"), "render-only: no store holds any of its 2 runs")]
    assert format_summary(runs).splitlines()[-1] == "1 of 2 notebooks ran; 1 skipped (the note says why)"
    assert not runs[1].failed and not runs[1].ok


def test_index_outputs_records_the_parameters_given_over_the_profile(tmp_path):
    import json
    import shlex
    import time

    from fedlib.paper.reproduce import index_outputs, parse_parameters

    since = time.time()
    (tmp_path / "pkd_fig3_6_9_class_accuracy_rounds_fig9.png").write_bytes(b"x")
    parameters = {"dataset": "mnist", "partitions": ["balanced"], "rounds": 100}
    index_outputs(tmp_path, "figure", "pkd_fig3_6_9_class_accuracy_rounds", "paper", since, parameters=parameters)
    entry = json.loads((tmp_path / "index.json").read_text())["pkd_fig3_6_9_class_accuracy_rounds_fig9.png"]
    assert entry["parameters"] == parameters
    readme = (tmp_path / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| [pkd_fig3"))
    words = shlex.split(" ".join(part.strip("` ") for part in row.split("|")[4].split(",")))
    pairs = [words[i + 1:i + 3] for i in range(0, len(words), 3)]
    assert parse_parameters(pairs) == parameters  # the README's -p words give back the same parameters
    assert "with each file's profile and parameters below" in readme


def test_index_outputs_without_parameters_says_none(tmp_path):
    import time

    from fedlib.paper.reproduce import index_outputs

    since = time.time()
    (tmp_path / "pkd_table1_vs_paper.csv").write_bytes(b"x")
    index_outputs(tmp_path, "table", "pkd_table1_4_class_accuracy", "paper", since)
    row = next(line for line in (tmp_path / "README.md").read_text().splitlines() if line.startswith("| [pkd"))
    assert row.split("|")[4].strip() == "none"


@pytest.mark.parametrize("value", ["yes", "0.5", "none", "it's", "a b", "[half", None, 1e-5, 0.1, True, -3,
                                   {"cifar10": 10, "mnist": None}, ["balanced", "1"]])
def test_a_recorded_parameter_reads_back_as_the_same_value(value):
    import shlex

    from fedlib.paper.reproduce import parse_parameters
    from fedlib.paper.reproduce.output_index import _shell_value

    words = shlex.split(_shell_value(value))
    assert len(words) == 1 and parse_parameters([("name", words[0])]) == {"name": value}


def test_parse_parameters_keeps_dates_and_none_as_text():
    from fedlib.paper.reproduce import parse_parameters

    parsed = parse_parameters([("tag", "2026-11-23"), ("augmentation", "none"), ("max_train_samples", "null")])
    assert parsed == {"tag": "2026-11-23", "augmentation": "none", "max_train_samples": None}


def test_ctrl_c_is_one_line_saying_how_to_go_on(monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(command_line, "run_notebooks", interrupted)  # where main reads it
    assert reproduce.main(["--only", "getting_started"]) == 130
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("interrupted: run the same command again") and "Traceback" not in err


@pytest.mark.parametrize("out", ["notebooks", "notebooks/executed", "."])
def test_an_out_folder_at_in_or_around_the_notebooks_is_refused(repo: Path, capsys, out):
    before = (repo / "notebooks" / "fig1_good.ipynb").read_bytes()
    assert cli(repo, "--only", "good", "--out", str(repo / out)) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "the notebooks folder" in error, error
    assert (repo / "notebooks" / "fig1_good.ipynb").read_bytes() == before
    assert not (repo / "notebooks" / "executed").exists()


def test_an_empty_parameter_value_is_refused_not_read_as_none():
    with pytest.raises(FedlibError, match="-p results_dir '' gives no value"):
        command_line.parse_parameters([("results_dir", "")])
