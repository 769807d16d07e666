"""The controller's part of ``elasticMinShare`` (issue 38): a new elastic job whose min set would take
its queue's elastic min sets past the key's fraction of the queue's deserved share gets no PodGroup.

Volcano schedules no pod whose PodGroup does not exist: our webhook names every PyTorchJob pod's group
(``scheduling.k8s.io/group-name``: the job), so Volcano's own PodGroup controller leaves those pods
alone (it creates ``podgroup-<uid>`` only for pods without that annotation, ``pg_controller_handler.go``
v1.15.1), and its scheduler skips a job without its PodGroup. The held job's pods stay Pending.

What is recorded: an Event ``HeldByMinShare`` on the PyTorchJob with ``admission.min_share_holds``'
reason (again only when the reason changes), and the reason in the job's ``volcano-elastic.io/held``
annotation (``volcano-elastic status`` lists such jobs); the annotation goes once the PodGroup is created.
Held jobs are reconciled again whenever a PodGroup changes or a PyTorchJob is deleted (``wake``), and
at every resync. With ``elasticMinShare`` at 1 (the default) none of this runs: no read, no write."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from .kube.api import KubeAPI, owner_ref
from .kube.caches import Store
from .kube.errors import KubeError, NotFoundError
from .kube.events import EventRecorder
from .kube.resources import NAMESPACES, NODES, PODGROUPS, PYTORCHJOBS, QUEUES, Resource
from .policy import keys
from .policy.admission import Hold
from .policy.minshare import HELD_REASON, QueueJob, hold_of, job_request
from .policy.model import JobView, PodView
from .policy.neighbours import job_neighbour
from .policy.parse import ParseError, parse_job, parse_node, parse_pod, parse_queue
from .policy.podgroups import JobSpecError, PodGroupPlan, plan_podgroup
from .policy.quantity import Resources, add
from .policy.settings import ElasticConfig

log = logging.getLogger(__name__)
T = TypeVar("T")

_Row = tuple[JobView, PodGroupPlan, Resources, float]  # a job, its plan, what it asks for, its creation time


def namespace_queue(store: Store, namespace: str) -> str | None:
    """The queue a namespace names for its jobs (its ``scheduling.volcano.sh/queue-name``), if any."""
    ns_obj = store.get(NAMESPACES, namespace)
    queue = (((ns_obj or {}).get("metadata") or {}).get("annotations") or {}).get(keys.NAMESPACE_QUEUE)
    return str(queue) if queue else None


def applies(cfg: ElasticConfig, plan: PodGroupPlan) -> bool:
    """May this job be held at all: elastic, not admitted whole, in a queue whose key is below 1."""
    return plan.bounds.elastic and not plan.whole and cfg.queue_policy(plan.queue).elasticMinShare < 1.0


class MinShareHolds:
    """The held jobs of one controller (their keys and last reasons) and the check itself."""

    def __init__(self, api: KubeAPI, store: Store, cfg: ElasticConfig, recorder: EventRecorder,
                 job_pods: Callable[[JobView], list[dict[str, Any]]]) -> None:
        self.api = api
        self.store = store
        self.cfg = cfg
        self.recorder = recorder
        self.job_pods = job_pods
        self._lock = threading.Lock()
        self._held: dict[str, tuple[str, str]] = {}  # ns/job -> (its queue, the reason last recorded)
        self._rows: dict[tuple[str, str, str], _Row | None] = {}  # (uid, resourceVersion, ns queue) -> row
        # resource -> (uid or name, resourceVersion) -> the object parsed (None: it does not parse)
        self._views: dict[str, dict[tuple[str, str], Any]] = {}
        self._pod_views: dict[str, dict[tuple[str, str], PodView | None]] = {}  # the same per queue, its pods

    def held(self, queue: str | None = None) -> list[str]:
        """The held jobs (of ``queue`` only, when given)."""
        with self._lock:
            return sorted(k for k, (q, _) in self._held.items() if queue is None or q == queue)

    def check(self, raw: dict[str, Any], job: JobView, plan: PodGroupPlan) -> Hold | None:
        """The job's hold (its PodGroup withheld, the reason recorded), or None: let it in."""
        if not applies(self.cfg, plan):
            return None
        hold = hold_of(self.cfg, job.key, self._queue_jobs(job.key, plan), self._queues(), self._nodes())
        if hold is None:
            return None
        with self._lock:
            new = self._held.get(job.key) != (plan.queue, hold.reason)
            self._held[job.key] = (plan.queue, hold.reason)
        if new:
            log.info("job held by elasticMinShare", extra={"job": job.key, "queue": plan.queue,
                                                          "reason": hold.reason})
            self.recorder.emit(owner_ref(raw), "Normal", HELD_REASON, hold.reason)
        self._annotate(raw, job, hold.reason)
        return hold

    def let_in(self, raw: dict[str, Any], job: JobView) -> None:
        """The job's PodGroup exists now: forget its hold and take its annotation off."""
        with self._lock:
            was = self._held.pop(job.key, None)
        if was is not None:
            log.info("held job let in", extra={"job": job.key})
        if keys.HELD in ((raw.get("metadata") or {}).get("annotations") or {}):
            self._annotate(raw, job, None)

    def forget(self, key: str) -> None:
        """The job is gone."""
        with self._lock:
            self._held.pop(key, None)

    def _annotate(self, raw: dict[str, Any], job: JobView, reason: str | None) -> None:
        if ((raw.get("metadata") or {}).get("annotations") or {}).get(keys.HELD) == reason:
            return
        try:
            out = self.api.patch(PYTORCHJOBS, job.name, {"metadata": {"annotations": {keys.HELD: reason}}},
                                 job.namespace)
        except NotFoundError:
            return
        except KubeError as exc:
            log.warning("held annotation not written; retrying at the next reconcile",
                        extra={"job": job.key, "error": str(exc)})
            return
        self.store.put(PYTORCHJOBS, out)

    # ---------------------------------------------------------------- inputs, from the caches
    def _parsed(self, resource: Resource, parse: Callable[[dict[str, Any]], Any]) -> list[Any]:
        """The cached objects of ``resource`` that parse (one that does not is left out), each parsed
        once per resourceVersion: a check at 1,000 nodes would otherwise parse them all again."""
        known = self._views.get(resource.plural, {})
        now: dict[tuple[str, str], Any] = {}
        views = [_parse_once(obj, parse, known, now) for obj in self.store.items(resource)]
        self._views[resource.plural] = now
        return [v for v in views if v is not None]

    def _queues(self) -> list[Any]:
        return self._parsed(QUEUES, parse_queue)

    def _nodes(self) -> list[Any]:
        return self._parsed(NODES, parse_node)

    def _queue_jobs(self, key: str, plan: PodGroupPlan) -> list[QueueJob]:
        """Every unfinished PyTorchJob we would give a PodGroup, with its plan (``key``'s is ``plan``).
        A job's plan, request and creation time are kept per resourceVersion (and namespace queue)."""
        out = []
        memo: dict[tuple[str, str, str], _Row | None] = {}
        known = self._pod_views.get(plan.queue, {})
        pods: dict[tuple[str, str], PodView | None] = {}
        for raw in self.store.items(PYTORCHJOBS):
            meta = raw.get("metadata") or {}
            ns_queue = namespace_queue(self.store, str(meta.get("namespace") or ""))
            mkey = (str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""), str(ns_queue or ""))
            row = self._rows.get(mkey) if mkey[1] else None
            if row is None and mkey not in self._rows:
                row = self._row(raw, ns_queue)
            memo[mkey] = row
            if row is None:
                continue
            job, this, request, created = row
            if job.key == key:
                this = plan
            admitted, placed = (self._admitted(job, known, pods) if this.queue == plan.queue
                                else (False, {}))  # (other queues: unread)
            out.append(QueueJob(this, created, request, admitted, placed))
        self._rows = {k: v for k, v in memo.items() if k[1]}
        self._pod_views[plan.queue] = pods
        return out

    def _admitted(self, job: JobView, known: dict[tuple[str, str], PodView | None],
                  seen: dict[tuple[str, str], PodView | None]) -> tuple[bool, Resources]:
        """Whether the job's PodGroup (ours) exists, and what its placed pods hold (each pod parsed once
        per resourceVersion: ``known`` from the queue's last check, ``seen`` kept for its next)."""
        pg = self.store.get(PODGROUPS, job.name, job.namespace)
        if pg is None or ((pg.get("metadata") or {}).get("labels") or {}).get(keys.MANAGED_BY_LABEL) != keys.MANAGED_BY:
            return False, {}
        placed: Resources = {}
        for pod in self.job_pods(job):
            view = _parse_once(pod, lambda p: parse_pod(p, self.cfg), known, seen)
            if view is not None and view.placed:
                placed = add(placed, view.requests)
        return True, placed

    def _row(self, raw: dict[str, Any], ns_queue: str | None) -> _Row | None:
        try:
            job = parse_job(raw)
        except ParseError:
            return None
        if job.finished or job.suspended or job_neighbour(raw, self.cfg.schedulerName) is not None:
            return None
        try:
            plan = plan_podgroup(job, self.cfg, ns_queue)
        except JobSpecError:
            return None
        request = job_request((r.replicas, r.requests) for r in job.replicas.values())
        return job, plan, request, job.created.timestamp() if job.created else 0.0


def _parse_once(obj: dict[str, Any], parse: Callable[[dict[str, Any]], T], known: dict[tuple[str, str], T | None],
                seen: dict[tuple[str, str], T | None]) -> T | None:
    """``parse(obj)`` (None: it does not parse), taken from ``known`` when this resourceVersion of the
    object was parsed before; kept in ``seen`` (the memo of the next check)."""
    meta = obj.get("metadata") or {}
    key = (str(meta.get("uid") or meta.get("name") or ""), str(meta.get("resourceVersion") or ""))
    if key[1] and key in known:
        view = known[key]
    else:
        try:
            view = parse(obj)
        except ParseError:
            view = None
    if key[1]:
        seen[key] = view
    return view
