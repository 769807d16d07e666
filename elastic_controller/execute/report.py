"""What one cycle did (``CycleReport``: the plan, evictions, failures, notices, releases, ...) and an
eviction in flight in the agent's memory (``InFlight``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..policy.decisions import CyclePlan
from ..policy.notices import NoticeReview


@dataclass(frozen=True, slots=True)
class InFlight:
    pod: str
    gang: str
    since: float


@dataclass(slots=True)
class CycleReport:
    plan: CyclePlan
    evicted: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # gang -> why its plan was not executed
    released: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # stamped pod -> why its eviction was refused
    noticed: dict[str, list[str]] = field(default_factory=dict)  # gang -> victims put under notice this cycle
    withdrawn: list[str] = field(default_factory=list)  # eviction notices withdrawn this cycle
    taken_back: list[str] = field(default_factory=list)  # jobs whose stamp's actions never happened: restored
    notices: NoticeReview = field(default_factory=NoticeReview)  # the notices as this cycle found them
    not_leader: bool = False  # the cycle stopped before a write: this replica does not lead
    stale: list[str] = field(default_factory=list)  # caches known stale: the cycle did nothing
    preemptions: list[str] = field(default_factory=list)  # pods Volcano itself preempted (counted)
    clock_skew: float = 0.0  # this process's clock minus the API server's (0: not known)
    scheduler_idle: float = 0.0  # seconds gangs have fit while no pod was placed
    seconds: float = 0.0
    plan_seconds: float = 0.0
    dry_run: bool = False
