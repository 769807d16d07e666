"""One time unit per table column: the largest value of the column picks seconds, minutes or hours,
and every cell of the column is written in it (the header names it)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TimeUnit:
    seconds: float  # seconds per unit
    name: str  # "s", "min" or "h"
    decimals: int

    def __call__(self, seconds: float) -> str:
        return f"{seconds / self.seconds:,.{self.decimals}f}"


SECONDS = TimeUnit(1, "s", 0)
MINUTES = TimeUnit(60, "min", 1)
HOURS = TimeUnit(3600, "h", 2)


def time_unit(values: Iterable[float]) -> TimeUnit:
    """The unit of a column of seconds: s below 2 minutes, min below 2 hours, else h (the largest
    value decides, so that every cell of the column compares at a glance)."""
    top = max(values, default=0.0)
    if top < 120:
        return SECONDS
    if top < 7200:
        return MINUTES
    return HOURS
