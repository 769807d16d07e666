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
- ``after`` (optional): per task, earlier tasks it starts after. A cycle's dependent steps go in one
  run (a job's gates after its own stamp, its final record after its own gates), each task started
  once what it waits for has ended, instead of one run per step with every writer waiting at the end
  of each step for that step's slowest write.

With ``size`` 1, or a single key, the tasks run in the caller's thread, in order (no thread at all).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
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

    def run(self, tasks: Sequence[tuple[str, Callable[[], T]]],
            after: Sequence[Sequence[int]] | None = None) -> list[Done[T]]:
        """Run ``tasks`` (see the module doc). ``after``: per task, the indices of earlier tasks it
        starts after (whatever their outcome; the task itself checks what it needs of them): one
        cycle's dependent steps in one run (a job's gates after its own stamp, not after every job's),
        each task started as soon as what it waits for has ended, so that no writer idles at the end
        of a step while another object's next write could go out."""
        n = len(tasks)
        if after is not None and len(after) != n:
            raise ValueError(f"after names the tasks {len(after)} tasks start after, for {n} tasks")
        waits: list[set[int]] = [set() for _ in range(n)]
        last: dict[str, int] = {}
        for i, (key, _) in enumerate(tasks):
            if key in last:
                waits[i].add(last[key])  # one object's writes in the order given
            last[key] = i
            for j in (after[i] if after is not None else ()):
                if not 0 <= j < i:
                    raise ValueError(f"task {i} can only start after an earlier task, not {j}")
                waits[i].add(j)
        results: list[Done[T] | None] = [None] * n
        stop: list[BaseException] = []  # the first stopping error (NotLeaderError or a crash)
        stop_lock = threading.Lock()

        def one(i: int) -> None:
            key, fn = tasks[i]
            with stop_lock:
                stopped = stop[0] if stop else None
            if stopped is not None:
                results[i] = Done(key, error=_as_exception(stopped), started=False)
                return
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

        if self.size == 1 or len(last) <= 1:
            # In the caller's thread: one key's tasks after the other's (the order before the pool),
            # or, with ``after``, in the order given (every task after those it waits for).
            order = range(n) if after is not None else \
                [i for k in last for i in range(n) if tasks[i][0] == k]
            for i in order:
                one(i)
        else:
            pool = self._threads()
            left = [len(w) for w in waits]
            dependents: list[list[int]] = [[] for _ in range(n)]
            for i, w in enumerate(waits):
                for j in w:
                    dependents[j].append(i)
            running: dict[Future[None], int] = {pool.submit(one, i): i for i in range(n) if not left[i]}
            while running:
                ended, _ = wait(running, return_when=FIRST_COMPLETED)
                for f in ended:
                    for d in dependents[running.pop(f)]:
                        left[d] -= 1
                        if not left[d]:  # (a task queued after a stop is answered as skipped)
                            running[pool.submit(one, d)] = d
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
