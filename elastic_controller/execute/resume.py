"""Resume after a crash: a plan interrupted between its first stamp and its last eviction (a crash,
an API outage, a lost Lease) is found by its record (victims stamped ``evicted-for``, not
terminating). The next leader finishes it if every victim still passes a fresh plan's checks
(``policy.resume``), else forgets it (stamps taken back, a refused victim gets a Warning Event);
either way the gang is never left blocked by a cooldown of evictions that did not happen."""

from __future__ import annotations

from datetime import datetime

from ..kube.errors import KubeError, NotFoundError
from ..policy import contract, keys
from ..policy.actions import SpendRestart
from ..policy.model import PodGroupView, PodView, Snapshot
from ..policy.parse import format_time
from ..policy.restart_count import spend_for, uncounted
from ..policy.resume import check_resumable, plan_stamp_for
from .executor import (
    RECORD_GRACE_SECONDS,
    RESTORE_KEYS,
    CycleReport,
    Executor,
    ScaleRecord,
    down_decision,
    log,
    parse_record,
)

# A plan another writer stamped is that writer's to finish or drop while it may still be running it:
# a live writer goes from its stamp to its last eviction in a few API calls, so a plan whose record
# is younger than this and was written by another identity is left alone by the drop (issue 36, F3:
# with two active controllers, the loser's "interrupted plan dropped" erased the winner's real
# stamp). Finishing it stays immediate (evictions by uid: the second is a no-op). A predecessor that
# really died has its plan dropped once it is this old (the Lease moves after 15 s by default).
PLAN_GRACE_SECONDS = 30.0
LIVE_WRITER = "another writer"  # how stamp_owner says a live writer's plan


def stamp_owner(ex: Executor, pg: PodGroupView | None, gang: str, victims: list[PodView],
                now: datetime) -> str:
    """Why ``pg``'s scale stamp may not be taken back as the stamp of the plan evicting ``victims``
    (of its job) for ``gang``; "" when it may. It may when it carries no scale record (a stamp
    written before records, or by hand), or when its record is this plan's (for ``gang``, naming
    every victim) and was written by this agent, or by another writer at least
    ``PLAN_GRACE_SECONDS`` ago (that writer is not running it any more; a record with no time, or a
    time in this agent's future, counts from when this agent first saw it)."""
    if pg is None:
        return "no PodGroup"
    rec = parse_record(pg.annotations.get(keys.SCALE_RECORD))
    if rec is None:
        return ""
    if rec.gang != gang or rec.path not in ("evict", "notice", "in-place"):
        return f"its stamp is another plan's ({rec.path} for {rec.gang or 'no gang'}, by {rec.by})"
    if rec.pods and any(v.key not in rec.pods for v in victims):
        return f"its stamp's record (by {rec.by}) does not name every victim claimed for {gang}"
    if rec.by == ex.identity:
        return ""
    at = rec.time
    seen = ex.records_seen.setdefault(rec.id, now)
    if at is None or at > now:  # unreadable, or in our future (clock skew): from when this agent first saw it
        at = seen
    if (now - at).total_seconds() < PLAN_GRACE_SECONDS:
        ex.saw_writer(rec, pg.key)
        return f"{LIVE_WRITER} ({rec.by}) stamped this plan at {rec.at}: it may still be running it"
    return ""



def resume_interrupted(ex: Executor, snapshot: Snapshot, now: datetime, report: CycleReport) -> None:
    """Finish or forget every interrupted plan found in ``snapshot`` (``report.resumed``, ``report.refused``)."""
    if ex.dry_run:
        return
    stamped: dict[str, list[PodView]] = {}
    for pod in snapshot.pods:
        target = pod.annotations.get(keys.EVICTED_FOR)
        if target and not pod.deleting and not pod.terminal and keys.EVICT_AFTER not in pod.annotations:
            # (a pod carrying evict-after is under notice, not an interrupted plan: see notice.py)
            stamped.setdefault(target, []).append(pod)
    if not stamped:
        return
    groups = {pg.key: pg for pg in snapshot.podgroups}
    for gang, victims in sorted(stamped.items()):
        jobs = sorted({v.job_id for v in victims})
        own = [j for j in jobs if plan_stamp_for(groups.get(j), gang)]
        verdict = check_resumable(snapshot, ex.cfg, now, gang, victims, own)
        if not verdict.ok:
            live = {j: stamp_owner(ex, groups.get(j), gang, [v for v in victims if v.job_id == j], now)
                    for j in own}
            live = {j: w for j, w in live.items() if w.startswith(LIVE_WRITER)}
            if live:  # another writer's plan in progress: not ours to drop (F3); it finishes or undoes it
                log.info("interrupted plan left to its writer", extra={"podgroup": gang, "jobs": live})
                continue
            why = verdict.forget or "; ".join(f"{k}: {w}" for k, w in sorted(verdict.refused.items()))
            log.warning("interrupted plan dropped", extra={"podgroup": gang, "reason": why,
                                                           "victims": [v.key for v in victims]})
            for v in victims:
                refusal = verdict.refused.get(v.key)
                if refusal is None:
                    continue
                report.refused[v.key] = refusal
                pg = groups.get(v.group_key)
                ex.metrics.eviction_failed(pg.queue if pg else "", "refused")
                ref = ex.pod_ref(v.key)
                if ref is not None:
                    ex.recorder.emit(ref, "Warning", "EvictionRefused",
                                     f"{keys.EVICTED_FOR} names gang {gang}, but this pod may not be "
                                     f"evicted for it: {refusal}; annotation removed")
            forget(ex, gang, victims, own, snapshot, now, why)
            continue
        try:
            for v in victims:
                ex.evict(v.key, v.uid, dry_run=True)
        except KubeError as exc:
            log.warning("interrupted plan dropped: a dry-run failed", extra={"podgroup": gang,
                                                                             "error": str(exc)})
            forget(ex, gang, victims, own, snapshot, now, f"dry-run failed: {exc}")
            continue
        stamp = format_time(now)
        try:
            for j in jobs:
                n = sum(1 for v in victims if v.job_id == j)
                if ex.ours(j) and j not in own:  # this plan's own stamp stays as it was
                    was = ex.pg_annotations(j)
                    ex.stamp(j, {keys.LAST_SCALE_TIME: stamp,
                                 keys.LAST_SCALE_DIRECTION: keys.Direction.DOWN.value,
                                 keys.LAST_DECISION: down_decision(stamp, n, gang),
                                 keys.SCALE_RECORD: ex.new_record("evict", gang, {v.key: v.uid for v in victims
                                                                                  if v.job_id == j},
                                                                  was, stamp)}, over=was)
        except KubeError as exc:
            log.warning("interrupted plan not resumed this cycle: cooldown not stamped",
                        extra={"podgroup": gang, "error": str(exc)})
            continue  # the record stays: the next cycle tries again
        done: list[tuple[str, str]] = []
        for v in victims:
            try:
                ex.evict(v.key, v.uid)
            except NotFoundError:
                continue
            except KubeError as exc:
                log.warning("resumed eviction failed", extra={"pod": v.key, "error": str(exc)})
                ex.unstamp_pod(v.key, gang)
                continue
            pg = groups.get(v.group_key)
            ex.evicted(v.key, v.uid, v.job_id, pg.queue if pg else "", gang,
                       "finishing an interrupted plan", report, resumed=True)
            done.append((v.job_id, v.key))
        ex.scaled_down(gang, done, _spends(ex, gang, {job for job, _ in done}), resumed=True)


def _spends(ex: Executor, gang: str, jobs: set[str]) -> list[SpendRestart]:
    """The restart each of ``jobs`` used once an interrupted plan's evictions happened: the cycle's
    rule (``restart_count``) on the down record for ``gang`` its PodGroup carries, uncounted."""
    out = []
    for j in sorted(jobs):
        ann = ex.pg_annotations(j)
        rec = uncounted(ann)
        if rec is not None and rec.gang == gang:
            out.append(spend_for(j, ann, rec.id))
    return out


def forget(ex: Executor, gang: str, victims: list[PodView], own: list[str], snapshot: Snapshot,
           now: datetime, why: str) -> None:
    """Drop an interrupted plan: unstamp its victims; a job cooldown the plan stamped for
    evictions that never happened is taken back: only a stamp whose scale record is this plan's and
    is not another live writer's (``stamp_owner``), and only while the PodGroup still carries that
    very record (``restore_pg``: compare-and-swap on the record id and the resourceVersion)."""
    for v in victims:
        try:
            ex.unstamp_pod(v.key, gang)
        except KubeError as exc:
            log.warning("could not clear evicted-for", extra={"pod": v.key, "error": str(exc)})
    evicted_jobs = {p.job_id for p in snapshot.pods
                    if p.deleting and p.annotations.get(keys.EVICTED_FOR) == gang}
    groups = {pg.key: pg for pg in snapshot.podgroups}
    for j in own:
        if j in evicted_jobs:
            continue  # part of the plan happened: that cooldown is real
        not_ours = stamp_owner(ex, groups.get(j), gang, [v for v in victims if v.job_id == j], now)
        if not_ours:  # a stamp this plan did not write, or one its live writer may still act on
            log.info("cooldown stamp not taken back", extra={"job": j, "podgroup": gang, "reason": not_ours})
            continue
        pg = groups.get(j)
        ours = dict(pg.annotations) if pg is not None else {}  # the stamp judged above: the CAS compares it
        at = format_time(now)
        text = contract.forgotten(at, f"plan to evict for {gang} dropped after an interruption: {why}", gang).encode()
        try:
            ex.restore_pg(j, {k: ours[k] for k in RESTORE_KEYS if k in ours}, {keys.LAST_DECISION: text})
        except KubeError as exc:
            log.warning("could not take back a cooldown stamp", extra={"job": j, "error": str(exc)})


def check_records(ex: Executor, snapshot: Snapshot, now: datetime, report: CycleReport) -> bool:
    """Every write path's stamp, judged by its scale record (``keys.SCALE_RECORD``) once it is
    RECORD_GRACE_SECONDS old: a down stamp (evictions, a notice) none of whose pods was evicted,
    is leaving or is under notice (a crash between the stamp and the notice, a notice withdrawn, an
    undo that never ran) is taken back to the stamp it replaced; a scale-up interrupted before its
    last-decision said how many gates were lifted is told from the pods (none: taken back). (A down
    record one of whose pods was evicted or is gone counts its restart: the cycle's decision says so,
    ``policy/restart_count.py``, once per record.) Records of another writer newer than our first
    cycle are said (``Executor.saw_writer``). Also writes nothing for a record it cannot read. True
    when anything was written."""
    if ex.started is None:
        ex.started = now
    if ex.dry_run:
        return False
    pods = {p.key: p for p in snapshot.pods}
    wrote = False
    for pg in snapshot.podgroups:
        rec = parse_record(pg.annotations.get(keys.SCALE_RECORD))
        if rec is None or rec.at != pg.annotations.get(keys.LAST_SCALE_TIME) or not ex.ours(pg.key):
            continue  # no record, or one left behind by a stamp written without one
        ex.saw_writer(rec, pg.key)
        at = rec.time
        if at is None or (now - at).total_seconds() < RECORD_GRACE_SECONDS:
            continue
        current = {k: pg.annotations[k] for k in RESTORE_KEYS if k in pg.annotations}
        try:
            if rec.path in ("evict", "notice", "in-place"):
                wrote |= _judge_down(ex, rec, pg.key, pods, current, now, report)
            elif rec.path == "up":
                wrote |= _judge_up(ex, rec, pg.key, pods, current, now)
        except KubeError as exc:
            log.warning("scale record not settled; next cycle tries again", extra={"job": pg.key, "error": str(exc)})
    return wrote


def _acted(rec: ScaleRecord, pods: dict[str, PodView]) -> bool:
    """Whether any of a down record's pods was evicted, is leaving, or is (still) claimed for its gang."""
    for key, uid in rec.pods.items():
        p = pods.get(key)
        if p is None or (uid and p.uid != uid) or p.deleting or p.terminal:
            return True  # gone (evicted, or deleted: the job shrank either way) or leaving
        if p.annotations.get(keys.EVICTED_FOR) == rec.gang:
            return True  # under notice, or an interrupted plan (resume_interrupted's to judge)
    return False


def _judge_down(ex: Executor, rec: ScaleRecord, job: str, pods: dict[str, PodView], current: dict[str, str],
                now: datetime, report: CycleReport) -> bool:
    if not rec.pods or current.get(keys.LAST_SCALE_DIRECTION) != keys.Direction.DOWN or _acted(rec, pods):
        return False
    what = {"notice": "eviction notice", "in-place": "in-place leave"}.get(rec.path, "eviction")
    text = contract.taken_back(format_time(now), f"cooldown of {rec.at} taken back: none of its {len(rec.pods)} "
                                                 f"{what}(s) for {rec.gang} happened (interrupted, withdrawn or not "
                                                 "executed)", rec.gang).encode()
    before = dict(rec.before)
    before[keys.LAST_DECISION] = text
    if not ex.restore_pg(job, current, before):
        return False
    report.taken_back.append(job)
    log.warning("cooldown stamp taken back: its evictions never happened",
                extra={"job": job, "podgroup": rec.gang, "stamp": rec.at, "path": rec.path, "by": rec.by})
    ref = ex.job_ref(job)
    if ref is not None:
        ex.recorder.emit(ref, "Normal", "CooldownTakenBack",
                         f"the cooldown stamped at {rec.at} for {rec.gang} is taken back: none of its "
                         f"{what}s happened")
    return True


def _judge_up(ex: Executor, rec: ScaleRecord, job: str, pods: dict[str, PodView], current: dict[str, str],
              now: datetime) -> bool:
    """A scale-up whose last-decision still says "lifting": the writer stopped before counting."""
    decision = contract.Decision.decode(current.get(keys.LAST_DECISION))
    if not rec.pods or current.get(keys.LAST_SCALE_DIRECTION) != keys.Direction.UP or decision is None or \
            decision.kind != contract.Kind.UP or decision.path != "lifting" or decision.at != rec.at:
        return False
    gate = ex.cfg.gating.gateName
    lifted = 0
    for key, uid in rec.pods.items():
        p = pods.get(key)
        if p is None or (uid and p.uid != uid) or gate not in p.scheduling_gates:
            lifted += 1
    reason = decision.reason
    ref = ex.job_ref(job)
    if not lifted:
        before = dict(rec.before)
        before[keys.LAST_DECISION] = contract.taken_back(format_time(now), f"scale-up of {rec.at} taken back: none "
                                                         f"of its {len(rec.pods)} gate(s) was lifted (interrupted)"
                                                         ).encode()
        return ex.restore_pg(job, current, before)
    n = len(rec.pods)
    text = contract.up_lifted(rec.at, lifted, n, reason, " (interrupted)").encode()
    ex.patch_pg(job, {keys.LAST_DECISION: text})
    if ref is not None:
        ex.recorder.emit(ref, "Normal", "ScaledUp", f"the scale-up of {rec.at} lifted the scale-up gate of "
                                                    f"{lifted} of {n} elastic pod(s) (counted after an interruption)")
    return True
