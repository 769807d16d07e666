"""A de-duplicating work queue (client-go style): a key is processed by one worker at a time,
a key added while it is processed is processed again afterwards, failures come back later."""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable


class WorkQueue:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._queue: list[str] = []
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._delayed: list[tuple[float, str]] = []
        self._failures: dict[str, int] = {}
        self._urgent: set[str] = set()  # waiting keys added urgent (kept at the head of the queue)
        self._closed = False

    def add(self, key: str, *, urgent: bool = False) -> None:
        """Queue ``key`` (once: a key already waiting keeps its place). ``urgent``: ahead of the keys
        not urgent (after the urgent ones already waiting, first come first served among them); a
        key already waiting is moved up."""
        with self._cond:
            if self._closed:
                return
            if key in self._dirty:
                if urgent and key not in self._urgent:
                    if key in self._queue:
                        self._queue.remove(key)
                        self._queue.insert(self._urgent_waiting(), key)
                    self._urgent.add(key)
                return
            self._dirty.add(key)
            if key not in self._processing:
                if urgent:
                    self._queue.insert(self._urgent_waiting(), key)
                else:
                    self._queue.append(key)
                self._cond.notify()
            if urgent:
                self._urgent.add(key)

    def _urgent_waiting(self) -> int:
        """How many keys at the head of the queue are urgent (the urgent ones are always first)."""
        n = 0
        for k in self._queue:
            if k not in self._urgent:
                break
            n += 1
        return n

    def add_after(self, key: str, delay: float) -> None:
        with self._cond:
            heapq.heappush(self._delayed, (self._clock() + delay, key))
            self._cond.notify()

    def retry(self, key: str, base: float = 0.1, cap: float = 60.0) -> float:
        """Re-add ``key`` with per-key exponential backoff; returns the delay."""
        with self._cond:
            n = self._failures.get(key, 0)
            self._failures[key] = n + 1
        delay = min(cap, base * float(2**n))
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        with self._cond:
            self._failures.pop(key, None)

    def _promote(self) -> float | None:
        now = self._clock()
        while self._delayed and self._delayed[0][0] <= now:
            _, key = heapq.heappop(self._delayed)
            if key not in self._dirty:
                self._dirty.add(key)
                if key not in self._processing:
                    self._queue.append(key)
        return self._delayed[0][0] - now if self._delayed else None

    def get(self, timeout: float | None = None) -> str | None:
        """The next key (None on close or timeout); call ``done(key)`` when finished."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while True:
                wait = self._promote()
                if self._queue:
                    key = self._queue.pop(0)
                    self._urgent.discard(key)
                    self._dirty.discard(key)
                    self._processing.add(key)
                    return key
                if self._closed:
                    return None
                if deadline is not None:
                    left = deadline - self._clock()
                    if left <= 0:
                        return None
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait)

    def done(self, key: str) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                if key in self._urgent:
                    self._queue.insert(self._urgent_waiting(), key)
                else:
                    self._queue.append(key)
                self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue) + len(self._delayed)
