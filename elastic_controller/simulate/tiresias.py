"""``--policy tiresias``: the best non-elastic answer, as a peer on the judge (issue 38).

Tiresias (Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep Learning", NSDI 2019)
schedules gang jobs of fixed size without knowing their durations, by **discretized two-dimensional
least-attained-service** (2D-LAS): a job's attained service is its GPUs times the time it has run;
jobs sit in priority queues by thresholds on that service (a job is demoted as its service crosses
the next threshold), FIFO within a queue (by arrival), and the scheduler runs jobs in that order,
**preempting whole jobs** that no longer rank high enough. Against starvation, a job that has waited
since it last ran for ``promote_knob`` times the time it has run (``STARVELIMIT``) is promoted back to
the highest-priority queue. Here:

- every job runs at its trace's **max** workers (no elasticity: what static-max submits), each worker
  on one node (best fit by free GPUs, as the other policies' nodes are filled), all workers or none;
- at every arrival, completion, threshold crossing or promotion, jobs are considered in priority
  order (queue, then arrival) and each is admitted while the cluster's GPUs not yet promised to a
  higher-priority job can hold it: work-conserving, a job that does not fit is skipped for lower
  ones. A running job not admitted is preempted (all its workers at once); an admitted waiting job
  is placed when its workers fit on the nodes once the preempted jobs are gone;
- a preempted job **checkpoints as it is preempted** (Tiresias saves the model on preemption): it
  loses no work, and pays the restart cost of the simulator's model (``RestartCost``, a restart at
  max) when it resumes. Queue shares (Volcano queues) play no part: Tiresias has none.

Parameters (``TiresiasParams``; ``simulate --tiresias-thresholds``, ``--tiresias-promote-knob``): the
queue thresholds (default 8 and 64 GPU-hours: three queues) and the promote knob (default 8). The
paper leaves both to the operator; the defaults are the best of a sweep on the judge's four traces
(docs/measurements.md), so that the peer is the best non-elastic answer we found, not a weak one.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field

from .cluster import ClusterSpec
from .engine import JobResult, SimResult, SimSettings
from .nodes import NodeTable
from .trace import JobSpec

NAME = "tiresias"
_TICK = 1 << 62  # an event that is no job's: a threshold crossing or a promotion is due


@dataclass(frozen=True, slots=True)
class TiresiasParams:
    thresholds: tuple[float, ...] = (8 * 3600.0, 64 * 3600.0)  # GPU-seconds between queues (ascending)
    promote_knob: float = 8.0  # STARVELIMIT: waited >= knob x executed time -> highest queue


@dataclass(slots=True)
class _Job:
    spec: JobSpec
    id: int
    workers: int
    gpus: int  # GPUs of the whole job
    work_left: float
    rate: float  # work per second while running (0 while restarting or waiting)
    queue: int = 0  # discretized 2D-LAS queue index
    service: float = 0.0  # attained service (GPU-seconds held), as of ``since``
    base: float = 0.0  # service at the last promotion (demotion counts from it)
    executed: float = 0.0  # seconds run, as of ``since``
    running: bool = False
    since: float = 0.0  # when it last started or stopped running
    resume_at: float = 0.0  # progress starts (after a restart's stall)
    started_at: float = -1.0
    finished_at: float = -1.0
    nodes: list[int] = field(default_factory=list)
    restarts: int = 0
    evictions: int = 0
    restart_seconds: float = 0.0
    held: float = 0.0
    version: int = 0


class TiresiasSimulator:
    """The trace under Tiresias (see the module's docstring)."""

    def __init__(self, jobs: list[JobSpec], cluster: ClusterSpec, settings: SimSettings | None = None,
                 params: TiresiasParams | None = None) -> None:
        self.specs = jobs
        self.cluster = cluster
        self.settings = settings or SimSettings()
        self.params = params or TiresiasParams()
        self.nodes = NodeTable(cluster)
        self.now = 0.0
        self.jobs: list[_Job] = []
        self.active: list[_Job] = []
        self.events: list[tuple[float, int, int, int]] = []  # (time, seq, job id or -1, version)
        self.seq = 0
        self.allocated = 0
        self.area = 0.0
        self.busy = 0.0
        self.area_while_arriving: float | None = None
        self.timeline: list[tuple[float, int]] = []
        self.evictions = 0
        self.restarts = 0
        self.calls = 0
        self.plan_seconds = 0.0
        self.last_submit = max((s.submit for s in jobs), default=0.0)

    def _push(self, t: float, job: int, version: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, job, version))

    def _rate(self, spec: JobSpec) -> float:
        return spec.max_workers * spec.gpus * self.settings.curve.efficiency(spec.max_workers)

    def run(self) -> SimResult:
        wall = time.perf_counter()
        for i, spec in enumerate(self.specs):
            self._push(spec.submit, -1 - i)
        while self.events:
            t = self.events[0][0]
            if t > self.area_from_horizon():
                break
            if t > self.now:
                self.area += self.allocated * (t - self.now)
                self.now = t
            if self.area_while_arriving is None and t >= self.last_submit:
                self.area_while_arriving = self.area
            while self.events and self.events[0][0] == t:
                _, _, obj, version = heapq.heappop(self.events)
                if obj < 0:
                    spec = self.specs[-1 - obj]
                    job = _Job(spec, len(self.jobs), spec.max_workers, spec.max_workers * spec.gpus, spec.work, 0.0)
                    job.since = t
                    self.jobs.append(job)
                    self.active.append(job)
                elif obj != _TICK and self.jobs[obj].version == version and self.jobs[obj].running:
                    self._maybe_complete(self.jobs[obj])
            self._schedule()
            if not self.timeline or self.timeline[-1][1] != self.allocated:
                self.timeline.append((self.now, self.allocated))
        return self._result(time.perf_counter() - wall)

    def area_from_horizon(self) -> float:
        work = sum(s.work for s in self.specs)
        return self.last_submit + 100 * work / max(1, self.cluster.total_gpus) + 30 * 86400.0

    # --- service ---------------------------------------------------------------------------------

    def _settle(self, job: _Job) -> None:
        """Bring ``job``'s progress, service and executed time up to now."""
        if job.running:
            held = self.now - job.since
            job.service += job.gpus * held
            job.executed += held
            job.held += job.gpus * held
            if self.now > job.resume_at and job.rate > 0:
                delta = min(job.work_left, job.rate * (self.now - job.resume_at))
                job.work_left -= delta
                self.busy += job.gpus * delta / job.rate
                job.resume_at = self.now
            job.since = self.now  # (a waiting job's stays when it stopped: its wait counts from then)

    def _level(self, job: _Job) -> int:
        served = job.service - job.base
        return sum(1 for th in self.params.thresholds if served >= th)

    def _maybe_complete(self, job: _Job) -> None:
        self._settle(job)
        if job.work_left > 1e-6:
            self._plan_finish(job)
            return
        job.work_left = 0.0
        job.finished_at = self.now
        self._stop(job)
        self.active.remove(job)

    def _plan_finish(self, job: _Job) -> None:
        job.version += 1
        self._push(max(self.now, job.resume_at) + job.work_left / job.rate, job.id, job.version)

    # --- scheduling ------------------------------------------------------------------------------

    def _schedule(self) -> None:
        started = time.perf_counter()
        self.calls += 1
        knob = self.params.promote_knob
        for job in self.active:
            self._settle(job)
            if job.running:
                job.queue = max(job.queue, self._level(job))
            elif job.queue > 0 and job.started_at >= 0 and self.now - job.since >= knob * job.executed:
                job.queue, job.base = 0, job.service  # starvation: promoted to the highest queue
        order = sorted(self.active, key=lambda j: (j.queue, j.spec.submit, j.id))
        room = self.cluster.total_gpus
        admitted: list[_Job] = []
        for job in order:
            if job.gpus <= room:
                admitted.append(job)
                room -= job.gpus
        keep = set(id(j) for j in admitted)
        for job in self.active:
            if job.running and id(job) not in keep:
                self._preempt(job)
        for job in admitted:
            if not job.running:
                self._start(job)
        self._next_tick()
        self.plan_seconds += time.perf_counter() - started

    def _start(self, job: _Job) -> None:
        spec = job.spec
        cpu, mem = spec.cpu_request, spec.memory_request
        placed: list[int] = []
        for _ in range(job.workers):
            node = self.nodes.best_fit(spec.gpus, cpu, mem)
            if node < 0:
                for n in placed:
                    self.nodes.give(n, spec.gpus, cpu, mem)
                return  # fragmented: it waits for the next event
            self.nodes.take(node, spec.gpus, cpu, mem)
            placed.append(node)
        job.nodes = placed
        job.running = True
        job.since = self.now
        self.allocated += job.gpus
        job.rate = self._rate(spec)
        if job.started_at < 0:
            job.started_at = self.now
            job.resume_at = self.now
        else:  # resumes from the checkpoint it saved when preempted
            stall = self.settings.restart_cost.seconds(False, job.workers, job.workers)
            job.resume_at = self.now + stall
            job.restart_seconds += stall
            job.restarts += 1
            self.restarts += 1
        self._plan_finish(job)

    def _stop(self, job: _Job) -> None:
        spec = job.spec
        for n in job.nodes:
            self.nodes.give(n, spec.gpus, spec.cpu_request, spec.memory_request)
        job.nodes = []
        job.running = False
        job.rate = 0.0
        job.version += 1
        self.allocated -= job.gpus

    def _preempt(self, job: _Job) -> None:
        self._stop(job)  # (settled by _schedule: it checkpoints now and loses nothing)
        job.evictions += job.workers
        self.evictions += job.workers

    def _next_tick(self) -> None:
        """The next time a running job crosses a threshold or a waiting one is promoted."""
        best = math.inf
        for job in self.active:
            if job.running:
                served = job.service - job.base
                above = [th for th in self.params.thresholds if th > served]
                if above:
                    best = min(best, self.now + (above[0] - served) / job.gpus)
            elif job.queue > 0 and job.started_at >= 0:
                best = min(best, job.since + self.params.promote_knob * job.executed)
        if best < math.inf:
            self._push(max(best, self.now + 1e-6), _TICK)

    # --- results ---------------------------------------------------------------------------------

    def _result(self, wall: float) -> SimResult:
        results = tuple(
            JobResult(
                name=j.spec.name, queue=j.spec.queue, submit=j.spec.submit, start=j.started_at,
                finish=j.finished_at, restarts=j.restarts, evictions=j.evictions,
                min_workers=j.workers, max_workers=j.workers, min_seen=j.workers if j.started_at >= 0 else 0,
                max_seen=j.workers if j.started_at >= 0 else 0, work=j.spec.work,
                work_done=j.spec.work - j.work_left, held_gpu_seconds=j.held, scale_events=(),
                trace_min=j.spec.min_workers, trace_max=j.spec.max_workers, lost_work=0.0,
                restart_seconds=j.restart_seconds)
            for j in self.jobs)
        first = min((j.submit for j in results), default=0.0)
        last = max((j.finish for j in results), default=0.0)
        return SimResult(
            policy=NAME, jobs=results, total_gpus=self.cluster.total_gpus, span=(first, last),
            gpu_seconds_allocated=self.area, timeline=tuple(self.timeline), evictions=self.evictions,
            restarts=self.restarts, cooldown_violations=0, rejected_decisions=(), bound_violations=0,
            plan_calls=self.calls, plan_seconds=self.plan_seconds, cycles_skipped=0, wall_seconds=wall,
            gpu_seconds_busy=self.busy,
            gpu_seconds_while_arriving=self.area_while_arriving if self.area_while_arriving is not None else self.area,
            last_submit=self.last_submit)


def tiresias_params(thresholds: str, knob: float) -> TiresiasParams | str:
    """``--tiresias-thresholds`` (ascending GPU-hours, comma-separated; "" for none) and
    ``--tiresias-promote-knob`` read, or what is wrong with them."""
    try:
        hours = tuple(float(x) for x in thresholds.split(",") if x.strip())
    except ValueError:
        return f"--tiresias-thresholds: comma-separated GPU-hours, got {thresholds!r}"
    if any(not math.isfinite(h) or h <= 0 for h in hours) or list(hours) != sorted(set(hours)):
        return f"--tiresias-thresholds: positive GPU-hours in ascending order, got {thresholds!r}"
    if not math.isfinite(knob) or knob <= 0:
        return f"--tiresias-promote-knob must be > 0, got {knob!r}"
    return TiresiasParams(tuple(h * 3600.0 for h in hours), knob)


def simulate_tiresias(jobs: list[JobSpec], cluster: ClusterSpec, settings: SimSettings | None = None,
                      params: TiresiasParams | None = None) -> SimResult:
    return TiresiasSimulator(jobs, cluster, settings, params).run()
