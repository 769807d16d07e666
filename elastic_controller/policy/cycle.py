"""One planning cycle: starving gangs, eviction plans, gate releases (ARCHITECTURE.md, "The agent's cycle",
steps 2, 3 and 5)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from .decisions import CyclePlan, Eviction, GangDecision
from .eviction import Planner, SearchMode, starving_gangs
from .fairness import plan_fairness
from .gates import plan_gate_releases
from .model import Snapshot
from .settings import ElasticConfig
from .world import PlanCache, build_world

__all__ = ["PlanCache", "SearchMode", "plan_cycle"]


@contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while planning. A cycle allocates many short-lived objects among
    a large live snapshot (54,584 pod views at 5,000 nodes), so the collector's full passes would walk
    the snapshot again and again: 10 % of a 5,000-node cycle. Planning makes no reference cycles that
    matter; whatever it leaves is collected once the collector runs again."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def plan_cycle(snapshot: Snapshot, cfg: ElasticConfig, now: datetime, *, cache: PlanCache | None = None,
               search: SearchMode = "indexed", pdb_refused: frozenset[str] = frozenset()) -> CyclePlan:
    """Pure: the same snapshot, config and ``now`` always give the same plan.

    ``cache``: what the caller keeps from one cycle to the next (the agent and each simulation own
    one; without it every cycle is built cold). ``search``: how the victim search finds nodes
    ("exhaustive": every node scored, the reference the indexed search must match). Neither changes
    the plan. ``pdb_refused``: keys ("namespace/name") of pods whose eviction a PodDisruptionBudget
    refused lately (the agent remembers them for a while): never victims, and counted as
    "PDB refused eviction" among a waiting gang's excluded candidates."""
    with _collector_paused():
        return _plan(snapshot, cfg, now, cache, search, pdb_refused)


def _plan(snapshot: Snapshot, cfg: ElasticConfig, now: datetime, cache: PlanCache | None,
          search: SearchMode, pdb_refused: frozenset[str] = frozenset()) -> CyclePlan:
    world = build_world(snapshot, cfg, now, cache)
    if cache is not None:
        cache.world = world
    decisions: list[GangDecision] = []
    evictions: list[Eviction] = []
    starving = starving_gangs(world)
    if starving:  # the planner's search index is only worth building when some gang starves
        planner = Planner(world, search, pdb_refused)
        for gang in starving:
            result = planner.plan_gang(gang)
            decisions.append(result.decision)
            evictions.extend(result.evictions)
    releases, blockers, notes = plan_gate_releases(world, evicted_for={d.pod_group for d in decisions if d.victims})
    # issue 38: the fairness scale-down (fairness.py), in the queues where nothing else moves
    evictions.extend(plan_fairness(world, releases, evictions))
    return CyclePlan(
        starving=tuple(decisions),
        evictions=tuple(evictions),
        gate_releases=tuple(releases),
        scale_up_blocked_by=tuple(blockers),
        waiting=tuple(g.key for g in world.waiting),
        notes=tuple(notes),
    )
