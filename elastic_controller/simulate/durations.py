"""How the simulator's reports write a duration: shared by ``report`` and ``classes`` (below both)."""

from __future__ import annotations


def duration(seconds: float) -> str:
    s = round(seconds)
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s / 60:.1f}m"
    return f"{s / 3600:.2f}h"
