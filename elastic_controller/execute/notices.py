"""Eviction notices, the agent's side of them: give notice for a plan (``give_notice``) and act on the
notices given before (``act_on_notices``: evict the due victims, withdraw the ones no longer needed).
The notice writes themselves are ``notice.Notices``; this module stamps the jobs, books the outcome
and takes the stamps back when a notice is not given."""

from __future__ import annotations

import time
from datetime import datetime

from ..kube.errors import KubeError
from ..policy import contract, keys
from ..policy.actions import CycleDecision, EvictDueNotice, GiveNotice, ShrinkInPlace, WithdrawNotice
from ..policy.model import Snapshot
from ..policy.notices import NoticeReview
from ..policy.parse import format_time
from .executor import CycleReport, Executor, InFlight, log


def give_notice(ex: Executor, action: GiveNotice, now: datetime, report: CycleReport) -> None:
    """Carry out one gang's ``GiveNotice``: stamp the victims' jobs' PodGroups (the cooldown starts
    with the notice; a restart is counted only once a victim left, issue 36 F2), then put every
    victim under notice with the action's deadline (``Notices.give``: dry-runs, then ``evict-after``
    next to ``evicted-for``, all or none); a later cycle's ``EvictDueNotice`` evicts them. A notice
    not given takes the PodGroup stamps back."""
    if ex.dry_run:
        return
    gang, evictions = action.gang, action.evictions
    before = {j: ex.pg_annotations(j) for j in sorted({e.job for e in evictions})}
    stamp = format_time(now)
    stamped_jobs: dict[str, dict[str, str]] = {}
    ex.fence(f"eviction notice for {gang}")
    why = ""
    try:
        for j in sorted({e.job for e in evictions}):
            n = sum(1 for e in evictions if e.job == j)
            ours = {keys.LAST_SCALE_TIME: stamp, keys.LAST_SCALE_DIRECTION: keys.Direction.DOWN.value,
                    keys.LAST_DECISION: contract.down_notice(stamp, n, gang).encode(),
                    keys.SCALE_RECORD: ex.new_record("notice", gang,
                                                     {e.pod: e.uid for e in evictions if e.job == j},
                                                     before.get(j, {}), stamp)}
            stamped_jobs[j] = ours
            ex.stamp(j, ours)
    except KubeError as exc:
        why = f"error: {exc}"
    ex.fault("notice-jobs-stamped")
    claim_or_undo(ex, action, now, report, why, before, stamped_jobs, what="eviction notice",
                  failed="eviction notice not given")


def claim_or_undo(ex: Executor, action: GiveNotice | ShrinkInPlace, now: datetime, report: CycleReport, why: str,
                  before: dict[str, dict[str, str]], stamped: dict[str, dict[str, str]], *, what: str,
                  failed: str, in_place: bool = False) -> bool:
    """After the victims' jobs were stamped (``why``: the stamping's error, if any): claim every victim
    of ``action`` for its gang with its deadline (``Notices.give``, all or none; a PDB's refusal makes
    that pod no victim for a while, as on the immediate path), or book the failure and take the stamps
    back. True when the victims are claimed."""
    gang, evictions = action.gang, action.evictions
    if not why:
        ex.fence(f"{what} for {gang}")
        given = ex.notices.give(gang, action.victims, now, in_place=in_place)
        for pod in given.refused:
            ex.refused_by_pdb(pod, gang, now)
        why = given.failed
    if why:
        report.failed[gang] = why
        for e in evictions:
            ex.metrics.eviction_failed(e.queue, why.partition(":")[0])
        log.warning(f"{failed}; re-planning next cycle", extra={"podgroup": gang, "error": why})
        ex.undo(gang, before, stamped, [])
        return False
    report.noticed[gang] = [e.pod for e in evictions]
    return True


def act_on_notices(ex: Executor, snapshot: Snapshot, decision: CycleDecision, now: datetime,
                   report: CycleReport) -> bool:
    """Carry out the notice actions of ``decision`` (``cycle.decide(..., notices_only=True)``): evict
    each ``EvictDueNotice``'s victim, withdraw each ``WithdrawNotice`` (``Notices.act``); True when
    anything was written (the caller snapshots again). Sets ``report.notices`` (the review)."""
    report.notices = decision.notices
    ex.notices.forget_gone(snapshot)
    review = NoticeReview(due=tuple(a.notice for a in decision.of(EvictDueNotice)),
                          withdrawn=tuple(a.withdrawal for a in decision.of(WithdrawNotice)))
    if ex.dry_run or not (review.due or review.withdrawn):
        return False
    ex.fence("act on eviction notices")
    done = ex.notices.act(review)
    queues = {d.facts.pod: d.facts.queue for d in review.due}
    for pod, uid, gang in done.evicted:
        ex.ledger[uid or pod] = InFlight(pod, gang, time.monotonic())
        report.evicted.append(pod)
        ex.metrics.eviction(queues.get(pod, ""), "notice-ended")
    for pod in done.failed:
        if pod in queues:
            ex.metrics.eviction_failed(queues[pod], "notice")
    for pod, gang in done.refused:  # a PDB refused a due eviction: remembered as on the immediate path
        ex.refused_by_pdb(pod, gang, now)
    report.withdrawn.extend(done.withdrawn)
    return bool(done.evicted or done.withdrawn)
