"""Eviction notices, the agent's side of them: give notice for a plan (``give_notice``) and act on the
notices given before (``act_on_notices``: evict the due victims, withdraw the ones no longer needed).
The notice writes themselves are ``notice.Notices``; this module stamps the jobs, books the outcome
and takes the stamps back when a notice is not given.

**Waves** (issue 36, item 3: at 1,000 nodes one cycle gave 10 gangs' notices in 6.6-6.8 s, one gang
after the other, and another evicted its due victims one by one in 5.6 s). A run of consecutive
``GiveNotice`` actions is split into the waves of the eviction path (``waves.waves``: the gangs of a
wave share no victim job; two gangs shrinking one job keep their order, the later stamp's
compare-and-swap over the earlier one's). Each wave is one ``Executor.pool`` run with one task per
gang, keyed by the gang: every gang's ``give_notice`` whole, its writes in their order (the fence,
its jobs' stamps, the dry-runs, the claims, an undo), the gangs of the wave at once (``give_notices``).
So N independent gangs cost the rounds of one (up to the pool's width), each gang fails and is undone
on its own, a lost Lease (or a bug) met by one stops the gangs not yet started and is raised once the
others ended, and a crash leaves each gang where its own writes stopped, as a crash of one gang alone
does. The due evictions and withdrawals of ``act_on_notices`` go out in one pool run
(``Notices.act`` with ``pooled``): a failure of one is reported and stops no other."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from typing import TypeVar, cast

from ..kube.errors import KubeError
from ..notice import Runner
from ..policy import contract, keys
from ..policy.actions import CycleDecision, EvictDueNotice, GiveNotice, ShrinkInPlace, WithdrawNotice
from ..policy.model import Snapshot
from ..policy.notices import NoticeReview
from ..policy.parse import format_time
from .executor import CycleReport, Executor, InFlight, log
from .waves import waves
from .writers import first_stop

R = TypeVar("R")


def give_notices(ex: Executor, actions: Sequence[GiveNotice], now: datetime, report: CycleReport) -> None:
    """Carry out consecutive ``GiveNotice`` actions of one decision, wave by wave (module doc): each
    gang's ``give_notice`` as one task of its wave's pool run; what each gang books in ``report``
    (``failed``, ``noticed``) in decision order, as one after the other would."""
    if ex.dry_run:
        return
    for wave in waves(actions):
        parts = [CycleReport(report.plan) for _ in wave]
        done = ex.pool.run([(a.gang, partial(give_notice, ex, a, now, part))
                            for a, part in zip(wave, parts, strict=True)])
        for part in parts:  # (a gang that met a stop booked what it did, as alone)
            report.failed.update(part.failed)
            report.noticed.update(part.noticed)
        stop = first_stop(done, Exception)
        if stop is not None:  # a lost Lease (or a bug): no gang was started after it; nothing more is written
            raise stop


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
    done = ex.notices.act(review, pooled(ex))
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


def pooled(ex: Executor) -> Runner:
    """``Notices.act``'s runner: the tasks in one ``Executor.pool`` run (one pod's in order, different
    pods' at once), their values in order; the first error a task raised (a bug: ``Notices.act``'s
    tasks answer their ``KubeError``) is raised once every started task has ended."""
    def run(tasks: Sequence[tuple[str, Callable[[], R]]]) -> list[R]:
        done = ex.pool.run(tasks)
        error = first_stop(done, Exception)
        if error is not None:
            raise error
        return [cast(R, d.value) for d in done]
    return run
