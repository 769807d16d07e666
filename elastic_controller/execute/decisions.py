"""Every decision about a job where ``kubectl describe`` shows it: the PodGroup's ``last-decision``
annotation and an Event on the job (its PyTorchJob, else its PodGroup).

- A starving gang: what this cycle did for it (evicted, gave notice, could not execute, waits).
- A job whose growth is held back (the plan's ``HoldNote``s: cooldown, snooze, ``minScaleUpGain``,
  checkpoint window, a waiting gang's room, ...): ``<time> held (<Reason>): <note>`` and a
  ``ScaleUpHeld`` Event with the note.

The write rate is bounded, with the annotation itself as the memory (so a restarted or new leader
does not repeat what the last one said): nothing is written while the text stays the same; a new
text of the same kind (same gang outcome, same hold reason code) is written at most once per
``REFRESH_SECONDS``; an Event is recorded only when the kind changes (at most one per job and
reason change, not one per cycle). A job with a plan in flight (a pod stamped ``evicted-for``, a
victim or a gate lift of this cycle) keeps the scale stamp's own ``last-decision``: a resumed plan
recognises its stamp by that text (``policy.resume.plan_stamp_for``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import partial

from ..kube.errors import KubeError
from ..policy import contract, keys
from ..policy.actions import CycleDecision, Evict, GiveNotice, Hold, LiftGates, RecordGang, ShrinkInPlace
from ..policy.decisions import CyclePlan, GangDecision, HoldNote
from ..policy.model import Snapshot
from ..policy.parse import format_time
from .executor import CycleReport, Executor, log

# A new text of the same kind replaces the annotation at most this often (a note whose numbers
# follow the free capacity would otherwise be written on every change of the cluster).
REFRESH_SECONDS = 60.0
HELD = "ScaleUpHeld"
# The gang outcomes' Events, by the kind of their decision: (Event reason, Event type).
GANG_EVENTS = {
    contract.Kind.WAITING: ("GangWaiting", "Normal"),
    contract.Kind.EVICTED: ("GangEvicting", "Normal"),
    contract.Kind.NOTICE: ("GangEvictionNotice", "Normal"),
    contract.Kind.NOT_EXECUTED: ("GangPlanNotExecuted", "Warning"),
}


def hold_decision(stamp: str, note: HoldNote | str) -> contract.Decision:
    """The ``last-decision`` for a job whose growth is held back: ``held (<Reason>): <note>``."""
    code = note.reason if isinstance(note, HoldNote) and note.reason else "Held"
    return contract.held(stamp, code, str(note))


def kind_of(text: str) -> str:
    """What kind of decision an annotation records ("" for none we write here): the hold's
    ``held (<Reason>)``, or the decision's kind (``contract.Decision.sort``)."""
    d = contract.Decision.decode(text)
    return d.sort if d is not None else ""


def _gang_decision(d: GangDecision, report: CycleReport, stamp: str) -> contract.Decision:
    if d.pod_group in report.failed:
        return contract.gang_not_executed(stamp, len(d.victims), report.failed[d.pod_group])
    if d.pod_group in report.in_place:
        return contract.gang_in_place(stamp, len(report.noticed[d.pod_group]), d.reason)
    if d.pod_group in report.noticed:
        return contract.gang_noticed(stamp, len(report.noticed[d.pod_group]), d.reason)
    if d.decision == "evict":
        return contract.gang_evicted(stamp, len(d.victims), d.reason)
    return contract.gang_waiting(stamp, d.reason)


def in_flight_jobs(snapshot: Snapshot | None, plan: CyclePlan) -> set[str]:
    """Jobs whose scale stamp's ``last-decision`` must stay as written this cycle or by a plan not
    finished yet: a live pod stamped ``evicted-for`` (a plan in flight, a notice), a victim or a
    gate lift of this plan."""
    out = {e.job for e in plan.evictions} | {g.job for g in plan.gate_releases}
    if snapshot is not None:
        out |= {p.job_id for p in snapshot.pods
                if keys.EVICTED_FOR in p.annotations and not p.deleting and not p.terminal}
    return out


def acted_on(decision: CycleDecision) -> set[str]:
    """The PodGroups this cycle's actions write or act for: the gangs of an ``Evict``, ``GiveNotice``
    or ``ShrinkInPlace`` (what their records say depends on how those actions went), their victims'
    jobs and the jobs that grow (stamped by the actions: a record there goes after the stamp)."""
    out: set[str] = set()
    for a in decision.actions:
        if isinstance(a, Evict):
            out |= {a.gang, *(e.job for e in a.victims)}
        elif isinstance(a, GiveNotice | ShrinkInPlace):
            out |= {a.gang, *(e.job for e in a.evictions)}
        elif isinstance(a, LiftGates):
            out.add(a.job)
    return out


Tasks = list[tuple[str, Callable[[], None]]]


def record_tasks(ex: Executor, decision: CycleDecision, report: CycleReport, now: datetime,
                 snapshot: Snapshot | None = None, *, early: bool | None = None) -> Tasks:
    """The writes of ``write_decisions``, as tasks for ``Executor.pool``. ``early`` True: only those
    that depend on none of the cycle's actions and are on PodGroups no action writes (``acted_on``: a
    gang that waits; a held job, whose note is the plan's), which can go out alongside the actions'
    writes (``plan.execute_decision``); False: only the others (after the actions); None: all."""
    if ex.dry_run:
        return []
    stamp = format_time(now)
    acted = acted_on(decision) if early is not None else set()
    tasks: Tasks = []
    for rec in decision.of(RecordGang):
        d = rec.decision
        if early is not None and (d.pod_group not in acted) != early:
            continue
        said = _gang_decision(d, report, stamp)
        reason, event_type = GANG_EVENTS[said.kind]
        tasks.append((d.pod_group, partial(_publish, ex, d.pod_group, said, now, reason, event_type, said.text)))
    holds = decision.of(Hold)
    busy = in_flight_jobs(snapshot, decision.plan) if holds else set()
    for hold in holds:
        if hold.job in busy or (early is not None and (hold.job not in acted) != early):
            continue
        tasks.append((hold.job, partial(_publish, ex, hold.job, hold_decision(stamp, hold.note), now, HELD, "Normal",
                                        str(hold.note))))
    return tasks


def write_decisions(ex: Executor, decision: CycleDecision, report: CycleReport, now: datetime,
                    snapshot: Snapshot | None = None, *, early: bool | None = None) -> None:
    """Each ``RecordGang`` (a starving gang's outcome) and ``Hold`` (a held job), on its PodGroup and
    as an Event when its kind changed (see the module doc). ``snapshot``: the cycle's, to find plans
    in flight; ``early``: as ``record_tasks``."""
    # One PodGroup's records in order, different PodGroups' concurrently (Executor.pool); a failed
    # write is logged in _publish and loses no other; a lost Lease stops the rest and is raised.
    for done in ex.pool.run(record_tasks(ex, decision, report, now, snapshot, early=early)):
        if done.error is not None:
            raise done.error


def _publish(ex: Executor, key: str, said: contract.Decision, now: datetime, reason: str, event_type: str,
             message: str) -> None:
    """Write ``said`` to ``key``'s ``last-decision`` (bounded as the module doc says); an Event
    when its kind changed and the write went through."""
    if not ex.ours(key):
        return
    text = said.encode()
    new = contract.Decision.decode(text)  # as stored: a cut sentence compares as it will be read back
    current = contract.Decision.decode(ex.pg_annotations(key).get(keys.LAST_DECISION))
    if current is not None and new is not None and (current.sort, current.text) == (new.sort, new.text):
        return  # nothing changed
    changed = (current.sort if current is not None else "") != said.sort
    if not changed and current is not None:
        last = current.time
        if last is not None and 0 <= (now - last).total_seconds() < REFRESH_SECONDS:
            return  # same kind, new words: refreshed at most once per REFRESH_SECONDS
    try:
        ex.patch_pg(key, {keys.LAST_DECISION: text})
    except KubeError as exc:
        log.debug("last-decision not written", extra={"podgroup": key, "error": str(exc)})
        return
    if not changed:
        return
    ref = ex.job_ref(key)
    if ref is not None:
        ex.fence(f"event on {key}")
        ex.recorder.emit(ref, event_type, reason, message)
