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

import re
from datetime import datetime

from ..kube.errors import KubeError
from ..policy import keys
from ..policy.actions import CycleDecision, Hold, RecordGang
from ..policy.decisions import CyclePlan, GangDecision, HoldNote
from ..policy.model import Snapshot
from ..policy.parse import format_time, parse_time
from .executor import CycleReport, Executor, log

# A new text of the same kind replaces the annotation at most this often (a note whose numbers
# follow the free capacity would otherwise be written on every change of the cluster).
REFRESH_SECONDS = 60.0
MAX_TEXT = 500
HELD = "ScaleUpHeld"
# The gang outcomes: (kind as its annotation starts after the time, Event reason, Event type).
GANG_WAITING = ("waiting", "GangWaiting", "Normal")
GANG_EVICTING = ("evicted", "GangEvicting", "Normal")
GANG_NOTICE = ("eviction notice", "GangEvictionNotice", "Normal")
GANG_NOT_EXECUTED = ("waiting: plan to evict", "GangPlanNotExecuted", "Warning")
_STAMPED = re.compile(r"^(\S+) (.*)$", re.S)
_HELD = re.compile(r"^held \((\w+)\): ")


def hold_text(stamp: str, note: HoldNote | str) -> str:
    """The ``last-decision`` for a job whose growth is held back: ``<time> held (<Reason>): <note>``."""
    code = note.reason if isinstance(note, HoldNote) and note.reason else "Held"
    return f"{stamp} held ({code}): {note}"


def kind_of(text: str) -> str:
    """What kind of decision an annotation records ("" for none we write here): the hold's
    ``held (<Reason>)``, or a gang outcome's kind."""
    m = _STAMPED.match(text)
    body = m.group(2) if m else text
    held = _HELD.match(body)
    if held:
        return f"held ({held.group(1)})"
    for kind, _, _ in (GANG_NOT_EXECUTED, GANG_NOTICE, GANG_EVICTING, GANG_WAITING):
        if body.startswith(kind):
            return kind
    return ""


def _stamp_of(text: str) -> datetime | None:
    m = _STAMPED.match(text)
    if not m:
        return None
    try:
        return parse_time(m.group(1))
    except (ValueError, TypeError):
        return None


def _gang_text(d: GangDecision, report: CycleReport, stamp: str) -> tuple[str, tuple[str, str, str]]:
    if d.pod_group in report.failed:
        return (f"{stamp} waiting: plan to evict {len(d.victims)} not executed ({report.failed[d.pod_group]})",
                GANG_NOT_EXECUTED)
    if d.pod_group in report.noticed:
        return (f"{stamp} eviction notice given to {len(report.noticed[d.pod_group])} elastic worker(s) "
                f"for it: {d.reason}", GANG_NOTICE)
    if d.decision == "evict":
        return f"{stamp} evicted {len(d.victims)} elastic worker(s) for it: {d.reason}", GANG_EVICTING
    return f"{stamp} waiting: {d.reason}", GANG_WAITING


def in_flight_jobs(snapshot: Snapshot | None, plan: CyclePlan) -> set[str]:
    """Jobs whose scale stamp's ``last-decision`` must stay as written this cycle or by a plan not
    finished yet: a live pod stamped ``evicted-for`` (a plan in flight, a notice), a victim or a
    gate lift of this plan."""
    out = {e.job for e in plan.evictions} | {g.job for g in plan.gate_releases}
    if snapshot is not None:
        out |= {p.job_id for p in snapshot.pods
                if keys.EVICTED_FOR in p.annotations and not p.deleting and not p.terminal}
    return out


def write_decisions(ex: Executor, decision: CycleDecision, report: CycleReport, now: datetime,
                    snapshot: Snapshot | None = None) -> None:
    """Each ``RecordGang`` (a starving gang's outcome) and ``Hold`` (a held job), on its PodGroup and
    as an Event when its kind changed (see the module doc). ``snapshot``: the cycle's, to find plans
    in flight."""
    if ex.dry_run:
        return
    stamp = format_time(now)
    for rec in decision.of(RecordGang):
        d = rec.decision
        text, (_, reason, event_type) = _gang_text(d, report, stamp)
        _publish(ex, d.pod_group, text, now, reason, event_type, text[len(stamp) + 1:])
    holds = decision.of(Hold)
    busy = in_flight_jobs(snapshot, decision.plan) if holds else set()
    for hold in holds:
        if hold.job in busy:
            continue
        _publish(ex, hold.job, hold_text(stamp, hold.note), now, HELD, "Normal", str(hold.note))


def _publish(ex: Executor, key: str, text: str, now: datetime, reason: str, event_type: str,
             message: str) -> None:
    """Write ``text`` to ``key``'s ``last-decision`` (bounded as the module doc says); an Event
    when its kind changed and the write went through."""
    if not ex.ours(key):
        return
    text = text[:MAX_TEXT]  # as written: a longer text would never compare equal to its stored self
    current = ex.pg_annotations(key).get(keys.LAST_DECISION, "")
    stamp_len = len(text.split(" ", 1)[0])
    if current[stamp_len:] == text[stamp_len:]:
        return  # nothing changed
    changed = kind_of(current) != kind_of(text)
    if not changed:
        last = _stamp_of(current)
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
