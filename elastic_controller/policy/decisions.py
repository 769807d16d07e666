"""What one planning cycle decides: plain values, ordered as decided."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


class HoldReason:
    """The reason codes of a ``HoldNote`` (growth held back), one per rule that holds it."""

    COOLDOWN = "Cooldown"  # cooldownSeconds after its last scale event (``until``: when it ends)
    SNOOZED = "Snoozed"  # scaleUpSnoozeSeconds after a shrink for a gang (``until``: when it ends)
    QUEUE_SCALE_UP_LIMIT = "MaxScaleUpPerCycle"  # its queue grew maxScaleUpPerCycle jobs this cycle
    CYCLE_GATE_LIMIT = "MaxGateReleasesPerCycle"  # the agent lifted agent.maxGateReleasesPerCycle gates
    CHECKPOINT_TOO_OLD = "CheckpointTooOld"  # older than scaleUpAfterCheckpointSeconds: waits for the next
    BELOW_MIN_GAIN = "BelowMinScaleUpGain"  # what fits is not worth a restart
    NO_ALLOWED_COUNT = "NoAllowedCount"  # what fits is not one of its allowed worker counts
    GANG_NEEDS_IT = "WaitingGangNeedsIt"  # growing it would feed a waiting gang (held below that size)

    ALL = (COOLDOWN, SNOOZED, QUEUE_SCALE_UP_LIMIT, CYCLE_GATE_LIMIT, CHECKPOINT_TOO_OLD, BELOW_MIN_GAIN,
           NO_ALLOWED_COUNT, GANG_NEEDS_IT)


class HoldNote(str):
    """A note on growth held back: the text (it *is* a ``str``: logs, tables and older callers use
    it as one) with the ``job`` it is about, a ``reason`` code (``HoldReason``) and ``until`` (when
    the hold ends by itself, for a cooldown or snooze; None otherwise)."""

    job: str
    reason: str
    until: datetime | None

    def __new__(cls, text: str, job: str, reason: str, until: datetime | None = None) -> HoldNote:
        note = super().__new__(cls, text)
        note.job, note.reason, note.until = job, reason, until
        return note

    def __reduce__(self) -> tuple[Any, ...]:  # copy and pickle keep the fields
        return (HoldNote, (str(self), self.job, self.reason, self.until))


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


class EvictionKind:
    """What an ``Eviction`` is for (``Eviction.kind``)."""

    GANG = "gang"  # room for a starving gang (the eviction planner)
    FAIRNESS = "fairness"  # workers given to the least-served job of the queue (policy/fairness.py, issue 38)

    ALL = (GANG, FAIRNESS)


@dataclass(frozen=True, slots=True)
class Eviction:
    pod: str  # ns/name
    node: str
    job: str  # ns/podgroup of the victim's job
    queue: str  # the victim's queue
    for_gang: str  # ns/podgroup it makes room for: a starving gang, or (kind fairness) the job that takes
    reason: str
    uid: str = ""
    kind: str = EvictionKind.GANG  # EvictionKind: a gang's victim, or a fairness scale-down's

    @property
    def fairness(self) -> bool:
        """A fairness scale-down's victim (``EvictionKind.FAIRNESS``): ``for_gang`` is the running job it
        gives its room to, not a gang."""
        return self.kind == EvictionKind.FAIRNESS

    @property
    def in_place(self) -> bool:
        """Its job resizes in place (issue 39): ``InPlaceEviction``."""
        return False

    @property
    def past_pdb(self) -> bool:
        """Removed past a PodDisruptionBudget that refused it (issue 36, T13): ``PastPdbEviction``."""
        return False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pod": self.pod, "node": self.node, "job": self.job, "queue": self.queue,
                               "for": self.for_gang, "reason": self.reason}
        if self.kind != EvictionKind.GANG:  # (absent: a gang's victim, as every plan before issue 38 said)
            out["kind"] = self.kind
        return out


@dataclass(frozen=True, slots=True)
class InPlaceEviction(Eviction):
    """The eviction of a victim whose job resizes in place (issue 39): it leaves the process group
    first, then is evicted. (A subclass, not a field: every other plan stays the same, field for field.)"""

    @property
    def in_place(self) -> bool:
        return True

    def to_json(self) -> dict[str, Any]:
        return {**Eviction.to_json(self), "inPlace": True}


@dataclass(frozen=True, slots=True)
class GateRelease:
    pod: str
    job: str  # ns/podgroup
    node: str  # where it fits now
    queue: str
    reason: str

    @property
    def in_place(self) -> bool:
        """Its job resizes in place (issue 39): ``InPlaceRelease``."""
        return False

    def to_json(self) -> dict[str, Any]:
        return {"pod": self.pod, "job": self.job, "node": self.node, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class InPlaceRelease(GateRelease):
    """A gate lifted for a job that resizes in place (issue 39): the job grows without a restart."""

    @property
    def in_place(self) -> bool:
        return True

    def to_json(self) -> dict[str, Any]:
        return {**GateRelease.to_json(self), "inPlace": True}


@dataclass(frozen=True, slots=True)
class CyclePlan:
    starving: tuple[GangDecision, ...] = ()
    evictions: tuple[Eviction, ...] = ()
    gate_releases: tuple[GateRelease, ...] = ()
    scale_up_blocked_by: tuple[str, ...] = ()  # waiting gangs that hold back scale-up
    waiting: tuple[str, ...] = ()  # every waiting gang, starving or not
    notes: tuple[HoldNote, ...] = field(default=())  # growth held back, and why (one per job at most)

    def to_json(self) -> dict[str, Any]:
        return {
            "starving": [d.to_json() for d in self.starving],
            "evictions": [e.to_json() for e in self.evictions],
            "gateReleases": [g.to_json() for g in self.gate_releases],
            "scaleUpBlockedBy": list(self.scale_up_blocked_by),
            "notes": list(self.notes),
        }
