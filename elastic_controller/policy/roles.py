"""Which role a pod of a PyTorchJob plays: master, core (inside min) or elastic (beyond min).

The one rule the webhook and the agent share; it needs only the pod's labels and the
``PET_NNODES`` value the training operator sets (``"min:max"`` for elastic jobs, ``"N"`` otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from . import keys
from .keys import Role
from .model import ElasticBounds
from .settings import PrioritiesConfig


class BoundsError(ValueError):
    """PET_NNODES that cannot be read."""


def parse_nnodes(value: str | None) -> ElasticBounds | None:
    """``"min:max"`` -> bounds; ``"N"`` -> N:N; None/empty -> None. Raises BoundsError when malformed."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    lo, sep, hi = text.partition(":")
    try:
        low = int(lo)
        high = int(hi) if sep else low
    except ValueError as exc:
        raise BoundsError(f"PET_NNODES={value!r} is neither N nor MIN:MAX") from exc
    if low < 1 or high < low:
        raise BoundsError(f"PET_NNODES={value!r} needs 1 <= MIN <= MAX")
    return ElasticBounds(low, high)


@dataclass(frozen=True, slots=True)
class RolePlan:
    role: Role
    replica_type: str  # lowercased
    replica_index: int
    bounds: ElasticBounds | None

    @property
    def task_spec(self) -> str:
        return self.replica_type


def replica_of(labels: Mapping[str, str]) -> tuple[str, int]:
    rtype = labels.get(keys.REPLICA_TYPE_LABEL, "").lower()
    try:
        index = int(labels.get(keys.REPLICA_INDEX_LABEL, "-1"))
    except ValueError:
        index = -1
    return rtype, index


def plan_role(labels: Mapping[str, str], bounds: ElasticBounds | None) -> RolePlan:
    """The role of a PyTorchJob pod (labels as the operator sets them).

    A pod whose job's bounds are unknown is ``master`` if labelled so, else ``core``: never
    evicted, never gated.
    """
    rtype, index = replica_of(labels)
    # The training operator puts job-role=master on master-0, or on worker-0 of a job without a
    # Master replica; nowhere else. The label is writable by the job's owner (``edit``), so on any
    # other pod it is ignored: an elastic worker relabelled master stays elastic (issue 36, T2).
    labelled_master = rtype == "master" or (
        labels.get(keys.JOB_ROLE_LABEL, "") == "master" and rtype == "worker" and index == 0)
    if labelled_master:
        return RolePlan(Role.MASTER, rtype, index, bounds)
    if bounds is None or not bounds.elastic or rtype != "worker" or index < 0:
        return RolePlan(Role.CORE, rtype, index, bounds)
    # Without a Master replica, worker-0 carries job-role=master (handled above); the min set is
    # then worker-0 .. worker-(min-1). With one, it is master-0 plus worker-0 .. worker-(min-1).
    role = Role.ELASTIC if index >= bounds.min_replicas else Role.CORE
    return RolePlan(role, rtype, index, bounds)


def task_priority(plan: RolePlan, priorities: PrioritiesConfig) -> int:
    """master > core > elastic; among elastic, lower index = higher priority (floor 1)."""
    if plan.role is Role.MASTER:
        return priorities.master
    if plan.role is Role.CORE:
        return priorities.core
    assert plan.bounds is not None
    return max(1, priorities.elastic - (plan.replica_index - plan.bounds.min_replicas))


def preemptable(role: Role) -> bool:
    return role is Role.ELASTIC
