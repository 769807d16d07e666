"""One planning cycle: starving gangs, eviction plans, gate releases (DESIGN steps 2, 3, 5)."""

from __future__ import annotations

from datetime import datetime

from .decisions import CyclePlan, Eviction, GangDecision
from .eviction import Planner, starving_gangs
from .gates import plan_gate_releases
from .model import Snapshot
from .settings import ElasticConfig
from .world import build_world


def plan_cycle(snapshot: Snapshot, cfg: ElasticConfig, now: datetime) -> CyclePlan:
    """Pure: the same snapshot, config and ``now`` always give the same plan."""
    world = build_world(snapshot, cfg, now)
    decisions: list[GangDecision] = []
    evictions: list[Eviction] = []
    starving = starving_gangs(world)
    if starving:  # the planner's search index is only worth building when some gang starves
        planner = Planner(world)
        for gang in starving:
            result = planner.plan_gang(gang)
            decisions.append(result.decision)
            evictions.extend(result.evictions)
    releases, blockers = plan_gate_releases(world, evicted_for={d.pod_group for d in decisions if d.victims})
    return CyclePlan(
        starving=tuple(decisions),
        evictions=tuple(evictions),
        gate_releases=tuple(releases),
        scale_up_blocked_by=tuple(blockers),
        waiting=tuple(g.key for g in world.waiting),
    )
