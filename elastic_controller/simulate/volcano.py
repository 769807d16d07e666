"""Volcano's allocation, as the simulator models it.

- Queues share the cluster's GPUs by weight: a queue's deserved share is its weight's part of
  the GPUs, water-filled so that a queue never deserves more than it requests (its placed pods
  plus its pending ones, gated pods included, as Volcano's proportion plugin counts them). The
  water-filling is the policy's own share model's (``policy.sharemodel.ProportionModel.fill``).
- The queue with the lowest allocated/deserved ratio goes next; a queue at or above its
  deserved share gets nothing more in this pass (no reclaim, no preempt: the agent is the only
  one that evicts).
- Within a queue: higher priority first, then earlier submission (FIFO), then trace order.
- A job that has not started is a gang: it is placed only if its ``minMember`` pods all fit,
  otherwise it is skipped and the next job is tried (no head-of-line blocking), and its pods are
  marked unschedulable. Pending ungated pods of a running job (elastic workers whose gate was
  lifted) are placed one by one where they fit, on the node the agent checked when possible.

Under ``shares.plugin: capacity`` (``simulate --shares capacity``) the capacity plugin decides
instead of proportion, through ``quota.CapacityQuota`` (the policy's ``capacity.py`` rules): no
weighted share and no "at or above deserved" stop. Queues go in the plugin's order (share of
``spec.deserved``, best-effort queues last; in hierarchy mode compared below their deepest common
ancestor), and a gang or a pod is placed only while its queue (and, with ``shares.hierarchy``, every
ancestor) stays within its real capability on the resources the pod asks for.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cmp_to_key
from typing import Protocol

from ..policy.keys import GPU
from ..policy.settings import ElasticConfig
from ..policy.sharemodel import ProportionModel
from .cluster import ClusterSpec
from .enqueue import Admission
from .nodes import NodeTable
from .quota import CapacityQuota
from .state import SimJob, SimPod
from .trace import JobSpec


class HostSettings(Protocol):
    """The settings the allocator reads (``engine.SimSettings``)."""

    @property
    def overcommit_factor(self) -> float: ...
    @property
    def enqueue(self) -> bool: ...


class Host(Protocol):
    """What the allocator needs of the simulator that drives it (``engine.Simulator``): the allocator
    does not import the engine."""

    @property
    def nodes(self) -> NodeTable: ...
    @property
    def jobs(self) -> Sequence[SimJob]: ...
    @property
    def specs(self) -> Sequence[JobSpec]: ...
    @property
    def cfg(self) -> ElasticConfig: ...
    @property
    def settings(self) -> HostSettings: ...
    @property
    def active(self) -> Mapping[int, SimJob]: ...
    @property
    def allocated_gpus(self) -> int: ...

    def place_pod(self, pod: SimPod, node: int) -> None: ...
    def workers_changed(self, job: SimJob, now: float) -> None: ...
    def request_tick(self, t: float) -> None: ...


class Allocator:
    def __init__(self, sim: Host, cluster: ClusterSpec) -> None:
        self.sim = sim
        self.nodes = sim.nodes
        self.total = float(cluster.total_gpus)
        self.queues = [q.name for q in cluster.queues]
        self.weight = {q.name: q.weight for q in cluster.queues}
        self.allocated = dict.fromkeys(self.queues, 0)  # GPUs of placed, non-terminating pods
        self.request = dict.fromkeys(self.queues, 0)  # ... plus pending ones (gated included)
        self.cands: dict[str, list[tuple[tuple[int, float, int], int]]] = {q: [] for q in self.queues}
        self.in_cands: set[int] = set()
        self.waiting: dict[int, SimJob] = {}
        self.des: dict[str, float] = {}
        self.gen = 0  # bumped whenever capacity frees up
        self.dirty = False
        self.admission = Admission(self, cluster, sim.settings.overcommit_factor, sim.settings.enqueue)
        self.after_allocate: Callable[[float], None] | None = None  # volcano-gang's evicting actions
        self.started_now: set[int] = set()  # jobs that started in the current pass (first start)
        # shares.plugin capacity: the capacity plugin's rules instead of proportion's (None: proportion)
        self.quota: CapacityQuota | None = None
        if sim.cfg.shares.plugin == "capacity":
            self.quota = CapacityQuota(cluster, sim.cfg.shares.hierarchy, (s.queue for s in sim.specs))

    # --- notifications from the engine -----------------------------------------------------------

    def job_arrived(self, job: SimJob) -> None:
        self.request[job.queue] += job.replicas * job.spec.gpus
        self.waiting[job.id] = job
        self.admission.arrived(job)  # a candidate once its PodGroup is Inqueue
        self.dirty = True

    def job_admitted(self, job: SimJob) -> None:
        self._add(job)

    def job_requeued(self, job: SimJob) -> None:
        """All of a running job's workers were evicted: it is a waiting gang again (still Inqueue)."""
        self.waiting[job.id] = job
        job.marked = False
        job.fail_gen = -1

    def job_finished(self, job: SimJob) -> None:
        self.waiting.pop(job.id, None)
        self.admission.finished(job)
        self._remove(job)

    def pod_created(self, pod: SimPod) -> None:
        self.request[pod.job.queue] += pod.job.spec.gpus
        if not pod.gated and pod.job.admitted:
            pod.job.fail_gen = -1
            self._add(pod.job)

    def pod_ungated(self, pod: SimPod) -> None:
        pod.job.fail_gen = -1
        self._add(pod.job)

    def pod_released(self, pod: SimPod) -> None:
        """A placed pod stops counting for its queue (evicted, or its job finished)."""
        g = pod.job.spec.gpus
        self.allocated[pod.job.queue] -= g
        self.request[pod.job.queue] -= g
        if self.quota is not None:
            self.quota.give(pod.job.queue, pod.job.requests)

    def pod_gone(self, pod: SimPod) -> None:
        """A pending pod is removed (its job finished)."""
        self.request[pod.job.queue] -= pod.job.spec.gpus

    def capacity_freed(self) -> None:
        self.gen += 1
        self.dirty = True

    def waiting_gangs(self) -> Iterable[SimJob]:
        return self.waiting.values()

    def _add(self, job: SimJob) -> None:
        if job.id not in self.in_cands:
            self.in_cands.add(job.id)
            insort(self.cands[job.queue], (job.cand_key, job.id))
        self.dirty = True

    def _remove(self, job: SimJob) -> None:
        if job.id in self.in_cands:
            self.in_cands.discard(job.id)
            lst = self.cands[job.queue]
            del lst[bisect_left(lst, (job.cand_key, job.id))]

    # --- the allocate action ---------------------------------------------------------------------

    def deserved(self) -> dict[str, float]:
        """Proportion's deserved GPUs per queue; under capacity, ``spec.deserved`` as the plugin
        reads it (raised to the guarantee; 0 for a best-effort queue), which orders nothing."""
        if self.quota is not None:
            shares = self.quota.shares
            return {q: float(a.deserved.get(GPU, 0.0)) if (a := shares.get(q)) is not None else 0.0
                    for q in self.queues}
        return ProportionModel.fill(self.weight, self.request, self.total)

    def gang_room(self) -> Mapping[str, float]:
        """Each queue's GPUs for gangs, for admission's holds: its deserved share (proportion), or
        under capacity its deserved GPUs where set, else the cluster's."""
        if self.quota is None:
            return self.des
        return {q: d if d > 0 else self.total for q, d in self.deserved().items()}

    def queue_order(self, queues: Iterable[str]) -> list[str]:
        """``queues`` in the share plugin's queue order (lowest share first; cluster file order on ties)."""
        names = list(queues)
        if self.quota is None:
            des = self.des
            return sorted(names, key=lambda q: (self.allocated[q] / des[q] if des.get(q) else 0.0,
                                                self.queues.index(q)))
        rank = {q: i for i, q in enumerate(self.queues)}
        quota = self.quota

        def compare(a: str, b: str) -> int:
            return quota.compare(a, b) or rank[a] - rank[b]

        return sorted(names, key=cmp_to_key(compare))

    def schedule(self, now: float) -> None:
        if not self.dirty:
            return
        self.dirty = False
        des = self.deserved()
        self.des = des
        self.admission.enqueue(now)
        self.started_now = set()
        done: list[SimJob] = []
        # The gang plugin's job order puts jobs below their minMember before ready ones (within a
        # priority): starting gangs first, then the pods of running jobs.
        self._pass(now, des, done, gangs_only=True)
        if self.started_now and self.admission.held:  # a gang started: the jobs held behind it may go
            self.admission.enqueue(now)
            self._pass(now, des, done, gangs_only=True)
        self._pass(now, des, done, gangs_only=False)
        for job in done:
            self._remove(job)
        self.started_now = set()
        if self.after_allocate is not None:
            self.after_allocate(now)

    def _pass(self, now: float, des: dict[str, float], done: list[SimJob], gangs_only: bool) -> None:
        ptr = dict.fromkeys(self.queues, 0)
        jobs = self.sim.jobs
        while True:
            best = ""
            best_share = 0.0
            if self.quota is not None:  # no share stop: each queue is bounded by its real capability
                left = [q for q in self.queues if ptr[q] < len(self.cands[q])]
                best = self.queue_order(left)[0] if left else ""
            else:
                for q in self.queues:
                    if ptr[q] >= len(self.cands[q]) or des[q] <= 0 or self.allocated[q] >= des[q] - 1e-9:
                        continue
                    share = self.allocated[q] / des[q]
                    if not best or share < best_share:
                        best, best_share = q, share
            if not best:
                break
            lst = self.cands[best]
            before = self.allocated[best]
            # Shares only move when something is placed: stay on this queue until then.
            while ptr[best] < len(lst) and self.allocated[best] == before:
                job = jobs[lst[ptr[best]][1]]
                ptr[best] += 1
                if gangs_only and job.running > 0:
                    continue
                if self._try(job, now, surplus=not gangs_only):
                    done.append(job)

    def _try(self, job: SimJob, now: float, surplus: bool = True) -> bool:
        """Place what can be placed of ``job``; True when it has no pending ungated pod left.

        ``surplus`` False: only its gang (its pods beyond minMember wait for the second pass)."""
        if job.fail_gen == self.gen:
            return False  # nothing freed since it last failed
        spec = job.spec
        g, cpu, mem = spec.gpus, job.requests["cpu"], job.requests["memory"]
        nodes = self.nodes
        quota = self.quota
        gang = job.running == 0  # not started, or every worker evicted (volcano-gang)
        if quota is not None:  # capacity's AllocatableFn: real capability, leaf and ancestors
            no_room = gang and not quota.fits(job.queue, job.requests, job.min_member)
        else:  # proportion's AllocatableFn: deserved
            headroom = self.des[job.queue] - self.allocated[job.queue] + 1e-6
            no_room = gang and job.min_member * g > headroom
        if no_room:
            self._unschedulable(job, None, now, capacity=False)
            return False
        if gang and (job.min_member * g > nodes.free_gpus or nodes.slots(g) < job.min_member):
            self._unschedulable(job, None, now)
            return False
        pending = [p for p in job.pods if p.node < 0 and not p.gated and not p.deleting]
        if not pending:
            return True
        changed = False
        if gang:
            need = job.min_member - sum(1 for p in job.pods if p.node >= 0 and not p.deleting)
            if len(pending) < need:  # its workers are still being recreated
                return False
            chosen = self._fit_gang(need, g, cpu, mem) if need * g <= nodes.free_gpus else None
            if chosen is None:
                self._unschedulable(job, pending, now)
                return False
            for pod, node in zip(pending, chosen, strict=False):
                self._place(pod, node)
            if not job.started:
                job.started_at = now
                self.started_now.add(job.id)
            self.waiting.pop(job.id, None)
            job.nominated = []
            pending = pending[len(chosen):]
            changed = True
            if not surplus and pending:
                self.sim.workers_changed(job, now)
                return False
        left = room_fail = False
        for pod in pending:
            if (not quota.fits(job.queue, job.requests) if quota is not None
                    else self.allocated[job.queue] + g > self.des[job.queue] + 1e-6):
                left = room_fail = True  # its queue has no room left (retried next pass)
                continue
            node = pod.pin if pod.pin >= 0 and nodes.fits(pod.pin, g, cpu, mem) else nodes.best_fit(g, cpu, mem)
            if node < 0:
                left = True
                if pod.unschedulable_since < 0:
                    pod.unschedulable_since = now
                    pod.view = None
                continue
            self._place(pod, node)
            changed = True
        if changed:
            self.sim.workers_changed(job, now)
        if left and not room_fail:
            job.fail_gen = self.gen  # retried once capacity frees up
        return not left

    def _fit_gang(self, need: int, g: int, cpu: int, mem: int) -> list[int] | None:
        nodes = self.nodes
        chosen: list[int] = []
        for _ in range(need):
            node = nodes.best_fit(g, cpu, mem)
            if node < 0:
                break
            nodes.take(node, g, cpu, mem)
            chosen.append(node)
        for node in chosen:
            nodes.give(node, g, cpu, mem)
        return chosen if len(chosen) == need else None

    def _place(self, pod: SimPod, node: int) -> None:
        self.sim.place_pod(pod, node)
        self.allocated[pod.job.queue] += pod.job.spec.gpus
        if self.quota is not None:
            self.quota.take(pod.job.queue, pod.job.requests)

    def mark_unschedulable(self, job: SimJob, now: float) -> None:
        """A job that is not Inqueue: its pods are marked unschedulable all the same."""
        self._unschedulable(job, None, now, capacity=False)

    def _unschedulable(self, job: SimJob, pending: list[SimPod] | None, now: float,
                       capacity: bool = True) -> None:
        if capacity:
            job.fail_gen = self.gen  # retried once capacity frees up
        if job.marked:
            return
        job.marked = True
        marked = False
        for pod in pending if pending is not None else job.pods:
            if pod.node >= 0 or pod.gated or pod.deleting:
                continue
            if pod.unschedulable_since < 0:
                pod.unschedulable_since = now
                pod.view = None
                marked = True
        if marked:  # the agent looks again once the gang is starving
            self.sim.request_tick(now + self.sim.cfg.queue_policy(job.queue).starvationSeconds)
