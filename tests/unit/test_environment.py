"""The environment is read at the edges (the command line, reproduce, a notebook's set-up, a
worker process) and passed down from there: the library's modes are arguments or modes an edge
set, never a variable read halfway down."""

from fedlib.core import config
from fedlib.core.config import RunConfig
from fedlib.engine import engine
from fedlib.reporting import notebook


def test_a_notebooks_set_up_reads_the_modes_once(monkeypatch):
    monkeypatch.setenv("FEDLIB_RENDER_ONLY", "1")
    monkeypatch.setenv("FEDLIB_BACKEND", "sequential")
    monkeypatch.setenv("FEDLIB_DETERMINISTIC", "off")
    assert not engine.render_only() and RunConfig().backend == "auto", "nothing below the edge reads them"
    notebook.use_environment()
    assert engine.render_only() and RunConfig().backend == "sequential" and RunConfig().deterministic is False
    monkeypatch.delenv("FEDLIB_RENDER_ONLY")
    assert engine.render_only(), "read once: the kernel keeps the mode it started with"
    monkeypatch.setenv("FEDLIB_RENDER_ONLY", "0")
    notebook.use_environment()
    assert not engine.render_only(), "0 is off"


def test_the_modes_have_public_resets():
    assert engine.set_render_only(True) is False and engine.set_render_only(False) is True
    before = config.set_defaults(backend="threads", deterministic=False)
    assert before == {"backend": "auto", "deterministic": True}
    config.reset_defaults()
    assert RunConfig().backend == "auto" and RunConfig().deterministic is True
