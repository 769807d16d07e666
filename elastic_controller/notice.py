"""The eviction notice, agent side: give notices, evict when due, withdraw. The decisions are
``policy.notices.review_notices`` (pure); this module does the writes.

With a queue's ``noticeSeconds`` > 0, a victim is not evicted at once: ``Notices.give`` dry-runs
the evictions of one gang's victims (no notice for an eviction a PDB would refuse), then stamps
each victim ``volcano-elastic.io/evict-after: <now + notice>`` next to
``volcano-elastic.io/evicted-for`` (undoing its stamps if one fails: no half notices) and records
an ``EvictionNotice`` Event on each pod and job. ``Notices.act`` then, every cycle, evicts the due
victims through the Eviction API (``EvictedForGang``) and withdraws the notices their gang no longer
needs (annotations removed, ``EvictionNoticeWithdrawn``).

How the agent's cycle uses it (``agent.py`` and ``execute/``):

1. ``review = notices.review(snapshot, now)`` right after the snapshot and recovery, then
   ``done = notices.act(review)`` (``execute.notices.act_on_notices``); each evicted ``(pod, uid, gang)`` goes
   into the in-flight ledger and, if anything was evicted or withdrawn, the (warm) snapshot is taken
   again.
2. ``execute.resume.resume_interrupted`` skips pods that carry ``evict-after`` (they are under notice, not an
   interrupted plan): only ``evicted-for`` without ``evict-after`` is resumed.
3. The plan is made on ``policy.notices.in_flight(snapshot, review)`` (a due or pending victim counts
   as leaving for its gang, like a terminating one: no further victims for that gang, never picked
   again) and told with ``with_notices`` (a gang with a pending notice waits, the notice its reason).
4. Executing one gang's evictions (``execute.notices.give_notice``): when a victim's queue has
   ``noticeSeconds`` > 0, the victims' PodGroups are stamped (the cooldown starts with the notice),
   then ``notices.give(gang, victims, now)`` instead of the ``evicted-for`` stamp + evictions; the
   PodGroup stamps are taken back when ``give`` fails. A gang whose victims are all in queues without
   a notice keeps the immediate path. Dry-run mode gives no notice. The agent checks its Lease
   (``Executor.fence``) before calling ``give`` and ``act``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, Protocol, TypeVar

from .kube.api import KubeAPI, evicted_pod_ref, owner_ref
from .kube.caches import Store
from .kube.errors import KubeError, NotFoundError, TooManyRequestsError
from .kube.events import EventRecorder
from .kube.resources import PODGROUPS, PODS, PYTORCHJOBS
from .policy import contract, keys
from .policy.actions import Noticed
from .policy.model import Snapshot
from .policy.notices import DueNotice, NoticeReview, Withdrawal, review_notices
from .policy.settings import ElasticConfig
from .policy.times import format_time

log = logging.getLogger(__name__)
R = TypeVar("R")


class Runner(Protocol):
    """Runs keyed tasks (one key's in order), their values in the tasks' order; a task's error is
    raised (``Notices.act``'s tasks answer their ``KubeError`` themselves)."""

    def __call__(self, tasks: Sequence[tuple[str, Callable[[], R]]], /) -> list[R]: ...


def in_order(tasks: Sequence[tuple[str, Callable[[], R]]]) -> list[R]:
    """The tasks one after the other, in the caller's thread."""
    return [fn() for _, fn in tasks]


def _split(key: str) -> tuple[str, str]:
    ns, _, name = key.partition("/")
    return ns, name


@dataclass(slots=True)
class GiveResult:
    noticed: list[str] = field(default_factory=list)  # ns/name of the pods now under notice
    evict_after: dict[str, datetime] = field(default_factory=dict)  # pod -> its deadline
    failed: str = ""  # why no notice was given ("" when it was)
    refused: list[str] = field(default_factory=list)  # pods whose (dry-run) eviction a PDB refused (429)


@dataclass(slots=True)
class ActResult:
    evicted: list[tuple[str, str, str]] = field(default_factory=list)  # (pod, uid, gang): for the ledger
    withdrawn: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # pod -> why it was not evicted or withdrawn
    refused: list[tuple[str, str]] = field(default_factory=list)  # (pod, gang): a PDB refused its eviction (429)


class Notices:
    """Gives, executes and withdraws eviction notices; remembers the deadlines it gave (by pod uid),
    so that a job cannot push its own ``evict-after`` back while this agent runs."""

    def __init__(self, api: KubeAPI, store: Store, cfg: ElasticConfig, recorder: EventRecorder, *,
                 clock: Callable[[], datetime] | None = None) -> None:
        self.api = api
        self.store = store
        self.cfg = cfg
        self.recorder = recorder
        self.clock = clock or (lambda: datetime.now(UTC))
        self.given: dict[str, datetime] = {}  # pod uid -> evict-after this agent stamped
        self.fault: Callable[[str], None] = lambda step: None  # the agent's fault hook (execute.executor)

    def notice_seconds(self, queue: str) -> int:
        return self.cfg.queue_policy(queue).noticeSeconds

    # ------------------------------------------------------------------ give
    def give(self, gang: str, noticed: Sequence[Noticed], now: datetime | None = None, *,
             in_place: bool = False) -> GiveResult:
        """Put ``noticed`` (one gang's victims, each with the deadline its ``GiveNotice`` decided) under
        notice, all or none. ``in_place``: the victims of a ``ShrinkInPlace`` (issue 39): the same writes,
        the deadline being their bounded wait to leave the group; the Events say so."""
        now = now or self.clock()
        result = GiveResult()
        victims = [n.victim for n in noticed]
        deadlines = {n.victim.pod: n.evict_after for n in noticed}
        try:
            for v in victims:
                ns, name = _split(v.pod)
                try:
                    self.api.evict(ns, name, uid=v.uid or None, dry_run=True)
                except TooManyRequestsError:
                    result.refused.append(v.pod)
                    raise
        except KubeError as exc:
            why = "pdb" if isinstance(exc, TooManyRequestsError) else "error"
            result.failed = f"{why}: {exc}"
            log.warning("eviction notice not given; re-planning next cycle",
                        extra={"podgroup": gang, "reason": why, "error": str(exc)})
            return result
        stamped: list[str] = []
        for v in victims:
            deadline = deadlines[v.pod]
            try:
                self._patch_pod(v.pod, {keys.EVICTED_FOR: gang, keys.EVICT_AFTER: contract.encode_time(deadline)})
            except KubeError as exc:
                result.failed = f"error: {exc}"
                log.warning("eviction notice not given; undoing its stamps",
                            extra={"podgroup": gang, "pod": v.pod, "error": str(exc)})
                self._clear(stamped)
                return result
            stamped.append(v.pod)
            if v.uid:
                self.given[v.uid] = deadline
            result.evict_after[v.pod] = deadline
            self.fault("noticed-one")
        result.noticed = stamped
        if in_place:
            self._tell(gang, victims, result.evict_after, "leaving in place", (
                "Normal", "LeavingInPlace",
                lambda deadline: f"in place: this pod leaves its job's group to make room for gang {gang}; it is "
                                 f"evicted once it says {keys.LEFT}, at the latest at {format_time(deadline)}"), (
                "Normal", "ScalingDownInPlace",
                lambda pods, deadline: f"in place: {len(pods)} elastic worker(s) ({', '.join(pods)}) leave the "
                                       f"group to make room for gang {gang}, then are evicted; the others go on "
                                       "without a restart"))
            return result
        self._tell(gang, victims, result.evict_after, "eviction notice given", (
            "Normal", "EvictionNotice",
            lambda deadline: f"volcano-elastic evicts this pod at {format_time(deadline)} "
                             f"(in {max(0, round((deadline - now).total_seconds()))}s) to make room for gang {gang}; "
                             f"checkpoint now: once the job records {keys.LAST_CHECKPOINT_TIME} it is evicted "
                             "at once"), (
            "Normal", "EvictionNotice",
            lambda pods, deadline: f"{len(pods)} elastic worker(s) ({', '.join(pods)}) are evicted at "
                                   f"{format_time(deadline)} to make room for gang {gang}, or at once after the job "
                                   "records a checkpoint"))
        return result

    def _tell(self, gang: str, victims: Sequence[Any], deadlines: dict[str, datetime], logged: str,
              on_pod: tuple[str, str, Callable[[datetime], str]],
              on_job: tuple[str, str, Callable[[list[str], datetime], str]]) -> None:
        """An Event on each victim (type, reason, text of its deadline) and one on each of their jobs (type,
        reason, text of its victims' names and earliest deadline); each victim logged as ``logged``."""
        for v in victims:
            deadline = deadlines[v.pod]
            self._event_on_pod(v.pod, on_pod[0], on_pod[1], on_pod[2](deadline))
            log.info(logged, extra={"pod": v.pod, "job": v.job, "queue": v.queue, "for": gang,
                                    "evict_after": format_time(deadline), "reason": v.reason})
        for job in sorted({v.job for v in victims}):
            mine = [v for v in victims if v.job == job]
            self._event_on_job(job, on_job[0], on_job[1], on_job[2]([_split(v.pod)[1] for v in mine],
                                                                   min(deadlines[v.pod] for v in mine)))

    # ------------------------------------------------------------------ each cycle
    def review(self, snapshot: Snapshot, now: datetime | None = None) -> NoticeReview:
        review = review_notices(snapshot, self.cfg, now or self.clock(), self.given)
        self.forget_gone(snapshot)
        return review

    def forget_gone(self, snapshot: Snapshot) -> None:
        """Forget the deadlines of pods no longer in ``snapshot``."""
        if self.given:  # (most cycles: no notice given, no set of every pod's uid built)
            live = {p.uid for p in snapshot.pods}
            for uid in [u for u in self.given if u not in live]:
                del self.given[uid]  # the pod is gone: forget its deadline

    def act(self, review: NoticeReview, run: Runner | None = None) -> ActResult:
        """Evict the due victims and withdraw the notices no longer needed: each pod's write is a task
        of one ``run`` (default: one after the other; the agent's: its write pool, ``execute.notices``),
        answering its own ``KubeError`` (reported; no other write stops for it); the outcomes are
        booked in the review's order."""
        result = ActResult()
        tasks: list[tuple[str, Callable[[], KubeError | bool]]] = [
            *((w.facts.pod, partial(self._withdraw, w)) for w in review.withdrawn),
            *((d.facts.pod, partial(self._evict_due, d)) for d in review.due)]
        outcomes = (run or in_order)(tasks)
        w_end = len(review.withdrawn)
        for w, out in zip(review.withdrawn, outcomes[:w_end], strict=True):
            if isinstance(out, KubeError):
                result.failed[w.facts.pod] = f"not withdrawn: {out}"
            elif out:
                self.given.pop(w.facts.uid, None)
                result.withdrawn.append(w.facts.pod)
        for d, out in zip(review.due, outcomes[w_end:], strict=True):
            f = d.facts
            if isinstance(out, KubeError):
                # A PDB (429) or a transient error: the notice stays, the next cycle tries again. A PDB's
                # refusal is also reported (``refused``): the agent remembers it as on the immediate path.
                if isinstance(out, TooManyRequestsError):
                    result.refused.append((f.pod, f.gang))
                result.failed[f.pod] = f"not evicted: {out}"
                continue
            self.given.pop(f.uid, None)  # (evicted, or gone)
            if out:
                result.evicted.append((f.pod, f.uid, f.gang))
        by_job: dict[tuple[str, str], int] = {}
        in_place = {(d.facts.job, d.facts.gang) for d in review.due if d.facts.in_place}
        for d in review.due:
            if any(d.facts.pod == pod for pod, _, _ in result.evicted):
                by_job[(d.facts.job, d.facts.gang)] = by_job.get((d.facts.job, d.facts.gang), 0) + 1
        for (job, gang), n in sorted(by_job.items()):
            if (job, gang) in in_place:
                self._event_on_job(job, "Normal", "ScaledDown",
                                   f"in place: {n} elastic worker(s) evicted after leaving the group for gang "
                                   f"{gang} (no restart)")
                continue
            self._event_on_job(job, "Normal", "ScaledDown",
                               f"{n} elastic worker(s) evicted to make room for gang {gang} at the end of their "
                               "eviction notice (the cooldown started with the notice)")
        return result

    def _withdraw(self, w: Withdrawal) -> KubeError | bool:
        """Withdraw one notice: True when withdrawn (and told), False when the pod is gone, the error
        when the write failed (the next cycle's review tries again)."""
        f = w.facts
        try:
            self._patch_pod(f.pod, {keys.EVICTED_FOR: None, keys.EVICT_AFTER: None})
        except NotFoundError:
            return False
        except KubeError as exc:
            log.warning("eviction notice not withdrawn", extra={"pod": f.pod, "error": str(exc)})
            return exc
        self.fault("withdrawn-one")
        log.info("eviction notice withdrawn", extra={"pod": f.pod, "job": f.job, "for": f.gang, "reason": w.reason})
        self._event_on_pod(f.pod, "Normal", "EvictionNoticeWithdrawn",
                           f"the eviction notice is withdrawn: {w.reason}; this pod stays")
        self._event_on_job(f.job, "Normal", "EvictionNoticeWithdrawn",
                           f"the eviction notice of {_split(f.pod)[1]} is withdrawn: {w.reason}")
        return True

    def _evict_due(self, d: DueNotice) -> KubeError | bool:
        """Evict one due victim: True when evicted (and told), False when the pod is gone, the error
        when the eviction failed (a PDB's 429 or a transient error: the notice stays, the next cycle
        tries again)."""
        f = d.facts
        ns, name = _split(f.pod)
        try:
            self.api.evict(ns, name, uid=f.uid or None)
        except NotFoundError:
            return False
        except KubeError as exc:
            log.warning("due eviction failed; retrying next cycle", extra={"pod": f.pod, "for": f.gang,
                                                                         "error": str(exc)})
            return exc
        self.fault("due-evicted-one")
        log.info("evicted", extra={"pod": f.pod, "job": f.job, "queue": f.queue, "for": f.gang, "reason": d.why})
        ref = evicted_pod_ref(ns, name, f.uid) if f.uid else self._ref(f.pod, PODS)
        if ref is not None:
            self.recorder.emit(ref, "Normal", "EvictedForGang",
                               f"elastic worker evicted by volcano-elastic to make room for gang {f.gang} "
                               f"({d.why})")
        return True

    # ------------------------------------------------------------------ writes
    def _patch_pod(self, key: str, annotations: dict[str, str | None]) -> None:
        ns, name = _split(key)
        out = self.api.patch(PODS, name, {"metadata": {"annotations": annotations}}, ns)
        self.store.put(PODS, out)

    def _clear(self, pods: Sequence[str]) -> None:
        for p in pods:
            try:
                self._patch_pod(p, {keys.EVICTED_FOR: None, keys.EVICT_AFTER: None})
            except KubeError as exc:
                # Left stamped: the next cycle's review withdraws it (or the agent resumes it).
                log.warning("could not clear an eviction notice", extra={"pod": p, "error": str(exc)})

    def _ref(self, key: str, *kinds: Any) -> dict[str, Any] | None:
        ns, name = _split(key)
        for res in kinds:
            obj = self.store.get(res, name, ns)
            if obj is not None:
                return owner_ref(obj)
        return None

    def _event_on_pod(self, pod: str, kind: str, reason: str, message: str) -> None:
        ref = self._ref(pod, PODS)
        if ref is not None:
            self.recorder.emit(ref, kind, reason, message)

    def _event_on_job(self, job: str, kind: str, reason: str, message: str) -> None:
        ref = self._ref(job, PYTORCHJOBS, PODGROUPS)
        if ref is not None:
            self.recorder.emit(ref, kind, reason, message)
