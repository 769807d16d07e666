"""The API server's clock, as seen from here: ages and windows are judged against it, stamps are
written with it (issue 31, item 3).

Every answer of the API server carries a ``Date`` header (whole seconds). An answer received
between local times ``sent`` and ``received`` whose header says ``D`` bounds the offset
(server minus local) to ``[D - received, D + 1 - sent]``; the intersection of the recent bounds
narrows it to well under a second on a local network. ``now()`` is local time plus the *lower*
bound: never later than the server's clock, so a stamp written with it is never in the server's
future and an age judged with it is never too long. Before any answer, the local clock.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

SKEW_WARN_SECONDS = 5.0  # |local - server| above this is an alarm (log, metric, Event, status)
WINDOW_SECONDS = 300.0  # bounds older than this no longer narrow the offset (clocks drift, get stepped)


def parse_date(header: str | None) -> float | None:
    """An HTTP ``Date`` header as a POSIX time, or None."""
    if not header:
        return None
    try:
        return parsedate_to_datetime(header).timestamp()
    except (TypeError, ValueError, IndexError):
        return None


class ServerClock:
    """The offset of the API server's clock from ours, from the answers' ``Date`` headers."""

    def __init__(self, local: Callable[[], float] = time.time) -> None:
        self.local = local
        self._bounds: deque[tuple[float, float, float]] = deque(maxlen=64)  # (low, high, local time)
        self._low = 0.0
        self._high = 0.0
        self.samples = 0
        self._lock = threading.Lock()

    def observe(self, header: str | None, sent: float, received: float) -> None:
        """One answer: its ``Date`` header, and the local times the request was sent and answered."""
        server = parse_date(header)
        if server is None:
            return
        low, high = server - received, server + 1.0 - sent
        with self._lock:
            self._bounds.append((low, high, received))
            while self._bounds and received - self._bounds[0][2] > WINDOW_SECONDS:
                self._bounds.popleft()
            lo = max(b[0] for b in self._bounds)
            hi = min(b[1] for b in self._bounds)
            if lo > hi:  # the clocks moved (a step, a slew): only the newest answer counts
                self._bounds.clear()
                self._bounds.append((low, high, received))
                lo, hi = low, high
            self._low, self._high = lo, hi
            self.samples += 1

    @property
    def known(self) -> bool:
        return self.samples > 0

    def offset(self) -> float:
        """Server minus local, in seconds (the middle of the bounds; 0 before any answer)."""
        with self._lock:
            return (self._low + self._high) / 2 if self.samples else 0.0

    def skew(self) -> float:
        """Local minus server, in seconds: positive when this process's clock is ahead."""
        return -self.offset()

    def time(self) -> float:
        """The server's time now, as a POSIX time, never later than the server's own clock."""
        with self._lock:
            low = self._low if self.samples else 0.0
        return self.local() + low

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.time(), UTC)
