"""The pools :func:`fedlib.orchestration.scheduler.schedule` hands jobs to: where they run.
``SerialPool`` in this process, ``LocalPool`` in spawned worker processes on this machine (each
GPU run placed on a card with room for its estimated memory), ``RayPool`` as Ray tasks. Every
pool answers the same five calls: ``idle``, ``running``, ``fits``, ``submit`` and ``collect``,
then ``close``. The executor trains its runs in any of them; the dry run measures its configs in
a ``LocalPool`` built with its own job function, a timeout per job and a rule for replacing a
worker (:func:`fedlib.orchestration.dry_run.dry_run`)."""

from __future__ import annotations

import time
from typing import Any, Callable

from fedlib.core.config import RunConfig
from fedlib.errors import FedlibError, one_line
from fedlib.orchestration import resources
from fedlib.orchestration.training_job import train_one
from fedlib.orchestration.workers import Job, WorkerProcess, has_news, ready_handles, train_in_ray

RAY_INSTALL = "pip install -e '.[ray]'"  # the optional extra that brings Ray


class SerialPool:
    """Runs in this process, one at a time (its thread count restored afterwards)."""

    def __init__(self, threads: int):
        self.threads, self.job = threads, None

    def fits(self, cfg: RunConfig) -> bool:
        return True

    def idle(self) -> int:
        return 0 if self.job else 1

    def running(self) -> int:
        return 1 if self.job else 0

    def submit(self, cfg: RunConfig) -> None:
        self.job = cfg

    def collect(self, timeout: float) -> list[tuple[RunConfig, dict]]:
        import torch

        if self.job is None:
            return []
        cfg, self.job, threads = self.job, None, torch.get_num_threads()
        try:
            return [(cfg, train_one(cfg.to_dict(), self.threads))]
        finally:
            torch.set_num_threads(threads)

    def close(self) -> None:
        pass


class LocalWorker(WorkerProcess):
    """A worker process that runs the configs it is sent through ``job`` (by default trains
    them), one at a time, on its GPU if it has one."""

    def __init__(self, threads: int, gpu: int | None, job: Job = train_one):
        super().__init__(job, threads, gpu)
        self.job: RunConfig | None = None  # the config it is running
        self.last: RunConfig | None = None  # the last config it was given
        self.jobs = 0  # configs it was given
        self.started = 0.0  # time.monotonic() when it was given its config
        self.reserved = 0  # GPU bytes its run was placed with

    def give(self, cfg: RunConfig) -> None:
        self.job = self.last = cfg
        self.jobs += 1
        self.started = time.monotonic()
        self.send(cfg.to_dict())

    def stop(self) -> None:
        """End the process: asked to when idle, killed when busy (a run resumes later)."""
        super().stop(idle=self.job is None)


Replace = Callable[[LocalWorker, RunConfig], bool]


class LocalPool:
    """``workers`` local processes running ``job`` on the configs they are given, started as
    configs need them and replaced when one dies, overruns ``timeout_s`` (None: never), or when
    ``replace(worker, cfg)`` says it must not run ``cfg`` (None: never). Without ``use_gpus``
    no config is placed on a GPU: each is sent as it is (the dry run's run on the CPU)."""

    def __init__(self, workers: int, threads: int, job: Job = train_one, *, timeout_s: float | None = None,
                 replace: Replace | None = None, use_gpus: bool = True):
        self.size, self.threads = workers, threads
        self.job_function, self.timeout_s, self.replace = job, timeout_s, replace
        self.gpus = local_gpu_count() if use_gpus else 0
        self.capacity = resources.gpu_capacities(self.gpus) if self.gpus else []
        self.reserved = [0] * self.gpus
        self.needs: dict[str, int] = {}  # config hash -> estimated GPU bytes
        self.workers: list[LocalWorker] = []

    def idle(self) -> int:
        return self.size - self.running()

    def running(self) -> int:
        return sum(w.job is not None for w in self.workers)

    def fits(self, cfg: RunConfig) -> bool:
        """Whether ``cfg`` can start now: a CPU run always; a GPU run when a GPU has room for its
        estimate, or when nothing runs (a run larger than the estimate allows then runs alone)."""
        return not self._on_gpu(cfg) or self.running() == 0 or self._place(cfg)[0] is not None

    def _on_gpu(self, cfg: RunConfig) -> bool:
        return self.gpus > 0 and cfg.device != "cpu"

    def _place(self, cfg: RunConfig) -> tuple[int | None, int]:
        """(the GPU for ``cfg``, the bytes reserved for it there): a card with room for its estimate
        that holds fewer runs than measured throughput says pay for its model."""
        if cfg.hash() not in self.needs:
            self.needs[cfg.hash()] = resources.run_gpu_bytes(cfg)
        need = self.needs[cfg.hash()]
        cap = resources.runs_per_gpu(cfg.model)
        capacity = [0 if cap is not None and self._runs_on(gpu) >= cap else room
                    for gpu, room in enumerate(self.capacity)]
        return resources.place_run(need, self.reserved, capacity), need

    def _runs_on(self, gpu: int) -> int:
        return sum(w.job is not None and w.gpu == gpu for w in self.workers)

    def submit(self, cfg: RunConfig) -> None:
        for worker in [w for w in self.workers if w.job is None and not w.alive()]:
            worker.stop()  # died while idle
            self.workers.remove(worker)
        gpu, need = self._place(cfg) if self._on_gpu(cfg) else (None, 0)
        if self._on_gpu(cfg) and gpu is None:  # nothing runs, yet no card holds the estimate: the roomiest one
            gpu = max(range(self.gpus), key=lambda g: self.capacity[g] - self.reserved[g])
        free = [w for w in self.workers if w.job is None and w.gpu == gpu]
        if free and self.replace is not None and self.replace(free[0], cfg):
            free[0].stop()  # e.g. the dry run's worker of another kind
            self.workers.remove(free[0])
            free = []
        if not free:
            for idle in [w for w in self.workers if w.job is None][: max(0, len(self.workers) + 1 - self.size)]:
                idle.stop()  # make room for a worker on another GPU
                self.workers.remove(idle)
            free = [LocalWorker(self.threads, gpu, self.job_function)]
            self.workers.append(free[0])
        worker = free[0]
        if gpu is not None:
            worker.reserved = need
            self.reserved[gpu] += need
        worker.give(one_gpu_device(cfg) if gpu is not None else cfg)

    def _release(self, worker: LocalWorker) -> None:
        if worker.gpu is not None:
            self.reserved[worker.gpu] -= worker.reserved
        worker.reserved = 0

    def _overdue(self, worker: LocalWorker) -> bool:
        return self.timeout_s is not None and time.monotonic() - worker.started > self.timeout_s

    def collect(self, timeout: float) -> list[tuple[RunConfig, dict]]:
        """The configs finished (waits up to ``timeout`` s for one): each with its result, or with
        ``{"status": "died", "error": ...}`` when its worker died or overran (the worker is then
        killed and replaced by the next submit)."""
        busy = [w for w in self.workers if w.job is not None]
        if not busy:
            return []
        handles = ready_handles(busy, timeout)
        done = [w for w in busy if has_news(w, handles) or self._overdue(w)]
        results = []
        for worker in done:
            cfg, overdue = worker.job, self._overdue(worker)
            self._release(worker)
            result = worker.result()
            if result is None:
                error = f"timed out after {self.timeout_s:g} s" if overdue else worker.death()
                result = {"status": "died", "error": error}
                worker.stop()  # still busy: killed
                self.workers.remove(worker)
            worker.job = None
            results.append((cfg, result))
        return results

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.workers = []


def local_gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - no usable CUDA: CPU workers
        return 0


def one_gpu_device(cfg: RunConfig) -> RunConfig:
    """A config whose worker sees one GPU (CUDA_VISIBLE_DEVICES): cuda:N becomes cuda."""
    return cfg.replace(device="cuda") if cfg.device.startswith("cuda:") else cfg


class RayPool:
    """One Ray task per run, at most ``workers`` in flight (on a cluster: as many as its CPUs hold)."""

    def __init__(self, workers: int | None, threads: int, address: str | None, verbose: bool):
        self.ray = import_ray()
        self.started_here = not self.ray.is_initialized()
        if self.started_here:
            start_ray(self.ray, address, workers, threads, verbose)
        cluster = self.ray.cluster_resources()
        # in flight at once: ``workers``, else as many runs as the cluster's CPUs hold (the rest wait here)
        self.size = workers or max(1, int(cluster.get("CPU", 1) // threads))
        self.threads = threads
        self.gpus = cluster.get("GPU", 0) > 0
        self.task = self.ray.remote(train_in_ray)
        self.pending: dict[Any, RunConfig] = {}

    def idle(self) -> int:
        return self.size - len(self.pending)

    def fits(self, cfg: RunConfig) -> bool:
        return True  # Ray places the task by the GPU share it asks for

    def running(self) -> int:
        return len(self.pending)

    def submit(self, cfg: RunConfig) -> None:
        options = ray_resources(cfg, self.threads, self.gpus)
        sent = one_gpu_device(cfg) if options.get("num_gpus") else cfg
        ref = self.task.options(**options, max_retries=0, name=f"fedlib-{cfg.hash()}").remote(sent.to_dict(),
                                                                                             self.threads)
        self.pending[ref] = cfg

    def collect(self, timeout: float) -> list[tuple[RunConfig, dict]]:
        if not self.pending:
            return []
        ready, _ = self.ray.wait(list(self.pending), num_returns=1, timeout=timeout)
        if ready:  # and every other one finished by now
            ready, _ = self.ray.wait(list(self.pending), num_returns=len(self.pending), timeout=0)
        results = []
        for ref in ready:
            cfg = self.pending.pop(ref)
            try:
                results.append((cfg, self.ray.get(ref)))
            except self.ray.exceptions.RayError as exc:  # the worker or its node died: give the run again
                results.append((cfg, {"status": "died", "error": one_line(exc)}))
        return results

    def close(self) -> None:
        for ref in self.pending:
            self.ray.cancel(ref, force=True)
        self.pending = {}
        if self.started_here:
            self.ray.shutdown()


def import_ray():
    """The ``ray`` module; one line naming the extra to install when it is missing."""
    try:
        import ray
    except ImportError:
        raise FedlibError(f"--executor ray needs Ray, which is not installed here; install the extra: "
                          f"{RAY_INSTALL} (or pip install 'fedlib[ray]')") from None
    return ray


def start_ray(ray, address: str | None, workers: int | None, threads: int, verbose: bool) -> None:
    """Connect to the cluster at ``address``, or start a local Ray with room for ``workers`` runs."""
    import logging

    quiet = {"log_to_driver": verbose, "logging_level": logging.INFO if verbose else logging.WARNING}
    if address:
        ray.init(address=address, **quiet)
        return
    cpus = max(resources.available_cores(), (workers or 1) * threads)
    try:
        ray.init(num_cpus=cpus, include_dashboard=False, object_store_memory=200 * 2 ** 20, **quiet)
    except Exception as exc:  # noqa: BLE001 - Ray raises bare Exceptions, e.g. a raylet slow to start
        ray.shutdown()
        raise FedlibError(f"could not start a local Ray ({one_line(exc)}); on a busy machine try again, "
                          "or use --executor local") from None


def ray_resources(cfg: RunConfig, threads: int, cluster_has_gpus: bool) -> dict[str, float]:
    """What a run's Ray task asks for: ``threads`` CPUs, plus a share of a GPU sized to its model
    (:func:`fedlib.orchestration.resources.gpu_share`) when the cluster has GPUs and the run may use one."""
    options: dict[str, float] = {"num_cpus": threads}
    if cluster_has_gpus and cfg.device != "cpu":
        options["num_gpus"] = resources.gpu_share(cfg.model)
    return options
