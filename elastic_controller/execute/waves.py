"""Which of a cycle's gangs may write at the same time (issue 36, item 3): a run of consecutive
``Evict`` actions, or of consecutive ``GiveNotice`` actions, split into waves in decision order
(``waves``). A gang goes into the wave after the last wave holding a gang that writes one of its
victims' jobs (or is the same gang), else into the first: the gangs of one wave write disjoint
objects (their victims' pods and jobs), so they go out concurrently; two gangs shrinking one job
keep their order (the later one's stamp compare-and-swap is over the earlier one's stamp, and what
it counts on is the earlier one's count). ``evictions.py`` takes each wave's steps in lockstep;
``notices.py`` runs each gang of a wave as one chain of its writes, in their order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from ..policy.actions import Evict, GiveNotice
from ..policy.decisions import Eviction

A = TypeVar("A", Evict, GiveNotice)


def victims_of(action: Evict | GiveNotice) -> tuple[Eviction, ...]:
    """The evictions an action acts on (an ``Evict``'s victims, a ``GiveNotice``'s noticed victims)."""
    return action.victims if isinstance(action, Evict) else action.evictions


def waves(actions: Sequence[A]) -> list[list[A]]:
    """``actions`` (in decision order) as waves: each gang in the wave after the last one that holds a
    gang sharing a victim job with it (or naming the same gang), else in the first; decision order
    within a wave."""
    last: dict[str, int] = {}  # job (or gang) -> the last wave writing it
    out: list[list[A]] = []
    for a in actions:
        objects = {e.job for e in victims_of(a)} | {a.gang}
        w = max((last[o] + 1 for o in objects if o in last), default=0)
        for o in objects:
            last[o] = w
        if w == len(out):
            out.append([])
        out[w].append(a)
    return out
