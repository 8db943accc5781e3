"""The edges' one reader of fedlib's modes: environment variables in, process modes out.

Below the edges no module reads the environment: a mode is an argument, or a process-wide
setting with a public setter (and reset) in the module it belongs to. The edges (the command
line, ``reproduce``, a notebook's set-up, a worker process, a tool's main) hand their
environment to :func:`apply` (for good: a kernel, a worker) or :func:`applied` (for one call:
the command line, ``reproduce``, put back afterwards), so a variable means the same wherever
fedlib runs, and a bad value is one line where it is read.

| variable | mode | where it is kept |
|---|---|---|
| ``FEDLIB_BACKEND``, ``FEDLIB_DETERMINISTIC`` | a RunConfig's default ``backend``, ``deterministic`` | ``core.config.set_defaults`` |
| ``FEDLIB_RENDER_ONLY`` | runs come from the stores only | ``engine.set_render_only`` |
| ``FEDLIB_DOWNLOAD`` | a missing dataset is downloaded | ``datasets.data.set_download`` |
| ``FEDLIB_THREADS`` | intra-op threads per run | ``resources.set_default_threads`` |
| ``FEDLIB_STACK_MEMORY`` | bytes the stacked backend's client stack may use | ``stacked.set_stack_memory`` |
| ``FEDLIB_MODEL_READS`` | the file each analysed run's hash is noted in | ``store.record.set_model_reads_log`` |
| ``FEDLIB_WRITE_REFERENCE`` | runs may train into the reference store | ``store.paths.set_write_reference`` |

The folder variables (``FEDLIB_DATA``, ``FEDLIB_CACHE``, ``FEDLIB_RESULTS``, ``FEDLIB_REFERENCE``)
are not modes but the folders a user names: ``fedlib.folders`` is their one reader.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Mapping


def _on(value: str | None) -> bool:
    return (value or "") not in ("", "0")


def modes_from(environ: Mapping[str, str]) -> dict:
    """The modes ``environ`` (an edge's ``os.environ``) asks for; a bad value is one line."""
    from fedlib.core import config
    from fedlib.datasets import data
    from fedlib.engine import engine
    from fedlib.engine.backends import stacked
    from fedlib.orchestration import resources
    from fedlib.store import paths, record

    return {"defaults": config.defaults_from(environ), "render_only": _on(environ.get(engine.RENDER_ONLY_ENV)),
            "download": environ.get(data.DOWNLOAD_ENV) == "1",
            "threads": resources.threads_from(environ.get(resources.THREADS_ENV)),
            "stack_memory": _stack_memory(environ.get(stacked.STACK_MEMORY_ENV)),
            "model_reads": environ.get(record.MODEL_READS_ENV) or None,
            "write_reference": _on(environ.get(paths.WRITE_REFERENCE_ENV))}


def _stack_memory(text: str | None) -> int | None:
    """``$FEDLIB_STACK_MEMORY``'s value (unset or blank: None) as bytes; anything but a whole number is one line."""
    from fedlib.errors import FedlibError

    chosen = (text or "").strip()
    if chosen and (not chosen.isdigit() or int(chosen) < 1):
        raise FedlibError(f"FEDLIB_STACK_MEMORY={chosen!r}: give the bytes the client stack may use, "
                          "a whole number such as 8000000000")
    return int(chosen) if chosen else None


def set_modes(values: Mapping) -> dict:
    """Set this process's modes to ``values`` (:func:`modes_from`'s answer); returns the modes
    before, in the same form."""
    from fedlib.core import config
    from fedlib.datasets import data
    from fedlib.engine import engine
    from fedlib.engine.backends import stacked
    from fedlib.orchestration import resources
    from fedlib.store import paths, record

    return {"defaults": config.set_defaults(**values["defaults"]),
            "render_only": engine.set_render_only(values["render_only"]),
            "download": data.set_download(values["download"]),
            "threads": resources.set_default_threads(values["threads"]),
            "stack_memory": stacked.set_stack_memory(values["stack_memory"]),
            "model_reads": record.set_model_reads_log(values["model_reads"]),
            "write_reference": paths.set_write_reference(values["write_reference"])}


def use(environ: Mapping[str, str]) -> None:
    """A process's set-up (a notebook's, a worker's): the folder variables checked
    (:func:`fedlib.folders.check_environment`), then :func:`apply`."""
    from fedlib.folders import check_environment

    check_environment()
    apply(environ)


def apply(environ: Mapping[str, str]) -> None:
    """Set this process's modes from ``environ``, for good (a kernel's set-up, a worker's start)."""
    set_modes(modes_from(environ))


@contextmanager
def applied(environ: Mapping[str, str]) -> Iterator[None]:
    """Inside the block, the modes ``environ`` asks for; after it, the modes found (the command
    line and ``reproduce``, called in a process that goes on)."""
    before = set_modes(modes_from(environ))
    try:
        yield
    finally:
        set_modes(before)


def reset() -> None:
    """fedlib's own modes: what a process whose environment sets none of the variables runs with."""
    apply({})
