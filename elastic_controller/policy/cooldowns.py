"""Cooldowns and fulfillment: read from PodGroup annotations, time passed in."""

from __future__ import annotations

from datetime import datetime

from .model import PodGroupView
from .settings import QueuePolicy


def last_scale_time(pg: PodGroupView | None) -> datetime | None:
    return pg.last_scale if pg is not None else None


def cooldown_remaining(pg: PodGroupView | None, policy: QueuePolicy, now: datetime) -> float:
    """Seconds left in the job's cooldown (0 when none)."""
    last = last_scale_time(pg)
    if last is None:
        return 0.0
    left = policy.cooldownSeconds - (now - last).total_seconds()
    # A stamp from a clock ahead of ours (another agent replica) cools for at most cooldownSeconds.
    return min(float(policy.cooldownSeconds), max(0.0, left))


def in_cooldown(pg: PodGroupView | None, policy: QueuePolicy, now: datetime) -> bool:
    return cooldown_remaining(pg, policy, now) > 0


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
