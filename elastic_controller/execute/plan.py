"""A cycle's plan in, its writes out: each starving gang's evictions (or notices), then the scale-up
gates, then the decisions (every starving gang's and held job's ``last-decision`` and Event). Every
write is fenced (``Executor.fence``)."""

from __future__ import annotations

from datetime import datetime

from ..policy.decisions import CyclePlan, Eviction
from ..policy.model import Snapshot
from .decisions import write_decisions
from .evictions import execute_evictions
from .executor import CycleReport, Executor
from .gates import execute_releases


def execute_plan(ex: Executor, plan: CyclePlan, now: datetime, report: CycleReport,
                 snapshot: Snapshot | None = None) -> None:
    by_gang: dict[str, list[Eviction]] = {}
    for ev in plan.evictions:
        by_gang.setdefault(ev.for_gang, []).append(ev)
    for gang, evictions in by_gang.items():
        execute_evictions(ex, gang, evictions, now, report)
    execute_releases(ex, plan.gate_releases, now, report)
    write_decisions(ex, plan, report, now, snapshot)
