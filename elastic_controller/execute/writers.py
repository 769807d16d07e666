"""Bounded concurrency for a cycle's independent writes (issue 36, item 3: at 1,000 nodes a cycle
lifted ~100 gates one request after the other, each waiting on a loaded API server).

``WritePool.run`` takes tasks as (object key, callable): tasks of one key run one after the other, in
the order given (a PodGroup's stamp before its ``last-decision``; one pod's writes in order), tasks
of different keys at most ``size`` at once. What each writer guarantees is kept:

- **Fencing**: every task's writes still go through ``Executor.fence`` (the Lease check before each
  write). A task that meets ``NotLeaderError`` stops the pool: no task starts after it (each is
  answered with that error); the caller says what was done and raises it.
- **A failure of one write loses no other**: a task's ``Exception`` (a ``KubeError``: 409, 404, 429,
  an outage) is its own result; the other tasks go on.
- **A crash stays a crash**: a ``BaseException`` that is not an ``Exception`` (``InjectedFault``, a
  test's kill) stops the pool the same way and is raised once every started task has ended.
- Results come back in the order of the tasks, whatever order they finished in.

With ``size`` 1, or a single key, the tasks run in the caller's thread, in order (no thread at all).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

# Writes in flight at once per agent: enough to hide an API server's latency (a loaded one answers a
# PATCH in 0.1-0.5 s), few enough that the agent never floods it (its client-side pool is 16+).
WRITERS = 8


@dataclass(frozen=True, slots=True)
class Done(Generic[T]):
    """One task's outcome: its value, or the ``Exception`` it raised (``error``), or skipped (not
    started: the pool was stopped by ``NotLeaderError`` or a crash; ``error`` says which)."""

    key: str
    value: T | None = None
    error: Exception | None = None
    started: bool = True

    @property
    def ok(self) -> bool:
        return self.error is None


class WritePool:
    """See the module doc. One per executor, kept across cycles (its threads idle between them)."""

    def __init__(self, size: int = WRITERS, *, stops: tuple[type[Exception], ...] = ()) -> None:
        if size < 1:
            raise ValueError(f"a write pool needs at least one writer, not {size}")
        self.size = size
        self.stops = stops  # Exceptions that stop the pool (NotLeaderError), besides crashes
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def _threads(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.size, thread_name_prefix="agent-writer")
            return self._executor

    def close(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    def run(self, tasks: Sequence[tuple[str, Callable[[], T]]]) -> list[Done[T]]:
        results: list[Done[T] | None] = [None] * len(tasks)
        groups: dict[str, list[int]] = {}
        for i, (key, _) in enumerate(tasks):
            groups.setdefault(key, []).append(i)
        stop: list[BaseException] = []  # the first stopping error (NotLeaderError or a crash)
        stop_lock = threading.Lock()

        def one_key(indices: list[int]) -> None:
            for i in indices:
                key, fn = tasks[i]
                with stop_lock:
                    stopped = stop[0] if stop else None
                if stopped is not None:
                    results[i] = Done(key, error=_as_exception(stopped), started=False)
                    continue
                try:
                    results[i] = Done(key, value=fn())
                except Exception as exc:
                    results[i] = Done(key, error=exc)
                    if isinstance(exc, self.stops):
                        with stop_lock:
                            stop.append(exc)
                except BaseException as exc:  # a crash: recorded, raised by run() after the others end
                    results[i] = Done(key, error=_as_exception(exc))
                    with stop_lock:
                        stop.append(exc)

        if self.size == 1 or len(groups) <= 1:
            for indices in groups.values():
                one_key(indices)
        else:
            pool = self._threads()
            wait([pool.submit(one_key, indices) for indices in groups.values()])
        crash = next((e for e in stop if not isinstance(e, Exception)), None)
        if crash is not None:
            raise crash
        return [r if r is not None else Done(tasks[i][0], error=RuntimeError("task lost"), started=False)
                for i, r in enumerate(results)]


def _as_exception(exc: BaseException) -> Exception:
    return exc if isinstance(exc, Exception) else RuntimeError(f"stopped by {type(exc).__name__}: {exc}")


def first_stop(results: Sequence[Done[T]], kind: type[Exception]) -> Exception | None:
    """The first result's error of ``kind`` (the ``NotLeaderError`` that stopped the pool), if any."""
    return next((r.error for r in results if isinstance(r.error, kind)), None)
