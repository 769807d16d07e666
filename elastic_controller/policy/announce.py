"""The size a job is told (``volcano-elastic.io/target-workers``): one rule, for the agent's
``AnnounceSize`` actions (``cycle.decide``) and the controller's announcements alike. Pure.

A pod counts when it will run torchrun after the decisions made so far: live (not deleting, not
finished), not held by the scale-up gate (or its gate is lifted now), not claimed as a victim (an
``evicted-for`` stamp: evicted now or under notice), and not a ghost (``Running`` on a node that
is not Ready or gone: ``world.ghosts_of``; docs/failure-model.md, "A lost node")."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from .keys import EVICTED_FOR
from .model import PodView


def coming(pod: PodView, gate: str, *, ghosts: Mapping[str, str] | Collection[str] = (),
           leaving: Collection[str] = (), lifted: Collection[str] = ()) -> bool:
    """Whether ``pod`` counts in its job's announced size. ``leaving``: keys of pods this cycle
    evicts or puts under notice (not stamped yet); ``lifted``: keys whose gate this cycle lifts."""
    if pod.deleting or pod.terminal or pod.key in ghosts or pod.key in leaving:
        return False
    if EVICTED_FOR in pod.annotations:
        return False
    return pod.key in lifted or gate not in pod.scheduling_gates


def announced(pods: Iterable[PodView], gate: str, *, ghosts: Mapping[str, str] | Collection[str] = (),
              leaving: Collection[str] = (), lifted: Collection[str] = ()) -> tuple[str, ...]:
    """The keys of ``pods`` (one job's) that count, in the order given: their number is the size."""
    return tuple(p.key for p in pods if coming(p, gate, ghosts=ghosts, leaving=leaving, lifted=lifted))
