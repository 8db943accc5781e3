"""The one kind of worker process fedlib starts.

A worker is a spawned Python process that receives jobs (config dicts) through a pipe, runs one
job function on each (``job(payload, threads)``, a module-level function so that it pickles),
sends the result back, and leaves when it receives None. It dies with the process that started
it, even one killed with SIGKILL, so nothing goes on training unwatched. The executor trains
runs in workers (``training_job.train_one``); the dry run measures configs in them
(``dry_run.measure_row``). What is done around the processes (GPU places, timeouts, a new worker
for another kind of config) is the pool's that holds them (``pools.LocalPool``).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from multiprocessing.connection import wait
from typing import Any, Callable, Sequence

PARENT_POLL_SECONDS = 1.0  # how often a worker looks whether its parent is still there

Job = Callable[[Any, int], Any]


class WorkerProcess:
    """One spawned worker running ``job(payload, threads)`` for each payload it is sent; ``gpu``:
    the one card it sees (as cuda:0), None for none chosen."""

    def __init__(self, job: Job, threads: int, gpu: int | None = None):
        context = multiprocessing.get_context("spawn")
        self.connection, child = context.Pipe()
        self.process = context.Process(target=serve, args=(child, job, threads, gpu, os.getpid()), daemon=True,
                                       name="fedlib-worker")
        self.process.start()
        child.close()
        self.gpu = gpu

    def send(self, payload: Any) -> None:
        """Hand the worker its next job."""
        self.connection.send(payload)

    def waitables(self) -> list:
        """What :func:`ready_handles` waits on: a result in the pipe, or the process's end."""
        return [self.connection, self.process.sentinel]

    def result(self) -> Any | None:
        """The sent job's result; None when the process ended without one."""
        try:
            if self.connection.poll():
                return self.connection.recv()
        except (EOFError, OSError):
            pass
        return None

    def death(self) -> str:
        """Why the process ended without a result, in a few words (waits up to 10 s for its end)."""
        self.process.join(timeout=10)
        code = self.process.exitcode
        hint = ", killed: out of memory?" if code == -9 else ""
        return f"worker process {self.process.pid} died (exit code {code}{hint})"

    def alive(self) -> bool:
        return self.process.is_alive()

    def stop(self, idle: bool) -> None:
        """End the process: asked to when ``idle`` (it tidies up), killed when busy or deaf."""
        if idle and self.process.is_alive():
            try:
                self.connection.send(None)
                self.process.join(timeout=10)
            except (BrokenPipeError, OSError):
                pass
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.connection.close()


def ready_handles(workers: Sequence[WorkerProcess], timeout: float) -> set:
    """The waitables of ``workers`` that have a result or an end to collect (waits up to ``timeout`` s)."""
    if not workers:
        return set()
    return set(wait([handle for worker in workers for handle in worker.waitables()], timeout=timeout))


def has_news(worker: WorkerProcess, handles: set) -> bool:
    """Whether ``worker`` is among :func:`ready_handles`' answer."""
    return worker.connection in handles or worker.process.sentinel in handles


def serve(connection, job: Job, threads: int, gpu: int | None, parent: int | None = None) -> None:
    """A worker's life: a payload in, ``job(payload, threads)`` out, until None arrives, the pipe
    breaks (the parent is gone: what it was running resumes later) or Ctrl-C; it ends quietly,
    without a traceback in the parent's log. It dies with ``parent`` (a pid), however that ends."""
    if parent is not None:
        die_with(parent)
    if gpu is not None:  # before torch initialises CUDA: this worker sees one GPU, as cuda:0
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
    use_environment()
    try:
        for payload in iter(connection.recv, None):
            connection.send(job(payload, threads))
    except (EOFError, BrokenPipeError, ConnectionResetError, KeyboardInterrupt):
        return


def die_with(parent: int) -> None:
    """End this process as soon as process ``parent`` is gone: a daemon thread looks once a
    second whether this process has been handed to another parent (what the OS does when the
    parent dies, however it died). A run being trained keeps its last checkpoint and its claim,
    which the next worker takes over (the claim's process is dead)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="fedlib-parent-watch", daemon=True).start()


def use_environment() -> None:
    """A worker process is an edge: the modes its environment (inherited from the process that
    started it) asks for are read at its start (:mod:`fedlib.orchestration.environment`)."""
    from fedlib.orchestration import environment

    environment.use(os.environ)


def train_in_ray(payload: dict, threads: int) -> Any:
    """:func:`fedlib.orchestration.training_job.train_one` as a Ray task: a Ray worker is a
    process of its own, so the modes its environment asks for are read first."""
    from fedlib.orchestration.training_job import train_one

    use_environment()
    return train_one(payload, threads)
