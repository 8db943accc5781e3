"""The environment is read at the edges (the command line, reproduce, a notebook's set-up, a
worker process) and passed down from there: the library's modes are arguments or modes an edge
set, never a variable read halfway down."""

import ast
import inspect
import os
from pathlib import Path

import pytest
import torch

import fedlib
from fedlib.core import config
from fedlib.core.config import RunConfig
from fedlib.engine import engine
from fedlib.errors import FedlibError
from fedlib.orchestration import environment, workers
from fedlib.reporting import notebook


def test_a_process_set_up_reads_the_modes_once(monkeypatch):
    monkeypatch.setenv("FEDLIB_RENDER_ONLY", "1")
    monkeypatch.setenv("FEDLIB_BACKEND", "sequential")
    monkeypatch.setenv("FEDLIB_DETERMINISTIC", "off")
    assert not engine.render_only() and RunConfig().backend == "auto", "nothing below the edge reads them"
    environment.use(os.environ)  # what a notebook's set-up and a worker's start do
    assert engine.render_only() and RunConfig().backend == "sequential" and RunConfig().deterministic is False
    monkeypatch.delenv("FEDLIB_RENDER_ONLY")
    assert engine.render_only(), "read once: the kernel keeps the mode it started with"
    monkeypatch.setenv("FEDLIB_RENDER_ONLY", "0")
    environment.use(os.environ)
    assert not engine.render_only(), "0 is off"
    assert "environment.use(os.environ)" in inspect.getsource(notebook.apply_profile)
    assert "use_environment()" in inspect.getsource(workers.serve)


def test_the_modes_have_public_resets():
    assert engine.set_render_only(True) is False and engine.set_render_only(False) is True
    before = config.set_defaults(backend="threads", deterministic=False)
    assert before == {"backend": "auto", "deterministic": True}
    config.reset_defaults()
    assert RunConfig().backend == "auto" and RunConfig().deterministic is True


# The modules that may touch os.environ, each an edge or named for why; any other module that
# reads the environment fails here: take the value at an edge and pass it down (a mode with a
# public setter in its module, read by fedlib.orchestration.environment).
ENVIRONMENT_READERS = {
    "__init__.py": "sets CUBLAS_WORKSPACE_CONFIG for cuBLAS before any CUDA work (a write for torch)",
    "folders.py": "the ground floor's one resolver of the folders a user names by variable ($FEDLIB_DATA, ...)",
    "core/determinism.py": "a deterministic CUDA run sets CUBLAS_WORKSPACE_CONFIG for cuBLAS (a write for torch)",
    "commands/cli.py": "the command line: an edge",
    "paper/reproduce/command_line.py": "reproduce's command line: an edge; sets the variables its kernels inherit",
    "paper/reproduce/kernel.py": "starts the notebooks' kernels: sets PYTHONPATH and $FEDLIB_PUBLISH for them",
    "reporting/notebook.py": "a notebook's set-up: an edge (a kernel's modes, $FEDLIB_PUBLISH, downloads)",
    "orchestration/workers.py": "a worker process's start: an edge (and the GPU it sees, CUDA_VISIBLE_DEVICES)",
}


def environment_uses(path: Path) -> list[int]:
    """The lines of ``path`` that use ``os.environ``, ``os.getenv`` or ``os.putenv`` (code, not text)."""
    tree = ast.parse(path.read_text(), str(path))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "putenv") \
                and isinstance(node.value, ast.Name) and node.value.id == "os":
            lines.append(node.lineno)
        if isinstance(node, ast.ImportFrom) and node.module == "os" \
                and {a.name for a in node.names} & {"environ", "getenv", "putenv"}:
            lines.append(node.lineno)
    return sorted(lines)


def test_no_module_below_the_edges_reads_the_environment():
    package = Path(fedlib.__file__).parent
    found = {path.relative_to(package).as_posix(): environment_uses(path) for path in sorted(package.rglob("*.py"))}
    readers = {name for name, lines in found.items() if lines}
    strays = sorted(f"fedlib/{name}:{found[name][0]}" for name in readers - set(ENVIRONMENT_READERS))
    assert not strays, f"read the environment at an edge and pass the value down: {', '.join(strays)}"
    stale = sorted(set(ENVIRONMENT_READERS) - readers)
    assert not stale, f"no longer touch os.environ, drop them from ENVIRONMENT_READERS: {', '.join(stale)}"


def test_the_scan_sees_a_reader(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('"""os.environ in a docstring is text."""\nimport os\nx = os.environ.get("A")\n'
                      'from os import getenv\n')
    assert environment_uses(module) == [3, 4]


def test_every_mode_has_a_variable_and_a_reset(monkeypatch):
    from fedlib.datasets import data
    from fedlib.engine.backends import stacked
    from fedlib.orchestration import environment, resources
    from fedlib.store import paths, record

    variables = {"FEDLIB_RENDER_ONLY": "1", "FEDLIB_DOWNLOAD": "1", "FEDLIB_THREADS": "1",
                 "FEDLIB_STACK_MEMORY": "123456789", "FEDLIB_MODEL_READS": "reads.txt",
                 "FEDLIB_WRITE_REFERENCE": "1", "FEDLIB_BACKEND": "threads", "FEDLIB_DETERMINISTIC": "0"}
    with environment.applied(variables):
        assert engine.render_only() and data._download_allowed(False)
        assert resources.thread_budget() == 1 and stacked.stack_memory(torch.device("cpu")) == 123456789
        assert record._MODEL_READS == "reads.txt" and paths._WRITE_REFERENCE
        assert RunConfig().backend == "threads" and RunConfig().deterministic is False
    assert not engine.render_only() and not data._download_allowed(False) and RunConfig().backend == "auto"
    assert record._MODEL_READS is None and not paths._WRITE_REFERENCE and stacked._STACK_MEMORY == [None]
    environment.apply(variables)
    environment.reset()
    assert not engine.render_only() and resources._DEFAULT_THREADS is None
    with pytest.raises(FedlibError, match="FEDLIB_THREADS must be a whole number"):
        environment.modes_from({"FEDLIB_THREADS": "many"})
    with pytest.raises(FedlibError, match="FEDLIB_STACK_MEMORY='8GiB'"):
        environment.modes_from({"FEDLIB_STACK_MEMORY": "8GiB"})
