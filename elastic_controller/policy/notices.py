"""Eviction notices already given: which are due, which still run, which to withdraw. Pure.

A victim under notice carries ``volcano-elastic.io/evicted-for: ns/gang`` and
``volcano-elastic.io/evict-after: <RFC 3339>`` (the agent stamps both; see ``notice.py``). Each
cycle, ``review_notices`` sorts every such live pod into exactly one of

- **withdrawn**: its gang no longer needs it (the gang's PodGroup is gone, or at least minMember of
  its pods are placed), or it lost its ``evicted-for``: the annotations are removed. Not while its job
  runs at a count outside its allowed counts (``worker-counts``/``worker-step``) that evicting its
  noticed victims would bring back to one (part of the job's rounded victim group was evicted, the
  rest not, e.g. a PodDisruptionBudget refused one): such a notice runs on (``_completes_a_group``);
- **due**: the notice ran out (``now >= evict-after``), or its job recorded a checkpoint since the
  notice began (``evict-after`` minus the victim's queue's ``noticeSeconds``, less one second: the
  deadline is rounded up to a whole second and checkpoint times have whole seconds, while a job
  answers a notice within a second: 0.5 s measured on real nodes, where a strict comparison let
  the job wait out its whole notice; a checkpoint up to a second older than the notice counts, at
  most a second of work), or its ``evict-after`` cannot be read: evict it now;
- **pending**: otherwise, with the time left (the planner counts it as in flight for its gang).

A notice is never shortened except by a newer checkpoint; ``given`` holds the deadlines the agent
itself gave (it wins over a later time on the pod, which the job's own pod-patch rights could
otherwise push back).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from .contract import has_left, leaving_at
from .decisions import CyclePlan, Eviction, InPlaceEviction
from .keys import EVICT_AFTER, EVICTED_FOR, LEAVING
from .model import JobView, PodGroupView, PodView, Snapshot, newest_checkpoint
from .settings import ElasticConfig
from .times import format_time
from .world import ghosts_of

# The deadline is rounded up to a whole second and checkpoint times have whole seconds: a
# checkpoint this much older than the notice's computed start may still be its answer.
ROUNDING = timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class NoticeFacts:
    """One victim under notice, as the review saw it."""

    pod: str  # ns/name
    uid: str
    gang: str  # ns/podgroup it makes room for ("" when evicted-for is missing)
    job: str  # ns/podgroup (or ns/job-name) of the victim's job
    queue: str  # the victim's queue (whose noticeSeconds apply)
    node: str
    evict_after: datetime | None  # None: unreadable
    in_place: bool = False  # a victim of a job resized in place: told to leave the group (``leaving``)


@dataclass(frozen=True, slots=True)
class DueNotice:
    facts: NoticeFacts
    why: str  # "notice ended at ...", "checkpoint at ... after the notice began at ...", ...


@dataclass(frozen=True, slots=True)
class PendingNotice:
    facts: NoticeFacts
    seconds_left: float

    @property
    def reason(self) -> str:
        """For the gang's ``wait`` in ``plan`` and ``status``."""
        return self.describe(left=True)

    def describe(self, *, left: bool) -> str:
        """The reason; without the time ``left`` it stays the same all through the notice (the agent's
        ``last-decision``, rewritten only when it changes)."""
        f = self.facts
        when = format_time(f.evict_after) if f.evict_after else "?"
        if f.in_place:
            secs = f", {self.seconds_left:.0f}s left" if left else ""
            return (f"victim {f.pod} is leaving job {f.job}'s group in place (evicted once it has left, at the "
                    f"latest at {when}{secs})")
        secs = f"{self.seconds_left:.0f}s left; " if left else ""
        return (f"victim {f.pod} is under an eviction notice until {when} ({secs}"
                f"sooner if job {f.job} records a checkpoint)")


@dataclass(frozen=True, slots=True)
class Withdrawal:
    facts: NoticeFacts
    reason: str


@dataclass(frozen=True, slots=True)
class NoticeReview:
    due: tuple[DueNotice, ...] = ()
    pending: tuple[PendingNotice, ...] = ()
    withdrawn: tuple[Withdrawal, ...] = ()

    def pending_for(self, gang: str) -> tuple[PendingNotice, ...]:
        return tuple(p for p in self.pending if p.facts.gang == gang)


def under_notice(pod: PodView) -> bool:
    """A live pod carrying an eviction notice (an ``evict-after`` annotation, readable or not)."""
    return EVICT_AFTER in pod.annotations and not pod.deleting and not pod.terminal


def review_notices(snapshot: Snapshot, cfg: ElasticConfig, now: datetime,
                   given: Mapping[str, datetime] | None = None) -> NoticeReview:
    """Sort every notice in ``snapshot`` into due, pending and withdrawn (see the module doc).

    ``given``: pod uid -> the ``evict-after`` the agent stamped (earlier of it and the pod's wins).
    """
    noticed = [p for p in snapshot.pods if under_notice(p)]
    if not noticed:
        return NoticeReview()
    given = given or {}
    groups: dict[str, PodGroupView] = {pg.key: pg for pg in snapshot.podgroups}
    jobs: dict[str, JobView] = {j.key: j for j in snapshot.jobs}
    gangs = {p.annotations.get(EVICTED_FOR, "") for p in noticed}
    victim_jobs = {p.job_id for p in noticed}
    placed: dict[str, int] = {}
    job_pods: dict[str, list[PodView]] = {}
    for pod in snapshot.pods:
        if pod.group_key in gangs and pod.node_name and not pod.deleting and pod.phase != "Failed":
            placed[pod.group_key] = placed.get(pod.group_key, 0) + 1
        if pod.job_id in victim_jobs:
            job_pods.setdefault(pod.job_id, []).append(pod)
    due: list[DueNotice] = []
    pending: list[PendingNotice] = []
    withdrawn: list[Withdrawal] = []
    completes: dict[str, bool] = {}  # per victim job: see _completes_a_group
    ghosts: Mapping[str, str] | None = None  # a lost node's pods (world.ghosts_of), when first needed
    for pod in sorted(noticed, key=lambda p: p.order):
        gang = pod.annotations.get(EVICTED_FOR, "")
        group = groups.get(pod.group_key)
        queue = group.queue if group is not None else ""
        deadline = pod.evict_after
        stamped = given.get(pod.uid)
        if stamped is not None and (deadline is None or stamped < deadline):
            deadline = stamped
        leaving = leaving_at(pod.annotations) is not None
        facts = NoticeFacts(pod=pod.key, uid=pod.uid, gang=gang, job=pod.job_id, queue=queue,
                            node=pod.node_name, evict_after=deadline, in_place=leaving)
        if leaving:  # resized in place (issue 39): its job re-forms without it; never withdrawn
            why = _left_why(pod, deadline, now)
            if why:
                due.append(DueNotice(facts, why))
            else:
                pending.append(PendingNotice(facts, (deadline - now).total_seconds() if deadline else 0.0))
            continue
        target = groups.get(gang)
        why_withdraw = (f"{EVICTED_FOR} is gone: no gang to make room for" if not gang else
                        f"gang {gang} is gone (its PodGroup was deleted)" if target is None else
                        f"gang {gang} is placed ({placed.get(gang, 0)} of minMember {target.min_member} pods on "
                        f"nodes) without this pod" if placed.get(gang, 0) >= target.min_member else "")
        if why_withdraw:
            keep = completes.get(pod.job_id) if gang else False
            if keep is None:
                if ghosts is None:
                    ghosts = ghosts_of(snapshot)
                keep = completes[pod.job_id] = _completes_a_group(group, job_pods.get(pod.job_id, ()), ghosts)
            if not keep:
                withdrawn.append(Withdrawal(facts, why_withdraw))
                continue
        if deadline is None:
            due.append(DueNotice(facts, f"{EVICT_AFTER} {pod.annotations.get(EVICT_AFTER)!r} cannot be read"))
            continue
        if now >= deadline:
            due.append(DueNotice(facts, f"notice ended at {format_time(deadline)}"))
            continue
        notice = cfg.queue_policy(queue).noticeSeconds
        began = deadline - timedelta(seconds=notice)
        job_name = pod.job_name and f"{pod.namespace}/{pod.job_name}"
        checkpoint = newest_checkpoint(jobs.get(job_name) if job_name else None, group, job_pods.get(pod.job_id, ()))
        if checkpoint is not None and checkpoint >= began - ROUNDING:
            due.append(DueNotice(facts, f"job {pod.job_id} checkpointed at {format_time(checkpoint)}, after the "
                                        f"notice began at {format_time(began)}"))
            continue
        pending.append(PendingNotice(facts, (deadline - now).total_seconds()))
    pending.sort(key=lambda p: (p.facts.evict_after or now, p.facts.pod))
    return NoticeReview(due=tuple(due), pending=tuple(pending), withdrawn=tuple(withdrawn))


def _left_why(pod: PodView, deadline: datetime | None, now: datetime) -> str:
    """Why a victim told to leave in place is due now ("" while it is not): its pod says it has left
    (``left`` = its ``leaving``), its wait ended, or its deadline cannot be read."""
    if has_left(pod.annotations):
        return f"left the group in place at event {pod.annotations.get(LEAVING)}"
    if deadline is None:
        return f"{EVICT_AFTER} {pod.annotations.get(EVICT_AFTER)!r} cannot be read"
    if now >= deadline:
        return f"did not say it left the group by {format_time(deadline)}"
    return ""


def _completes_a_group(group: PodGroupView | None, pods: Sequence[PodView], ghosts: Mapping[str, str]) -> bool:
    """Whether the job of ``pods`` (PodGroup ``group``) runs at a Worker count outside its allowed
    counts, and evicting its victims still under notice would leave it at an allowed one: the rest of
    a rounded victim group (issue 20) whose other part was evicted. Its notices then run on even when
    their gang no longer needs them, so the job does not stay at a count its training cannot use.
    A lost node's pods (``ghosts``) are no running workers here either."""
    if group is None or not group.worker_sizes.constrained:
        return False
    bounds = next((p.bounds for p in pods if p.bounds is not None), None)
    if bounds is None:
        return False
    allowed = group.worker_sizes.allowed(bounds.min_replicas, bounds.max_replicas)
    if allowed.every or not allowed.counts:
        return False
    workers = [p for p in pods if p.replica_type == "worker" and p.running and p.key not in ghosts]
    running = len(workers)
    noticed = sum(1 for p in workers if under_notice(p))
    return running not in allowed and noticed > 0 and running - noticed in allowed


def notice_deadline(now: datetime, notice_seconds: int) -> datetime:
    """The ``evict-after`` for a notice given at ``now``: whole seconds (as written), never earlier
    than ``now + notice_seconds``."""
    deadline = now + timedelta(seconds=notice_seconds)
    if deadline.microsecond:
        deadline = deadline.replace(microsecond=0) + timedelta(seconds=1)
    return deadline


def in_flight(snapshot: Snapshot, review: NoticeReview) -> Snapshot:
    """``snapshot`` with every victim under a pending or due notice counted as in flight for its gang,
    as a terminating one is: its capacity is promised to that gang (no further victims for it) and it
    is never picked again as a victim. Withdrawn ones stay as they are."""
    facts = [n.facts for n in review.pending] + [n.facts for n in review.due]
    flying = {f.uid: f.gang for f in facts if f.gang}
    if not flying:
        return snapshot
    pods = []
    for pod in snapshot.pods:
        gang = flying.get(pod.uid)
        if gang is not None:
            pod = replace(pod, deleting=True, annotations={**pod.annotations, EVICTED_FOR: gang})
        pods.append(pod)
    return replace(snapshot, pods=tuple(pods))


def with_notices(plan: CyclePlan, review: NoticeReview, *, due: bool, left: bool = True) -> CyclePlan:
    """``plan`` (made on ``in_flight(snapshot, review)``) told in notices: a gang with a pending notice
    waits with the notice as its reason (and gets no evictions); with ``due``, each due victim is
    listed in ``evictions`` (``plan`` on a dump; the agent has already evicted them). ``left``: say the
    time left in the reason."""
    if not review.pending and not (due and review.due):
        return plan
    starving = []
    for d in plan.starving:
        pending = review.pending_for(d.pod_group)
        if pending:
            more = f" (and {len(pending) - 1} more under notice)" if len(pending) > 1 else ""
            d = replace(d, decision="wait", reason=pending[0].describe(left=left) + more, victims=())
        starving.append(d)
    noticed = {p.facts.gang for p in review.pending}
    evictions = [e for e in plan.evictions if e.for_gang not in noticed]
    if due:
        said = {True: "in place", False: "eviction notice"}
        evictions = [(InPlaceEviction if n.facts.in_place else Eviction)(
            pod=n.facts.pod, node=n.facts.node, job=n.facts.job, queue=n.facts.queue, for_gang=n.facts.gang,
            reason=f"{said[n.facts.in_place]}: {n.why}", uid=n.facts.uid) for n in review.due] + evictions
    return replace(plan, starving=tuple(starving), evictions=tuple(evictions))
