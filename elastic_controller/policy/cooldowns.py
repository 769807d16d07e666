"""Cooldowns and fulfillment: read from the PodGroup's annotations, time passed in.

The stamp is written in two places, the PodGroup and a copy on the PyTorchJob, but only the
PodGroup's is read for a decision: a tenant with the ``edit`` role writes its PyTorchJob's
annotations (a ``last-scale-time`` of 2099 would keep its job in cooldown, never a victim, issue 36
T4) but not its PodGroup (403). The job's copy is for people (``status``); one that disagrees is
ignored and said (``execute/stamps.py: JobCopies``). A PodGroup recreated by hand starts without a
cooldown (docs/failure-model.md). A PodGroup stamp that is there but is no time is read as a scale
event now: the cooldown is in force, never lost.
"""

from __future__ import annotations

from datetime import datetime

from .model import JobView, PodGroupView
from .settings import QueuePolicy


def last_scale_time(pg: PodGroupView | None, job: JobView | None = None,
                    now: datetime | None = None) -> datetime | None:
    """The job's last scale event: the PodGroup's stamp; an unreadable stamp counts as ``now`` (when
    given). ``job`` (the PyTorchJob, which its owner may write) is not read."""
    del job  # tenant-writable: never trusted for a decision about other tenants
    if pg is None:
        return None
    if pg.last_scale is not None:
        return pg.last_scale
    if pg.last_scale_invalid and now is not None:
        return now
    return None


def cooldown_remaining(pg: PodGroupView | None, policy: QueuePolicy, now: datetime,
                       job: JobView | None = None, in_place: bool = False) -> float:
    """Seconds left in the job's cooldown (0 when none). ``in_place``: the job resizes in place (its
    queue's ``inPlaceCooldownSeconds`` when set and shorter than ``cooldownSeconds``; issue 39)."""
    last = last_scale_time(pg, job, now)
    if last is None:
        return 0.0
    seconds = policy.cooldown_seconds(in_place)
    left = seconds - (now - last).total_seconds()
    # A stamp from a clock ahead of ours (another agent replica) cools for at most its cooldown.
    return min(float(seconds), max(0.0, left))


def in_cooldown(pg: PodGroupView | None, policy: QueuePolicy, now: datetime, job: JobView | None = None,
                in_place: bool = False) -> bool:
    return cooldown_remaining(pg, policy, now, job, in_place) > 0


def fulfillment(running_workers: int, min_replicas: int, max_replicas: int) -> float:
    """(running workers - min) / (max - min), workers only; 1.0 for a job that cannot grow."""
    if max_replicas <= min_replicas:
        return 1.0
    return (running_workers - min_replicas) / (max_replicas - min_replicas)


def old_enough(scheduled_at: datetime | None, min_runtime_seconds: int, now: datetime) -> bool:
    """Fresh workers get a minimum runtime, counted from their PodScheduled=True transition."""
    if scheduled_at is None:
        return min_runtime_seconds <= 0
    return (now - scheduled_at).total_seconds() >= min_runtime_seconds
