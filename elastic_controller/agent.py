"""The preemption agent: snapshot of the caches -> ``policy.cycle.decide`` -> execution (``execute``).

This module is the loop: it keeps the parsed snapshot (``ViewCache``, the ledger of evictions the
caches have not shown yet), decides when a cycle may act (caches fresh), asks the policy core for a
plan and hands it to the executor. The writes live in ``elastic_controller.execute``: ``stamps``
(repairs, Volcano's preemptions), ``resume`` (plans interrupted by a crash, finished or forgotten),
``notices`` (eviction notices due or withdrawn), then ``plan`` (each gang's evictions, the scale-up
gates, the ``last-decision`` notes), every write fenced by the Lease check (``Executor.fence``: a
leader that was paused past its Lease stops before its next write). docs/failure-model.md.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .execute.attained import AttainedStamps
from .execute.executor import LEDGER_TTL, AgentMetrics, CycleReport, Executor, NoMetrics, NotLeaderError, log
from .execute.executor import PDB_REFUSAL_SECONDS as PDB_REFUSAL_SECONDS
from .execute.executor import InjectedFault as InjectedFault  # re-exported: tests and docs name them here
from .execute.gauges import cycle_state
from .execute.notices import act_on_notices
from .execute.plan import execute_decision
from .execute.resume import check_records, resume_interrupted
from .execute.stamps import Preemptions, check_job_copies, repair_stamps
from .execute.writers import WRITERS
from .kube.api import KubeAPI
from .kube.caches import Store
from .kube.clock import SKEW_WARN_SECONDS, ServerClock
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
from .policy.cycle import PlanCache, decide
from .policy.decisions import CyclePlan
from .policy.model import JobView, NodeView, PodGroupView, PodView, QueueView, Snapshot
from .policy.parse import (
    ParseError,
    parse_job,
    parse_node,
    parse_pod,
    parse_podgroup,
    parse_queue,
)
from .policy.settings import ElasticConfig


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


# A starving gang that waits with this in its reason fits now: only a scheduler is missing.
SCHEDULER_WAIT = "waiting for the scheduler"
# Gangs that fit while no pod is placed for this long: the scheduler alarm (metric, Event, status).
SCHEDULER_IDLE_SECONDS = 120.0


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
                 may_write: Callable[[], bool] | None = None, faults: dict[str, str] | None = None,
                 identity: str = "", server_clock: ServerClock | None = None,
                 self_ref: dict[str, Any] | None = None, writers: int = WRITERS) -> None:
        self.store = store
        self.cfg = cfg
        # Ages, windows and stamps against the API server's clock (kube/clock.py) when it is known.
        self.server_clock = server_clock
        self.clock = clock or (server_clock.now if server_clock is not None else (lambda: datetime.now(UTC)))
        self.self_ref = self_ref  # the object this agent's own alarms are told on (its Lease)
        self._skew_warned = False
        self._bound: set[str] = set()  # uids of the pods seen bound to a node (for the scheduler alarm)
        self._last_placed: datetime | None = None  # when a pod was last seen newly bound
        self._idle_warned = False
        self.dry_run = cfg.agent.dryRun if dry_run is None else dry_run
        self.min_gap = min_gap
        self.notices = Notices(api, store, cfg, recorder, clock=self.clock)
        # Every write, fenced by ``may_write`` (the Lease), and the books the writes keep.
        self.executor = Executor(api, store, cfg, recorder, metrics=metrics or NoMetrics(), notices=self.notices,
                                 dry_run=self.dry_run, may_write=may_write, faults=faults, identity=identity,
                                 writers=writers)
        self.notices.fault = self.executor.fault  # the notice path's fault points (FAULT_STEPS)
        self.views = ViewCache()
        self._was_stale = False
        # Objects the planner cannot use (or uses only in part), by (kind, ns/name): the reason last
        # reported. Each is said once at WARNING per object and reason, counted, shown by `status`.
        self.skipped: dict[tuple[str, str], str] = {}
        self.last_report: CycleReport | None = None
        self.heartbeat = time.monotonic()
        self._wake = threading.Event()
        self.preemptions = Preemptions()  # Volcano's own preemptions, noted from the watch events
        self.plan_cache = PlanCache()  # node base and pod index, kept from one cycle to the next
        self.attained = AttainedStamps()  # the placed pods of the last cycle (attained-service stamps)
        self._notes: frozenset[str] = frozenset()  # the last cycle's plan notes (logged when new)

    # The executor's settings, as the agent's (tests and the process set them after construction).
    @property
    def metrics(self) -> AgentMetrics:
        return self.executor.metrics

    @metrics.setter
    def metrics(self, value: AgentMetrics) -> None:
        self.executor.metrics = value

    @property
    def may_write(self) -> Callable[[], bool]:
        return self.executor.may_write

    @may_write.setter
    def may_write(self, value: Callable[[], bool]) -> None:
        self.executor.may_write = value

    @property
    def faults(self) -> dict[str, str]:
        return self.executor.faults

    @faults.setter
    def faults(self, value: dict[str, str]) -> None:
        self.executor.faults = value

    @property
    def pdb_refused(self) -> dict[str, datetime]:
        return self.executor.pdb_refused

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
            entry = self.executor.ledger.get(pod.uid)
            if entry is not None:
                seen.add(pod.uid)
                if pod.deleting or pod.terminal or now - entry.since > LEDGER_TTL:
                    del self.executor.ledger[pod.uid]  # the cache caught up (or we gave up waiting)
                else:
                    ann = dict(pod.annotations)
                    ann[keys.EVICTED_FOR] = entry.gang
                    pod = dataclasses.replace(pod, deleting=True, annotations=ann)
            out.append(pod)
        for uid in [u for u in self.executor.ledger if u not in seen]:
            del self.executor.ledger[uid]  # gone from the cache: its eviction is complete
        return out

    # ------------------------------------------------------------------ the cycle
    def run_cycle(self) -> CycleReport:
        started = time.perf_counter()
        now = self.clock()
        report = CycleReport(CyclePlan((), (), (), (), ()), dry_run=self.dry_run)
        report.clock_skew = self._check_clock()
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
        t_snap = time.perf_counter()
        phases = {"snapshot": t_snap - started}  # where the cycle's time went (its log line)
        ex = self.executor
        try:
            repaired = repair_stamps(ex, snapshot, now) if not self.dry_run else 0
            repaired += len(check_job_copies(ex, snapshot)) if not self.dry_run else 0
            report.preemptions = self.preemptions.count(ex, snapshot, now)
            resume_interrupted(ex, snapshot, now, report)
            t_notices = time.perf_counter()
            phases["repair"] = t_notices - t_snap  # (stamps, copies, preemptions, an interrupted plan)
            # The cycle's decision (policy.cycle.decide), in two steps: the notices first (a due
            # victim evicted, a notice withdrawn), then the rest on what is left.
            notices = decide(snapshot, self.cfg, now, given=ex.notices.given, notices_only=True)
            acted = act_on_notices(ex, snapshot, notices, now, report)
            if acted:
                snapshot = self.snapshot()  # (a withdrawn notice's stamp is judged on what is left)
            t_records = time.perf_counter()
            phases["notices"] = t_records - t_notices
            settled = check_records(ex, snapshot, now, report)
            if report.resumed or report.preemptions or report.refused or repaired or acted or settled:
                snapshot = self.snapshot()  # warm: only the objects we just wrote are parsed again
            t_plan = time.perf_counter()
            phases["records"] = t_plan - t_records  # (the records checked, and the warm snapshot after)
            # A victim under notice is in flight for its gang (no further victims for it, never
            # picked again); a gang waiting on one says so.
            decision = decide(snapshot, self.cfg, now, reviewed=notices.notices, cache=self.plan_cache,
                              pdb_refused=self._pdb_refused(now))
            report.plan_seconds = time.perf_counter() - t_plan
            phases["before_decide"] = t_plan - t_snap
            plan = report.plan = decision.plan
            self._log_plan(plan)
            self._publish_state(plan, report)
            t_write = time.perf_counter()
            execute_decision(ex, decision, now, report, snapshot)
            phases["write"] = time.perf_counter() - t_write
            self.attained.cycle(ex, snapshot, now)  # issue 38: pods that left are counted in the stamp
        except NotLeaderError as exc:
            report.not_leader = True
            self.metrics.write_refused("not-leader")
            log.warning("not leading: cycle stopped before a write", extra={"step": str(exc)})
        plan = report.plan
        report.scheduler_idle = self._check_scheduler(snapshot, plan, now)
        starving: dict[str, int] = {}
        for d in plan.starving:
            starving[d.queue] = starving.get(d.queue, 0) + 1
        self.metrics.starving(starving)
        report.seconds = time.perf_counter() - started
        self.metrics.cycle(report.seconds)
        # One line per cycle, after its decisions' lines: the time it decided at (``plan --now``
        # replays it on a dump: bench/scale_box.py) and what it took.
        log.info("agent cycle", extra={"now": now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                                       "seconds": round(report.seconds, 3),
                                       "decide_seconds": round(report.plan_seconds, 3),
                                       "starving": len(plan.starving), "evictions": len(plan.evictions),
                                       "gate_releases": len(plan.gate_releases), "released": len(report.released),
                                       "evicted": len(report.evicted), "not_leader": report.not_leader,
                                       **{f"{k}_seconds": round(v, 3) for k, v in phases.items()}})
        self.last_report = report
        self.heartbeat = time.monotonic()
        return report

    def _check_clock(self) -> float:
        """This process's clock minus the API server's: a metric always, a warning (log once, Event on
        our Lease) above SKEW_WARN_SECONDS. Ages are judged against the server's clock either way."""
        sc = self.server_clock
        if sc is None or not sc.known:
            return 0.0
        skew = sc.skew()
        self.metrics.alarm("clock_skew_seconds", round(skew, 3))
        if abs(skew) > SKEW_WARN_SECONDS:
            if not self._skew_warned:
                log.warning("this process's clock is off the API server's; ages and stamps use the server's",
                            extra={"skew_seconds": round(skew, 1), "threshold": SKEW_WARN_SECONDS})
                if self.self_ref is not None:
                    self.executor.recorder.emit(
                        self.self_ref, "Warning", "ClockSkew",
                        f"the clock of volcano-elastic agent {self.executor.identity} is {skew:+.0f}s off the API "
                        f"server's (more than {SKEW_WARN_SECONDS:.0f}s): ages and stamps use the server's clock; "
                        "fix the node's time sync")
            self._skew_warned = True
        elif self._skew_warned:
            log.info("clock within the threshold of the API server's again", extra={"skew_seconds": round(skew, 1)})
            self._skew_warned = False
        return skew

    def _check_scheduler(self, snapshot: Snapshot | None, plan: CyclePlan, now: datetime) -> float:
        """Seconds gangs have fit on free capacity while no pod was newly bound (0 when a pod was
        placed since, or no gang fits). Above SCHEDULER_IDLE_SECONDS: a Warning (log once, Event on
        each such gang), and always the ``scheduler_idle_seconds`` gauge."""
        if snapshot is None:
            return 0.0
        bound = {p.uid for p in snapshot.pods if p.node_name}
        if self._last_placed is None or bound - self._bound:
            self._last_placed = now
        self._bound = bound
        fits = [d for d in plan.starving if d.decision == "wait" and SCHEDULER_WAIT in d.reason]
        idle = max(0.0, (now - self._last_placed).total_seconds()) if fits else 0.0
        self.metrics.alarm("scheduler_idle_seconds", round(idle, 1))
        if idle > SCHEDULER_IDLE_SECONDS:
            if not self._idle_warned:
                log.warning("gangs fit but no scheduler has placed a pod for a while; is Volcano's scheduler running?",
                            extra={"idle_seconds": round(idle), "gangs": [d.pod_group for d in fits]})
                for d in fits:
                    ref = self.executor.job_ref(d.pod_group)
                    if ref is not None:
                        self.executor.recorder.emit(
                            ref, "Warning", "SchedulerIdle",
                            f"this gang fits on free capacity, but no pod has been placed for {idle:.0f}s: "
                            "is Volcano's scheduler running (schedulerName, its logs)?")
            self._idle_warned = True
        elif idle == 0.0:
            self._idle_warned = False
        return idle

    def _pdb_refused(self, now: datetime) -> frozenset[str]:
        """Pods a PDB refused to evict within the last PDB_REFUSAL_SECONDS (older refusals forgotten)."""
        return self.executor.recent_pdb_refusals(now)

    def _restore_pg(self, key: str, ours: dict[str, str], before: dict[str, str]) -> None:
        """``Executor.restore_pg``: the conditional take-back of a cooldown stamp."""
        self.executor.restore_pg(key, ours, before)

    def _publish_state(self, plan: CyclePlan, report: CycleReport) -> None:
        """The state gauges from the planner's view of this cycle (``execute.gauges``); the world is
        not kept past this."""
        world, self.plan_cache.world = self.plan_cache.world, None
        if world is not None:
            self.metrics.state(cycle_state(world, plan, report.notices))

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
                    extra={"note": note, "job": note.job, "reason": note.reason,
                           "dry_run": self.dry_run})
        self._notes = frozenset(plan.notes)

    # ------------------------------------------------------------------ the loop
    def on_event(self, res: Resource, kind: str, obj: dict[str, Any]) -> None:
        """Wake the loop early for changes that can start or end a wait; note Volcano's preemptions."""
        if res is PODS and kind != "ADDED" and self.preemptions.note(obj):
            self._wake.set()
        if res is PODS:
            if kind == "DELETED" or not (obj.get("spec") or {}).get("nodeName"):
                self._wake.set()
            elif self._awaiting_checkpoint(obj) or self._left_group(obj):
                # A job under notice checkpointed: its victims are due now, and the whole job is
                # stalled until they go (the kit holds the victim's rank): not one interval later.
                self._wake.set()
        elif (res in (PODGROUPS, NODES) and kind != "MODIFIED") or (
                res is PYTORCHJOBS and self._awaiting_checkpoint(obj)):  # the job's own stamp counts too
            self._wake.set()

    def _awaiting_checkpoint(self, obj: dict[str, Any]) -> bool:
        """``obj`` (a pod or a PyTorchJob) carries a checkpoint stamp while notices are out (given or
        pending at the last cycle)."""
        last = self.last_report
        if last is None or not (last.noticed or last.notices.pending):
            return False
        return keys.LAST_CHECKPOINT_TIME in ((obj.get("metadata") or {}).get("annotations") or {})

    def _left_group(self, obj: dict[str, Any]) -> bool:
        """``obj`` (a pod) says it left its job's group in place (``left``, issue 39) while victims are
        leaving in place: it is due now, and its gang waits for its room: not one interval later."""
        last = self.last_report
        if last is None or not (last.in_place or any(p.facts.in_place for p in last.notices.pending)):
            return False
        return keys.LEFT in ((obj.get("metadata") or {}).get("annotations") or {})

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
