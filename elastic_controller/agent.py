"""The preemption agent: snapshot of the caches -> ``plan_cycle`` -> evict / lift gates.

Execution order per starving gang (ARCHITECTURE.md, "The agent's cycle", step 4): stamp the victims' job
PodGroups (cooldown state, written before acting) and the victims (``evicted-for``: the in-flight
ledger), dry-run every eviction, then evict through the Eviction API. A failure undoes the stamps
and leaves the gang to the next cycle's plan: no victim is ever substituted, nothing is deleted.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from .kube.api import KubeAPI, owner_ref
from .kube.caches import Store
from .kube.errors import KubeError, NotFoundError, TooManyRequestsError
from .kube.events import EventRecorder
from .kube.resources import (
    NAMESPACES,
    NODES,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    PYTORCHJOBS,
    QUEUES,
    Resource,
)
from .policy import keys
from .policy.cycle import PlanCache, plan_cycle
from .policy.decisions import CyclePlan, Eviction, GateRelease
from .policy.model import JobView, NodeView, PodGroupView, PodView, QueueView, Snapshot
from .policy.parse import (
    ParseError,
    format_time,
    parse_job,
    parse_node,
    parse_pod,
    parse_podgroup,
    parse_queue,
    parse_time,
)
from .policy.settings import ElasticConfig

log = logging.getLogger(__name__)
LEDGER_TTL = 600.0  # seconds an eviction stays "in flight" in memory without the cache confirming it


class AgentMetrics(Protocol):
    """Hooks the process exports (see ``main.PrometheusMetrics``)."""

    def eviction(self, queue: str, reason: str) -> None: ...

    def eviction_failed(self, queue: str, reason: str) -> None: ...

    def gate_release(self, queue: str, reason: str) -> None: ...

    def starving(self, by_queue: dict[str, int]) -> None: ...

    def cycle(self, seconds: float) -> None: ...


class NoMetrics:
    def eviction(self, queue: str, reason: str) -> None:
        return None

    def eviction_failed(self, queue: str, reason: str) -> None:
        return None

    def gate_release(self, queue: str, reason: str) -> None:
        return None

    def starving(self, by_queue: dict[str, int]) -> None:
        return None

    def cycle(self, seconds: float) -> None:
        return None


@dataclass(frozen=True, slots=True)
class InFlight:
    pod: str
    gang: str
    since: float


@dataclass(slots=True)
class CycleReport:
    plan: CyclePlan
    evicted: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # gang -> why its plan was not executed
    released: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    preemptions: list[str] = field(default_factory=list)  # pods Volcano itself preempted (counted)
    seconds: float = 0.0
    plan_seconds: float = 0.0
    dry_run: bool = False


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def _split(key: str) -> tuple[str, str]:
    ns, _, name = key.partition("/")
    return ns, name


class ViewCache:
    """Parsed views memoised by (uid, resourceVersion): a cycle re-parses only what changed."""

    def __init__(self) -> None:
        self._memo: dict[tuple[str, str], tuple[str, Any]] = {}

    def view(self, kind: str, obj: dict[str, Any], parse: Callable[[dict[str, Any]], Any]) -> Any:
        meta = obj.get("metadata") or {}
        ident = (kind, str(meta.get("uid") or _key(obj)))
        rv = str(meta.get("resourceVersion") or "")
        hit = self._memo.get(ident)
        if hit is not None and rv and hit[0] == rv:
            return hit[1]
        value = parse(obj)
        self._memo[ident] = (rv, value)
        return value

    def retain(self, live: set[tuple[str, str]]) -> None:
        if len(self._memo) > 2 * max(len(live), 1000):
            self._memo = {k: v for k, v in self._memo.items() if k in live}


class Agent:
    def __init__(self, api: KubeAPI, store: Store, cfg: ElasticConfig, recorder: EventRecorder, *,
                 metrics: AgentMetrics | None = None, clock: Callable[[], datetime] | None = None,
                 dry_run: bool | None = None, min_gap: float = 1.0) -> None:
        self.api = api
        self.store = store
        self.cfg = cfg
        self.recorder = recorder
        self.metrics: AgentMetrics = metrics or NoMetrics()
        self.clock = clock or (lambda: datetime.now(UTC))
        self.dry_run = cfg.agent.dryRun if dry_run is None else dry_run
        self.min_gap = min_gap
        self.ledger: dict[str, InFlight] = {}  # pod uid -> eviction in flight
        self.views = ViewCache()
        self.last_report: CycleReport | None = None
        self.heartbeat = time.monotonic()
        self._wake = threading.Event()
        # Volcano deletes the pods it preempts right after marking them: remember them from the
        # watch events (group ns/name -> (condition time, pod ns/name)) so no cycle misses one.
        self._preempted: dict[str, tuple[datetime, list[str]]] = {}
        self._preempted_lock = threading.Lock()
        self.plan_cache = PlanCache()  # node base and pod index, kept from one cycle to the next

    # ------------------------------------------------------------------ snapshot
    def snapshot(self) -> Snapshot:
        cfg = self.cfg
        live: set[tuple[str, str]] = set()

        def views(res: Resource, kind: str, parse: Callable[[dict[str, Any]], Any]) -> list[Any]:
            out = []
            for obj in self.store.items(res):
                meta = obj.get("metadata") or {}
                live.add((kind, str(meta.get("uid") or _key(obj))))
                try:
                    out.append(self.views.view(kind, obj, parse))
                except ParseError as exc:
                    log.debug("object skipped", extra={"kind": kind, "reason": str(exc)})
            return out

        pods: list[PodView] = views(PODS, "Pod", lambda o: parse_pod(o, cfg))
        nodes: list[NodeView] = views(NODES, "Node", parse_node)
        pgs: list[PodGroupView] = views(PODGROUPS, "PodGroup", parse_podgroup)
        queues: list[QueueView] = views(QUEUES, "Queue", parse_queue)
        jobs: list[JobView] = views(PYTORCHJOBS, "PyTorchJob", parse_job)
        self.views.retain(live)
        classes = {str(pc["metadata"]["name"]): int(pc.get("value") or 0)
                   for pc in self.store.items(PRIORITY_CLASSES)}
        ns_queues = {}
        for ns in self.store.items(NAMESPACES):
            q = ((ns.get("metadata") or {}).get("annotations") or {}).get(keys.NAMESPACE_QUEUE)
            if q:
                ns_queues[str(ns["metadata"]["name"])] = str(q)
        pods = self._overlay_ledger(pods)
        return Snapshot(nodes=tuple(nodes), pods=tuple(pods), podgroups=tuple(pgs), queues=tuple(queues),
                        priority_classes=classes, jobs=tuple(jobs), namespace_queues=ns_queues)

    def _overlay_ledger(self, pods: list[PodView]) -> list[PodView]:
        """Evictions we made that the cache has not shown yet still count as releasing capacity."""
        now = time.monotonic()
        seen: set[str] = set()
        out = []
        for pod in pods:
            entry = self.ledger.get(pod.uid)
            if entry is not None:
                seen.add(pod.uid)
                if pod.deleting or pod.terminal or now - entry.since > LEDGER_TTL:
                    del self.ledger[pod.uid]  # the cache caught up (or we gave up waiting)
                else:
                    ann = dict(pod.annotations)
                    ann[keys.EVICTED_FOR] = entry.gang
                    pod = dataclasses.replace(pod, deleting=True, annotations=ann)
            out.append(pod)
        for uid in [u for u in self.ledger if u not in seen]:
            del self.ledger[uid]  # gone from the cache: its eviction is complete
        return out

    # ------------------------------------------------------------------ the cycle
    def run_cycle(self) -> CycleReport:
        started = time.perf_counter()
        now = self.clock()
        snapshot = self.snapshot()
        preemptions = self._count_scheduler_preemptions(snapshot, now)
        resumed = self._resume_interrupted(snapshot, now)
        if resumed or preemptions:
            snapshot = self.snapshot()  # warm: only the objects we just wrote are parsed again
        t_plan = time.perf_counter()
        plan = plan_cycle(snapshot, self.cfg, now, cache=self.plan_cache)
        plan_seconds = time.perf_counter() - t_plan
        report = CycleReport(plan, resumed=resumed, preemptions=preemptions, dry_run=self.dry_run,
                             plan_seconds=plan_seconds)
        self._log_plan(plan)
        by_gang: dict[str, list[Eviction]] = {}
        for ev in plan.evictions:
            by_gang.setdefault(ev.for_gang, []).append(ev)
        for gang, evictions in by_gang.items():
            self._execute_evictions(gang, evictions, now, report)
        self._execute_releases(plan.gate_releases, now, report)
        self._write_decisions(plan, report, now)
        starving: dict[str, int] = {}
        for d in plan.starving:
            starving[d.queue] = starving.get(d.queue, 0) + 1
        self.metrics.starving(starving)
        report.seconds = time.perf_counter() - started
        self.metrics.cycle(report.seconds)
        self.last_report = report
        self.heartbeat = time.monotonic()
        return report

    def _log_plan(self, plan: CyclePlan) -> None:
        for d in plan.starving:
            log.info("gang decision", extra={"podgroup": d.pod_group, "queue": d.queue, "decision": d.decision,
                                             "reason": d.reason, "victims": list(d.victims),
                                             "dry_run": self.dry_run})
        for e in plan.evictions:
            log.info("eviction planned", extra={"pod": e.pod, "job": e.job, "queue": e.queue, "for": e.for_gang,
                                                "node": e.node, "reason": e.reason, "dry_run": self.dry_run})
        for g in plan.gate_releases:
            log.info("gate release planned", extra={"pod": g.pod, "job": g.job, "queue": g.queue, "node": g.node,
                                                    "reason": g.reason, "dry_run": self.dry_run})

    # ------------------------------------------------------------------ writes
    def _patch_pg(self, key: str, annotations: dict[str, str | None]) -> None:
        ns, name = _split(key)
        out = self.api.patch(PODGROUPS, name, {"metadata": {"annotations": annotations}}, ns)
        self.store.put(PODGROUPS, out)

    def _patch_pod_annotations(self, key: str, annotations: dict[str, str | None]) -> None:
        ns, name = _split(key)
        out = self.api.patch(PODS, name, {"metadata": {"annotations": annotations}}, ns)
        self.store.put(PODS, out)

    def _pg_annotations(self, key: str) -> dict[str, str]:
        ns, name = _split(key)
        pg = self.store.get(PODGROUPS, name, ns) or {}
        return dict((pg.get("metadata") or {}).get("annotations") or {})

    def _ours(self, key: str) -> bool:
        ns, name = _split(key)
        pg = self.store.get(PODGROUPS, name, ns) or {}
        return ((pg.get("metadata") or {}).get("labels") or {}).get(keys.MANAGED_BY_LABEL) == keys.MANAGED_BY

    def _job_ref(self, key: str) -> dict[str, Any] | None:
        ns, name = _split(key)
        job = self.store.get(PYTORCHJOBS, name, ns)
        if job is not None:
            return owner_ref(job)
        pg = self.store.get(PODGROUPS, name, ns)
        return owner_ref(pg) if pg is not None else None

    def _pod_ref(self, key: str) -> dict[str, Any] | None:
        ns, name = _split(key)
        pod = self.store.get(PODS, name, ns)
        return owner_ref(pod) if pod is not None else None

    def _execute_evictions(self, gang: str, evictions: list[Eviction], now: datetime,
                           report: CycleReport) -> None:
        if self.dry_run:
            return
        stamp = format_time(now)
        jobs = sorted({e.job for e in evictions})
        before = {j: self._pg_annotations(j) for j in jobs}
        stamped_jobs: list[str] = []
        stamped_pods: list[str] = []
        try:
            for j in jobs:
                n = sum(1 for e in evictions if e.job == j)
                self._patch_pg(j, {keys.LAST_SCALE_TIME: stamp, keys.LAST_SCALE_DIRECTION: keys.Direction.DOWN,
                                   keys.LAST_DECISION: f"{stamp} down: {n} elastic worker(s) evicted to make "
                                                       f"room for {gang}"})
                stamped_jobs.append(j)
            for e in evictions:
                self._patch_pod_annotations(e.pod, {keys.EVICTED_FOR: gang})
                stamped_pods.append(e.pod)
            for e in evictions:
                ns, name = _split(e.pod)
                self.api.evict(ns, name, uid=e.uid or None, dry_run=True)
        except KubeError as exc:
            why = "pdb" if isinstance(exc, TooManyRequestsError) else "conflict" if exc.status == 409 else "error"
            report.failed[gang] = f"{why}: {exc}"
            for e in evictions:
                self.metrics.eviction_failed(e.queue, why)
            log.warning("eviction plan not executed; re-planning next cycle",
                        extra={"podgroup": gang, "reason": why, "error": str(exc)})
            self._undo(before, stamped_jobs, stamped_pods)
            return
        done: list[Eviction] = []
        for e in evictions:
            ns, name = _split(e.pod)
            try:
                self.api.evict(ns, name, uid=e.uid or None)
            except KubeError as exc:
                # Dry-run passed but the real call did not (a race): stop, keep what is done.
                report.failed[gang] = f"error after {len(done)} eviction(s): {exc}"
                self.metrics.eviction_failed(e.queue, "race")
                log.warning("eviction failed after dry-run passed", extra={"pod": e.pod, "podgroup": gang,
                                                                          "error": str(exc)})
                rest = [x.pod for x in evictions if x not in done]
                self._undo({}, [], rest)
                break
            done.append(e)
            self.ledger[e.uid or e.pod] = InFlight(e.pod, gang, time.monotonic())
            report.evicted.append(e.pod)
            self.metrics.eviction(e.queue, "starving-gang")
            log.info("evicted", extra={"pod": e.pod, "job": e.job, "queue": e.queue, "for": gang,
                                       "reason": e.reason})
            ref = self._pod_ref(e.pod)
            if ref is not None:
                self.recorder.emit(ref, "Normal", "EvictedForGang",
                                   f"elastic worker evicted by volcano-elastic to make room for gang {gang}")
        for j in jobs:
            n = sum(1 for e in done if e.job == j)
            ref = self._job_ref(j)
            if n and ref is not None:
                self.recorder.emit(ref, "Normal", "ScaledDown",
                                   f"{n} elastic worker(s) evicted to make room for gang {gang}; "
                                   f"cooldown starts now")

    def _undo(self, before: dict[str, dict[str, str]], jobs: Iterable[str], pods: Iterable[str]) -> None:
        for p in pods:
            try:
                self._patch_pod_annotations(p, {keys.EVICTED_FOR: None})
            except KubeError as exc:
                log.warning("could not clear evicted-for", extra={"pod": p, "error": str(exc)})
        for j in jobs:
            prev = before.get(j, {})
            try:
                self._patch_pg(j, {k: prev.get(k) for k in (keys.LAST_SCALE_TIME, keys.LAST_SCALE_DIRECTION,
                                                            keys.LAST_DECISION)})
            except KubeError as exc:
                log.warning("could not restore cooldown stamp", extra={"job": j, "error": str(exc)})

    def _execute_releases(self, releases: Iterable[GateRelease], now: datetime, report: CycleReport) -> None:
        if self.dry_run:
            return
        by_job: dict[str, list[GateRelease]] = {}
        for r in releases:
            by_job.setdefault(r.job, []).append(r)
        stamp = format_time(now)
        gate = self.cfg.gating.gateName
        for job, items in by_job.items():
            try:
                if self._ours(job):
                    self._patch_pg(job, {keys.LAST_SCALE_TIME: stamp, keys.LAST_SCALE_DIRECTION: keys.Direction.UP,
                                         keys.LAST_DECISION: f"{stamp} up: {len(items)} gate(s) lifted; "
                                                             f"{items[0].reason}"})
            except KubeError as exc:
                log.warning("scale-up not stamped; skipped", extra={"job": job, "error": str(exc)})
                continue
            lifted = 0
            for r in items:
                try:
                    out = lift_gate(self.api, r.pod, gate)
                except KubeError as exc:
                    log.warning("gate not lifted", extra={"pod": r.pod, "job": job, "error": str(exc)})
                    continue
                if out is not None:
                    self.store.put(PODS, out)
                lifted += 1
                report.released.append(r.pod)
                self.metrics.gate_release(r.queue, "scale-up")
                log.info("gate lifted", extra={"pod": r.pod, "job": job, "queue": r.queue, "node": r.node,
                                               "reason": r.reason})
            ref = self._job_ref(job)
            if lifted and ref is not None:
                self.recorder.emit(ref, "Normal", "ScaledUp",
                                   f"lifted the scale-up gate of {lifted} elastic pod(s): {items[0].reason}")

    def _write_decisions(self, plan: CyclePlan, report: CycleReport, now: datetime) -> None:
        if self.dry_run:
            return
        stamp = format_time(now)
        for d in plan.starving:
            if d.pod_group in report.failed:
                text = f"{stamp} waiting: plan to evict {len(d.victims)} not executed ({report.failed[d.pod_group]})"
            elif d.decision == "evict":
                text = f"{stamp} evicted {len(d.victims)} elastic worker(s) for it: {d.reason}"
            else:
                text = f"{stamp} waiting: {d.reason}"
            current = self._pg_annotations(d.pod_group).get(keys.LAST_DECISION, "")
            if not self._ours(d.pod_group) or current[len(stamp):] == text[len(stamp):]:
                continue
            try:
                self._patch_pg(d.pod_group, {keys.LAST_DECISION: text[:500]})
            except KubeError as exc:
                log.debug("last-decision not written", extra={"podgroup": d.pod_group, "error": str(exc)})

    # ------------------------------------------------------------------ recovery and accounting
    def _resume_interrupted(self, snapshot: Snapshot, now: datetime) -> list[str]:
        """Victims stamped ``evicted-for`` but never evicted (an agent killed mid-cycle, or one whose
        undo failed): finish that plan if its gang still waits and every dry-run passes, else unstamp."""
        if self.dry_run:
            return []
        stamped: dict[str, list[PodView]] = {}
        for pod in snapshot.pods:
            target = pod.annotations.get(keys.EVICTED_FOR)
            if target and not pod.deleting and not pod.terminal:
                stamped.setdefault(target, []).append(pod)
        if not stamped:
            return []
        placed: dict[str, int] = {}
        for pod in snapshot.pods:
            if pod.group_key and pod.node_name and not pod.deleting and pod.phase != "Failed":
                placed[pod.group_key] = placed.get(pod.group_key, 0) + 1
        groups = {pg.key: pg for pg in snapshot.podgroups}
        done: list[str] = []
        for gang, victims in sorted(stamped.items()):
            pg = groups.get(gang)
            still_waiting = pg is not None and placed.get(gang, 0) < pg.min_member
            try:
                if still_waiting:
                    for v in victims:
                        self.api.evict(v.namespace, v.name, uid=v.uid, dry_run=True)
            except KubeError as exc:
                log.warning("interrupted plan dropped", extra={"podgroup": gang, "error": str(exc)})
                still_waiting = False
            if not still_waiting:
                self._undo({}, [], [v.key for v in victims])
                continue
            for v in victims:
                try:
                    self.api.evict(v.namespace, v.name, uid=v.uid)
                except NotFoundError:
                    continue
                except KubeError as exc:
                    log.warning("resumed eviction failed", extra={"pod": v.key, "error": str(exc)})
                    self._undo({}, [], [v.key])
                    continue
                self.ledger[v.uid] = InFlight(v.key, gang, time.monotonic())
                done.append(v.key)
                victim_pg = groups.get(v.group_key)
                self.metrics.eviction(victim_pg.queue if victim_pg else "", "resumed")
                log.info("evicted (resumed interrupted plan)", extra={"pod": v.key, "for": gang})
        return done

    def _count_scheduler_preemptions(self, snapshot: Snapshot, now: datetime) -> list[str]:
        """Pods Volcano preempted itself (DisruptionTarget/PreemptionByScheduler) are scale events:
        their job's PodGroup gets a cooldown stamp at the condition's time. Returns the pods newly counted."""
        seen: dict[str, list[str]] = {}
        latest: dict[str, datetime] = {}
        with self._preempted_lock:
            pending, self._preempted = self._preempted, {}
        for group, (at, pods) in pending.items():
            latest[group] = at
            seen[group] = list(pods)
        for view in snapshot.pods:
            if not view.preempted_by_scheduler or not view.group_key:
                continue
            raw = self.store.get(PODS, view.name, view.namespace) or {}
            at = preemption_time(raw) or now
            if view.key not in seen.get(view.group_key, []):
                seen.setdefault(view.group_key, []).append(view.key)
            if view.group_key not in latest or at > latest[view.group_key]:
                latest[view.group_key] = at
        if self.dry_run:
            return []
        stamped: list[str] = []
        for key, at in latest.items():
            if not self._ours(key):
                continue
            last = parse_time(self._pg_annotations(key).get(keys.LAST_SCALE_TIME))
            if last is not None and last >= at.replace(microsecond=0):
                continue
            stamp = format_time(at)
            try:
                self._patch_pg(key, {keys.LAST_SCALE_TIME: stamp, keys.LAST_SCALE_DIRECTION: keys.Direction.DOWN,
                                     keys.LAST_DECISION: f"{stamp} down: Volcano preempted worker(s) of this job "
                                                         "(counted as a scale event)"})
            except KubeError as exc:
                log.warning("scheduler preemption not stamped", extra={"job": key, "error": str(exc)})
                with self._preempted_lock:
                    self._preempted.setdefault(key, (at, seen.get(key, [])))  # next cycle tries again
                continue
            stamped.append(key)
            pg = self.store.get(PODGROUPS, _split(key)[1], _split(key)[0]) or {}
            self.metrics.eviction(str((pg.get("spec") or {}).get("queue") or ""), "volcano-preemption")
            ref = self._job_ref(key)
            if ref is not None:
                self.recorder.emit(ref, "Warning", "PreemptedByScheduler",
                                   "Volcano preempted pod(s) of this job; counted as a scale event (cooldown)")
        return [p for k in stamped for p in seen[k]]

    # ------------------------------------------------------------------ the loop
    def on_event(self, res: Resource, kind: str, obj: dict[str, Any]) -> None:
        """Wake the loop early for changes that can start or end a wait; note Volcano's preemptions."""
        if res is PODS and kind != "ADDED":
            at = preemption_time(obj)
            meta = obj.get("metadata") or {}
            group = (meta.get("annotations") or {}).get(keys.GROUP_NAME) or \
                (meta.get("labels") or {}).get(keys.GROUP_NAME)
            if at is not None and group:
                key = f"{meta.get('namespace')}/{group}"
                with self._preempted_lock:
                    prev = self._preempted.get(key)
                    pods = (prev[1] if prev else []) + [_key(obj)]
                    self._preempted[key] = (max(at, prev[0]) if prev else at, sorted(set(pods)))
                self._wake.set()
        if res is PODS:
            if kind == "DELETED" or not (obj.get("spec") or {}).get("nodeName"):
                self._wake.set()
        elif res in (PODGROUPS, NODES) and kind != "MODIFIED":
            self._wake.set()

    def run(self, stop: threading.Event) -> None:
        interval = float(self.cfg.agent.intervalSeconds)
        last = 0.0
        while not stop.is_set():
            gap = time.monotonic() - last
            if gap < self.min_gap:
                stop.wait(self.min_gap - gap)
                continue
            last = time.monotonic()
            try:
                self.run_cycle()
            except Exception:
                log.exception("agent cycle failed")
            self.heartbeat = time.monotonic()
            self._wake.clear()
            deadline = time.monotonic() + interval
            while not stop.is_set() and not self._wake.is_set() and time.monotonic() < deadline:
                self._wake.wait(min(0.5, max(0.0, deadline - time.monotonic())))


def preemption_time(pod: dict[str, Any]) -> datetime | None:
    """When Volcano marked ``pod`` for preemption (condition DisruptionTarget, reason
    PreemptionByScheduler), else None."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "DisruptionTarget" and cond.get("reason") == "PreemptionByScheduler" and \
                cond.get("status", "True") == "True":
            return parse_time(cond.get("lastTransitionTime")) or datetime.now(UTC)
    return None


def lift_gate(api: KubeAPI, pod_key: str, gate: str) -> dict[str, Any] | None:
    """Remove only ``gate`` from the pod's schedulingGates (strategic merge keyed by name; other
    gates survive). None when the pod is gone."""
    ns, name = _split(pod_key)
    patch = {"spec": {"schedulingGates": [{"$patch": "delete", "name": gate}]}}
    try:
        return api.patch(PODS, name, patch, ns, patch_type="strategic")
    except NotFoundError:
        return None
