"""Run one function over many inputs on every core, with bounded memory, whatever the number of inputs.

:func:`run` is what ``tracepack export``, ``convert`` and ``pack`` of many inputs use (``-j N``):

- ``jobs`` worker processes (default: every core this process may use), started from a clean server
  process (``forkserver`` where there is one, else ``spawn``), never forked from a caller holding
  threads or large buffers;
- each worker is replaced after ``recycle`` inputs (``max_tasks_per_child``, Python 3.11+), so memory a
  worker grows or fragments on one input does not stay with it: a worker's peak is that of its
  largest input, not of how many it has seen;
- at most ``2 x jobs`` inputs are handed out at a time and each result is yielded as soon as it is
  done (in completion order), so neither the caller nor the pool holds more than that;
- a worker that dies (killed, out of memory, a crash in a C library) fails only the input that
  killed it: the inputs that were in the pool then run again one at a time in a new pool, and the one
  whose worker dies again is yielded as a failure; the rest go on. Never a hang.

``jobs=1`` runs in this process, one input after another.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

__all__ = ["WorkerDied", "default_jobs", "run"]

T = TypeVar("T")
R = TypeVar("R")

#: Inputs a worker handles before it is replaced.
RECYCLE = 25
#: What the workers import once, in the server they are forked from.
PRELOAD = ["tracepack.analysis.job", "tracepack.analysis.dataset", "tracepack.tables", "pyarrow.parquet"]


class WorkerDied(Exception):
    """The worker process running an input ended without an answer (killed, out of memory, a crash)."""


def default_jobs() -> int:
    """Every core this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _context() -> Any:
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" in methods:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload([m for m in PRELOAD if _importable(m)])
        return ctx
    return multiprocessing.get_context("spawn")


def _importable(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _executor(jobs: int, recycle: int) -> ProcessPoolExecutor:
    kwargs: dict[str, Any] = {"max_workers": jobs, "mp_context": _context()}
    if sys.version_info >= (3, 11):
        kwargs["max_tasks_per_child"] = recycle
    return ProcessPoolExecutor(**kwargs)


def run(
    fn: Callable[[T], R], items: Iterable[T], *, jobs: int | None = None, recycle: int = RECYCLE
) -> Iterator[tuple[T, R | WorkerDied]]:
    """``(item, fn(item))`` for every item, in completion order; a :class:`WorkerDied` in place of the
    result when the worker running it died. ``fn`` must be picklable (a module-level function, or a
    ``functools.partial`` of one) and should catch its own errors: any exception it raises is re-raised
    here."""
    jobs = default_jobs() if jobs is None else jobs
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, not {jobs}")
    if jobs == 1:
        for item in items:
            yield item, fn(item)
        return
    todo = iter(items)
    pending: dict[Future[R], T] = {}
    #: inputs that were in a pool when it broke: each runs again alone, so only the one that kills
    #: its worker fails
    suspects: deque[T] = deque()
    pool = _executor(jobs, recycle)
    try:
        while True:
            if suspects and not pending:
                item = suspects.popleft()
                pool, future = _submit(pool, fn, item, jobs, recycle)
                wait([future])
                result: R | WorkerDied
                try:
                    result = future.result()
                except BrokenProcessPool:
                    result = WorkerDied(_DIED)
                    pool = _restart(pool, jobs, recycle)
                yield item, result
                continue
            while not suspects and len(pending) < 2 * jobs:
                item = next(todo, _END)
                if item is _END:
                    break
                pool, future = _submit(pool, fn, item, jobs, recycle)
                pending[future] = item
            if not pending:
                if suspects:
                    continue
                return
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            results: list[tuple[T, R]] = []
            for future in done:
                item = pending.pop(future)
                try:
                    results.append((item, future.result()))
                except BrokenProcessPool:
                    suspects.append(item)
            if suspects:
                suspects.extend(pending.values())
                pending.clear()
                pool = _restart(pool, jobs, recycle)
            yield from results
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _submit(
    pool: ProcessPoolExecutor, fn: Callable[[T], R], item: T, jobs: int, recycle: int
) -> tuple[ProcessPoolExecutor, Future[R]]:
    """Submit ``item``, to a new pool when this one has broken meanwhile (its other inputs then come back
    from :func:`wait` as broken, and run again alone)."""
    try:
        return pool, pool.submit(fn, item)
    except BrokenProcessPool:
        pool = _restart(pool, jobs, recycle)
        return pool, pool.submit(fn, item)


def _restart(pool: ProcessPoolExecutor, jobs: int, recycle: int) -> ProcessPoolExecutor:
    pool.shutdown(wait=True, cancel_futures=True)
    return _executor(jobs, recycle)


_END: Any = object()
_DIED = "the worker process died (killed, out of memory or crashed)"
