"""The peak resident memory of this process over a block of code, and handing freed memory back
to the system between blocks: what a dry run's ``peak_rss_mb`` column measures per config."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import re
import threading
from pathlib import Path


class PeakMemory:
    """Peak resident memory (MB) of this process inside the block.

    On Linux the kernel's high-water mark (VmHWM) is reset on entry and read on exit: exact, and
    it counts every allocation (torch's CPU tensors included). Elsewhere a thread samples the
    resident size every 10 ms.
    """

    STATUS = Path("/proc/self/status")

    def __enter__(self) -> "PeakMemory":
        self.megabytes = float("nan")
        self._exact = _reset_high_water_mark()
        self._stop = threading.Event()
        self._sampled = 0
        if not self._exact:
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._exact:
            self.megabytes = round(_status_kb("VmHWM") / 1024, 1)
            return
        self._stop.set()
        self._thread.join()
        self.megabytes = round(self._sampled / 2 ** 20, 1)

    def _sample(self) -> None:
        import psutil

        process = psutil.Process()
        while not self._stop.wait(0.01):
            self._sampled = max(self._sampled, process.memory_info().rss)


def _reset_high_water_mark() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return _status_kb("VmHWM") > 0
    except OSError:
        return False


def _status_kb(field: str) -> int:
    match = re.search(rf"^{field}:\s+(\d+)\s+kB", PeakMemory.STATUS.read_text(), re.MULTILINE)
    return int(match.group(1)) if match else 0


def release_memory() -> None:
    """Collect garbage and hand freed memory back to the system (glibc's malloc_trim), so that
    the next block's peak starts from what this process really holds."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
