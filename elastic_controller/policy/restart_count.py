"""When a shrink's restart is counted (issue 36, F2): once it happened, once per scale record.

A plan's scale-down stamp (``scale-record`` with path ``evict`` or ``notice``) uses one of torchrun's
restarts only when one of its victims really left: evicted (now, or when its notice ran out) or gone
by itself. A notice withdrawn, a stamp taken back or an interrupted plan dropped restarted nothing and
counts nothing. So the count is a reconciliation rule of the cycle's decision, not a value written with
the stamp: a PodGroup of ours whose current down record has a victim evicted, leaving or gone, and
whose ``restart-counted`` does not name that record yet, gets ``SpendRestart(job, used + 1, record)``;
its writer (``Executor.count_restart``) applies it with a compare-and-swap (the record still there,
not counted, the count still the one decided on) and marks ``restart-counted: <record id>``.

Volcano's own preemptions (a stamp without a record) count at their stamp: they happened.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from .actions import SpendRestart
from .budget import parse_used
from .contract import ScaleRecord
from .keys import (
    LAST_SCALE_DIRECTION,
    LAST_SCALE_TIME,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    RESTART_COUNTED,
    RESTARTS_USED,
    SCALE_RECORD,
    Direction,
)
from .model import PodGroupView, PodView, Snapshot

DOWN_PATHS = ("evict", "notice")


def restarted(rec: ScaleRecord, pods: Mapping[str, PodView]) -> bool:
    """Whether one of a down record's pods was evicted or is gone or leaving: torchrun's workers
    restarted (a notice merely given, or withdrawn, restarted nothing)."""
    for key, uid in rec.pods.items():
        p = pods.get(key)
        if p is None or (uid and p.uid != uid) or p.deleting or p.terminal:
            return True
    return False


def uncounted(annotations: Mapping[str, str]) -> ScaleRecord | None:
    """The PodGroup's current down record (a plan's scale-down: evictions or a notice) while its
    restart is not counted yet, else None. Only the record of the current stamp (its ``at`` is the
    PodGroup's ``last-scale-time``): a record left behind by a later stamp without one is not."""
    text = annotations.get(SCALE_RECORD)
    if not text or annotations.get(LAST_SCALE_DIRECTION) != Direction.DOWN.value:
        return None
    counted = annotations.get(RESTART_COUNTED)
    if counted and f'"id":"{counted}"' in text:  # (most cycles: counted long ago, no JSON read)
        return None
    rec = ScaleRecord.decode(text)
    if rec is None or rec.path not in DOWN_PATHS or rec.at != annotations.get(LAST_SCALE_TIME) \
            or rec.id == counted:
        return None
    return rec


def spend_for(job: str, annotations: Mapping[str, str], record: str = "") -> SpendRestart:
    """One more restart of ``job`` than its PodGroup counts (an unreadable count as 0: the write
    repairs it; the policy read it as spent, so no shrink chose the job meanwhile)."""
    return SpendRestart(job, (parse_used(annotations.get(RESTARTS_USED)) or 0) + 1, record)


def restarts_to_count(snapshot: Snapshot) -> tuple[SpendRestart, ...]:
    """Every restart that happened and is not counted yet: one ``SpendRestart`` per PodGroup of ours
    whose current down record (``uncounted``) has a victim evicted, leaving or gone, by job."""
    pending = [(pg, rec) for pg in snapshot.podgroups
               if pg.labels.get(MANAGED_BY_LABEL) == MANAGED_BY and (rec := uncounted(pg.annotations)) is not None]
    if not pending:
        return ()
    wanted = {key for _, rec in pending for key in rec.pods}
    pods = {p.key: p for p in snapshot.pods if p.key in wanted}
    return tuple(spend_for(pg.key, pg.annotations, rec.id)
                 for pg, rec in sorted(pending, key=lambda x: x[0].key) if restarted(rec, pods))


def with_counts(snapshot: Snapshot, spends: Sequence[SpendRestart]) -> Snapshot:
    """``snapshot`` as it is once ``spends`` are written: each job's PodGroup with its new count and
    ``restart-counted``, so that the same cycle's budget rule (``budget.budget_of``) counts them."""
    if not spends:
        return snapshot
    by_job = {s.job: s for s in spends}

    def counted(pg: PodGroupView) -> PodGroupView:
        s = by_job.get(pg.key)
        if s is None:
            return pg
        return replace(pg, annotations={**pg.annotations, RESTARTS_USED: str(s.used), RESTART_COUNTED: s.record})

    return replace(snapshot, podgroups=tuple(counted(pg) for pg in snapshot.podgroups))
