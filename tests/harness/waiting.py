"""Polling helper shared by the tiers that wait on a real control plane."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(what: str, fn: Callable[[], Any], timeout: float = 60, interval: float = 0.3) -> Any:
    """Poll ``fn`` until it returns something truthy (returned), or fail naming ``what``."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
