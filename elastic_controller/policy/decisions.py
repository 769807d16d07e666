"""What one planning cycle decides: plain values, ordered as decided."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class GangDecision:
    pod_group: str  # ns/name of the waiting gang
    queue: str
    decision: str  # "evict" | "wait"
    reason: str
    needed: tuple[str, ...] = ()  # ns/name of the pods it needs placed
    victims: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"podGroup": self.pod_group, "queue": self.queue, "decision": self.decision,
                "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Eviction:
    pod: str  # ns/name
    node: str
    job: str  # ns/podgroup of the victim's job
    queue: str  # the victim's queue
    for_gang: str  # ns/podgroup it makes room for
    reason: str
    uid: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"pod": self.pod, "node": self.node, "job": self.job, "queue": self.queue,
                "for": self.for_gang, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class GateRelease:
    pod: str
    job: str  # ns/podgroup
    node: str  # where it fits now
    queue: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"pod": self.pod, "job": self.job, "node": self.node, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class CyclePlan:
    starving: tuple[GangDecision, ...] = ()
    evictions: tuple[Eviction, ...] = ()
    gate_releases: tuple[GateRelease, ...] = ()
    scale_up_blocked_by: tuple[str, ...] = ()  # waiting gangs that hold back scale-up
    waiting: tuple[str, ...] = ()  # every waiting gang, starving or not
    notes: tuple[str, ...] = field(default=())  # growth held back, and why (one per job at most)

    def to_json(self) -> dict[str, Any]:
        return {
            "starving": [d.to_json() for d in self.starving],
            "evictions": [e.to_json() for e in self.evictions],
            "gateReleases": [g.to_json() for g in self.gate_releases],
            "scaleUpBlockedBy": list(self.scale_up_blocked_by),
            "notes": list(self.notes),
        }
