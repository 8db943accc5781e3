"""The flat paths of earlier releases (``fedlib.engine``, ``from fedlib import store``) still work,
for one release: each is the very module at its new path, so notebooks, users' scripts, pickles
and monkeypatching reach the same object (``fedlib.MOVED`` is the table)."""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import fedlib

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("old", sorted(fedlib.MOVED))
def test_each_old_path_is_the_module_at_its_new_path(old):
    new = fedlib.MOVED[old]
    assert importlib.import_module(old) is importlib.import_module(new)
    assert sys.modules[old] is sys.modules[new]
    assert sys.modules[new].__name__ == new  # it ran once, under its new name


def test_a_moved_package_takes_its_submodules():
    import fedlib.grids.pkd
    import fedlib.paper.grids.pkd

    assert fedlib.grids.pkd is fedlib.paper.grids.pkd
    assert fedlib.new_name("fedlib.grids.base") == "fedlib.paper.grids.base"
    assert fedlib.new_name("fedlib.core.engine") is None and fedlib.new_name("fedlib.algorithms.pkd") is None


def test_from_fedlib_import_gives_the_new_modules():
    from fedlib import data, engine, store
    from fedlib.core import engine as new_engine
    from fedlib.core import store as new_store
    from fedlib.datasets import data as new_data

    assert (engine, store, data) == (new_engine, new_store, new_data)


def test_monkeypatching_an_old_path_patches_the_new_one(monkeypatch):
    import fedlib.core.engine
    import fedlib.engine

    monkeypatch.setattr(fedlib.engine, "choose_backend", "patched")
    assert fedlib.core.engine.choose_backend == "patched"
    monkeypatch.setattr("fedlib.store.REFERENCE_RESULTS", Path("elsewhere"))
    assert fedlib.core.store.REFERENCE_RESULTS == Path("elsewhere")


def test_a_class_pickled_under_an_old_path_loads():
    from fedlib.core.config import RunConfig

    stored = pickle.dumps(RunConfig, protocol=0)  # GLOBAL opcode: the module path as text
    assert b"fedlib.core.config" in stored
    assert pickle.loads(stored.replace(b"fedlib.core.config", b"fedlib.config")) is RunConfig


def test_import_fedlib_stays_light_and_python_m_runs_an_old_path():
    code = "import sys, fedlib; print(sorted(m for m in sys.modules if m.startswith('fedlib')))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "['fedlib', 'fedlib.errors']", done.stderr
    done = subprocess.run([sys.executable, "-m", "fedlib.reproduce", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "usage:" in done.stdout, done.stderr
