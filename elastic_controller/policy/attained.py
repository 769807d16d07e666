"""Attained service: how much of the cluster a job has had, in GPU-seconds held (issue 38).

The fair ordering (``ordering``: growth to the least-served job first, victims from the most-served)
and the fairness scale-down (``fairness``) read it. It is what the design "Scheduler for TrainingJob"
sorts its jobs by (``sum(running count x running time)``) and Tiresias' 2D-LAS service (GPUs x time).

**Durable.** The agent keeps it on the job's PodGroup as ``volcano-elastic.io/attained-service``,
``"<GPU-seconds>@<as-of time>"`` (e.g. ``"7200.0@2026-01-01T02:00:00Z"``), like the cooldown stamp: it
survives agent restarts and reads from a ``kubectl get -o json`` dump. The planner never waits for a
write: the service *now* is the stamp plus, for every pod of the group that holds a node, its GPUs
times the time it held the node since the stamp (since it was scheduled, when later):

    service(now) = stamped + sum over placed pods of gpus(pod) x (now - max(as_of, scheduled_at))

So the stamp only has to be rewritten when a pod leaves (its time would be lost with it): the agent
remembers the placed pods it saw at its last cycle, and for a group one of them left since, writes
the service now plus the departed pods' time from the stamp to that last sighting (exact to within
one cycle; ``execute.attained``). While no pod leaves, nothing is written. Without a stamp only the
pods placed now count (a job that ran before volcano-elastic saw it starts from them, and pods that
left while no agent ran are not counted).
A pod that requests no GPU counts as one (``gpus``), so CPU-only jobs are ordered by pod-seconds.

The simulator stamps every job's PodGroup view with its exact service (``simulate.engine``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import NamedTuple

from .keys import ATTAINED_SERVICE, GPU
from .model import PodGroupView, PodView, Snapshot
from .times import parse_time

__all__ = ["ATTAINED_SERVICE", "Stamp", "attained_by_group", "attained_service", "format_stamp", "gpus",
           "holds_node", "parse_stamp", "stamp_of"]


class Stamp(NamedTuple):
    """An ``attained-service`` annotation, read: GPU-seconds as of a time."""

    gpu_seconds: float
    as_of: datetime


def format_stamp(gpu_seconds: float, as_of: datetime) -> str:
    """The annotation's value: ``"<GPU-seconds, one decimal>@<RFC 3339, UTC, milliseconds>"``."""
    when = as_of.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return f"{max(0.0, gpu_seconds):.1f}@{when}"


def parse_stamp(raw: object) -> Stamp | None:
    """The annotation read; None when absent or unreadable (then the job counts from its placed pods)."""
    if not isinstance(raw, str) or "@" not in raw:
        return None
    value, _, when = raw.partition("@")
    try:
        seconds = float(value)
    except ValueError:
        return None
    at = parse_time(when)
    if at is None or not seconds >= 0 or seconds == float("inf"):
        return None
    return Stamp(seconds, at)


def stamp_of(pg: PodGroupView | None) -> Stamp | None:
    return parse_stamp(pg.annotations.get(ATTAINED_SERVICE)) if pg is not None else None


def gpus(pod: PodView) -> float:
    """The GPUs ``pod`` holds while placed (one when it requests none)."""
    n = pod.requests.get(GPU, 0)
    return float(n) if n > 0 else 1.0


def holds_node(pod: PodView) -> bool:
    return bool(pod.node_name) and pod.phase not in ("Succeeded", "Failed")


def attained_service(pg: PodGroupView | None, pods: Iterable[PodView], now: datetime) -> float:
    """The job's GPU-seconds held as of ``now``: its stamp, plus its placed pods since then."""
    stamp = stamp_of(pg)
    total = stamp.gpu_seconds if stamp is not None else 0.0
    for pod in pods:
        if not holds_node(pod):
            continue
        since = pod.scheduled_at
        if stamp is not None and (since is None or since < stamp.as_of):
            since = stamp.as_of
        if since is None:
            continue  # no stamp and no scheduling time: nothing known to count
        total += gpus(pod) * max(0.0, (now - since).total_seconds())
    return total


def attained_by_group(snapshot: Snapshot, now: datetime) -> dict[str, float]:
    """Every PodGroup's attained service (by ``ns/name``) as of ``now``."""
    pods: dict[str, list[PodView]] = {}
    for pod in snapshot.pods:
        if pod.group_key and holds_node(pod):
            pods.setdefault(pod.group_key, []).append(pod)
    return {pg.key: attained_service(pg, pods.get(pg.key, ()), now) for pg in snapshot.podgroups}
