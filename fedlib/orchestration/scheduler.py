"""The one loop that hands jobs to a pool: give the pool jobs as it has room, collect what it
finishes, until no job is left.

Both the executor (:func:`fedlib.orchestration.executor.execute`, its runs) and the dry run
(:func:`fedlib.orchestration.dry_run.dry_run`, its configs) schedule through :func:`schedule`.
What differs between them is said elsewhere: where and how a job runs by the pool
(:mod:`fedlib.orchestration.pools`: GPU places, a timeout, when a worker is replaced), and what
becomes of a finished job by the caller's ``collected`` (the executor retries a run whose worker
died and parks a run another process holds; the dry run records a row).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable

Collected = Callable[[Any, dict], None]


def schedule(queue: deque, pool, collected: Collected, *, poll_seconds: float,
             started: Callable[[Any], None] | None = None, waiting: Callable[[], bool] | None = None) -> None:
    """Give the jobs of ``queue`` (in order) to ``pool`` as it has room (``pool.idle()`` and
    ``pool.fits(job)``), and hand each ``(job, result)`` it collects to ``collected``, which may
    put a job back on ``queue``; waits up to ``poll_seconds`` for a result while jobs run.

    ``started(job)`` follows each submission. ``waiting()`` runs after each collection and says
    whether jobs wait outside the queue (the executor's parked runs, which it puts back on the
    queue when their time comes); the loop ends when the queue is empty, nothing runs and
    nothing waits. The pool is the caller's to close."""
    outside = False
    while queue or pool.running() or outside:
        while queue and pool.idle() > 0 and pool.fits(queue[0]):
            job = queue.popleft()
            pool.submit(job)
            if started is not None:
                started(job)
        for job, result in pool.collect(timeout=poll_seconds if pool.running() else 0):
            collected(job, result)
        outside = waiting() if waiting is not None else False
