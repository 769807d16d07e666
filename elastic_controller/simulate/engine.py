"""Discrete-event simulation of Volcano + the elastic agent on a job trace.

Events: job arrival, job completion, end of an evicted worker's termination grace period, and
agent cycles. Volcano's allocation runs after every batch of simultaneous events (see
``volcano.py``); the agent cycle calls the policy core's ``plan_cycle`` on a ``Snapshot`` built
from the simulated objects, on the agent's interval grid, at the cycles where something may
change (see ``Simulator._may_act``), and applies the plan the way the agent would: with a queue's
``noticeSeconds`` > 0 its victims are put under notice instead (``policy.notices``, reviewed each
cycle as the agent does), evicted when due or withdrawn, and a job under notice checkpoints, so
its restart loses no work.
"""

from __future__ import annotations

import heapq
import math
import time
from datetime import datetime, timedelta

from ..policy import keys
from ..policy.actions import CycleDecision, Evict, GiveNotice, ShrinkInPlace
from ..policy.admission import gang_workers
from ..policy.cycle import decide
from ..policy.decisions import Eviction
from ..policy.keys import Role
from ..policy.model import NodeView, QueueView
from ..policy.notices import NoticeReview
from ..policy.roles import plan_role
from ..policy.settings import ElasticConfig
from .cluster import ClusterSpec
from .gang import GangActions
from .nodes import NodeTable
from .restarts import advance, checkpoint_now, lose_since_checkpoint
from .simtypes import EPOCH as EPOCH
from .simtypes import JobResult as JobResult
from .simtypes import Planner as Planner
from .simtypes import Progress as Progress
from .simtypes import SimNotice
from .simtypes import SimResult as SimResult
from .simtypes import SimSettings as SimSettings
from .simtypes import SimulationError as SimulationError
from .simtypes import batched_config as batched_config
from .simtypes import default_planner as default_planner
from .state import SimJob, SimPod
from .trace import JobSpec
from .views import SnapshotViews
from .volcano import Allocator

POLICIES = ("elastic", "volcano-gang", "static-max", "static-min")
NAMESPACE = "sim"

_ARRIVAL, _GRACE_END, _COMPLETE = 0, 1, 2




class Simulator(SnapshotViews):
    def __init__(self, jobs: list[JobSpec], cluster: ClusterSpec, cfg: ElasticConfig, policy: str,
                 settings: SimSettings | None = None, planner: Planner | None = None,
                 progress: Progress | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}")
        self.specs = jobs
        self.cluster = cluster
        self.cfg = cfg
        self.policy = policy
        self.settings = settings or SimSettings()
        self.planner = planner
        self.progress = progress
        self.gate = cfg.gating.gateName
        self.interval = float(self.settings.cycle_seconds or cfg.agent.intervalSeconds)
        self.plan_cfg = batched_config(cfg, self.interval)
        self.nodes = NodeTable(cluster)
        self.alloc = Allocator(self, cluster)
        self.gang_actions: GangActions | None = GangActions(self) if policy == "volcano-gang" else None
        self.alloc.after_allocate = self.gang_actions.run if self.gang_actions is not None else None
        self.now = 0.0
        self.events: list[tuple[float, int, int, object, int]] = []
        self.seq = 0
        self.ticks: list[float] = []
        self.tick_set: set[float] = set()
        self.last_tick = -math.inf
        self.jobs: list[SimJob] = []
        self.active: dict[int, SimJob] = {}
        self.pods_by_key: dict[str, SimPod] = {}
        self.uid_seq = 0
        self.finished = 0
        # accounting
        self.allocated_gpus = 0
        self.terminating_gpus = 0
        self.area = 0.0
        self.area_from = 0.0
        self.busy_area = 0.0  # see SimResult.gpu_seconds_busy
        self.last_submit = max((s.submit for s in jobs), default=0.0)
        self.area_while_arriving: float | None = None  # self.area once the last submission came
        self.timeline: list[tuple[float, int]] = []
        self.evictions = 0
        self.pod_changes = 0  # placements, evictions and frees (volcano-gang skips runs without any)
        self.restarts = 0
        self.restarts_used: dict[int, int] = {}  # job id -> restarts-used, as the agent writes it (SpendRestart)
        # Jobs whose notice stamp has not counted its restart yet: counted when its first victim is
        # evicted, never when the notice is withdrawn (issue 36, F2; policy/restart_count.py).
        self.notice_restarts: set[int] = set()
        self.cooldown_violations = 0
        self.rejected: list[str] = []
        self.bound_violations = 0
        self.count_violations = 0
        self.plan_calls = 0
        self.plan_seconds = 0.0
        self.cycles_skipped = 0
        self.grown: dict[int, SimJob] = {}  # started jobs with running elastic workers
        self.gated: dict[int, SimJob] = {}  # started jobs with gated pods
        # eviction notices (elastic): victims under notice by pod uid, the deadlines given (the agent's
        # ``Notices.given``), when a job under notice records its checkpoint (job id -> time), counts
        self.noticed: dict[str, SimNotice] = {}
        self.notice_given: dict[str, datetime] = {}
        self.notice_checkpoints: dict[int, float] = {}
        self.notices = 0
        self.notices_ended_by_checkpoint = 0
        self.notices_withdrawn = 0
        self.notice_gpu_seconds = 0.0
        # static views
        self.node_views = tuple(
            NodeView(name=self.nodes.names[i], allocatable={
                keys.GPU: self.nodes.gpus[i], "cpu": self.nodes.cpu[i], "memory": self.nodes.memory[i],
                "pods": self.nodes.pods[i]})
            for i in range(len(self.nodes)))
        self.queue_views = tuple(QueueView(name=q.name, weight=q.weight, reclaimable=q.reclaimable,
                                           deserved=q.deserved, guarantee=q.guarantee, capability=q.capability,
                                           parent=q.parent or "root") for q in cluster.queues)
        self.priority_classes = {f"p{s.priority}": s.priority for s in jobs if s.priority}
        for i, spec in enumerate(jobs):
            self._push(spec.submit, _ARRIVAL, i, 0)

    # --- time ------------------------------------------------------------------------------------

    def dt(self, t: float) -> datetime:
        return self.settings.start + timedelta(seconds=t)

    def _push(self, t: float, kind: int, obj: object, version: int) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, kind, self.seq, obj, version))

    def request_tick(self, t: float) -> None:
        if self.policy != "elastic" and not (self.policy == "volcano-gang" and self.settings.pod_cooldown):
            return
        grid = math.ceil(t / self.interval - 1e-9) * self.interval
        if grid <= self.last_tick:
            grid = self.last_tick + self.interval
        if grid not in self.tick_set:
            self.tick_set.add(grid)
            heapq.heappush(self.ticks, grid)

    def _advance(self, t: float) -> None:
        if t > self.area_from:
            self.area += self.allocated_gpus * (t - self.area_from)
            self.area_from = t
        self.now = t

    # --- main loop -------------------------------------------------------------------------------

    def run(self) -> SimResult:
        if self.policy == "elastic" and self.planner is None:
            self.planner = default_planner()
        wall = time.perf_counter()
        total = len(self.specs)
        next_report = 0.0
        work = sum(s.work for s in self.specs)
        horizon = (max((s.submit for s in self.specs), default=0.0) + 100 * work / self.cluster.total_gpus
                   + 30 * 86400.0)
        while (self.events or (self.ticks and self.active)) and (self.finished < total or self.active):
            t_ev = self.events[0][0] if self.events else math.inf
            t_tick = self.ticks[0] if self.ticks else math.inf
            now = min(t_ev, t_tick)
            if now > horizon:
                break  # a planner that never lets jobs finish: report what finished
            self._advance(now)
            if self.area_while_arriving is None and now >= self.last_submit:
                self.area_while_arriving = self.area
            while self.events and self.events[0][0] == now:
                _, kind, _, obj, version = heapq.heappop(self.events)
                if kind == _ARRIVAL:
                    assert isinstance(obj, int)
                    self._arrive(self.specs[obj])
                elif kind == _COMPLETE:
                    assert isinstance(obj, SimJob)
                    if obj.version == version and not obj.done:
                        self._complete(obj)
                else:
                    assert isinstance(obj, SimPod)
                    self._grace_end(obj)
            self.alloc.schedule(now)
            if self.ticks and self.ticks[0] == now:
                heapq.heappop(self.ticks)
                self.tick_set.discard(now)
                self.last_tick = now
                self._agent_cycle(now)
                if self.settings.every_cycle and self.active:
                    self.request_tick(now + self.interval)
            if self.settings.timeline and (not self.timeline or self.timeline[-1][1] != self.allocated_gpus):
                self.timeline.append((now, self.allocated_gpus))
            if self.progress is not None and time.perf_counter() >= next_report:
                self.progress(self.finished, total)
                next_report = time.perf_counter() + 0.2
        if self.progress is not None:
            self.progress(self.finished, total)
        return self._result(time.perf_counter() - wall)

    # --- jobs ------------------------------------------------------------------------------------

    def _arrive(self, spec: JobSpec) -> None:
        if self.policy == "static-max":
            replicas, lo, hi = spec.max_workers, spec.max_workers, spec.max_workers
        elif self.policy == "static-min":
            replicas, lo, hi = spec.min_workers, spec.min_workers, spec.min_workers
        else:  # elastic: a small job may be admitted whole (the queue's wholeGangUpTo)
            lo = (gang_workers(spec.min_workers, spec.max_workers, self.cfg.queue_policy(spec.queue).wholeGangUpTo)
                  if self.policy == "elastic" else spec.min_workers)
            replicas, hi = spec.max_workers, spec.max_workers
        # Each job its own tenant (namespace): minWorkersToShrink counts a tenant's workers in the
        # queue (issue 36, T14), and a simulated workload says nothing of who submitted what.
        job = SimJob(len(self.jobs), spec, f"{NAMESPACE}-{spec.name}", replicas, lo, hi)
        job.in_place = self.policy == "elastic" and self.settings.restart_cost.resizes_in_place(job.id)
        self.jobs.append(job)
        self.active[job.id] = job
        for index in range(replicas):
            self._new_pod(job, index)
        self.alloc.job_arrived(job)
        self.request_tick(self.now)
        self.request_tick(self.now + self.cfg.queue_policy(job.queue).starvationSeconds)

    def _new_pod(self, job: SimJob, index: int) -> SimPod:
        labels = {keys.REPLICA_TYPE_LABEL: "worker", keys.REPLICA_INDEX_LABEL: str(index)}
        if index == 0:
            labels[keys.JOB_ROLE_LABEL] = "master"
        role = plan_role(labels, job.bounds).role
        gated = role is Role.ELASTIC and self.cfg.gating.enabled and self.policy == "elastic"
        self.uid_seq += 1
        pod = SimPod(job, index, role, gated, self.now, f"uid-{self.uid_seq:08d}")
        if index < len(job.pods):
            job.pods[index] = pod
        else:
            job.pods.append(pod)
        job.views = None
        self.pods_by_key[pod.key] = pod
        return pod

    def workers_changed(self, job: SimJob, now: float) -> None:
        """Placements or evictions changed the job's workers: settle its progress, restart it."""
        running = sum(1 for p in job.pods if p.node >= 0 and not p.deleting)
        if not job.started:
            return
        self._settle(job, now)
        # a job's first start, also with its pods placed later in the same scheduling pass
        # (volcano-gang's surplus pods: Volcano binds them in the session that binds the gang)
        first = (job.running == 0 and not job.whole_evicted) or job.id in self.alloc.started_now
        before = job.running
        # workers added within the last call of the job's first rendezvous join it: no restart
        joins_first = (not first and running > before and job.evictions == 0 and job.restarts == 0
                       and now - job.started_at < self.settings.rendezvous_last_call)
        if job.done:
            job.running = running
            return
        # issue 39: a job resized in place goes on through our agent's planned events (no restart, no
        # loss); another policy's events (Volcano's preemptions) are unplanned for it: a restart
        in_place = job.in_place
        if not first and not joins_first and job.running > 0 and not in_place:
            # the workers that ran restart from the last checkpoint
            self.busy_area -= lose_since_checkpoint(job, self.settings.checkpoint_interval)
        job.running = running
        if running == 0:
            # every worker evicted (volcano-gang's whole bundles): the job waits as a gang again
            job.rate = 0.0
            job.busy_gpus = 0
            job.whole_evicted = True
            job.version += 1
            if job.last_restart != now:
                job.restarts += 1
                self.restarts += 1
                job.last_restart = now
            self.grown.pop(job.id, None)
            self.alloc.job_requeued(job)
            return
        if running < job.bounds_min or running > job.bounds_max:
            self.bound_violations += 1
        job.min_seen = min(job.min_seen, running)
        job.max_seen = max(job.max_seen, running)
        counts = job.spec.worker_counts
        if counts and running not in counts:
            self.count_violations += 1  # it runs at a count its training cannot use
        g = job.spec.gpus
        job.rate = running * g * self.settings.curve.efficiency(running)
        job.busy_gpus = running * g
        if first:
            job.resume_at = now
        elif joins_first:
            pass  # they join the first rendezvous, which waits its last call for more workers
        else:
            cost = self.settings.restart_cost
            stall = cost.in_place if in_place else cost.seconds(running < before, running, job.bounds_max)
            resume = max(now + stall, job.resume_at)
            job.restart_seconds += resume - max(now, job.resume_at)
            job.resume_at = resume
            if in_place:
                pass  # the processes went on: no restart
            elif job.whole_evicted:
                job.whole_evicted = False  # counted when it was evicted
            elif job.last_restart != now:
                job.restarts += 1
                self.restarts += 1
                job.last_restart = now
        if running > job.bounds_min:
            self.grown[job.id] = job
            for p in job.pods:
                if p.role is Role.ELASTIC and p.node >= 0 and not p.deleting and p.placed_at == now:
                    self.request_tick(now + self.cfg.queue_policy(job.queue).minRuntimeSeconds)
        else:
            self.grown.pop(job.id, None)
        if any(p.gated for p in job.pods):
            self.gated[job.id] = job
        else:
            self.gated.pop(job.id, None)
        job.version += 1
        self._push(job.resume_at + job.work_left / job.rate, _COMPLETE, job, job.version)

    def _settle(self, job: SimJob, now: float) -> None:
        if job.rate > 0 and now > job.resume_at:
            delta = min(job.work_left, job.rate * (now - job.resume_at))
            self.busy_area += job.busy_gpus * delta / job.rate  # the GPUs' time that did this work
            job.work_left -= delta
            job.work_done += delta
            advance(job, delta / job.rate, self.settings.checkpoint_interval)
            job.resume_at = now

    def _complete(self, job: SimJob) -> None:
        now = self.now
        self._settle(job, now)
        job.work_done += job.work_left
        job.work_left = 0.0
        job.done = True
        job.finished_at = now
        job.rate = 0.0
        self.finished += 1
        self.grown.pop(job.id, None)
        self.gated.pop(job.id, None)
        for pod in job.pods:
            if pod.deleting:
                continue
            if pod.uid in self.noticed:
                self._end_notice(pod, now)
            if pod.node >= 0:
                self.free_pod(pod)
            else:
                self.alloc.pod_gone(pod)
            self.pods_by_key.pop(pod.key, None)
        job.pods = [p for p in job.pods if p.deleting]
        job.views = None
        if not job.pods:
            self.active.pop(job.id, None)
        self.alloc.job_finished(job)
        self.request_tick(now)

    def _grace_end(self, pod: SimPod) -> None:
        job = pod.job
        self.terminating_gpus -= job.spec.gpus
        self.free_pod(pod)
        self.pods_by_key.pop(pod.key, None)
        if job.done:
            job.pods.remove(pod)
            job.views = None
            if not job.pods:
                self.active.pop(job.id, None)
        else:
            new = self._new_pod(job, pod.index)  # the operator recreates it; the webhook gates it
            self.alloc.pod_created(new)
            if new.gated:
                self.gated[job.id] = job
        self.request_tick(self.now)

    # --- resources -------------------------------------------------------------------------------

    def place_pod(self, pod: SimPod, node: int) -> None:
        job = pod.job
        self.nodes.take(node, job.spec.gpus, job.requests["cpu"], job.requests["memory"])
        pod.node = node
        pod.placed_at = self.now
        pod.view = None
        self.allocated_gpus += job.spec.gpus
        self.pod_changes += 1

    def free_pod(self, pod: SimPod) -> None:
        job = pod.job
        if pod.node < 0:
            return
        self.nodes.give(pod.node, job.spec.gpus, job.requests["cpu"], job.requests["memory"])
        self.pod_changes += 1
        job.held_gpu_seconds += job.spec.gpus * (self.now - pod.placed_at)
        job.pg_view = None  # its attained-service stamp counted this pod as placed
        self.allocated_gpus -= job.spec.gpus
        if not pod.deleting:
            self.alloc.pod_released(pod)
        pod.node = -1
        pod.view = None
        self.alloc.capacity_freed()

    def evict(self, pod: SimPod, now: float, for_gang: str) -> None:
        """Volcano evicts ``pod`` (volcano-gang): it terminates for the grace period, then the
        operator recreates it. The caller settles its job (``workers_changed``)."""
        pod.deleting = True
        self.terminating_gpus += pod.job.spec.gpus
        pod.evicted_for = for_gang
        pod.view = None
        pod.job.evictions += 1
        self.evictions += 1
        self.pod_changes += 1
        self.alloc.pod_released(pod)
        self._push(now + self.settings.grace_period, _GRACE_END, pod, 0)

    # --- the agent -------------------------------------------------------------------------------

    def _agent_cycle(self, now: float) -> None:
        if self.gang_actions is not None:  # a pod's cooldown ended: Volcano's next session
            self.alloc.dirty = True
            self.alloc.schedule(now)
            return
        self._wake_at_checkpoints(now)
        if self.settings.prefilter and not self.noticed and not self._may_act(now):
            self.cycles_skipped += 1
            return
        assert self.planner is not None
        snapshot = self.snapshot()
        # The agent's cycle (Agent.run_cycle): review the notices, evict the due victims and withdraw
        # the notices no longer needed, then plan with the victims under notice in flight for their gang.
        review = NoticeReview()
        noticed = False
        if self.noticed:
            review = decide(snapshot, self.cfg, self.dt(now), given=self.notice_given, notices_only=True).notices
            noticed = self._act_on_notices(review, now)
            if noticed:
                snapshot = self.snapshot()
        started = time.perf_counter()
        decision = decide(snapshot, self.cfg, self.dt(now), plan_cfg=self.plan_cfg, planner=self.planner,
                          reviewed=review)
        self.plan_seconds += time.perf_counter() - started
        self.plan_calls += 1
        acted = self._apply(decision, now) or noticed
        if acted:
            self.alloc.schedule(now)
            self.request_tick(now + self.interval)
        if self.noticed:  # the next cycle reviews them (a gang placed otherwise, a checkpoint)
            self.request_tick(now + self.interval)

    def _wake_at_checkpoints(self, now: float) -> None:
        """The real agent plans every ``agent.intervalSeconds``; the simulator only at the times
        something could change its plan. A job with gated workers that publishes its checkpoints
        may grow only within its queue's ``scaleUpAfterCheckpointSeconds`` of its last one, so its
        next checkpoint is such a time: without this cycle, a window with no other event in it went
        by unseen, and the simulated agent grew jobs less often than the real one."""
        interval = self.settings.checkpoint_interval
        if not self.settings.publish_checkpoints or interval <= 0:
            return
        for job in self.gated.values():
            if job.rate <= 0 or job.done or self.cfg.queue_policy(job.queue).checkpoint_window(job.in_place) is None:
                continue
            start = max(now, job.resume_at)  # progress resumes after a restart's penalty
            done = job.since_checkpoint + max(0.0, now - job.resume_at)
            self.request_tick(start + interval - math.fmod(done, interval))

    def _in_cooldown(self, job: SimJob, now: float) -> bool:
        cooldown = self.cfg.queue_policy(job.queue).cooldown_seconds(job.in_place)
        return job.last_scale >= 0 and now - job.last_scale < cooldown

    def _may_act(self, now: float) -> bool:
        """False only when ``plan_cycle`` can neither evict nor lift a gate (a necessary condition).

        An eviction needs a starving gang and a running elastic worker out of its minimum runtime
        in a job that may be scaled; a gate release needs a gated pod of a running job out of
        cooldown and a node with enough free GPUs for it.
        """
        starving: list[SimJob] = []
        for job in self.alloc.waiting_gangs():
            pol = self.cfg.queue_policy(job.queue)
            since = min((p.unschedulable_since if p.unschedulable_since >= 0 else p.created
                         for p in job.pods if p.node < 0 and not p.gated), default=-1.0)
            if since >= 0 and now - since >= pol.starvationSeconds:
                starving.append(job)
        if starving:
            # GPUs that evictions could free: elastic workers old enough, of jobs that may scale.
            # (Their GPUs plus every GPU free or terminating bound what any plan can make room for:
            # enough for the smallest starving gang answers.)
            need = (min(job.min_member * job.spec.gpus for job in starving)
                    - self.nodes.free_gpus - self.terminating_gpus)
            evictable = 0
            for job in self.grown.values():
                pol = self.cfg.queue_policy(job.queue)
                if self._in_cooldown(job, now) and not pol.preemptDuringCooldown:
                    continue
                old = sum(1 for p in job.pods if p.role is Role.ELASTIC and p.node >= 0 and not p.deleting
                          and now - p.placed_at >= pol.minRuntimeSeconds)
                evictable += min(old, job.running - job.bounds_min) * job.spec.gpus
                if evictable and evictable >= need:
                    return True
        largest = self.nodes.largest_free()
        for job in self.gated.values():
            if job.spec.gpus <= largest and not self._in_cooldown(job, now):
                return True
        return self._may_take_for_fairness(now)

    def _may_take_for_fairness(self, now: float) -> bool:
        """The fairness scale-down (policy.fairness) may act: a queue with it on has a job with gated
        workers out of cooldown and another job above its min and minWorkersToShrink, out of cooldown."""
        waiting = {job.queue for job in self.gated.values() if job.running >= job.bounds_min
                   and self.cfg.queue_policy(job.queue).fairnessScaleDown and not self._in_cooldown(job, now)}
        return any(job.queue in waiting
                   and job.running >= self.cfg.queue_policy(job.queue).min_workers_to_shrink(job.in_place)
                   and not self._in_cooldown(job, now) and any(g.id != job.id and g.queue == job.queue
                                                                for g in self.gated.values())
                   for job in self.grown.values())

    def _apply(self, decision: CycleDecision, now: float) -> bool:
        plan = decision.plan
        scaled: dict[int, str] = {}
        victims: list[SimPod] = []
        # A gang's victims are evicted now (Evict, with the restart each shrunk job spends:
        # SpendRestart) or put under notice (GiveNotice, with each deadline; its restart is counted
        # once a victim leaves, _act_on_notices): decided by policy.cycle.decide.
        shrinks: list[tuple[Eviction, datetime | None, int | None]] = []
        for action in decision.actions:
            if isinstance(action, GiveNotice):
                shrinks += [(n.victim, n.evict_after, None) for n in action.victims]
            elif isinstance(action, Evict):
                used = {r.job: r.used for r in action.restarts}
                shrinks += [(ev, None, used.get(ev.job)) for ev in action.victims]
            elif isinstance(action, ShrinkInPlace):  # they leave the group at once, then are evicted: no restart
                shrinks += [(n.victim, None, None) for n in action.victims]
        for ev, deadline, restarts_used in shrinks:
            pod = self.pods_by_key.get(ev.pod)
            if pod is None or pod.node < 0 or pod.deleting or pod.uid in self.noticed:
                self.rejected.append(f"{now:g}s: evict {ev.pod}: not a running pod (or already under notice)")
                continue
            if pod.role is not Role.ELASTIC:
                self.rejected.append(f"{now:g}s: evict {ev.pod}: role {pod.role.value} is never evicted")
                continue
            if restarts_used is not None:
                self.restarts_used[pod.job.id] = restarts_used
            if deadline is not None:
                self._give_notice(pod, ev.for_gang, now, deadline)
                self.notice_restarts.add(pod.job.id)  # the notice's stamp: a restart once a victim leaves
                scaled[pod.job.id] = keys.Direction.DOWN.value  # the cooldown starts with the notice
                continue
            victims.append(pod)
            pod.deleting = True
            self.terminating_gpus += pod.job.spec.gpus
            pod.evicted_for = ev.for_gang
            pod.view = None
            pod.job.evictions += 1
            self.evictions += 1
            self.alloc.pod_released(pod)
            self._push(now + self.settings.grace_period, _GRACE_END, pod, 0)
            scaled[pod.job.id] = keys.Direction.DOWN.value
        released: list[SimPod] = []
        for rel in plan.gate_releases:
            pod = self.pods_by_key.get(rel.pod)
            if pod is None or not pod.gated or not pod.job.started or pod.job.done:
                self.rejected.append(f"{now:g}s: release {rel.pod}: not a gated pod of a running job")
                continue
            pod.gated = False
            pod.pin = self.nodes.index.get(rel.node, -1)
            pod.view = None
            released.append(pod)
            scaled.setdefault(pod.job.id, keys.Direction.UP.value)
        for job_id, direction in scaled.items():
            job = self.jobs[job_id]
            if self._in_cooldown(job, now):
                pol = self.cfg.queue_policy(job.queue)
                if not (direction == "down" and pol.preemptDuringCooldown):
                    self.cooldown_violations += 1
            job.last_scale = float(math.floor(now))
            job.last_scale_direction = direction
            job.scale_events.append((now, direction))
            job.pg_view = None
            pol = self.cfg.queue_policy(job.queue)
            cooldown = pol.cooldown_seconds(job.in_place)
            self.request_tick(now + cooldown)
            if direction == keys.Direction.DOWN.value and pol.snooze_seconds(job.in_place) != cooldown:
                self.request_tick(now + pol.snooze_seconds(job.in_place))  # it may grow again then
        for pod in victims:
            self.workers_changed(pod.job, now)
        for pod in released:
            self.alloc.pod_ungated(pod)
            if not any(p.gated for p in pod.job.pods):
                self.gated.pop(pod.job.id, None)
        return bool(scaled)

    # --- eviction notices ------------------------------------------------------------------------

    def _give_notice(self, pod: SimPod, gang: str, now: float, deadline: datetime) -> None:
        """``Notices.give``: ``evict-after`` (the action's deadline) next to ``evicted-for``."""
        until = (deadline - self.settings.start).total_seconds()
        self.noticed[pod.uid] = SimNotice(pod, gang, now, until, deadline)
        self.notice_given[pod.uid] = deadline
        pod.evicted_for = gang
        pod.view = None
        self.notices += 1
        self.request_tick(until)
        after = self.settings.notice_checkpoint
        if after >= 0 and now + after < until:
            job = pod.job
            self.notice_checkpoints[job.id] = min(self.notice_checkpoints.get(job.id, math.inf), now + after)
            job.pg_view = None
            self.request_tick(now + after)

    def _end_notice(self, pod: SimPod, now: float) -> SimNotice:
        notice = self.noticed.pop(pod.uid)
        self.notice_given.pop(pod.uid, None)
        self.notice_gpu_seconds += pod.job.spec.gpus * (now - notice.since)
        job = pod.job
        if job.id in self.notice_checkpoints and not any(p.uid in self.noticed for p in job.pods):
            del self.notice_checkpoints[job.id]
            job.pg_view = None
        return notice

    def _act_on_notices(self, review: NoticeReview, now: float) -> bool:
        """``Notices.act``: withdraw the notices no longer needed, evict the due victims. A job whose
        victims leave at the end of their notice has checkpointed: its restart loses no work."""
        acted = False
        for w in review.withdrawn:
            notice = self.noticed.get(w.facts.uid)
            if notice is None:
                continue
            pod = notice.pod
            self._end_notice(pod, now)
            pod.evicted_for = ""
            pod.view = None
            self.notices_withdrawn += 1
            if not any(p.uid in self.noticed for p in pod.job.pods):
                self.notice_restarts.discard(pod.job.id)  # withdrawn before any victim left: no restart
            acted = True
        jobs: dict[int, SimJob] = {}
        for d in review.due:
            notice = self.noticed.get(d.facts.uid)
            if notice is None:
                continue
            pod = notice.pod
            self._end_notice(pod, now)
            if pod.node < 0 or pod.deleting:
                continue
            if now < notice.until:
                self.notices_ended_by_checkpoint += 1
            self.evict(pod, now, notice.gang)
            if pod.job.id in self.notice_restarts:  # the notice's restart happened: counted once
                self.notice_restarts.discard(pod.job.id)
                self.restarts_used[pod.job.id] = self.restarts_used.get(pod.job.id, 0) + 1
                pod.job.pg_view = None
            jobs[pod.job.id] = pod.job
            acted = True
        for job in jobs.values():
            self._settle(job, now)
            checkpoint_now(job)
            self.workers_changed(job, now)
        return acted

    # --- snapshot --------------------------------------------------------------------------------


    # --- results ---------------------------------------------------------------------------------

    def _result(self, wall: float) -> SimResult:
        jobs = tuple(
            JobResult(
                name=j.spec.name, queue=j.spec.queue, submit=j.spec.submit, start=j.started_at,
                finish=j.finished_at, restarts=j.restarts, evictions=j.evictions,
                min_workers=j.bounds_min, max_workers=j.bounds_max,
                min_seen=j.min_seen if j.started else 0, max_seen=j.max_seen, work=j.spec.work,
                work_done=j.work_done, held_gpu_seconds=j.held_gpu_seconds,
                scale_events=tuple(j.scale_events), trace_min=j.spec.min_workers,
                trace_max=j.spec.max_workers, lost_work=j.lost_work, restart_seconds=j.restart_seconds)
            for j in self.jobs)
        first = min((j.submit for j in jobs), default=0.0)
        last = max((j.finish for j in jobs), default=0.0)
        return SimResult(
            policy=self.policy, jobs=jobs, total_gpus=self.cluster.total_gpus, span=(first, last),
            gpu_seconds_allocated=self.area, timeline=tuple(self.timeline), evictions=self.evictions,
            restarts=self.restarts, cooldown_violations=self.cooldown_violations,
            rejected_decisions=tuple(self.rejected), bound_violations=self.bound_violations,
            plan_calls=self.plan_calls, plan_seconds=self.plan_seconds,
            cycles_skipped=self.cycles_skipped, wall_seconds=wall, gpu_seconds_busy=self.busy_area,
            gpu_seconds_while_arriving=self.area_while_arriving if self.area_while_arriving is not None else self.area,
            last_submit=self.last_submit, notices=self.notices,
            notices_ended_by_checkpoint=self.notices_ended_by_checkpoint, notices_withdrawn=self.notices_withdrawn,
            notice_gpu_seconds=self.notice_gpu_seconds, count_violations=self.count_violations)


def simulate(jobs: list[JobSpec], cluster: ClusterSpec, cfg: ElasticConfig, policy: str,
             settings: SimSettings | None = None, planner: Planner | None = None,
             progress: Progress | None = None) -> SimResult:
    return Simulator(jobs, cluster, cfg, policy, settings, planner, progress).run()
