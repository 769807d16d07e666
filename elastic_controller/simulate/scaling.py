"""How fast a job runs on n workers: ``rate = n * gpus_per_worker * efficiency(n)`` GPU-seconds/s.

A curve is written either as a per-doubling factor (``"0.95"``: each doubling of the workers
keeps 95 % of the per-GPU speed, ``efficiency(n) = 0.95 ** log2(n)``) or as points
``"1:1,2:0.97,4:0.92"`` (linear in between, the last value beyond the last point).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass


class CurveError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class ScalingCurve:
    per_doubling: float = 1.0
    points: tuple[tuple[int, float], ...] = ()

    def efficiency(self, workers: int) -> float:
        if not self.points:
            return float(self.per_doubling ** math.log2(max(1, workers)))
        pts = self.points
        if workers <= pts[0][0]:
            return pts[0][1]
        for (n0, e0), (n1, e1) in itertools.pairwise(pts):
            if n0 <= workers <= n1:
                return e0 + (e1 - e0) * (workers - n0) / (n1 - n0)
        return pts[-1][1]

    def describe(self) -> str:
        if self.points:
            return ",".join(f"{n}:{e:g}" for n, e in self.points)
        return f"{self.per_doubling:g} per doubling"


def parse_curve(text: str) -> ScalingCurve:
    text = text.strip()
    if ":" not in text:
        try:
            factor = float(text)
        except ValueError:
            raise CurveError(f"scaling efficiency {text!r}: expected a factor like 0.95 or points "
                             "like 1:1,2:0.97,4:0.92") from None
        if not 0 < factor <= 1:
            raise CurveError(f"scaling efficiency {text!r}: the factor must be in (0, 1]")
        return ScalingCurve(per_doubling=factor)
    points: list[tuple[int, float]] = []
    for part in text.split(","):
        n_text, _, e_text = part.partition(":")
        try:
            n, e = int(n_text), float(e_text)
        except ValueError:
            raise CurveError(f"scaling efficiency point {part!r}: expected WORKERS:EFFICIENCY") from None
        if n < 1 or not 0 < e <= 1 or (points and n <= points[-1][0]):
            raise CurveError(f"scaling efficiency point {part!r}: workers must increase from 1 and "
                             "efficiency be in (0, 1]")
        points.append((n, e))
    return ScalingCurve(points=tuple(points))
