"""Jobs resized in place (issue 39; docs/checkpointing.md, "Resizing in place"). Pure.

A PyTorchJob with ``volcano-elastic.io/resize: in-place`` keeps its training processes through a
planned scale event: the agent announces the event (a generation ``G``, one above the highest its
pods carry, with the coming size; ``leaving: G`` on the victims), the job kit re-forms the group at
the new size, each victim writes ``left: G`` on its pod and is then evicted (or once its bounded wait,
the queue's ``inPlaceLeaveSeconds``, ran out). Such a shrink spends no torchrun restart (its scale
record's path is ``in-place``, ``restart_count.DOWN_PATHS`` leaves it out; ``budget.budget_of`` sets
no budget for the job). Every other job is decided as before: nothing here runs unless a PyTorchJob
opts in.

The rules that exist because a scale event restarts a job are relaxed for such a job by its queue's
``inPlace*`` keys (issue 39 item 3; ``settings.QueuePolicy``: ``min_scale_up_gain``,
``checkpoint_window``, ``min_workers_to_shrink``, ``cooldown_seconds`` and ``snooze_seconds`` take
``in_place``), applied where each rule is (``gates``, ``fairness``, ``World.never_victim``, the
cooldown ``world`` gives the job: ``JobState.in_place``), so that the agent, ``plan``, ``status`` and
the simulator decide alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields, replace
from typing import Any

from .contract import generation_of, in_place
from .decisions import CyclePlan, InPlaceEviction, InPlaceRelease
from .model import PodView, Snapshot


def in_place_jobs(snapshot: Snapshot) -> frozenset[str]:
    """The job ids (``PodView.job_id``: ns/podgroup) of the jobs whose PyTorchJob opts in."""
    names = {j.key for j in snapshot.jobs if in_place(j.annotations)}
    if not names:
        return frozenset()
    return frozenset(p.job_id for p in snapshot.pods if p.job_name and f"{p.namespace}/{p.job_name}" in names)


def next_generation(pods: Iterable[PodView]) -> int:
    """The generation of a job's next in-place event: one above the highest its pods carry."""
    return generation_of(p.annotations for p in pods) + 1


def marked(plan: CyclePlan, jobs: frozenset[str]) -> CyclePlan:
    """``plan`` with the evictions and gate releases of ``jobs`` (resized in place) said to be in place
    (``inPlace`` in ``plan -o json``, "in place" in the reasons). The same plan when none is."""
    if not jobs or (not any(e.job in jobs for e in plan.evictions) and not any(
            r.job in jobs for r in plan.gate_releases)):
        return plan
    evictions = tuple(InPlaceEviction(**{**_fields(e), "reason": _said(e.reason)}) if e.job in jobs else e
                      for e in plan.evictions)
    releases = tuple(InPlaceRelease(**{**_fields(r), "reason": _said(r.reason)}) if r.job in jobs else r
                     for r in plan.gate_releases)
    return replace(plan, evictions=evictions, gate_releases=releases)


def _fields(value: Any) -> dict[str, Any]:
    return {f.name: getattr(value, f.name) for f in fields(value)}


def _said(reason: str) -> str:
    return reason if reason.startswith("in place: ") else f"in place: {reason}"


def pods_by_job(pods: Iterable[PodView], jobs: Iterable[str]) -> Mapping[str, list[PodView]]:
    wanted = set(jobs)
    out: dict[str, list[PodView]] = {}
    for p in pods:
        if p.job_id in wanted:
            out.setdefault(p.job_id, []).append(p)
    return out
