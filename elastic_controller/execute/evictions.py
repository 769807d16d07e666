"""A starving gang's evictions, the immediate path (docs/failure-model.md): stamp the victims
(``evicted-for``: the plan's record), dry-run every eviction, stamp the victims' job PodGroups
(cooldown state, written before acting), then evict through the Eviction API (the first victim
alone, then the others at once: a race or an outage met on the first stops the plan before anything
else is evicted), then count the restart the action spends for each job one of whose victims was
evicted (``Executor.count_restart``: once it happened, never with the stamp; issue 36, F2). A
failure undoes the stamps of what did not happen, each only if it is still the one we wrote, and
leaves the gang to the next cycle's plan: no victim is ever substituted, nothing is deleted.
Whether a gang's victims are evicted now or put under notice, and what each job's
``restarts-used`` becomes, is the action's (``policy.cycle.decide``): this writer decides
nothing."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from functools import partial

from ..kube.errors import KubeError, TooManyRequestsError
from ..policy import keys
from ..policy.actions import Evict
from ..policy.decisions import Eviction
from ..policy.parse import format_time
from .executor import CycleReport, Executor, down_decision, log, made_room, record_id
from .pdb import remove
from .writers import Done


def execute_evictions(ex: Executor, action: Evict, now: datetime, report: CycleReport) -> None:
    """Carry out one gang's ``Evict`` (all of its victims, or none beyond those done before a race)."""
    if ex.dry_run:
        return
    gang, evictions = action.gang, list(action.victims)
    stamp = format_time(now)
    jobs = sorted({e.job for e in evictions})
    before = {j: ex.pg_annotations(j) for j in jobs}
    stamped_jobs: dict[str, dict[str, str]] = {}  # job -> the stamp we wrote
    stamped_pods: list[str] = []
    try:
        # 1. The plan's record: each victim names the gang. Recovery finds an interrupted plan here.
        # Each step's writes go out concurrently (Executor.pool), the step ends before the next.
        marked = ex.pool.run([(e.pod, partial(ex.patch_pod_annotations, e.pod, {keys.EVICTED_FOR: gang}))
                              for e in evictions])
        stamped_pods.extend(e.pod for e, res in zip(evictions, marked, strict=True) if res.ok)
        _raise_first(marked)
        # a victim past its PDB is a DELETE (pdb.py); every victim a PDB holds is remembered, not just the first
        tried = ex.pool.run([(e.pod, partial(remove, ex, e, dry_run=True)) for e in evictions])
        for e, res in zip(evictions, tried, strict=True):
            if isinstance(res.error, TooManyRequestsError):
                ex.refused_by_pdb(e.pod, gang, now)
        _raise_first(tried)
        ex.fault("victims-stamped")
        # 2. Cooldown state, before acting: a job is never scaled without its stamp.
        for j in jobs:
            n = sum(1 for e in evictions if e.job == j)
            stamped_jobs[j] = {  # (before the write: a write that fails after it landed is undone too)
                keys.LAST_SCALE_TIME: stamp, keys.LAST_SCALE_DIRECTION: keys.Direction.DOWN.value,
                keys.LAST_DECISION: down_decision(stamp, n, gang, action.fairness),
                keys.SCALE_RECORD: ex.new_record("evict", gang, {e.pod: e.uid for e in evictions if e.job == j},
                                                 before[j], stamp)}
        _raise_first(ex.pool.run([(j, partial(ex.stamp, j, stamped_jobs[j], over=before[j], copy=False))
                                  for j in jobs]))
        ex.fault("jobs-stamped")
    except KubeError as exc:
        why = "pdb" if isinstance(exc, TooManyRequestsError) else "conflict" if exc.status == 409 else "error"
        report.failed[gang] = f"{why}: {exc}"
        for e in evictions:
            ex.metrics.eviction_failed(e.queue, why)
        log.warning("eviction plan not executed; re-planning next cycle",
                    extra={"podgroup": gang, "reason": why, "error": str(exc)})
        ex.undo(gang, before, stamped_jobs, stamped_pods)
        return
    # The victims' jobs hear of it before their pods go (issue 40): one ScalingDown Event per job
    # (its ScaledDown follows the evictions; with a notice, notice.py tells the job instead).
    for j in jobs:
        ref = ex.job_ref(j)
        if ref is not None:
            names = ", ".join(sorted(e.pod.partition("/")[2] for e in evictions if e.job == j))
            why = next((f"; {e.reason}" for e in evictions if e.job == j and e.fairness), "")
            ex.recorder.emit(ref, "Normal", "ScalingDown",
                             f"evicting elastic worker(s) {names} now {made_room(gang, action.fairness)}{why}")
    # 3. Evict: the first victim alone, then the others at once (``Executor.pool``). A race (the
    # dry-run passed, the real call did not: a PDB tightened, the pod replaced) or an outage met on
    # the first stops the plan before anything else is evicted; the others passed the same dry-run
    # moments ago and go out together (one round instead of one per victim). Whatever failed among
    # them: what was evicted is kept and booked, the rest is undone (the claims of the pods not
    # evicted; the stamps of the jobs none of whose victims was).
    done: list[Eviction] = []
    failures: list[tuple[Eviction, KubeError]] = []
    stop: Exception | None = None
    # The jobs' copies of their stamps (ex.copy_stamp: for people, never read by a decision) go out
    # alongside the first eviction, one round less; an undo takes them back with the stamps.
    copies = [(j, partial(ex.copy_stamp, j, stamped_jobs[j])) for j in jobs]

    def evict_one(e: Eviction) -> None:  # booked in its own task: a crash of another loses no booking
        remove(ex, e)
        ex.evicted(e.pod, e.uid, e.job, e.queue, gang, e.reason, report, resumed=False, past_pdb=e.past_pdb,
                   fairness=e.fairness)
        ex.fault("evicted-one")

    for batch in (evictions[:1], evictions[1:]):
        if failures or stop is not None or not batch:
            break
        results = ex.pool.run([(e.pod, partial(evict_one, e)) for e in batch] + copies)
        for res in results[len(batch):]:  # (a copy logs its own failure; a lost Lease stops the plan)
            stop = stop or (res.error if not isinstance(res.error, KubeError) else None)
        copies = []
        for e, res in zip(batch, results[:len(batch)], strict=True):
            if res.ok:
                done.append(e)
            elif isinstance(res.error, KubeError):
                failures.append((e, res.error))
            else:
                stop = stop or res.error
    if stop is not None:  # a lost Lease (or a bug): what was evicted is booked; the next leader judges the rest
        raise stop
    if failures:
        for e, err in failures:
            if isinstance(err, TooManyRequestsError):
                ex.refused_by_pdb(e.pod, gang, now)
            ex.metrics.eviction_failed(e.queue, "race")
            log.warning("eviction failed after dry-run passed", extra={"pod": e.pod, "podgroup": gang,
                                                                      "error": str(err)})
        report.failed[gang] = f"error after {len(done)} eviction(s): {failures[0][1]}"
        rest = [x.pod for x in evictions if x not in done]
        untouched = [j for j in jobs if not any(x.job == j for x in done)]
        ex.undo(gang, before, {j: stamped_jobs[j] for j in untouched}, rest)
    # The restart each job evicted from uses, now that it happened (the action's SpendRestart, on
    # the record stamped above; a crash before leaves it to the next cycle's decision).
    spends = [replace(r, record=record_id(stamped_jobs[r.job])) for r in action.restarts if r.job in stamped_jobs]
    ex.scaled_down(gang, [(e.job, e.pod) for e in done], spends, fairness=action.fairness)


def _raise_first(results: list[Done[None]]) -> None:
    """A step's first failure, once all its writes have ended: a lost Lease (or a crash) before any
    ``KubeError`` (the caller undoes what the step did on a ``KubeError``)."""
    errors = [d.error for d in results if d.error is not None]
    for err in errors:
        if not isinstance(err, KubeError):
            raise err
    if errors:
        raise errors[0]
