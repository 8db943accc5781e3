"""Bit-identical runs on CUDA: deterministic kernels by default, an explicit opt-out for speed.

On a CPU, torch's kernels already give the same bits for the same inputs and thread count, and
fedlib leaves every flag as it is there. On CUDA, several kernels (atomic-add reductions,
cuBLAS with its default workspace, cuDNN's autotuned algorithms) sum in an order that changes
from call to call, so the same config run twice drifts apart. :func:`configure` turns on
``torch.use_deterministic_algorithms``, cuDNN's deterministic mode (autotuning off) and the
cuBLAS workspace setting that makes matmuls repeatable; a run with ``deterministic=False``
(``--nondeterministic``, ``$FEDLIB_DETERMINISTIC=0``) turns them off, and meta.json records which.

cuBLAS reads ``CUBLAS_WORKSPACE_CONFIG`` when it creates its handle, at the first matmul of
the process, so ``import fedlib`` sets it (unless the user did): before any run, or any of a
notebook's own work, puts a tensor on the GPU. A workspace of that size costs nothing measurable.

The flags are torch's, process-wide: :func:`restored` puts back the values a run found, so a
CPU run, or the user's own work, after a CUDA run in the same process is not trained under them.
The opt-out turns cuDNN's autotuning on (the speed it is for).

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
_ON = ("1", "true", "on", "yes")


def switch(value: str | None) -> bool:
    """``$FEDLIB_DETERMINISTIC``'s value (None: unset) read as a switch (0/1, true/false, on/off,
    yes/no, any case), True when unset or blank; another value is one line. The library never
    reads the variable: an edge passes its value (:func:`fedlib.core.config.defaults_from`)."""
    text = (value or "").strip().lower()
    if text and text not in _ON + _OFF:
        raise FedlibError(f"${ENV}={value!r} is no switch; set it to 1 or 0 (true/false, on/off, "
                          "yes/no), or unset it for deterministic runs")
    return text not in _OFF


def configure(device: torch.device, deterministic: bool) -> dict[str, bool]:
    """Set torch's process-wide determinism flags for a run on ``device``; returns what meta.json
    records (``{"deterministic": ...}`` on CUDA, nothing elsewhere: CPU flags are left alone)."""
    if device.type != "cuda":
        return {}
    if deterministic:
        os.environ.setdefault(*CUBLAS_SETTING)
    torch.use_deterministic_algorithms(deterministic)
    torch.backends.cudnn.deterministic = deterministic
    torch.backends.cudnn.benchmark = not deterministic
    return {"deterministic": deterministic}


def _flags() -> dict[str, bool]:
    return {"algorithms": torch.are_deterministic_algorithms_enabled(),
            "cudnn_deterministic": torch.backends.cudnn.deterministic, "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "cudnn_tf32": torch.backends.cudnn.allow_tf32, "matmul_tf32": torch.backends.cuda.matmul.allow_tf32}


@contextmanager
def restored() -> Iterator[None]:
    """Inside the block, set the flags as a run needs (:func:`configure`, the engine's TF32 switch);
    after it, every one as it was before, whatever happened inside."""
    before = _flags()
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before["algorithms"])
        torch.backends.cudnn.deterministic = before["cudnn_deterministic"]
        torch.backends.cudnn.benchmark = before["cudnn_benchmark"]
        torch.backends.cudnn.allow_tf32 = before["cudnn_tf32"]
        torch.backends.cuda.matmul.allow_tf32 = before["matmul_tf32"]


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
