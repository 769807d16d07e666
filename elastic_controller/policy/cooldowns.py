"""Cooldowns and fulfillment: read from the PodGroup's and the PyTorchJob's annotations, time passed in.

The stamp is kept in both places: a PodGroup deleted by hand is recreated without annotations, and
the job's copy keeps its cooldown. The later of the two counts. A stamp that is there but is no
time (hand-edited, truncated) is read as a scale event now: the cooldown is in force, never lost.
"""

from __future__ import annotations

from datetime import datetime

from .model import JobView, PodGroupView
from .settings import QueuePolicy


def last_scale_time(pg: PodGroupView | None, job: JobView | None = None,
                    now: datetime | None = None) -> datetime | None:
    """The job's last scale event: the later of the PodGroup's and the PyTorchJob's stamps; an
    unreadable stamp counts as ``now`` (when given)."""
    times = []
    for obj in (pg, job):
        if obj is None:
            continue
        if obj.last_scale is not None:
            times.append(obj.last_scale)
        elif obj.last_scale_invalid and now is not None:
            times.append(now)
    return max(times) if times else None


def cooldown_remaining(pg: PodGroupView | None, policy: QueuePolicy, now: datetime,
                       job: JobView | None = None) -> float:
    """Seconds left in the job's cooldown (0 when none)."""
    last = last_scale_time(pg, job, now)
    if last is None:
        return 0.0
    left = policy.cooldownSeconds - (now - last).total_seconds()
    # A stamp from a clock ahead of ours (another agent replica) cools for at most cooldownSeconds.
    return min(float(policy.cooldownSeconds), max(0.0, left))


def in_cooldown(pg: PodGroupView | None, policy: QueuePolicy, now: datetime, job: JobView | None = None) -> bool:
    return cooldown_remaining(pg, policy, now, job) > 0


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
