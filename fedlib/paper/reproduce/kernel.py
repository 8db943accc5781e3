"""The kernels the notebooks run in: which Jupyter kernel, its log kept quiet, and what each kernel
inherits through the environment (this checkout first on PYTHONPATH; whether publishing is asked)."""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

from fedlib.errors import one_of
from fedlib.reporting.notebook import PUBLISH_ENV, REPO_ROOT

# The kernel's own log stays silent: its "running over TCP without encryption" warning (it listens on
# localhost) and the "KeyboardInterrupt caught in kernel" error that jupyter_client's interrupt before each
# shutdown provokes now and then (4 of 36 notebooks in one smoke run) say nothing about the notebook; a cell
# that fails or a kernel that dies is reported by papermill, in the notebook's line of the summary.
QUIET_KERNEL = ["--IPKernelApp.log_level=CRITICAL"]


def default_kernel() -> str:
    """The ``fedlib`` kernel that reproduce.sh registers, else the stock ``python3``."""
    return "fedlib" if "fedlib" in _kernel_names() else "python3"


def _kernel_names() -> set[str]:
    from jupyter_client.kernelspec import KernelSpecManager

    return set(KernelSpecManager().find_kernel_specs())


def check_kernel(kernel: str) -> None:
    """Refuse a kernel that Jupyter does not know, naming those it knows."""
    if kernel not in _kernel_names():
        raise one_of("kernel", kernel, _kernel_names())


@contextmanager
def fedlib_importable() -> Iterator[None]:
    """Put this checkout first on the kernel's PYTHONPATH (the kernel inherits our environment),
    so notebooks import the fedlib beside them even when it is not pip-installed."""
    previous = os.environ.get("PYTHONPATH")
    parts = [str(REPO_ROOT)] + ([previous] if previous else [])
    os.environ["PYTHONPATH"] = os.pathsep.join(parts)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = previous


@contextmanager
def publishing_env(publish: bool) -> Iterator[None]:
    """Tell the kernels (through the environment they inherit) that writing figures/ and tables/ is asked for."""
    previous = os.environ.pop(PUBLISH_ENV, None)
    if publish:
        os.environ[PUBLISH_ENV] = "1"
    try:
        yield
    finally:
        os.environ.pop(PUBLISH_ENV, None)
        if previous is not None:
            os.environ[PUBLISH_ENV] = previous
