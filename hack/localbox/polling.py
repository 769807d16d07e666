"""Waiting for a condition: the box's components, its API client and the benchmarks that drive a box."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def poll_until(what: str, fn: Callable[[], Any], timeout: float, interval: float = 0.25,
               retry: tuple[type[BaseException], ...] = ()) -> Any:
    """``fn()``'s first truthy answer within ``timeout`` seconds, asked every ``interval``; an exception
    of a ``retry`` type counts as not yet (the last one is named in the TimeoutError)."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            got = fn()
            if got:
                return got
        except retry as e:
            last = e
        time.sleep(interval)
    detail = f" (last error: {last})" if last else ""
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
