"""A one-line progress bar on stderr, drawn only on a terminal and only once a run takes a while."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    def __init__(self, label: str, stream: TextIO | None = None, delay: float = 1.0,
                 force: bool = False) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = force or self.stream.isatty()
        self.started = time.monotonic()
        self.delay = delay
        self.drawn = False

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or time.monotonic() - self.started < self.delay:
            return
        width = 30
        frac = done / total if total else 1.0
        bar = "#" * int(frac * width)
        elapsed = time.monotonic() - self.started
        self.stream.write(f"\r{self.label:<11} [{bar:<{width}}] {100 * frac:5.1f}% "
                          f"{done}/{total} jobs {elapsed:5.1f}s")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
