"""Brute-force optima the planner's fast paths are checked against (unit tests of pure code)."""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations
from typing import Any

from elastic_controller.policy.keys import GPU


def fewest_share_victims(planner: Any, gang: Any, cands: list[Any], excess: int,
                         also: Callable[[tuple[Any, ...]], bool] = lambda subset: True) -> tuple[Any, ...] | None:
    """The own-queue share victims ``Planner._share_victims`` should find, by enumeration: among the
    smallest subsets of ``cands`` that free ``excess`` GPUs, pass ``_subset_ok`` and ``also``, the first
    in ``order_key`` order; None when no subset does."""
    for k in range(1, len(cands) + 1):
        feasible = [s for s in combinations(cands, k)
                    if sum(c.requests[GPU] for c in s) >= excess and planner._subset_ok(gang, s) and also(s)]
        if feasible:
            return min(feasible, key=planner.order_key)
    return None
