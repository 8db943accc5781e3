"""A notebook's parameters: its profile applied, passed values kept, folders against the repository.

Every notebook starts with a cell tagged ``parameters`` that holds literal defaults. The cell after
it calls::

    from fedlib.reporting.notebook import apply_profile
    apply_profile("getting_started", globals())

which gives each parameter its value. Under papermill and ``reproduce.sh`` the precedence is, highest
first:

1. a value passed explicitly: ``papermill ... -p NAME VALUE`` or ``./reproduce.sh -p NAME VALUE``;
2. the value of the chosen ``profile`` in ``profiles/<notebook>.yaml``;
3. the parameters cell's literal.

So ``papermill nb.ipynb out.ipynb -p profile quick``, JupyterLab (``profile = "quick"`` in the
parameters cell) and ``./reproduce.sh --profile quick`` run the same settings; ``profile = None``
runs the parameters cell as written: as shipped, the lesson profile's values (its section sets none).
Papermill passes values as a cell of its own, right after the parameters cell and starting with
``# Parameters``; that cell, read back from the kernel's input history, tells a passed value from a default.

In JupyterLab (no papermill cell) the cell a reader edits is the run they get: a value that differs
from the one the notebook shipped with (recorded in the parameters cell's metadata under
``fedlib_defaults``, which editing the cell's text leaves alone) is kept over the profile. Either way
every value that ends up other than the cell says is printed before anything runs, one line each:
``rounds: 3 -> 15 (profile quick)``.

Folders (every parameter named ``*_dir``) resolve against the repository, wherever the caller
stands. ``figures_dir`` and ``tables_dir`` left at None mean ``output/<profile>/figures`` and
``output/<profile>/tables``, which git ignores; the committed ``figures/`` and ``tables/`` are
written only by ``./reproduce.sh --publish``, which records what produced each file.

A run whose settings differ from its profile's (an edit kept in JupyterLab, a ``-p`` value) is no
run of that profile (:mod:`fedlib.reporting.edited_runs`): its figures' stamp names the edits, and
its figures and tables, left at None, go to ``output/<profile>-edited/``, never over the profile's.

This module imports no torch: ``reproduce.sh --list`` reads profiles through it.
"""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

import yaml

from fedlib.errors import FedlibError, explain, one_of
from fedlib.folders import user_folder
from fedlib.orchestration import environment
from fedlib.reporting.edited_runs import EditedProfile, profile_edits
from fedlib.reporting.edited_runs import plain as _plain
from fedlib.reporting.parameters import check_parameters
from fedlib.yaml_input import load_yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
COMMITTED_FOLDERS = ("figures", "tables")  # written only when publishing
PUBLISH_ENV = "FEDLIB_PUBLISH"  # set by ``reproduce.sh --publish`` for the kernels it starts
PAPERMILL_CELL = "# Parameters"  # how papermill's injected cell starts
DEFAULTS_KEY = "fedlib_defaults"  # the parameters cell's metadata: its values as the notebook shipped
# A section's prose keys, never parameters: the sentence a notebook prints under the profile, the lesson's verdict and
# numbers, what each Try-it prompt shows (tests/notebooks/test_lesson_outcomes.py, test_try_it_outcomes.py check them)
NOTE_KEY, OUTCOME_KEY, TRY_IT_KEY = PROSE_KEYS = ("note", "outcome", "try_it")
PROSE_KINDS = {NOTE_KEY: (str, "one sentence (a string)"), OUTCOME_KEY: (dict, "a mapping (verdict, numbers)"),
               TRY_IT_KEY: (list, "a list, one {see: text, numbers: [...]} or null per prompt")}


def find_root(stem: str) -> Path:
    """The repository holding ``notebooks/<stem>.ipynb``: the working directory or a folder above
    it (Jupyter and reproduce.sh run in ``notebooks/``), else the checkout fedlib is imported from."""
    here = Path.cwd().resolve()
    for folder in (here, *here.parents, REPO_ROOT):
        if (folder / "notebooks" / f"{stem}.ipynb").is_file():
            return folder
    raise FedlibError(f"notebooks/{stem}.ipynb is neither above {here} nor in {REPO_ROOT}; "
                      "run it from its repository")


def read_profile_file(path: Path):
    """The YAML of the profile file ``path`` (None when there is none); a folder in its place or
    text that is not UTF-8 is one line."""
    if not path.exists():
        return None
    if not path.is_file():
        raise FedlibError(f"{path} is not a file; a profile file holds YAML")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise FedlibError(f"{path} is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    return load_yaml(text, str(path))


def load_profiles(profiles_dir: Path, stem: str) -> dict[str, dict]:
    """Profile name -> parameters from ``profiles_dir/<stem>.yaml``; empty if there is no file."""
    path = Path(profiles_dir) / f"{stem}.yaml"
    profiles = read_profile_file(path) or {}
    if not isinstance(profiles, dict):
        raise FedlibError(f"{path} must map profile names to parameter mappings; fix the YAML")
    for name, params in profiles.items():
        if not isinstance(name, str):
            raise FedlibError(f"{path}: profile name {name!r} must be a string")
        if params is not None and not isinstance(params, dict):
            raise FedlibError(f"{path}: profile {name!r} must be a mapping of parameters")
        if params and not all(isinstance(key, str) for key in params):
            raise FedlibError(f"{path}: profile {name!r} has a parameter name that is not a string")
        if params and "profile" in params:  # the section is the profile: a profile key in it would be ignored
            raise FedlibError(f"{path}: profile {name!r} sets profile; a profile section cannot choose another "
                              "profile, drop that key")
    for name, params in profiles.items():
        for key, (kind, what) in PROSE_KINDS.items():
            value = (params or {}).get(key)
            if value is not None and not (isinstance(value, kind) and (key != TRY_IT_KEY or all(
                    item is None or isinstance(item, dict) and isinstance(item.get("see"), str) for item in value))):
                raise FedlibError(f"{path}: profile {name!r}: {key} must be {what}")
    return {name: {k: v for k, v in (params or {}).items() if k not in PROSE_KEYS} for name, params in profiles.items()}


def profile_note(profiles_dir: Path, stem: str, profile: str | None) -> str | None:
    """The ``note`` of ``profile`` in ``profiles_dir/<stem>.yaml``: what the notebook says under that
    profile before anything runs (what its scale can and cannot show), or None."""
    path = Path(profiles_dir) / f"{stem}.yaml"
    if profile is None or not path.exists():
        return None
    load_profiles(profiles_dir, stem)  # checks the file and the note's kind
    section = (read_profile_file(path) or {}).get(profile) or {}
    return section.get(NOTE_KEY)


def profile_values(root: Path, stem: str, profile: str | None) -> dict:
    """The values ``profiles/<stem>.yaml`` gives under ``profile``; none for profile None. A profile
    the file does not define (or a missing, empty or comment-only file) is an error: running the
    parameters cell instead would write other settings under the profile's name."""
    if profile is None:
        return {}
    if not isinstance(profile, str):
        raise FedlibError(f"profile must be a profile name (a string) or None, got {profile!r}")
    profiles = load_profiles(Path(root) / "profiles", stem)
    if not profiles:
        raise FedlibError(f"profile {profile!r} asked for, but profiles/{stem}.yaml defines no profile (missing, "
                          "empty or only comments); define it there, or run with profile None")
    if profile not in profiles:
        raise one_of("profile", profile, profiles)
    return profiles[profile]


def cell_defaults(notebook: Path) -> dict:
    """Name -> literal value of every assignment in the notebook's cell tagged ``parameters``."""
    return _assignments("".join(_parameters_cell(notebook)["source"]))


def shipped_defaults(notebook: Path) -> dict:
    """The parameters cell's values as the notebook shipped: its ``fedlib_defaults`` metadata
    (``tools/stamp_defaults.py`` writes it), else, for a notebook without it, the cell as saved."""
    cell = _parameters_cell(notebook)
    stamped = cell.get("metadata", {}).get(DEFAULTS_KEY)
    return dict(stamped) if isinstance(stamped, dict) else _assignments("".join(cell["source"]))


def _parameters_cell(notebook: Path) -> dict:
    """The notebook's first cell tagged ``parameters``, as JSON."""
    cells = json.loads(Path(notebook).read_text(encoding="utf-8")).get("cells", [])
    tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if not tagged:
        raise FedlibError(f"{Path(notebook).name} has no code cell tagged 'parameters'")
    return tagged[0]


def edited_names(values: dict, shipped: dict) -> set[str]:
    """The parameters whose value in ``values`` differs from the one the notebook ``shipped`` with
    (lists and tuples alike); ``profile`` is the selector, never an edit to keep."""
    return {name for name, value in values.items()
            if name != "profile" and name in shipped and _plain(value) != _plain(shipped[name])}


def defaults_stamp(source: str) -> dict:
    """The ``fedlib_defaults`` metadata of a parameters cell holding ``source``: its values as JSON."""
    return {name: _plain(value) for name, value in _assignments(source).items()}


def _assignments(source: str) -> dict:
    """Name -> literal value of each top-level ``name = literal`` in ``source`` (others read as None)."""
    values = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in (t for t in targets if isinstance(t, ast.Name)):
                try:
                    values[target.id] = ast.literal_eval(node.value)
                except ValueError:
                    values[target.id] = None
    return values


def parse_value(name: str, value, default=None):
    """A passed ``value`` as the notebook needs it: a string holding a YAML list or mapping (as
    ``papermill -p seeds "[0, 1]"`` passes it) becomes that list or mapping.

    Raises :class:`FedlibError`, naming the parameter, for invalid YAML or for a parameter whose
    ``default`` is a list or mapping given something else.
    """
    wants = list if isinstance(default, (list, tuple)) else dict if isinstance(default, dict) else None
    if not isinstance(value, str) or (wants is None and not value.lstrip().startswith(("[", "{"))):
        return value
    example = yaml.safe_dump(default, default_flow_style=True, width=200).strip() if wants else "[0, 1]"
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError as error:
        problem = str(getattr(error, "problem", None) or "invalid YAML")
        raise FedlibError(f"parameter {name}: cannot read {value!r} as YAML ({problem}); "
                          f"write it like {example}") from None
    if wants is not None and not isinstance(parsed, wants):
        kind = "a list" if wants is list else "a mapping"
        raise FedlibError(f"parameter {name} takes {kind} like {example}; got {value!r}")
    return parsed


def output_folder(root: Path, profile: str | None, kind: str) -> Path:
    """Where a run that is not published writes its ``kind`` (figures or tables): ignored by git;
    an edited run (:class:`EditedProfile`) beside the profile's, in ``output/<profile>-edited/``."""
    name = f"{profile}-edited" if getattr(profile, "edits", None) else profile or "custom"
    return Path(root) / "output" / name / kind


def repo_path(path: str | os.PathLike, root: Path) -> Path:
    """``path`` with ``~`` expanded; a relative path is taken relative to the repository ``root``."""
    path = Path(path).expanduser()
    return (path if path.is_absolute() else Path(root) / path).resolve()


def resolve_parameters(stem: str, values: dict, passed: dict, root: Path | None = None,
                       kept: set[str] | frozenset = frozenset()) -> dict:
    """The parameters notebook ``stem`` runs with: ``values`` (the parameters cell's), overridden by
    the chosen profile's except for the names in ``kept`` (a reader's edits in JupyterLab),
    overridden by ``passed``; folders made absolute against the repository.

    The profile is ``passed["profile"]`` if given, else ``values["profile"]``; where the result
    differs from what that profile runs (:func:`profile_edits`), it is an :class:`EditedProfile`.
    """
    root = Path(root) if root is not None else find_root(stem)
    notebook = root / "notebooks" / f"{stem}.ipynb"
    defaults = cell_defaults(notebook)
    passed = {name: parse_value(name, value, defaults.get(name)) for name, value in passed.items()}
    profile = passed.get("profile", values.get("profile"))
    profile_section = profile_values(root, stem, profile)
    undeclared = sorted(set(profile_section) - set(defaults))
    if undeclared:
        raise FedlibError(f"profiles/{stem}.yaml ({profile}) sets {', '.join(undeclared)}, which the parameters "
                          f"cell of {stem} does not declare")
    from_profile = {name: value for name, value in profile_section.items() if name not in kept}
    resolved = {**values, **from_profile, **passed}
    if profile is not None:
        edits = profile_edits(resolved, {**shipped_defaults(notebook), **profile_section})
        if edits:
            resolved["profile"] = profile = EditedProfile(profile, edits)
    for name, value in resolved.items():
        if name.endswith("_dir") and value is not None:  # a blank folder is an error, not the default
            resolved[name] = str(repo_path(user_folder(value, name), root))
    for kind in ("figures", "tables"):
        if f"{kind}_dir" in resolved and resolved[f"{kind}_dir"] is None:
            resolved[f"{kind}_dir"] = str(output_folder(root, profile, kind))
    return resolved


def check_unpublished(parameters: dict, root: Path, publishing: bool | None = None) -> None:
    """Refuse a figures or tables folder inside the committed ``figures/`` or ``tables/`` unless
    ``publishing`` (None: as ``$FEDLIB_PUBLISH`` says): their index.json must name the profile that
    produced each file, and only ``./reproduce.sh --publish`` writes it."""
    if publishing is None:
        publishing = os.environ.get(PUBLISH_ENV, "") not in ("", "0")
    if publishing:
        return
    for name in ("figures_dir", "tables_dir"):
        value = parameters.get(name)
        if not value:
            continue
        path = repo_path(value, root)
        for folder in (Path(root).resolve() / f for f in COMMITTED_FOLDERS):
            if path == folder or folder in path.parents:
                raise FedlibError(f"{name} {path} is inside the committed {folder.name}/; write there with "
                                  f"./reproduce.sh --publish (it records what produced each file), or leave "
                                  f"{name} at None for output/<profile>/")


def passed_names(namespace: dict) -> set[str] | None:
    """The names papermill passed: those assigned by its injected cell, when that cell ran just
    before the current one in this kernel. None when ``namespace`` is not an IPython kernel's
    (a script that executes the cells sets every parameter itself)."""
    shell = _shell()
    if shell is None or namespace is not shell.user_ns:
        return None
    history = shell.history_manager.input_hist_raw
    previous = history[-2] if len(history) >= 2 else ""
    return set(_assignments(previous)) if previous.startswith(PAPERMILL_CELL) else set()


def shown_path(path: str | os.PathLike) -> Path:
    """``path`` as a notebook shows it: relative to the working folder when it lies inside the
    repository (so a published notebook names no machine's checkout), else as given."""
    path = Path(path)
    if path.is_absolute() and path.resolve().is_relative_to(REPO_ROOT):
        return Path(os.path.relpath(path))
    return path


GREEK = {"alpha": "α", "beta": "β", "gamma": "γ", "lambda": "λ", "mu": "μ", "tau": "τ", "rho": "ρ", "sigma": "σ"}


def plain_math(text: str) -> str:
    """``text`` with its one-letter math (``$\\mu$``) as plain Greek letters (μ), for places that
    typeset no TeX: a terminal listing, an index page, a browser tab."""
    return re.sub(r"\$\\(\w+)\$", lambda m: GREEK.get(m.group(1), m.group(0)), text)


def apply_profile(stem: str, namespace: dict) -> dict:
    """Give the parameters of notebook ``stem`` in ``namespace`` (the notebook's ``globals()``)
    their values, folders resolved against the repository, and return them (name -> value), the
    notebook's ``params`` for its grid (:mod:`fedlib.paper.grids`).

    Under papermill: passed > profile > parameters cell. In JupyterLab: the values a reader edited
    in the parameters cell > profile > the cell's other values. Call it in the cell right after the
    parameters cell. In a kernel it prints every value that differs from the cell, with what set
    it, and where outputs go, and shows fedlib's errors as one line.
    """
    shell = _shell()
    _one_line_errors(shell)
    _readable_numbers(shell)
    _short_warnings(shell)
    environment.use(os.environ)  # an edge: folder variables checked, this kernel's modes read once
    root = find_root(stem)
    notebook = root / "notebooks" / f"{stem}.ipynb"
    declared = cell_defaults(notebook)
    names = list(declared)
    values = {name: namespace[name] for name in names if name in namespace}
    passed = passed_names(namespace)
    if passed is None:  # a script executing the cells set every parameter and answers for them
        resolved = resolve_parameters(stem, values, values, root)
        _check_kinds(stem, declared, resolved, root)
        namespace.update(resolved)
        return resolved
    unknown = sorted(passed - set(names))
    if unknown:
        raise FedlibError(f"{stem} has no parameter {', '.join(unknown)}; its parameters: {', '.join(names)}")
    kept = set() if passed else edited_names(values, shipped_defaults(notebook))
    resolved = resolve_parameters(stem, values, {name: values[name] for name in passed}, root, kept=kept)
    _check_kinds(stem, declared, resolved, root)
    check_unpublished(resolved, root)
    namespace.update(resolved)
    cell = {**values, **{name: value for name, value in declared.items() if name in passed}}
    print(describe(stem, cell, resolved, passed, kept, root))
    note = profile_note(root / "profiles", stem, resolved.get("profile"))
    if note:
        mine = " (its own settings, not your edits)" if getattr(resolved["profile"], "edits", None) else ""
        print(f"about profile {resolved['profile']}{mine}: {note}")
    fetching = download_on_first_use(resolved)
    if fetching:
        print(fetching)
    if resolved.get("profile") == RETRAIN_PROFILE:
        from fedlib.reporting import retrain_time  # torch, for the speed check: not on reproduce --list's path
        estimate = retrain_time.retrain_line(root, stem)
        if estimate:
            print(estimate)
    return resolved


RETRAIN_PROFILE = "lesson"  # the profile whose stored retrain times are scaled to this machine and printed


DOWNLOADING_PROFILES = ("lesson",)  # a teaching machine with internet needs no data folder for these


def download_on_first_use(resolved: dict) -> str | None:
    """Under a profile of :data:`DOWNLOADING_PROFILES`, a missing dataset downloads on first use (this kernel's mode;
    FEDLIB_DOWNLOAD=1 for its workers) unless FEDLIB_DOWNLOAD=0 says not; returns the line to print, if any."""
    if resolved.get("profile") not in DOWNLOADING_PROFILES or os.environ.get("FEDLIB_DOWNLOAD") == "0":
        return None
    from fedlib.datasets.data import data_root, dataset_available, set_download  # read only when a lesson asks

    named = resolved.get("datasets") or [resolved.get("dataset")]
    data_dir = resolved.get("data_dir")
    missing = [d for d in named if isinstance(d, str) and not dataset_available(d, data_dir)
               and dataset_available(d, data_dir, download=True)]
    if not missing:
        return None
    os.environ["FEDLIB_DOWNLOAD"] = "1"
    set_download(True)
    return (f"not on this machine: {', '.join(missing)}; downloaded on first use by torchvision into "
            f"{data_root(data_dir)} (FEDLIB_DOWNLOAD=0 turns this off; FEDLIB_DATA points at a copy you have)")


def _check_kinds(stem: str, declared: dict, resolved: dict, root: Path) -> None:
    """The chosen profile's values, then the values the notebook runs with, against the kinds of
    its parameters cell (fedlib.reporting.parameters): one line for the first that differs."""
    profile = resolved.get("profile")
    check_parameters(f"profiles/{stem}.yaml ({profile})", declared, profile_values(root, stem, profile))
    check_parameters(stem, declared, resolved)


def _readable_numbers(shell) -> None:
    """In a kernel, the float columns of data frames print four significant digits (59.44, not
    pandas' 59.444445; a weight of 0.001 stays 0.001, where a fixed count of decimals would show
    0.000); the saved tables keep their own digits. Outside a kernel pandas is left as it is."""
    if shell is None:
        return
    import pandas as pd

    pd.set_option("display.float_format", readable_float)


def readable_float(value: float) -> str:
    """``value`` to four significant digits, thousands separated from 1,000 on."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _short_warnings(shell) -> None:
    """In a kernel, a warning prints as ``RuntimeWarning: message``: without the file and line of
    fedlib's source that raised it (a path on the machine that ran the notebook, in every
    published copy). Outside a kernel Python's format is kept."""
    if shell is None:
        return
    import warnings

    warnings.formatwarning = _short_warning


def _short_warning(message, category, filename, lineno, line=None) -> str:
    return f"{category.__name__}: {message}\n"


def describe(stem: str, cell: dict, resolved: dict, passed: set[str], kept: set[str], root: Path) -> str:
    """What :func:`apply_profile` did, for the reader: which profile, each value that differs from
    the parameters ``cell`` as ``rounds: 3 -> 15 (profile quick)``, each edit kept over the profile,
    and where outputs go."""
    profile = resolved.get("profile")
    from_profile = profile_values(root, stem, profile)
    source = f"profile {profile} (profiles/{stem}.yaml)" if profile else "no profile (profile = None)"
    lines = []
    for name in resolved:
        if name.endswith("_dir") and name not in passed and name not in from_profile:
            continue  # resolved against the repository: shown on the last line
        before, after = cell.get(name), resolved[name]
        if name.endswith("_dir") and after not in (None, ""):
            after = _shown(after, root)  # relative to the repository: no machine's path in a published notebook
        if name in kept and name in from_profile and _plain(from_profile[name]) != _plain(after):
            lines.append(f"{name}: {_value(after)} as you edited it (profile {profile} has {_value(from_profile[name])})")
        elif _plain(before) != _plain(after):
            why = "passed" if name in passed else f"profile {profile}"
            lines.append(f"{name}: {_value(before)} -> {_value(after)} ({why})")
    head = f"{source}: the parameters cell as written" if not lines else f"{source}; differs from the parameters cell:"
    edited = getattr(profile, "edits", None)
    if edited:
        lines.append(f"no run of profile {profile} ({', '.join(edited)} edited): figures stamped \"profile "
                     f"{profile.label()}\", beside the profile's")
    where = [f"{kind} -> {_shown(resolved[f'{kind}_dir'], root)}" for kind in ("figures", "tables", "results")
             if resolved.get(f"{kind}_dir")]
    return "\n".join([head, *(f"  {line}" for line in lines), *([", ".join(where)] if where else [])])


def _value(value) -> str:
    """A parameter's value as the parameters cell would show it, strings without quotes."""
    return value if isinstance(value, str) else repr(value)


def _shown(path: str, root: Path) -> str:
    """``path`` relative to the repository when inside it."""
    try:
        return str(Path(path).relative_to(Path(root).resolve()))
    except ValueError:
        return str(path)


def _shell():
    """The running IPython shell, or None (plain Python, or IPython not installed)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with the notebook extras
        return None
    return get_ipython()


# what a cell may raise on bad input: shown as one line when fedlib.errors.explain knows the error
ONE_LINE_ERRORS = (FedlibError, yaml.YAMLError, json.JSONDecodeError, OverflowError, RuntimeError)


def _one_line_errors(shell) -> None:
    """Show a :class:`FedlibError` raised in a notebook cell as one line, not a traceback, and so
    every input error :func:`fedlib.errors.explain` knows (invalid YAML or JSON, an overflow);
    any other error keeps its traceback."""

    def show(shell, etype, value, tb, tb_offset=None):
        explained = explain(value)
        if explained is None:
            return shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        line = f"{etype.__name__}: {explained}"
        shell._showtraceback(etype, value, [line])  # the error output (and reply) papermill reads
        return [line]

    if shell is not None and FedlibError not in shell.custom_exceptions:
        shell.set_custom_exc(ONE_LINE_ERRORS, show)
