"""Resume after a crash: a plan interrupted between its first stamp and its last eviction (a crash,
an API outage, a lost Lease) is found by its record (victims stamped ``evicted-for``, not
terminating). The next leader finishes it if every victim still passes a fresh plan's checks
(``policy.resume``), else forgets it (stamps taken back, a refused victim gets a Warning Event);
either way the gang is never left blocked by a cooldown of evictions that did not happen."""

from __future__ import annotations

from datetime import datetime

from ..kube.errors import KubeError, NotFoundError
from ..policy import keys
from ..policy.model import PodView, Snapshot
from ..policy.parse import format_time
from ..policy.resume import check_resumable, plan_stamp_for
from .executor import SCALE_KEYS, CycleReport, Executor, down_decision, log


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
                    ex.stamp(j, {keys.LAST_SCALE_TIME: stamp,
                                 keys.LAST_SCALE_DIRECTION: keys.Direction.DOWN.value,
                                 keys.LAST_DECISION: down_decision(stamp, n, gang)})
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
        ex.scaled_down(gang, done, resumed=True)


def forget(ex: Executor, gang: str, victims: list[PodView], own: list[str], snapshot: Snapshot,
           now: datetime, why: str) -> None:
    """Drop an interrupted plan: unstamp its victims; a job cooldown the plan stamped for
    evictions that never happened is taken back (only while it is still that stamp)."""
    for v in victims:
        try:
            ex.unstamp_pod(v.key, gang)
        except KubeError as exc:
            log.warning("could not clear evicted-for", extra={"pod": v.key, "error": str(exc)})
    evicted_jobs = {p.job_id for p in snapshot.pods
                    if p.deleting and p.annotations.get(keys.EVICTED_FOR) == gang}
    for j in own:
        if j in evicted_jobs:
            continue  # part of the plan happened: that cooldown is real
        ours = ex.pg_annotations(j)
        text = f"{format_time(now)} plan to evict for {gang} dropped after an interruption: {why}"
        try:
            ex.restore_pg(j, {k: ours.get(k, "") for k in SCALE_KEYS}, {keys.LAST_DECISION: text[:500]})
        except KubeError as exc:
            log.warning("could not take back a cooldown stamp", extra={"job": j, "error": str(exc)})
