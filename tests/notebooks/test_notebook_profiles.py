"""A notebook applies its own profile (fedlib.reporting.notebook): papermill, JupyterLab and reproduce.sh
resolve the same parameters; passed values win; folders resolve against the repository; runs that
are not published write nothing git tracks."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from fedlib.errors import FedlibError
from fedlib.reporting.notebook import (DEFAULTS_KEY, REPO_ROOT, apply_profile, cell_defaults, check_unpublished,
                                       describe, edited_names, load_profiles, parse_value, profile_note,
                                       resolve_parameters, shipped_defaults)
from fedlib.paper.reproduce import parse_parameters, run_notebooks
from fedlib.paper.reproduce.selection import select_notebooks

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
each_notebook = pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])


# ---------------------------------------------------------------- values passed as strings
def test_yaml_lists_and_mappings_passed_as_strings_are_parsed():
    assert parse_value("seeds", "[0, 1]", [0]) == [0, 1]
    assert parse_value("rounds", "{cifar10: 10}", {"digits": 3}) == {"cifar10": 10}
    assert parse_value("data_dir", "[a]", None) == ["a"]  # looks like a list: read as one
    assert parse_value("dataset", "cifar10", "digits") == "cifar10"
    assert parse_value("seeds", [0, 1], [0]) == [0, 1]  # already a list (reproduce.sh, papermill -y)


@pytest.mark.parametrize("value", ["0,1", "[0, 1", "3"])
def test_a_list_parameter_given_no_list_is_one_line_naming_it(value):
    with pytest.raises(FedlibError) as error:
        parse_value("seeds", value, [0])
    message = str(error.value)
    assert len(message.splitlines()) == 1 and message.startswith("parameter seeds") and "[0]" in message


def test_command_line_values_are_yaml():
    parsed = parse_parameters([("seeds", "[0, 1]"), ("lr", "0.01"), ("weight_decay", "1e-5"), ("rounds", "3"),
                               ("max_train_samples", "null"), ("method", "fedavg"), ("data_dir", "data/x")])
    assert parsed == {"seeds": [0, 1], "lr": 0.01, "weight_decay": 1e-5, "rounds": 3, "max_train_samples": None,
                      "method": "fedavg", "data_dir": "data/x"}
    with pytest.raises(FedlibError, match="-p seeds"):
        parse_parameters([("seeds", "[0,")])


# ---------------------------------------------------------------- precedence
def test_passed_beats_profile_beats_the_parameters_cell():
    cell = cell_defaults(REPO_ROOT / "notebooks" / "getting_started.ipynb")
    quick = load_profiles(REPO_ROOT / "profiles", "getting_started")["quick"]
    resolved = resolve_parameters("getting_started", cell, {"profile": "quick", "rounds": 2, "seeds": "[0, 1]"})
    assert resolved["rounds"] == 2 and resolved["seeds"] == [0, 1]  # passed
    assert resolved["dataset"] == quick["dataset"] != cell["dataset"]  # the profile
    assert resolved["prox_mu"] == cell["prox_mu"] and "prox_mu" not in quick  # the parameters cell


def test_an_edit_kept_in_jupyterlab_wins_over_the_profile_and_passed_values_over_both():
    cell = cell_defaults(REPO_ROOT / "notebooks" / "getting_started.ipynb")
    edited = {**cell, "profile": "quick", "rounds": 30, "beta": 0.3}
    kept = edited_names(edited, shipped_defaults(REPO_ROOT / "notebooks" / "getting_started.ipynb"))
    assert kept == {"rounds", "beta"}  # profile selects, it is not an edit
    resolved = resolve_parameters("getting_started", edited, {}, kept=kept)
    assert resolved["rounds"] == 30 and resolved["beta"] == 0.3  # as edited
    assert resolved["dataset"] == "fashion_mnist"  # not edited: the quick profile's
    assert resolve_parameters("getting_started", edited, {"rounds": 7}, kept=kept)["rounds"] == 7


def test_an_edit_is_told_from_a_default_by_value_lists_and_tuples_alike():
    shipped = {"profile": "smoke", "seeds": [0], "rounds": 3, "data_dir": None}
    assert edited_names({"profile": "quick", "seeds": (0,), "rounds": 3, "data_dir": None}, shipped) == set()
    assert edited_names({"seeds": [0, 1], "rounds": 3.5, "data_dir": "d", "new": 1}, shipped) == \
        {"seeds", "rounds", "data_dir"}


def test_every_override_is_printed_as_old_to_new_with_its_source():
    cell = {**cell_defaults(REPO_ROOT / "notebooks" / "getting_started.ipynb"), "profile": "quick", "rounds": 30}
    resolved = resolve_parameters("getting_started", cell, {}, kept=set())  # as papermill: the profile wins
    lines = describe("getting_started", cell, resolved, set(), set(), REPO_ROOT).splitlines()
    assert lines[0] == "profile quick (profiles/getting_started.yaml); differs from the parameters cell:"
    assert "  rounds: 30 -> 15 (profile quick)" in lines and "  dataset: mnist -> fashion_mnist (profile quick)" in lines
    assert not any(line.lstrip().startswith(("clients", "results_dir")) for line in lines)  # unchanged: not listed
    kept = resolve_parameters("getting_started", cell, {}, kept={"rounds"})
    assert "  rounds: 30 as you edited it (profile quick has 15)" in \
        describe("getting_started", cell, kept, set(), {"rounds"}, REPO_ROOT).splitlines()
    passed = resolve_parameters("getting_started", cell, {"rounds": 2})
    assert "  rounds: 30 -> 2 (passed)" in describe("getting_started", cell, passed, {"rounds"}, set(), REPO_ROOT)
    folder = resolve_parameters("getting_started", cell, {"figures_dir": "figures/paper"})
    shown = describe("getting_started", cell, folder, {"figures_dir"}, set(), REPO_ROOT)
    assert "  figures_dir: None -> figures/paper (passed)" in shown and str(REPO_ROOT) not in shown


@each_notebook
def test_the_shipped_values_are_stamped_in_the_parameters_cell(path: Path):
    """JupyterLab tells an edit from a default by this stamp: it must be the cell as committed
    (after changing a parameters cell, run tools/stamp_defaults.py)."""
    from tools.stamp_defaults import main

    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    stamp = next(c for c in cells if "parameters" in c["metadata"].get("tags", []))["metadata"][DEFAULTS_KEY]
    assert stamp == json.loads(json.dumps(cell_defaults(path)))
    assert main(["--check", str(path)]) == 0


@each_notebook
def test_papermill_and_reproduce_resolve_the_same_parameters(path: Path):
    """`papermill nb.ipynb out.ipynb -p profile P` and `./reproduce.sh --profile P` (what the runner
    passes) give the notebook identical parameters: the profile's values over the cell's."""
    cell = cell_defaults(path)
    for profile, values in load_profiles(REPO_ROOT / "profiles", path.stem).items():
        via_papermill = resolve_parameters(path.stem, cell, {"profile": profile})
        runner_passes = select_notebooks(profile, path.stem, None, None, None, None, None, None, None)[2]
        via_reproduce = resolve_parameters(path.stem, cell, runner_passes)
        assert via_papermill == via_reproduce
        for name, value in values.items():
            assert via_papermill[name] == value, f"{profile}: {name}"


def test_an_unknown_profile_is_one_line():
    cell = cell_defaults(REPO_ROOT / "notebooks" / "getting_started.ipynb")
    with pytest.raises(FedlibError, match="unknown profile 'huge'; valid profiles: lesson, paper, quick, smoke"):
        resolve_parameters("getting_started", cell, {"profile": "huge"})


# ---------------------------------------------------------------- folders
def test_a_profiles_note_is_no_parameter_and_must_be_a_sentence(tmp_path):
    (tmp_path / "nb.yaml").write_text("lesson:\n  note: shows the effect in minutes\n  rounds: 4\nquick: {rounds: 9}\n")
    assert load_profiles(tmp_path, "nb") == {"lesson": {"rounds": 4}, "quick": {"rounds": 9}}
    assert profile_note(tmp_path, "nb", "lesson") == "shows the effect in minutes"
    assert profile_note(tmp_path, "nb", "quick") is None and profile_note(tmp_path, "nb", None) is None
    (tmp_path / "bad.yaml").write_text("lesson: {note: [a, b]}\n")
    with pytest.raises(FedlibError, match="note must be one sentence"):
        load_profiles(tmp_path, "bad")


def test_try_it_outcomes_are_no_parameter_and_must_be_a_list_of_entries(tmp_path):
    (tmp_path / "nb.yaml").write_text("lesson:\n  try_it: [null, {see: FedProx falls behind, numbers: []}]\n  rounds: 4\n")
    assert load_profiles(tmp_path, "nb") == {"lesson": {"rounds": 4}}
    for bad in ("{see: one}", "[just text]", "[{numbers: []}]"):
        (tmp_path / "bad.yaml").write_text(f"lesson:\n  try_it: {bad}\n")
        with pytest.raises(FedlibError, match=r"try_it must be a list, one \{see"):
            load_profiles(tmp_path, "bad")


def test_relative_folders_resolve_against_the_repository_from_any_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cell = cell_defaults(REPO_ROOT / "notebooks" / "getting_started.ipynb")
    resolved = resolve_parameters("getting_started", cell, {"profile": "quick", "data_dir": "data/sets"})
    assert resolved["results_dir"] == str(REPO_ROOT / "results")
    assert resolved["data_dir"] == str(REPO_ROOT / "data" / "sets")
    assert resolved["figures_dir"] == str(REPO_ROOT / "output" / "quick" / "figures")
    assert resolved["tables_dir"] == str(REPO_ROOT / "output" / "quick" / "tables")
    absolute = resolve_parameters("getting_started", cell, {"results_dir": str(tmp_path / "r")})
    assert absolute["results_dir"] == str(tmp_path / "r")


def test_committed_folders_need_publishing(monkeypatch):
    monkeypatch.delenv("FEDLIB_PUBLISH", raising=False)
    for folder in ("figures", "tables/paper", str(REPO_ROOT / "figures")):
        with pytest.raises(FedlibError, match="--publish"):
            check_unpublished({"figures_dir": folder}, REPO_ROOT)
    check_unpublished({"figures_dir": "output/quick/figures", "tables_dir": None}, REPO_ROOT)
    check_unpublished({"figures_dir": "figures/paper"}, REPO_ROOT, publishing=True)
    monkeypatch.setenv("FEDLIB_PUBLISH", "1")  # what reproduce.sh --publish gives its kernels
    check_unpublished({"figures_dir": "figures"}, REPO_ROOT)


def test_outside_a_kernel_the_caller_sets_every_parameter(tmp_path, monkeypatch):
    """fedlib.paper.plan executes the cells in a plain dict with every parameter set: apply_profile then
    applies no profile (it cannot tell passed values from defaults) and only resolves folders; what
    differs from the profile is an edit, as anywhere."""
    monkeypatch.chdir(tmp_path)
    cell = cell_defaults(REPO_ROOT / "notebooks" / "getting_started.ipynb")
    quick = load_profiles(REPO_ROOT / "profiles", "getting_started")["quick"]
    namespace = {**cell, **quick, "profile": "quick"}  # as fedlib.paper.plan gives it: the profile's values set
    apply_profile("getting_started", namespace)
    assert namespace["dataset"] == quick["dataset"] and type(namespace["profile"]) is str
    assert namespace["figures_dir"] == str(REPO_ROOT / "output" / "quick" / "figures")
    namespace = {**cell, "profile": "quick"}
    apply_profile("getting_started", namespace)
    assert namespace["dataset"] == "mnist" and "dataset" in namespace["profile"].edits
    assert namespace["figures_dir"] == str(REPO_ROOT / "output" / "quick-edited" / "figures")


def test_an_edited_run_is_no_run_of_its_profile_its_figures_go_beside_the_profiles():
    """An edit kept in JupyterLab or a value passed with -p that changes a setting of the profile:
    the profile (still its name for every lookup) names the edit, for the figure's stamp, and the
    figures and tables go to output/<profile>-edited/, never over the profile's own."""
    path = REPO_ROOT / "notebooks" / "fedlmd_fig4_kd_variants.ipynb"
    cell = cell_defaults(path)
    lesson = resolve_parameters(path.stem, cell, {"profile": "lesson"})
    assert type(lesson["profile"]) is str
    assert lesson["figures_dir"] == str(REPO_ROOT / "output" / "lesson" / "figures")
    passed = resolve_parameters(path.stem, cell, {"profile": "lesson", "beta": 0.05})  # papermill / reproduce -p
    edited = {**cell, "profile": "lesson", "beta": 0.05}  # JupyterLab
    kept = resolve_parameters(path.stem, edited, {}, kept=edited_names(edited, shipped_defaults(path)))
    for run in (passed, kept):
        assert run["profile"] == "lesson" and run["profile"].edits == {"beta": 0.05}
        assert run["profile"].label() == "lesson, edited: beta=0.05"
        assert run["figures_dir"] == str(REPO_ROOT / "output" / "lesson-edited" / "figures") != lesson["figures_dir"]
        assert run["tables_dir"] == str(REPO_ROOT / "output" / "lesson-edited" / "tables")
    shown = describe(path.stem, edited, kept, set(), {"beta"}, REPO_ROOT)
    assert 'stamped "profile lesson, edited: beta=0.05"' in shown
    assert "figures -> output/lesson-edited/figures" in shown
    retyped = {**cell, "profile": "lesson", "beta": 0.5}  # the profile's own value typed in: no edit
    assert type(resolve_parameters(path.stem, retyped, {}, kept={"beta"})["profile"]) is str
    moved = resolve_parameters(path.stem, cell, {"profile": "lesson", "device": "cpu", "results_dir": "/tmp/store"})
    assert type(moved["profile"]) is str, "where a run happens is no setting of the profile"
    assert resolve_parameters(path.stem, edited, {"profile": None})["figures_dir"] == \
        str(REPO_ROOT / "output" / "custom" / "figures"), "no profile, nothing to edit"


def test_the_runner_says_where_an_edited_run_went():
    import argparse

    from fedlib.paper.reproduce.command_line import _written_to
    from fedlib.paper.reproduce.runner import executed_folder

    notebook, out = REPO_ROOT / "notebooks" / "fedlmd_fig4_kd_variants.ipynb", REPO_ROOT / "output" / "lesson"
    assert executed_folder(notebook, {"profile": "lesson"}, out) == out
    assert executed_folder(notebook, {"profile": "lesson", "beta": 0.5}, out) == out, "the profile's own value"
    assert executed_folder(notebook, {"profile": "lesson", "beta": 0.05}, out) == REPO_ROOT / "output" / "lesson-edited"

    def line(parameters, publish=False):
        args = argparse.Namespace(figures=None, tables=None, publish=publish, profile="lesson", parameters=parameters)
        return _written_to(args, REPO_ROOT)

    assert "output/lesson/figures" in line(None) and "edited" not in line(None)
    assert "output/lesson-edited/figures" in line([("beta", "0.05")]) and "output/lesson/" in line([("beta", "0.05")])
    assert "edited" not in line([("results_dir", "store")]) + line([("beta", "0.05")], publish=True)


# ---------------------------------------------------------------- the notebooks themselves
@each_notebook
def test_the_cell_after_the_parameters_cell_applies_this_notebooks_profile(path: Path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    index = next(i for i, c in enumerate(cells) if "parameters" in c["metadata"].get("tags", []))
    assert f'apply_profile("{path.stem}", globals())' in "".join(cells[index + 1]["source"])
    cell = cell_defaults(path)
    assert cell["figures_dir"] is None and cell["tables_dir"] is None, "default to output/<profile>/"
    assert not Path(cell["results_dir"]).is_absolute() and ".." not in cell["results_dir"]


@each_notebook
def test_the_parameters_cell_is_the_lesson_profile(path: Path):
    """What the reader sees in the parameters cell is what the notebook runs as shipped: the cell
    selects the lesson profile, the lesson section of its profiles file sets no parameter (only its
    prose), and resolving it leaves every value of the cell as written (folders and device aside).
    The smoke, quick and paper profiles are the overrides. Values compare by repr, so 1 and 1.0 or a
    list and a tuple count as different."""
    cell = cell_defaults(path)
    assert cell["profile"] == "lesson", "ship the parameters cell with profile = \"lesson\" and its values"
    lesson = load_profiles(REPO_ROOT / "profiles", path.stem)["lesson"]
    assert not lesson, f"the lesson section of profiles/{path.stem}.yaml sets {sorted(lesson)}: write them into the cell"
    resolved = resolve_parameters(path.stem, cell, {}, root=REPO_ROOT)
    rewritten = [name for name in cell if name.endswith("_dir") or name == "device"]
    changed = sorted(name for name in cell if name not in rewritten and repr(resolved[name]) != repr(cell[name]))
    assert not changed, f"the lesson profile changes {changed}: write its values into the parameters cell"
    assert str(resolved["profile"]) == "lesson" and not getattr(resolved["profile"], "edits", None)


# ---------------------------------------------------------------- executed
APPLY_AND_DUMP = """\
import json
from fedlib.reporting.notebook import apply_profile
apply_profile("fig1_probe", globals())
names = ["profile", "scale", "seeds", "results_dir", "figures_dir", "tables_dir"]
with open(dump_to, "w") as handle:
    json.dump({name: globals()[name] for name in names}, handle)
"""
PROBE_PARAMETERS = """\
profile = "smoke"  # profile
device = "auto"  # device
data_dir = None  # data
results_dir = "results"  # results store
figures_dir = None  # figures
tables_dir = None  # tables
scale = 1  # set by the profile
seeds = [0]  # a list
dump_to = "resolved.json"  # where the resolved parameters go
"""


@pytest.fixture
def probe_repo(tmp_path: Path) -> Path:
    """A repository with one notebook that writes the parameters it resolved to a JSON file."""
    nbformat = pytest.importorskip("nbformat")
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_markdown_cell("# probe"),
                      nbformat.v4.new_code_cell(PROBE_PARAMETERS, metadata={"tags": ["parameters"]}),
                      nbformat.v4.new_code_cell(APPLY_AND_DUMP)]
    (tmp_path / "repo" / "notebooks").mkdir(parents=True)
    nbformat.write(notebook, tmp_path / "repo" / "notebooks" / "fig1_probe.ipynb")
    (tmp_path / "repo" / "profiles").mkdir()
    (tmp_path / "repo" / "profiles" / "fig1_probe.yaml").write_text(
        "smoke: {scale: 3}\nquick: {scale: 5, seeds: [0, 1, 2]}\npaper: {scale: 7}\n")
    return tmp_path / "repo"


@pytest.mark.notebook
def test_papermill_jupyterlab_and_reproduce_run_with_the_same_parameters(probe_repo: Path, tmp_path: Path):
    papermill = pytest.importorskip("papermill")
    nbformat, nbclient = pytest.importorskip("nbformat"), pytest.importorskip("nbclient")
    notebook = probe_repo / "notebooks" / "fig1_probe.ipynb"
    # papermill as a user runs it from the repository's root, with a string list as -p gives it
    papermill.execute_notebook(str(notebook), str(tmp_path / "pm.ipynb"), kernel_name="python3", cwd=str(probe_repo),
                               parameters={"profile": "quick", "seeds": "[4, 5]", "dump_to": str(tmp_path / "pm.json")},
                               progress_bar=False)
    [run] = run_notebooks("quick", "probe", notebooks_dir=probe_repo / "notebooks", kernel="python3",
                          log_output=False, out_dir=tmp_path / "out",
                          parameters={"seeds": [4, 5], "dump_to": str(tmp_path / "rp.json")})
    assert run.ok, run.note
    # JupyterLab: the reader edits the parameters cell and runs every cell, inside notebooks/
    edited = nbformat.read(notebook, as_version=4)
    edited.cells[1].source = edited.cells[1].source.replace('profile = "smoke"', 'profile = "quick"').replace(
        '"resolved.json"', repr(str(tmp_path / "jl.json")))
    nbclient.NotebookClient(edited, kernel_name="python3", resources={"metadata": {"path": str(notebook.parent)}}
                            ).execute()
    via_papermill, via_reproduce, via_jupyter = (json.loads((tmp_path / f"{name}.json").read_text())
                                                 for name in ("pm", "rp", "jl"))
    assert via_papermill == via_reproduce == {**via_jupyter, "seeds": [4, 5]}
    assert via_jupyter["scale"] == 5 and via_jupyter["seeds"] == [0, 1, 2]  # the quick profile's values
    # every way passed or edited something the quick profile does not run with (dump_to, seeds): no quick run
    assert via_papermill["figures_dir"] == str(probe_repo.resolve() / "output" / "quick-edited" / "figures")


@pytest.mark.notebook
def test_jupyterlab_runs_the_edited_cell_and_prints_each_override(tmp_path: Path):
    """A real notebook, its parameters cell edited as a reader would in JupyterLab (no papermill
    cell) under a profile that sets the edited value: the stored runs have the edited value, the
    profile fills in the rest, and every difference from the cell is printed before the runs."""
    nbformat, nbclient = pytest.importorskip("nbformat"), pytest.importorskip("nbclient")
    repo = tmp_path / "repo"
    (repo / "notebooks").mkdir(parents=True)
    (repo / "profiles").mkdir()
    shutil.copy(REPO_ROOT / "notebooks" / "getting_started.ipynb", repo / "notebooks")
    (repo / "profiles" / "getting_started.yaml").write_text(
        "lesson: {}\nquick: {rounds: 1, batch_size: 16, dataset: digits, max_train_samples: null}\n")
    notebook = nbformat.read(repo / "notebooks" / "getting_started.ipynb", as_version=4)
    source = notebook.cells[1].source
    for old, new in (('profile = "lesson"', 'profile = "quick"'), ("rounds = 20 ", "rounds = 2 "),
                     ('results_dir = "results"', f"results_dir = {str(tmp_path / 'store')!r}")):
        assert old in source
        source = source.replace(old, new)
    notebook.cells[1].source = source
    nbformat.write(notebook, repo / "notebooks" / "getting_started.ipynb")  # as JupyterLab's autosave would
    nbclient.NotebookClient(notebook, kernel_name="python3", resources={"metadata": {"path": str(repo / "notebooks")}}
                            ).execute()
    configs = [json.loads(p.read_text()) for p in (tmp_path / "store").glob("*/config.json")]
    assert sorted(c["method"] for c in configs) == ["fedavg", "fedprox"]
    assert {c["rounds"] for c in configs} == {2} and {c["batch_size"] for c in configs} == {16}
    printed = "".join(o.get("text", "") for o in notebook.cells[2].outputs)
    assert "rounds: 2 as you edited it (profile quick has 1)" in printed
    assert "batch_size: 50 -> 16 (profile quick)" in printed and "dataset: mnist -> digits (profile quick)" in printed


@pytest.mark.notebook
def test_papermill_jupyterlab_and_reproduce_draw_the_same_figure(tmp_path: Path):
    """A real notebook run three ways, each training its runs into a store of its own, draws the same
    PNG byte for byte (the stamp included): the paths differ in nothing but how they start the kernel."""
    papermill = pytest.importorskip("papermill")
    nbformat, nbclient = pytest.importorskip("nbformat"), pytest.importorskip("nbclient")
    name = "fedvls_fig5_convergence"
    notebook = REPO_ROOT / "notebooks" / f"{name}.ipynb"
    figure = REPO_ROOT / "output" / "smoke" / "figures" / f"{name}.png"
    drawn = {}

    def keep(path_name: str) -> None:
        assert figure.exists(), f"{path_name} drew no figure"
        drawn[path_name] = figure.read_bytes()
        figure.unlink()
        assert any((tmp_path / path_name).glob("*/summary.json")), f"{path_name} trained nothing"

    figure.unlink(missing_ok=True)
    papermill.execute_notebook(str(notebook), str(tmp_path / "pm.ipynb"), kernel_name="python3", cwd=str(REPO_ROOT),
                               parameters={"profile": "smoke", "results_dir": str(tmp_path / "papermill")},
                               progress_bar=False)
    keep("papermill")
    [run] = run_notebooks("smoke", name, kernel="python3", log_output=False, out_dir=tmp_path / "executed",
                          results_dir=tmp_path / "reproduce")
    assert run.ok, run.note
    keep("reproduce")
    edited = nbformat.read(notebook, as_version=4)  # JupyterLab: edit the parameters cell, run all, in notebooks/
    assert 'results_dir = "results"' in edited.cells[1].source and 'profile = "lesson"' in edited.cells[1].source
    edited.cells[1].source = edited.cells[1].source.replace(
        'results_dir = "results"', f"results_dir = {str(tmp_path / 'jupyterlab')!r}").replace(
        'profile = "lesson"', 'profile = "smoke"')
    nbclient.NotebookClient(edited, kernel_name="python3", resources={"metadata": {"path": str(notebook.parent)}}
                            ).execute()
    keep("jupyterlab")
    assert drawn["papermill"] == drawn["reproduce"] == drawn["jupyterlab"]
@pytest.mark.notebook
def test_a_passed_bad_list_fails_the_cell_in_one_line(probe_repo: Path, tmp_path: Path):
    papermill = pytest.importorskip("papermill")
    with pytest.raises(papermill.PapermillExecutionError) as error:
        papermill.execute_notebook(str(probe_repo / "notebooks" / "fig1_probe.ipynb"), str(tmp_path / "o.ipynb"),
                                   kernel_name="python3", cwd=str(probe_repo), parameters={"seeds": "0,1"},
                                   progress_bar=False)
    assert error.value.ename == "FedlibError"
    assert error.value.traceback == [f"FedlibError: {error.value.evalue}"]
    assert error.value.evalue.startswith("parameter seeds takes a list")


@pytest.mark.notebook
def test_a_smoke_run_leaves_the_checkout_as_it_was(tmp_path: Path):
    """The README's first command must leave `git status` clean: figures and tables of a run that
    is not published go to the ignored output/<profile>/."""
    pytest.importorskip("papermill")
    if not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")

    def status() -> str:
        return subprocess.run(["git", "status", "--porcelain"], cwd=REPO_ROOT, capture_output=True, text=True,
                              check=True).stdout

    before = status()
    [run] = run_notebooks("smoke", "fedvls_fig3_partitions", kernel="python3", log_output=False,
                          out_dir=tmp_path / "executed", results_dir=tmp_path / "results")
    assert run.ok, run.note
    assert status() == before
    assert (REPO_ROOT / "output" / "smoke" / "figures" / "fedvls_fig3_partitions.png").exists()


def test_in_a_kernel_warnings_name_no_source_path_and_frames_print_three_decimals(monkeypatch):
    import warnings

    import pandas as pd

    from fedlib.reporting import notebook

    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)  # restored after the test
    notebook._short_warnings(None), notebook._readable_numbers(None)  # outside a kernel: nothing changes
    assert "/fedlib/" in warnings.formatwarning("m", RuntimeWarning, "/x/fedlib/engine.py", 3)
    assert pd.get_option("display.float_format") is None
    try:
        notebook._short_warnings(object()), notebook._readable_numbers(object())  # a kernel's shell
        assert warnings.formatwarning("run diverged", RuntimeWarning, "/x/fedlib/engine.py", 3) == \
            "RuntimeWarning: run diverged\n"
        shown = pd.DataFrame({"acc": [59.4444449, 0.001, 86412.3, 1e-5]}).to_string()
        assert shown.split()[1:] == ["0", "59.44", "1", "0.001", "2", "86,412", "3", "1e-05"]
        assert "(0.001, 10.0)" in pd.DataFrame({"args": [(0.001, 10.0)]}).to_string(), "small values stay visible"
    finally:
        pd.reset_option("display.float_format")
