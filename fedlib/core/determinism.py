"""Bit-identical runs on CUDA: deterministic kernels by default, an explicit opt-out for speed.

On a CPU, torch's kernels already give the same bits for the same inputs and thread count, and
fedlib leaves every flag as it is there. On CUDA, several kernels (atomic-add reductions,
cuBLAS with its default workspace, cuDNN's autotuned algorithms) sum in an order that changes
from call to call, so the same config run twice drifts apart. :func:`configure` turns on
``torch.use_deterministic_algorithms``, cuDNN's deterministic mode (autotuning off) and the
cuBLAS workspace setting that makes matmuls repeatable; a run with ``deterministic=False``
(``--nondeterministic``, ``$FEDLIB_DETERMINISTIC=0``) turns them off, and meta.json records which.

cuBLAS reads ``CUBLAS_WORKSPACE_CONFIG`` when it creates its handle, at the first matmul of
the process, so this module sets it (unless the user did) as soon as it is imported: before
any run puts a tensor on the GPU. A workspace of that size costs nothing measurable.

An op without a deterministic CUDA kernel raises torch's RuntimeError mid-run;
:func:`explained` turns that into one line naming the op and the opt-out.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from typing import Iterator

import torch

from fedlib.errors import FedlibError

ENV = "FEDLIB_DETERMINISTIC"  # "0" (or "false", "off", "no"): the speed opt-out for runs configured without it
CUBLAS_SETTING = ("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
OPT_OUT = "deterministic=False (--nondeterministic, or $FEDLIB_DETERMINISTIC=0)"
_OFF = ("0", "false", "off", "no")

os.environ.setdefault(*CUBLAS_SETTING)


def default_deterministic() -> bool:
    """The default of ``RunConfig.deterministic``: True unless ``$FEDLIB_DETERMINISTIC`` says off."""
    return os.environ.get(ENV, "").strip().lower() not in _OFF


def configure(device: torch.device, deterministic: bool) -> dict[str, bool]:
    """Set torch's process-wide determinism flags for a run on ``device``; returns what meta.json
    records (``{"deterministic": ...}`` on CUDA, nothing elsewhere: CPU flags are left alone)."""
    if device.type != "cuda":
        return {}
    if deterministic:
        os.environ.setdefault(*CUBLAS_SETTING)
    torch.use_deterministic_algorithms(deterministic)
    torch.backends.cudnn.deterministic = deterministic
    torch.backends.cudnn.benchmark = False if deterministic else torch.backends.cudnn.benchmark
    return {"deterministic": deterministic}


def recorded_deterministic(meta: dict) -> bool:
    """Whether a run's meta.json says it was trained to be bit-identical: a CPU run always
    (CPU kernels are), a CUDA run unless it opted out (runs stored before the flag: not)."""
    environment = meta.get("environment") or {}
    if not str(meta.get("device", "cpu")).startswith("cuda"):
        return True
    return bool(environment.get("deterministic", False))


_NO_KERNEL = re.compile(r"^\s*(?P<op>\S+) does not have a deterministic implementation")


def translate(error: RuntimeError) -> FedlibError | None:
    """torch's "no deterministic implementation" error as one FedlibError line (None for other errors)."""
    text = str(error)
    match = _NO_KERNEL.search(text)
    if match:
        return FedlibError(f"{match['op']} has no deterministic CUDA kernel; to run anyway (repeat runs then "
                           f"differ in the last bits), set {OPT_OUT}")
    if "CUBLAS_WORKSPACE_CONFIG" in text:
        return FedlibError(f"cuBLAS was started before fedlib could set {CUBLAS_SETTING[0]}={CUBLAS_SETTING[1]}: "
                           f"export it before starting Python (or import fedlib before any CUDA work), or set {OPT_OUT}")
    return None


@contextmanager
def explained() -> Iterator[None]:
    """Re-raise torch's determinism errors inside the block as one-line FedlibErrors."""
    try:
        yield
    except RuntimeError as error:
        translated = translate(error)
        if translated is None:
            raise
        raise translated from None
