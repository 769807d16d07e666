"""The PodGroup controller: watch PyTorchJobs -> ``plan_podgroup`` -> create or merge-patch.

We only ever merge-patch ``spec`` and our own labels/annotations (the PodGroup CRD has no status
subresource and Volcano writes whole objects), retry 409s, and leave foreign PodGroups alone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .checkpoint_access import CheckpointAccess
from .controller_holds import MinShareHolds, namespace_queue
from .execute.gates import lift_gate
from .kube.api import KubeAPI, owner_ref
from .kube.caches import Store
from .kube.client import retry_on_conflict
from .kube.errors import AlreadyExistsError, ConflictError, KubeError, NotFoundError
from .kube.events import EventRecorder
from .kube.resources import NAMESPACES, NODES, PODGROUPS, PODS, PYTORCHJOBS, QUEUES, Resource
from .kube.workqueue import WorkQueue
from .policy import contract, keys
from .policy.announce import announced
from .policy.announce import coming as announce_coming
from .policy.model import JobView, Snapshot
from .policy.neighbours import job_neighbour, network_topology
from .policy.parse import ParseError, parse_job, parse_node, parse_pod, parse_podgroup
from .policy.podgroups import JobSpecError, PodGroupPlan, plan_podgroup
from .policy.roles import replica_of
from .policy.settings import ElasticConfig
from .policy.world import ghosts_of

log = logging.getLogger(__name__)


REFUSING = frozenset({"InvalidJob", "InvalidElasticPolicy", "ForeignPodGroup"})  # no PodGroup of ours


def format_quantity(name: str, value: int) -> str:
    """Integer units (cpu in millicores, bytes, counts) -> the canonical quantity string."""
    if name == "cpu":
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if name in ("memory", "ephemeral-storage") or name.startswith("hugepages-"):
        for suffix, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if value and value % size == 0:
                return f"{value // size}{suffix}"
    return str(value)


def podgroup_body(plan: PodGroupPlan, job: JobView, cfg: ElasticConfig) -> dict[str, Any]:
    """The PodGroup we want for ``job`` (ARCHITECTURE.md, "The agent's cycle": the PodGroup contract)."""
    spec: dict[str, Any] = {
        "minMember": plan.min_member,
        "minTaskMember": dict(plan.min_task_member),
        "minResources": {k: format_quantity(k, v) for k, v in sorted(plan.min_resources.items())},
        "queue": plan.queue,
    }
    if plan.priority_class_name:
        spec["priorityClassName"] = plan.priority_class_name
    meta_extra: dict[str, Any] = {"annotations": dict(plan.annotations)} if plan.annotations else {}
    return {
        "apiVersion": PODGROUPS.api_version, "kind": PODGROUPS.kind,
        "metadata": {
            "name": plan.name, "namespace": plan.namespace,
            **meta_extra,
            "labels": {keys.MANAGED_BY_LABEL: keys.MANAGED_BY},
            "ownerReferences": [{
                "apiVersion": PYTORCHJOBS.api_version, "kind": PYTORCHJOBS.kind, "name": job.name,
                "uid": job.uid, "controller": True, "blockOwnerDeletion": True,
            }],
        },
        "spec": spec,
    }


def podgroup_patch(current: Mapping[str, Any], want: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch taking ``current`` to ``want`` on the fields we own; None when nothing differs.

    Quantities are compared by value (Volcano rewrites them in canonical form)."""
    try:
        have = parse_podgroup(current)
        target = parse_podgroup(want)
    except ParseError:
        have = None
        target = None
    spec_now = current.get("spec") or {}
    spec_want = want.get("spec") or {}
    patch_spec: dict[str, Any] = {}
    if have is None or target is None or have.min_member != target.min_member:
        patch_spec["minMember"] = spec_want["minMember"]
    if have is None or target is None or have.min_task_member != target.min_task_member:
        mtm: dict[str, Any] = dict(spec_want.get("minTaskMember") or {})
        for k in spec_now.get("minTaskMember") or {}:
            mtm.setdefault(k, None)
        patch_spec["minTaskMember"] = mtm
    if have is None or target is None or have.min_resources != target.min_resources:
        mr: dict[str, Any] = dict(spec_want.get("minResources") or {})
        for k in spec_now.get("minResources") or {}:
            mr.setdefault(k, None)
        patch_spec["minResources"] = mr
    if spec_now.get("queue") != spec_want.get("queue"):
        patch_spec["queue"] = spec_want.get("queue")
    if (spec_now.get("priorityClassName") or None) != (spec_want.get("priorityClassName") or None):
        patch_spec["priorityClassName"] = spec_want.get("priorityClassName") or None
    patch: dict[str, Any] = {}
    if patch_spec:
        patch["spec"] = patch_spec
    meta_now = current.get("metadata") or {}
    labels = meta_now.get("labels") or {}
    meta_patch: dict[str, Any] = {}
    if labels.get(keys.MANAGED_BY_LABEL) != keys.MANAGED_BY:
        meta_patch["labels"] = {keys.MANAGED_BY_LABEL: keys.MANAGED_BY}
    # The job contract's copied annotations: set what the job says, remove what it dropped; the
    # agent's own annotations (last-scale-time, ...) are never touched here.
    ann_now = meta_now.get("annotations") or {}
    ann_want = (want.get("metadata") or {}).get("annotations") or {}
    ann_patch = {k: ann_want.get(k) for k in keys.COPIED_TO_PODGROUP if ann_now.get(k) != ann_want.get(k)}
    if ann_patch:
        meta_patch["annotations"] = ann_patch
    if meta_patch:
        patch["metadata"] = meta_patch
    return patch or None


def is_ours(pg: Mapping[str, Any]) -> bool:
    return ((pg.get("metadata") or {}).get("labels") or {}).get(keys.MANAGED_BY_LABEL) == keys.MANAGED_BY


def owner_uid(pg: Mapping[str, Any]) -> str:
    for ref in (pg.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == PYTORCHJOBS.kind:
            return str(ref.get("uid") or "")
    return ""


@dataclass(frozen=True, slots=True)
class Outcome:
    action: str  # created | patched | unchanged | deleted | invalid | foreign | gone | replaced | neighbour | held
    detail: str = ""


class Controller:
    """Reconciles one PyTorchJob at a time; ``run`` drives it from a work queue."""

    def __init__(self, api: KubeAPI, store: Store, cfg: ElasticConfig, recorder: EventRecorder, *,
                 workers: int = 4, resync_seconds: float = 60.0,
                 observe: Callable[[str, str], None] | None = None) -> None:
        self.api = api
        self.store = store
        self.cfg = cfg
        self.recorder = recorder
        self.queue = WorkQueue()
        self.workers = workers
        self.resync_seconds = resync_seconds
        self._observe = observe or (lambda action, ns: None)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.heartbeat = time.monotonic()
        # ns/job -> names of its pods, kept by on_event once start() has filled it (None: scan the store)
        self._pods_by_job: dict[str, set[str]] | None = None
        self._index_lock = threading.Lock()
        self._warned_once: set[tuple[str, str]] = set()  # (object uid, reason) warned about once
        self.access = CheckpointAccess(api)  # elastic jobs' ServiceAccounts may annotate their own pods
        self._coming: dict[str, bool] = {}  # ns/pod -> counted in its job's target-workers at the last event
        # New elastic jobs whose PodGroup is withheld by their queue's elasticMinShare (controller_holds.py)
        self.holds = MinShareHolds(api, store, cfg, recorder, self.job_pods)

    # ------------------------------------------------------------------ events
    def on_event(self, res: Resource, kind: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        if res is PYTORCHJOBS or res is PODGROUPS:
            # A new job (or a PodGroup gone) waits for its PodGroup: ahead of the re-reconciles that
            # pods' changes queue (ARCHITECTURE.md: PodGroup latency at cluster size).
            urgent = (res is PYTORCHJOBS and kind == "ADDED") or (res is PODGROUPS and kind == "DELETED")
            self.queue.add(f"{ns}/{name}", urgent=urgent)
            if res is PODGROUPS or kind == "DELETED":
                # a queue's min sets may have left room for its held jobs (elasticMinShare)
                queue = str((obj.get("spec") or {}).get("queue") or "") if res is PODGROUPS else ""
                for held in self.holds.held(queue or None):
                    self.queue.add(held)
        elif res is NAMESPACES and kind != "DELETED":
            for job in self.store.items(PYTORCHJOBS):
                if (job.get("metadata") or {}).get("namespace") == name:
                    self.queue.add(f"{name}/{job['metadata']['name']}")
        elif res is QUEUES and kind == "ADDED":
            self.enqueue_all()
        elif res is PODS:
            labels = meta.get("labels") or {}
            job_name = labels.get(keys.JOB_NAME_LABEL)
            if job_name and labels.get(keys.OPERATOR_NAME_LABEL):
                self._index(f"{ns}/{job_name}", name, present=kind != "DELETED")
                coming = kind != "DELETED" and self.coming(obj)
                with self._index_lock:
                    changed = self._coming.get(f"{ns}/{name}") != coming
                    if kind == "DELETED":
                        self._coming.pop(f"{ns}/{name}", None)
                    else:
                        self._coming[f"{ns}/{name}"] = coming
                if kind == "ADDED" or changed:  # a gate lifted, an eviction: the job's size changes
                    self.queue.add(f"{ns}/{job_name}")

    def _index(self, job: str, pod: str, present: bool) -> None:
        with self._index_lock:
            if self._pods_by_job is None:
                return
            if present:
                self._pods_by_job.setdefault(job, set()).add(pod)
            else:
                names = self._pods_by_job.get(job)
                if names is not None:
                    names.discard(pod)
                    if not names:
                        del self._pods_by_job[job]

    def build_index(self) -> None:
        index: dict[str, set[str]] = {}
        for pod in self.store.items(PODS):
            meta = pod.get("metadata") or {}
            labels = meta.get("labels") or {}
            if labels.get(keys.JOB_NAME_LABEL) and labels.get(keys.OPERATOR_NAME_LABEL):
                index.setdefault(f"{meta.get('namespace')}/{labels[keys.JOB_NAME_LABEL]}", set()).add(meta["name"])
        with self._index_lock:
            self._pods_by_job = index

    def job_pods(self, job: JobView) -> list[dict[str, Any]]:
        """The cached pods labelled as ``job``'s."""
        with self._index_lock:
            names = None if self._pods_by_job is None else sorted(self._pods_by_job.get(job.key, ()))
        if names is not None:
            found = (self.store.get(PODS, n, job.namespace) for n in names)
            return [p for p in found if p is not None]
        out = []
        for pod in self.store.items(PODS):
            meta = pod.get("metadata") or {}
            if meta.get("namespace") == job.namespace and \
                    (meta.get("labels") or {}).get(keys.JOB_NAME_LABEL) == job.name:
                out.append(pod)
        return out

    def enqueue_all(self) -> None:
        for job in self.store.items(PYTORCHJOBS):
            meta = job.get("metadata") or {}
            self.queue.add(f"{meta.get('namespace')}/{meta.get('name')}")

    # ------------------------------------------------------------------ one job
    def reconcile(self, key: str) -> Outcome:
        ns, _, name = key.partition("/")
        raw = self.store.get(PYTORCHJOBS, name, ns)
        pg: dict[str, Any] | None = self.store.get(PODGROUPS, name, ns)
        if pg is not None and network_topology(pg):
            self._warn_once(pg, "NetworkTopologyIgnored",
                            "this PodGroup asks for HyperNode placement (spec.networkTopology); volcano-elastic's "
                            "evictions and scale-up only see nodes and ignore HyperNode topology, so the room it "
                            "makes may be in another HyperNode (docs/compatibility.md)")
        if raw is None:
            self.access.forget(key)
            self.holds.forget(key)
            return Outcome("gone", "job deleted; its PodGroup goes with it (owner reference)")
        try:
            job = parse_job(raw)
        except ParseError as exc:
            self._warn(raw, "InvalidJob", str(exc))
            return Outcome("invalid", str(exc))
        neighbour = job_neighbour(raw, self.cfg.schedulerName)
        if neighbour is not None:
            self._warn_once(raw, "LeftToNeighbour",
                            f"volcano-elastic leaves this job alone because {neighbour}: no PodGroup, no scale-up "
                            "gates, no evictions (docs/compatibility.md)")
            return Outcome("neighbour", neighbour)
        if pg is not None and not is_ours(pg):
            self._warn(raw, "ForeignPodGroup",
                       f"PodGroup {ns}/{name} exists and is not managed by volcano-elastic (is the "
                       "training operator running with --gang-scheduler-name?); refusing to manage this job")
            return Outcome("foreign")
        if job.finished or job.suspended:
            return self._retire(raw, job, pg)
        self._check_pods(raw, job)
        ns_queue = namespace_queue(self.store, ns)
        try:
            plan = plan_podgroup(job, self.cfg, ns_queue)
        except JobSpecError as exc:
            self._warn(raw, "InvalidElasticPolicy", f"no PodGroup for this job: {exc}")
            return Outcome("invalid", str(exc))
        if self.store.has(QUEUES) and \
                self.store.get(QUEUES, plan.queue) is None:
            self._warn(raw, "QueueNotFound",
                       f"Volcano queue {plan.queue!r} (from {plan.queue_source}) does not exist; the PodGroup "
                       "is created anyway and waits until an admin creates the queue")
        if plan.contract_problems:
            effect = ("volcano-elastic neither shrinks nor grows this job" if job.worker_sizes.problem
                      else "only the listed counts within [minReplicas, maxReplicas] are used")
            self._warn(raw, "InvalidJobContract", f"{'; '.join(plan.contract_problems)} (until it is fixed, "
                       f"{effect})")
        want = podgroup_body(plan, job, self.cfg)
        if pg is not None and job.uid and owner_uid(pg) and owner_uid(pg) != job.uid:
            # Ours, but owned by an earlier job of the same name: replace it.
            self._delete_podgroup(pg)
            pg = None
        if pg is None:
            hold = self.holds.check(raw, job, plan)
            if hold is not None:
                return Outcome("held", hold.reason)
            outcome = self._create(want, job)
        else:
            patch = podgroup_patch(pg, want)
            outcome = Outcome("unchanged") if patch is None else self._patch(want, patch)
        self.holds.let_in(raw, job)
        # The PodGroup first (Volcano waits on it; issue 36, item 3: its latency at 1,000 jobs), then
        # the elastic job's checkpoint access and size (neither holds back the PodGroup).
        if plan.bounds.elastic:
            if plan.whole:
                self._ungate_gang(job, plan)
            self._grant_checkpoint_access(raw)
            self._announce_target(job)
        return outcome

    def _ungate_gang(self, job: JobView, plan: PodGroupPlan) -> None:
        """A job admitted whole (its queue's ``wholeGangUpTo``): its gang is its max, so none of its
        workers may wait at the scale-up gate (Volcano would never find the gang's members: the job
        would wait forever). The webhook gates the workers beyond the job's min when it cannot tell
        the job's queue (``webhook/mutate.py``); here, where the queue is known, the gate comes off
        every worker of the gang (index < gang) that still carries it, right after the PodGroup."""
        gate = self.cfg.gating.gateName
        for pod in self.job_pods(job):
            meta = pod.get("metadata") or {}
            rtype, index = replica_of({str(k): str(v) for k, v in (meta.get("labels") or {}).items()})
            gates = [g.get("name") for g in (pod.get("spec") or {}).get("schedulingGates") or []]
            if rtype != "worker" or not 0 <= index < plan.gang_workers or gate not in gates \
                    or meta.get("deletionTimestamp"):
                continue
            try:
                out = lift_gate(self.api, f"{job.namespace}/{meta['name']}", gate)
            except KubeError as exc:
                log.warning("gang gate not lifted; retrying at the next reconcile",
                            extra={"job": job.key, "pod": meta["name"], "error": str(exc)})
                continue
            if out is not None:
                self.store.put(PODS, out)
                log.info("gang gate lifted", extra={"job": job.key, "pod": meta["name"],
                                                    "wholeGangUpTo": plan.whole_up_to})

    def coming(self, pod: Mapping[str, Any]) -> bool:
        """Will this pod run torchrun after the decisions made so far (``policy.announce.coming``,
        lost nodes aside: ``coming_pods`` judges those): a change wakes its job."""
        try:
            view = parse_pod(pod, self.cfg)
        except ParseError:
            return False
        return announce_coming(view, self.cfg.gating.gateName)

    def coming_pods(self, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Those of ``pods`` (one job's) that will run torchrun after the decisions made so far: the
        policy's rule (``policy/announce.py``, the agent's ``AnnounceSize``): live, not gated by us,
        not claimed as a victim (``evicted-for``), not a ghost on a lost node (``world.ghosts_of``,
        with the cached Nodes the pods are bound to)."""
        pairs = []
        for raw in pods:
            try:
                pairs.append((raw, parse_pod(raw, self.cfg)))
            except ParseError:
                continue
        views = [v for _, v in pairs]
        held = sorted({v.node_name for v in views if v.holds_resources})
        nodes = []
        for name in held:
            obj = self.store.get(NODES, name)
            if obj is not None:
                try:
                    nodes.append(parse_node(obj))
                except ParseError:
                    continue
        ghosts = ghosts_of(Snapshot(nodes=tuple(nodes), pods=tuple(views))) if held else {}
        told = set(announced(views, self.cfg.gating.gateName, ghosts=ghosts))
        return [raw for raw, view in pairs if view.key in told]

    def _announce_target(self, job: JobView) -> None:
        """Write the job's size to come (``target-workers``) on each of its pods that will run
        torchrun (``coming_pods``), where it differs: the job kit's rendezvous stops waiting once that
        many joined."""
        pods = self.coming_pods(self.job_pods(job))
        target = contract.encode_count(len(pods))
        for pod in pods:
            meta = pod.get("metadata") or {}
            if (meta.get("annotations") or {}).get(keys.TARGET_WORKERS) == target:
                continue
            try:
                out = self.api.patch(PODS, meta["name"], {"metadata": {"annotations": {keys.TARGET_WORKERS: target}}},
                                     job.namespace)
            except NotFoundError:
                continue
            except KubeError as exc:
                log.warning("target-workers not written; retrying at the next reconcile",
                            extra={"job": job.key, "pod": meta["name"], "error": str(exc)})
                continue
            self.store.put(PODS, out)

    def _grant_checkpoint_access(self, raw: dict[str, Any]) -> None:
        """The job's ServiceAccount may patch exactly its own pods (checkpoint_access.py). A failure
        never holds back the PodGroup: it is logged and tried again at the next reconcile."""
        try:
            self.access.ensure(raw)
        except KubeError as exc:
            meta = raw.get("metadata") or {}
            log.warning("checkpoint access not granted; retrying at the next reconcile",
                        extra={"job": f"{meta.get('namespace')}/{meta.get('name')}", "error": str(exc)})

    def _create(self, want: dict[str, Any], job: JobView) -> Outcome:
        meta = want["metadata"]
        try:
            created = self.api.create(PODGROUPS, want, meta["namespace"])
        except AlreadyExistsError:
            current = self.api.get(PODGROUPS, meta["name"], meta["namespace"])
            self.store.put(PODGROUPS, current)
            if not is_ours(current):
                raise ConflictError(f"PodGroup {meta['namespace']}/{meta['name']} appeared and is foreign",
                                    409) from None
            patch = podgroup_patch(current, want)
            return self._patch(want, patch) if patch else Outcome("unchanged")
        self.store.put(PODGROUPS, created)
        self._observe("created", meta["namespace"])
        log.info("podgroup created", extra={"job": job.key, "queue": want["spec"]["queue"],
                                            "minMember": want["spec"]["minMember"]})
        return Outcome("created")

    def _patch(self, want: dict[str, Any], patch: dict[str, Any]) -> Outcome:
        meta = want["metadata"]

        def send() -> dict[str, Any]:
            return self.api.patch(PODGROUPS, meta["name"], patch, meta["namespace"], patch_type="merge")

        updated = retry_on_conflict(send)
        self.store.put(PODGROUPS, updated)
        self._observe("patched", meta["namespace"])
        log.info("podgroup updated", extra={"job": f"{meta['namespace']}/{meta['name']}",
                                            "patch": patch})
        return Outcome("patched", str(patch))

    def _delete_podgroup(self, pg: dict[str, Any]) -> None:
        meta = pg.get("metadata") or {}
        try:
            self.api.delete(PODGROUPS, meta["name"], meta.get("namespace"), uid=meta.get("uid") or None)
        except NotFoundError:
            pass
        self._observe("deleted", str(meta.get("namespace") or ""))

    def _retire(self, raw: dict[str, Any], job: JobView, pg: dict[str, Any] | None) -> Outcome:
        """Finished or suspended: drop our PodGroup; evict leftover gated pods (gates never lifted)."""
        why = "finished" if job.finished else "suspended"
        if pg is not None:
            self._delete_podgroup(pg)
            log.info("podgroup deleted", extra={"job": job.key, "reason": why})
        gate = self.cfg.gating.gateName
        cleaned = 0
        for pod in self.job_pods(job):
            meta = pod.get("metadata") or {}
            if meta.get("deletionTimestamp"):
                continue
            gates = [g.get("name") for g in (pod.get("spec") or {}).get("schedulingGates") or []]
            if gate not in gates:
                continue
            try:
                self.api.evict(job.namespace, meta["name"], uid=meta.get("uid") or None)
                cleaned += 1
            except NotFoundError:
                continue
        if cleaned:
            self.recorder.emit(owner_ref(raw), "Normal", "GatedPodsCleanedUp",
                               f"job {why}: evicted {cleaned} gated elastic pod(s) that never started")
        return Outcome("deleted" if pg is not None or cleaned else "unchanged", why)

    def _check_pods(self, raw: dict[str, Any], job: JobView) -> None:
        """Pods of this job grouped into another PodGroup were not admitted by our webhook."""
        for pod in self.job_pods(job):
            meta = pod.get("metadata") or {}
            labels = meta.get("labels") or {}
            group = (meta.get("annotations") or {}).get(keys.GROUP_NAME) or labels.get(keys.GROUP_NAME, "")
            if group and group != job.name:
                self._warn(raw, "PodsGroupedElsewhere",
                           f"pod {meta.get('name')} arrived already grouped into PodGroup {group!r}, not "
                           f"{job.name!r}: it will not be scheduled as part of this job's gang "
                           "(is the training operator running in gang mode?)")
                return

    def _warn_once(self, raw: dict[str, Any], reason: str, message: str) -> None:
        """One Warning Event per object and reason for the life of this process (not every resync)."""
        meta = raw.get("metadata") or {}
        key = (str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"), reason)
        with self._index_lock:
            if key in self._warned_once:
                return
            self._warned_once.add(key)
        self._warn(raw, reason, message)

    def _warn(self, raw: dict[str, Any], reason: str, message: str) -> None:
        meta = raw.get("metadata") or {}
        # Only the reasons that withhold the PodGroup refuse the job; the rest are warnings about a
        # job that is served (a missing queue: its PodGroup is created and waits for the queue).
        what = "job refused" if reason in REFUSING else "job warning"
        log.warning(what, extra={"job": f"{meta.get('namespace')}/{meta.get('name')}",
                                 "reason": reason, "detail": message})
        self._observe(f"warning:{reason}", str(meta.get("namespace") or ""))
        self.recorder.emit(owner_ref(raw), "Warning", reason, message)

    # ------------------------------------------------------------------ the loop
    def process_one(self, timeout: float | None = 0.5) -> str | None:
        key = self.queue.get(timeout)
        if key is None:
            return None
        try:
            self.reconcile(key)
            self.queue.forget(key)
        except KubeError as exc:
            delay = self.queue.retry(key)
            log.warning("reconcile failed, retrying", extra={"job": key, "error": str(exc), "retry_in": delay})
        except Exception:
            delay = self.queue.retry(key)
            log.exception("reconcile crashed", extra={"job": key, "retry_in": delay})
        finally:
            self.queue.done(key)
            self.heartbeat = time.monotonic()
        return key

    def _worker(self) -> None:
        while not self._stop.is_set():
            self.process_one(0.5)
            self.heartbeat = time.monotonic()

    def _resync(self) -> None:
        while not self._stop.wait(self.resync_seconds):
            self.enqueue_all()

    def start(self) -> None:
        self._stop.clear()
        self.build_index()
        self.enqueue_all()
        for i in range(self.workers):
            t = threading.Thread(target=self._worker, name=f"controller-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        t = threading.Thread(target=self._resync, name="controller-resync", daemon=True)
        t.start()
        self._threads.append(t)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self.queue.close()
        for t in self._threads:
            t.join(timeout)
        self._threads.clear()
