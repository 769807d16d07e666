"""The preemption agent: snapshot of the caches -> ``plan_cycle`` -> evict / lift gates.

Execution order per starving gang (docs/failure-model.md): stamp the victims (``evicted-for``: the
plan's record), dry-run every eviction, stamp the victims' job PodGroups (cooldown state, written
before acting), then evict through the Eviction API. A failure undoes the stamps, each only if it
is still the one we wrote, and leaves the gang to the next cycle's plan: no victim is ever
substituted, nothing is deleted. A plan interrupted between the first stamp and the last eviction
(a crash, an API outage, a lost Lease) is found by its record: the next leader finishes it if every
victim still passes a fresh plan's checks (``policy.resume``), else forgets it; either way the gang
is never left blocked by a cooldown of evictions that did not happen.

Every write first checks ``may_write`` (the Lease is held and was renewed within the renew
deadline): a leader that was paused past its Lease stops before its next write.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from .kube.api import KubeAPI, evicted_pod_ref, owner_ref
from .kube.caches import Store
from .kube.errors import ConflictError, InvalidError, KubeError, NotFoundError, TooManyRequestsError
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
from .notice import Notices
from .policy import keys
from .policy.cycle import PlanCache, plan_cycle
from .policy.decisions import CyclePlan, Eviction, GateRelease
from .policy.model import JobView, NodeView, PodGroupView, PodView, QueueView, Snapshot
from .policy.notices import NoticeReview, in_flight, with_notices
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
from .policy.resume import check_resumable, plan_stamp_for
from .policy.settings import ElasticConfig

log = logging.getLogger(__name__)
LEDGER_TTL = 600.0  # seconds an eviction stays "in flight" in memory without the cache confirming it
FAULT_ENV = "VOLCANO_ELASTIC_FAULT"  # test hook: "STEP=sleep:SECONDS", "STEP=raise" or "STEP=exit" (comma-separated)
FAULT_STEPS = ("victims-stamped", "jobs-stamped", "evicted-one", "gates-stamped", "gate-lifted-one")
# How long a pod whose eviction a PodDisruptionBudget refused (429, dry-run or real) is no victim:
# the planner excludes it ("PDB refused eviction") so the next cycles plan other victims instead of
# the same refused plan forever. Long enough for many cycles (default interval 5 s), short enough that
# a PDB relaxed meanwhile (a replica ready again, the budget edited) is seen within a minute.
PDB_REFUSAL_SECONDS = 60.0
SCALE_KEYS = (keys.LAST_SCALE_TIME, keys.LAST_SCALE_DIRECTION, keys.LAST_DECISION)


class NotLeaderError(Exception):
    """This replica may not write: it does not hold the Lease (or has not renewed it in time)."""


class InjectedFault(BaseException):
    """Raised at a named step by the ``VOLCANO_ELASTIC_FAULT`` test hook (a crash: nothing catches it)."""


def parse_faults(text: str | None) -> dict[str, str]:
    """``victims-stamped=exit,evicted-one=sleep:20`` -> {step: action}; unknown steps are an error."""
    out: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        step, _, action = part.strip().partition("=")
        if step not in FAULT_STEPS or not (action in ("raise", "exit") or action.startswith("sleep:")):
            raise ValueError(f"{FAULT_ENV}: bad entry {part!r} (steps: {', '.join(FAULT_STEPS)}; "
                             "actions: raise, exit, sleep:SECONDS)")
        out[step] = action
    return out


class AgentMetrics(Protocol):
    """Hooks the process exports (see ``main.PrometheusMetrics``)."""

    def eviction(self, queue: str, reason: str) -> None: ...

    def eviction_failed(self, queue: str, reason: str) -> None: ...

    def write_refused(self, reason: str) -> None: ...

    def skipped(self, by_kind: dict[str, int]) -> None: ...

    def gate_release(self, queue: str, reason: str) -> None: ...

    def starving(self, by_queue: dict[str, int]) -> None: ...

    def cycle(self, seconds: float) -> None: ...


class NoMetrics:
    def eviction(self, queue: str, reason: str) -> None:
        return None

    def eviction_failed(self, queue: str, reason: str) -> None:
        return None

    def write_refused(self, reason: str) -> None:
        return None

    def skipped(self, by_kind: dict[str, int]) -> None:
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
    refused: dict[str, str] = field(default_factory=dict)  # stamped pod -> why its eviction was refused
    noticed: dict[str, list[str]] = field(default_factory=dict)  # gang -> victims put under notice this cycle
    withdrawn: list[str] = field(default_factory=list)  # eviction notices withdrawn this cycle
    notices: NoticeReview = field(default_factory=NoticeReview)  # the notices as this cycle found them
    not_leader: bool = False  # the cycle stopped before a write: this replica does not lead
    stale: list[str] = field(default_factory=list)  # caches known stale: the cycle did nothing
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
                 dry_run: bool | None = None, min_gap: float = 1.0,
                 may_write: Callable[[], bool] | None = None, faults: dict[str, str] | None = None) -> None:
        self.api = api
        self.may_write = may_write or (lambda: True)
        self.faults = parse_faults(os.environ.get(FAULT_ENV)) if faults is None else faults
        self.store = store
        self.cfg = cfg
        self.recorder = recorder
        self.metrics: AgentMetrics = metrics or NoMetrics()
        self.clock = clock or (lambda: datetime.now(UTC))
        self.dry_run = cfg.agent.dryRun if dry_run is None else dry_run
        self.min_gap = min_gap
        self.ledger: dict[str, InFlight] = {}  # pod uid -> eviction in flight
        self.pdb_refused: dict[str, datetime] = {}  # pod ns/name -> when a PDB last refused its eviction
        self.views = ViewCache()
        self._was_stale = False
        # Objects the planner cannot use (or uses only in part), by (kind, ns/name): the reason last
        # reported. Each is said once at WARNING per object and reason, counted, shown by `status`.
        self.skipped: dict[tuple[str, str], str] = {}
        self.last_report: CycleReport | None = None
        self.heartbeat = time.monotonic()
        self._wake = threading.Event()
        # Volcano deletes the pods it preempts right after marking them: remember them from the
        # watch events (group ns/name -> (condition time, pod ns/name)) so no cycle misses one.
        self._preempted: dict[str, tuple[datetime, list[str]]] = {}
        self._preempted_lock = threading.Lock()
        self.plan_cache = PlanCache()  # node base and pod index, kept from one cycle to the next
        self._notes: frozenset[str] = frozenset()  # the last cycle's plan notes (logged when new)
        self.notices = Notices(api, store, cfg, recorder, clock=self.clock)

    # ------------------------------------------------------------------ snapshot
    def snapshot(self) -> Snapshot:
        cfg = self.cfg
        live: set[tuple[str, str]] = set()

        skipped: dict[tuple[str, str], str] = {}

        def views(res: Resource, kind: str, parse: Callable[[dict[str, Any]], Any]) -> list[Any]:
            out = []
            for obj in self.store.items(res):
                meta = obj.get("metadata") or {}
                live.add((kind, str(meta.get("uid") or _key(obj))))
                try:
                    view = self.views.view(kind, obj, parse)
                except ParseError as exc:
                    skipped[(kind, _key(obj) if res.namespaced else str(meta.get("name")))] = str(exc)
                    continue
                problems = getattr(view, "problems", ())
                if problems:
                    skipped[(kind, str(meta.get("name")))] = "; ".join(problems)
                out.append(view)
            return out

        pods: list[PodView] = views(PODS, "Pod", lambda o: parse_pod(o, cfg))
        nodes: list[NodeView] = views(NODES, "Node", parse_node)
        pgs: list[PodGroupView] = views(PODGROUPS, "PodGroup", parse_podgroup)
        queues: list[QueueView] = views(QUEUES, "Queue", parse_queue)
        jobs: list[JobView] = views(PYTORCHJOBS, "PyTorchJob", parse_job)
        self.views.retain(live)
        self._report_skipped(skipped)
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

    def _report_skipped(self, skipped: dict[tuple[str, str], str]) -> None:
        """Once at WARNING per object and reason (not every cycle); the count per kind as a metric."""
        for (kind, name), reason in skipped.items():
            if self.skipped.get((kind, name)) != reason:
                log.warning("object not used as it is", extra={"kind": kind, "object": name, "reason": reason})
        for kind, name in self.skipped.keys() - skipped.keys():
            log.info("object usable again", extra={"kind": kind, "object": name})
        if skipped or self.skipped:
            by_kind: dict[str, int] = {}
            for kind, _ in skipped:
                by_kind[kind] = by_kind.get(kind, 0) + 1
            self.metrics.skipped(by_kind)
        self.skipped = skipped

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
        report = CycleReport(CyclePlan((), (), (), (), ()), dry_run=self.dry_run)
        stale = self.store.stale()
        if stale:
            # After an API outage the caches miss whatever changed meanwhile: a plan on them could
            # evict for a gang already placed or lift a gate into a node since filled. Wait.
            report.stale = stale
            if not self._was_stale:
                log.warning("caches stale after an API error; not acting until they are relisted",
                            extra={"stale": stale})
            self._was_stale = True
            self.metrics.write_refused("stale-cache")
            report.seconds = time.perf_counter() - started
            self.last_report = report
            self.heartbeat = time.monotonic()
            return report
        if self._was_stale:
            log.info("caches fresh again; acting")
            self._was_stale = False
        snapshot = self.snapshot()
        try:
            repaired = self._repair_stamps(snapshot, now) if not self.dry_run else 0
            report.preemptions = self._count_scheduler_preemptions(snapshot, now)
            self._resume_interrupted(snapshot, now, report)
            acted = self._act_on_notices(snapshot, now, report)
            if report.resumed or report.preemptions or report.refused or repaired or acted:
                snapshot = self.snapshot()  # warm: only the objects we just wrote are parsed again
            t_plan = time.perf_counter()
            # A victim under notice is in flight for its gang (no further victims for it, never
            # picked again); a gang waiting on one says so.
            plan = with_notices(plan_cycle(in_flight(snapshot, report.notices), self.cfg, now, cache=self.plan_cache,
                                           pdb_refused=self._pdb_refused(now)),
                                report.notices, due=False, left=False)
            report.plan_seconds = time.perf_counter() - t_plan
            report.plan = plan
            self._log_plan(plan)
            by_gang: dict[str, list[Eviction]] = {}
            for ev in plan.evictions:
                by_gang.setdefault(ev.for_gang, []).append(ev)
            for gang, evictions in by_gang.items():
                self._execute_evictions(gang, evictions, now, report)
            self._execute_releases(plan.gate_releases, now, report)
            self._write_decisions(plan, report, now)
        except NotLeaderError as exc:
            report.not_leader = True
            self.metrics.write_refused("not-leader")
            log.warning("not leading: cycle stopped before a write", extra={"step": str(exc)})
        plan = report.plan
        starving: dict[str, int] = {}
        for d in plan.starving:
            starving[d.queue] = starving.get(d.queue, 0) + 1
        self.metrics.starving(starving)
        report.seconds = time.perf_counter() - started
        self.metrics.cycle(report.seconds)
        self.last_report = report
        self.heartbeat = time.monotonic()
        return report

    def _pdb_refused(self, now: datetime) -> frozenset[str]:
        """Pods a PDB refused to evict within the last PDB_REFUSAL_SECONDS (older refusals forgotten)."""
        for key in [k for k, t in self.pdb_refused.items()
                    if not 0 <= (now - t).total_seconds() < PDB_REFUSAL_SECONDS]:
            del self.pdb_refused[key]
        return frozenset(self.pdb_refused)

    def _refused_by_pdb(self, pod: str, gang: str, now: datetime) -> None:
        self.pdb_refused[pod] = now
        log.info("PDB refused eviction; pod is no victim for a while",
                 extra={"pod": pod, "podgroup": gang, "seconds": PDB_REFUSAL_SECONDS})

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
        # Growth held back, and why: at INFO when a note is new (a job in cooldown or below
        # minScaleUpGain keeps its note for many cycles), at DEBUG while it repeats.
        for note in plan.notes:
            log.log(logging.DEBUG if note in self._notes else logging.INFO, "scale-up held back",
                    extra={"note": note, "dry_run": self.dry_run})
        self._notes = frozenset(plan.notes)

    # ------------------------------------------------------------------ writes
    def _fence(self, what: str) -> None:
        """Every write goes through here first: a replica that does not lead (any more) stops."""
        if not self.may_write():
            raise NotLeaderError(what)

    def _fault(self, step: str) -> None:
        """Fault injection for tests (``VOLCANO_ELASTIC_FAULT``): sleep, raise or exit at ``step``."""
        action = self.faults.get(step)
        if action is None:
            return
        log.warning("fault injected", extra={"step": step, "action": action})
        if action.startswith("sleep:"):
            time.sleep(float(action.partition(":")[2]))
        elif action == "exit":
            os._exit(137)  # as kill -9: nothing after this runs
        else:
            raise InjectedFault(step)

    def _patch_pg(self, key: str, annotations: dict[str, str | None]) -> dict[str, Any]:
        self._fence(f"patch podgroup {key}")
        ns, name = _split(key)
        out = self.api.patch(PODGROUPS, name, {"metadata": {"annotations": annotations}}, ns)
        self.store.put(PODGROUPS, out)
        return out

    def _stamp(self, key: str, ours: dict[str, str]) -> None:
        """A scale event: the PodGroup's stamp (cooldown state, last-decision), then its copy on the
        PyTorchJob (time and direction), which a PodGroup deleted by hand does not take along."""
        self._patch_pg(key, dict(ours))
        ns, name = _split(key)
        if self.store.get(PYTORCHJOBS, name, ns) is None:
            return
        self._fence(f"patch pytorchjob {key}")
        copy = {k: ours[k] for k in (keys.LAST_SCALE_TIME, keys.LAST_SCALE_DIRECTION) if k in ours}
        try:
            out = self.api.patch(PYTORCHJOBS, name, {"metadata": {"annotations": copy}}, ns)
        except KubeError as exc:  # the PodGroup's stamp is the one that counts first
            log.warning("cooldown copy not written on the job", extra={"job": key, "error": str(exc)})
            return
        self.store.put(PYTORCHJOBS, out)

    def _repair_stamps(self, snapshot: Snapshot, now: datetime) -> int:
        """An unreadable ``last-scale-time`` (PodGroup or job) counts as a scale event now: rewrite it
        as the time we first saw it (so the cooldown runs out one day) and say so with a Warning Event.
        Only while the bad value is still there (JSON patch ``test``)."""
        bad: list[tuple[Resource, str, str]] = []
        for pg in snapshot.podgroups:
            if pg.last_scale_invalid and pg.labels.get(keys.MANAGED_BY_LABEL) == keys.MANAGED_BY:
                bad.append((PODGROUPS, pg.key, pg.annotations.get(keys.LAST_SCALE_TIME, "")))
        for job in snapshot.jobs:
            if job.last_scale_invalid:
                raw = ((self.store.get(PYTORCHJOBS, job.name, job.namespace) or {}).get("metadata") or {})
                bad.append((PYTORCHJOBS, job.key, str((raw.get("annotations") or {}).get(keys.LAST_SCALE_TIME))))
        stamp = format_time(now)
        path = "/metadata/annotations/" + keys.LAST_SCALE_TIME.replace("~", "~0").replace("/", "~1")
        for res, key, value in bad:
            ns, name = _split(key)
            self._fence(f"repair {res.plural} {key}")
            try:
                out = self.api.patch(res, name, [{"op": "test", "path": path, "value": value},
                                                 {"op": "replace", "path": path, "value": stamp}], ns,
                                     patch_type="json")
            except KubeError as exc:
                log.warning("unreadable cooldown stamp not repaired", extra={"job": key, "error": str(exc)})
                continue
            self.store.put(res, out)
            ref = self._job_ref(key)
            if ref is not None:
                self.recorder.emit(ref, "Warning", "InvalidScaleStamp",
                                   f"{keys.LAST_SCALE_TIME} on the {res.kind} was {value[:60]!r}, not a time: "
                                   f"read as a scale event at {stamp} (cooldown in force from then)")
        return len(bad)

    def _patch_pod_annotations(self, key: str, annotations: dict[str, str | None]) -> None:
        self._fence(f"patch pod {key}")
        ns, name = _split(key)
        out = self.api.patch(PODS, name, {"metadata": {"annotations": annotations}}, ns)
        self.store.put(PODS, out)

    def _evict(self, key: str, uid: str | None, *, dry_run: bool = False) -> None:
        if not dry_run:
            self._fence(f"evict {key}")
        ns, name = _split(key)
        self.api.evict(ns, name, uid=uid or None, dry_run=dry_run)

    def _unstamp_pod(self, key: str, gang: str) -> None:
        """Remove ``evicted-for`` only while it still names ``gang`` (a JSON patch ``test``: another
        writer's value, or a newer plan's, is left alone)."""
        self._fence(f"unstamp pod {key}")
        ns, name = _split(key)
        path = "/metadata/annotations/" + keys.EVICTED_FOR.replace("~", "~0").replace("/", "~1")
        try:
            out = self.api.patch(PODS, name, [{"op": "test", "path": path, "value": gang},
                                              {"op": "remove", "path": path}], ns, patch_type="json")
        except (InvalidError, NotFoundError):
            return  # not ours any more, or gone
        self.store.put(PODS, out)

    def _restore_pg(self, key: str, ours: dict[str, str], before: dict[str, str]) -> None:
        """Put the scale stamp back to ``before``, only while the PodGroup still carries ``ours``:
        read, compare, then write with the read's resourceVersion as a precondition (a 409 means
        someone wrote in between: read again). A newer stamp (another leader's) is never overwritten."""
        ns, name = _split(key)
        for _ in range(3):
            try:
                live = self.api.get(PODGROUPS, name, ns)
            except NotFoundError:
                return
            ann = (live.get("metadata") or {}).get("annotations") or {}
            if any(ann.get(k) != ours.get(k) for k in SCALE_KEYS):
                log.info("cooldown stamp changed since ours; not restored", extra={"job": key})
                return
            rv = str((live.get("metadata") or {}).get("resourceVersion") or "")
            self._fence(f"restore podgroup {key}")
            try:
                out = self.api.patch(PODGROUPS, name, {"metadata": {
                    "resourceVersion": rv, "annotations": {k: before.get(k) for k in SCALE_KEYS}}}, ns)
            except ConflictError:
                continue
            self.store.put(PODGROUPS, out)
            self._restore_job_copy(key, ours, before)
            return
        log.warning("cooldown stamp not restored: the PodGroup keeps changing", extra={"job": key})

    def _restore_job_copy(self, key: str, ours: dict[str, str], before: dict[str, str]) -> None:
        ns, name = _split(key)
        copy_keys = (keys.LAST_SCALE_TIME, keys.LAST_SCALE_DIRECTION)
        for _ in range(3):
            try:
                live = self.api.get(PYTORCHJOBS, name, ns)
            except NotFoundError:
                return
            ann = (live.get("metadata") or {}).get("annotations") or {}
            if any(ann.get(k) != ours.get(k) for k in copy_keys):
                return
            rv = str((live.get("metadata") or {}).get("resourceVersion") or "")
            self._fence(f"restore pytorchjob {key}")
            try:
                out = self.api.patch(PYTORCHJOBS, name, {"metadata": {
                    "resourceVersion": rv, "annotations": {k: before.get(k) for k in copy_keys}}}, ns)
            except ConflictError:
                continue
            self.store.put(PYTORCHJOBS, out)
            return

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
        stamped_jobs: dict[str, dict[str, str]] = {}  # job -> the stamp we wrote
        stamped_pods: list[str] = []
        if any(self.notices.notice_seconds(e.queue) > 0 for e in evictions):
            self._give_notice(gang, evictions, now, before, report)
            return
        try:
            # 1. The plan's record: each victim names the gang. Recovery finds an interrupted plan here.
            for e in evictions:
                self._patch_pod_annotations(e.pod, {keys.EVICTED_FOR: gang})
                stamped_pods.append(e.pod)
            for e in evictions:
                try:
                    self._evict(e.pod, e.uid, dry_run=True)
                except TooManyRequestsError:
                    self._refused_by_pdb(e.pod, gang, now)
                    raise
            self._fault("victims-stamped")
            # 2. Cooldown state, before acting: a job is never scaled without its stamp.
            for j in jobs:
                n = sum(1 for e in evictions if e.job == j)
                ours = {keys.LAST_SCALE_TIME: stamp, keys.LAST_SCALE_DIRECTION: keys.Direction.DOWN.value,
                        keys.LAST_DECISION: down_decision(stamp, n, gang)}
                self._stamp(j, ours)
                stamped_jobs[j] = ours
            self._fault("jobs-stamped")
        except KubeError as exc:
            why = "pdb" if isinstance(exc, TooManyRequestsError) else "conflict" if exc.status == 409 else "error"
            report.failed[gang] = f"{why}: {exc}"
            for e in evictions:
                self.metrics.eviction_failed(e.queue, why)
            log.warning("eviction plan not executed; re-planning next cycle",
                        extra={"podgroup": gang, "reason": why, "error": str(exc)})
            self._undo(gang, before, stamped_jobs, stamped_pods)
            return
        done: list[Eviction] = []
        for e in evictions:
            try:
                self._evict(e.pod, e.uid)
            except KubeError as exc:
                # Dry-run passed but the real call did not (a race): stop, keep what is done.
                if isinstance(exc, TooManyRequestsError):
                    self._refused_by_pdb(e.pod, gang, now)
                report.failed[gang] = f"error after {len(done)} eviction(s): {exc}"
                self.metrics.eviction_failed(e.queue, "race")
                log.warning("eviction failed after dry-run passed", extra={"pod": e.pod, "podgroup": gang,
                                                                          "error": str(exc)})
                rest = [x.pod for x in evictions if x not in done]
                untouched = [j for j in jobs if not any(x.job == j for x in done)]
                self._undo(gang, before, {j: stamped_jobs[j] for j in untouched}, rest)
                break
            done.append(e)
            self._evicted(e.pod, e.uid, e.job, e.queue, gang, e.reason, report, resumed=False)
            self._fault("evicted-one")
        self._scaled_down(gang, [(e.job, e.pod) for e in done])

    def _give_notice(self, gang: str, evictions: list[Eviction], now: datetime,
                     before: dict[str, dict[str, str]], report: CycleReport) -> None:
        """The victims' queues give notice: stamp their jobs' PodGroups (the cooldown starts with the
        notice), then put every victim under notice (``Notices.give``: dry-runs, then ``evict-after`` next
        to ``evicted-for``, all or none); ``Notices.act`` evicts them in a later cycle. A notice not given
        takes the PodGroup stamps back."""
        stamp = format_time(now)
        stamped_jobs: dict[str, dict[str, str]] = {}
        self._fence(f"eviction notice for {gang}")
        why = ""
        try:
            for j in sorted({e.job for e in evictions}):
                n = sum(1 for e in evictions if e.job == j)
                ours = {keys.LAST_SCALE_TIME: stamp, keys.LAST_SCALE_DIRECTION: keys.Direction.DOWN.value,
                        keys.LAST_DECISION: f"{stamp} down: eviction notice to {n} elastic worker(s) to make "
                                            f"room for {gang}"}
                self._stamp(j, ours)
                stamped_jobs[j] = ours
        except KubeError as exc:
            why = f"error: {exc}"
        if not why:
            self._fence(f"eviction notice for {gang}")
            given = self.notices.give(gang, evictions, now)
            for pod in given.refused:  # as on the immediate path: no victim for a while
                self._refused_by_pdb(pod, gang, now)
            why = given.failed
        if why:
            report.failed[gang] = why
            for e in evictions:
                self.metrics.eviction_failed(e.queue, why.partition(":")[0])
            log.warning("eviction notice not given; re-planning next cycle", extra={"podgroup": gang, "error": why})
            self._undo(gang, before, stamped_jobs, [])
            return
        report.noticed[gang] = [e.pod for e in evictions]

    def _act_on_notices(self, snapshot: Snapshot, now: datetime, report: CycleReport) -> bool:
        """Evict the victims whose notice is due, withdraw the notices no longer needed (``Notices.act``);
        True when anything was written (the caller snapshots again)."""
        review = report.notices = self.notices.review(snapshot, now)
        if self.dry_run or not (review.due or review.withdrawn):
            return False
        self._fence("act on eviction notices")
        done = self.notices.act(review)
        queues = {d.facts.pod: d.facts.queue for d in review.due}
        for pod, uid, gang in done.evicted:
            self.ledger[uid or pod] = InFlight(pod, gang, time.monotonic())
            report.evicted.append(pod)
            self.metrics.eviction(queues.get(pod, ""), "notice-ended")
        for pod in done.failed:
            if pod in queues:
                self.metrics.eviction_failed(queues[pod], "notice")
        for pod, gang in done.refused:  # a PDB refused a due eviction: remembered as on the immediate path
            self._refused_by_pdb(pod, gang, now)
        report.withdrawn.extend(done.withdrawn)
        return bool(done.evicted or done.withdrawn)

    def _evicted(self, pod: str, uid: str | None, job: str, queue: str, gang: str, reason: str,
                 report: CycleReport, *, resumed: bool) -> None:
        """Book one completed eviction: ledger, report, metric, log line and the pod's Event."""
        self.ledger[uid or pod] = InFlight(pod, gang, time.monotonic())
        (report.resumed if resumed else report.evicted).append(pod)
        self.metrics.eviction(queue, "resumed" if resumed else "starving-gang")
        log.info("evicted (resumed interrupted plan)" if resumed else "evicted",
                 extra={"pod": pod, "job": job, "queue": queue, "for": gang, "reason": reason})
        ref = evicted_pod_ref(*_split(pod), uid) if uid else self._pod_ref(pod)
        if ref is not None:
            how = " (finishing an interrupted plan)" if resumed else ""
            self.recorder.emit(ref, "Normal", "EvictedForGang",
                               f"elastic worker evicted by volcano-elastic to make room for gang {gang}{how}")

    def _scaled_down(self, gang: str, done: list[tuple[str, str]], *, resumed: bool = False) -> None:
        for j in sorted({job for job, _ in done}):
            n = sum(1 for job, _ in done if job == j)
            ref = self._job_ref(j)
            if ref is not None:
                how = " (finishing an interrupted plan)" if resumed else ""
                self.recorder.emit(ref, "Normal", "ScaledDown",
                                   f"{n} elastic worker(s) evicted to make room for gang {gang}{how}; "
                                   f"cooldown starts now")

    def _undo(self, gang: str, before: dict[str, dict[str, str]], jobs: dict[str, dict[str, str]],
              pods: Iterable[str]) -> None:
        """Take back a plan's stamps, each only if it is still the one we wrote."""
        for p in pods:
            try:
                self._unstamp_pod(p, gang)
            except KubeError as exc:
                log.warning("could not clear evicted-for", extra={"pod": p, "error": str(exc)})
        for j, ours in jobs.items():
            try:
                self._restore_pg(j, ours, before.get(j, {}))
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
                    self._stamp(job, {keys.LAST_SCALE_TIME: stamp, keys.LAST_SCALE_DIRECTION: keys.Direction.UP,
                                      keys.LAST_DECISION: f"{stamp} up: {len(items)} gate(s) lifted; "
                                                             f"{items[0].reason}"})
            except KubeError as exc:
                log.warning("scale-up not stamped; skipped", extra={"job": job, "error": str(exc)})
                continue
            self._fault("gates-stamped")
            # The Event first: a leader killed between two lifts has announced every gate it lifted.
            ref = self._job_ref(job)
            if ref is not None:
                self.recorder.emit(ref, "Normal", "ScaledUp",
                                   f"lifting the scale-up gate of {len(items)} elastic pod(s): {items[0].reason}")
            lifted = 0
            for r in items:
                try:
                    self._fence(f"lift gate of {r.pod}")
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
                self._fault("gate-lifted-one")
            if lifted < len(items) and ref is not None:
                self.recorder.emit(ref, "Warning", "ScaleUpIncomplete",
                                   f"lifted {lifted} of {len(items)} scale-up gate(s); the rest stay gated")

    def _write_decisions(self, plan: CyclePlan, report: CycleReport, now: datetime) -> None:
        if self.dry_run:
            return
        stamp = format_time(now)
        for d in plan.starving:
            if d.pod_group in report.failed:
                text = f"{stamp} waiting: plan to evict {len(d.victims)} not executed ({report.failed[d.pod_group]})"
            elif d.pod_group in report.noticed:
                text = (f"{stamp} eviction notice given to {len(report.noticed[d.pod_group])} elastic worker(s) "
                        f"for it: {d.reason}")
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
    def _resume_interrupted(self, snapshot: Snapshot, now: datetime, report: CycleReport) -> None:
        """Plans whose record (victims stamped ``evicted-for``, not terminating) outlived their agent:
        finish each when every victim passes a fresh plan's checks (``policy.resume``), else forget it
        (stamps taken back, a refused victim gets a Warning Event). Never blocks the gang it was for."""
        if self.dry_run:
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
            verdict = check_resumable(snapshot, self.cfg, now, gang, victims, own)
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
                    self.metrics.eviction_failed(pg.queue if pg else "", "refused")
                    ref = self._pod_ref(v.key)
                    if ref is not None:
                        self.recorder.emit(ref, "Warning", "EvictionRefused",
                                           f"{keys.EVICTED_FOR} names gang {gang}, but this pod may not be "
                                           f"evicted for it: {refusal}; annotation removed")
                self._forget(gang, victims, own, snapshot, now, why)
                continue
            try:
                for v in victims:
                    self._evict(v.key, v.uid, dry_run=True)
            except KubeError as exc:
                log.warning("interrupted plan dropped: a dry-run failed", extra={"podgroup": gang,
                                                                                 "error": str(exc)})
                self._forget(gang, victims, own, snapshot, now, f"dry-run failed: {exc}")
                continue
            stamp = format_time(now)
            try:
                for j in jobs:
                    n = sum(1 for v in victims if v.job_id == j)
                    if self._ours(j) and j not in own:  # this plan's own stamp stays as it was
                        self._stamp(j, {keys.LAST_SCALE_TIME: stamp,
                                        keys.LAST_SCALE_DIRECTION: keys.Direction.DOWN.value,
                                        keys.LAST_DECISION: down_decision(stamp, n, gang)})
            except KubeError as exc:
                log.warning("interrupted plan not resumed this cycle: cooldown not stamped",
                            extra={"podgroup": gang, "error": str(exc)})
                continue  # the record stays: the next cycle tries again
            done: list[tuple[str, str]] = []
            for v in victims:
                try:
                    self._evict(v.key, v.uid)
                except NotFoundError:
                    continue
                except KubeError as exc:
                    log.warning("resumed eviction failed", extra={"pod": v.key, "error": str(exc)})
                    self._unstamp_pod(v.key, gang)
                    continue
                pg = groups.get(v.group_key)
                self._evicted(v.key, v.uid, v.job_id, pg.queue if pg else "", gang,
                              "finishing an interrupted plan", report, resumed=True)
                done.append((v.job_id, v.key))
            self._scaled_down(gang, done, resumed=True)

    def _forget(self, gang: str, victims: list[PodView], own: list[str], snapshot: Snapshot,
                now: datetime, why: str) -> None:
        """Drop an interrupted plan: unstamp its victims; a job cooldown the plan stamped for
        evictions that never happened is taken back (only while it is still that stamp)."""
        for v in victims:
            try:
                self._unstamp_pod(v.key, gang)
            except KubeError as exc:
                log.warning("could not clear evicted-for", extra={"pod": v.key, "error": str(exc)})
        evicted_jobs = {p.job_id for p in snapshot.pods
                        if p.deleting and p.annotations.get(keys.EVICTED_FOR) == gang}
        for j in own:
            if j in evicted_jobs:
                continue  # part of the plan happened: that cooldown is real
            ours = self._pg_annotations(j)
            text = f"{format_time(now)} plan to evict for {gang} dropped after an interruption: {why}"
            try:
                self._restore_pg(j, {k: ours.get(k, "") for k in SCALE_KEYS}, {keys.LAST_DECISION: text[:500]})
            except KubeError as exc:
                log.warning("could not take back a cooldown stamp", extra={"job": j, "error": str(exc)})

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
                self._stamp(key, {keys.LAST_SCALE_TIME: stamp, keys.LAST_SCALE_DIRECTION: keys.Direction.DOWN,
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


def down_decision(stamp: str, n: int, gang: str) -> str:
    """The job's ``last-decision`` for a plan evicting ``n`` of its workers for ``gang`` (its ending is
    what ``policy.resume.plan_stamp_for`` recognises)."""
    return f"{stamp} down: {n} elastic worker(s) evicted to make room for {gang}"


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
