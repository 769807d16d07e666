"""Volcano's ``enqueue`` action, as the simulator models it (for every policy).

A PodGroup waits in phase Pending until ``enqueue`` moves it to Inqueue; only Inqueue jobs are
candidates of ``allocate``. Every scheduling pass, queues in order of their share (allocated over
deserved, lowest first) and within a queue jobs by priority then creation, each Pending job is
admitted when both plugins of the default configuration that decide it agree (GPUs only):

- ``overcommit`` (``plugins/overcommit/overcommit.go``, ``OnSessionOpen`` and its
  ``JobEnqueueableFn``): the ``minResources`` of all Inqueue jobs plus this job's fit into
  ``overcommit-factor`` (1.2) times the cluster's GPUs less the GPUs in use (terminating pods
  included);
- ``proportion`` (``plugins/proportion/proportion.go``, ``JobEnqueueableFn``): this job's
  ``minResources`` plus its queue's allocated GPUs, plus its queue's Inqueue reservations, less
  its queue's elastic GPUs (allocated beyond each running job's minimum) fit into the queue's
  ``realCapability``, which without capability or guarantee is the whole cluster.

An admitted job reserves its ``minResources`` less the GPUs of its scheduling-gated pods
(``JobInfo.DeductSchGatedResources``, floored at 0): under ``elastic`` an unstarted job whose
gated elastic pods hold as many GPUs as its minimum reserves nothing. A running job at or above
its minimum reserves nothing more (``util.GetInqueueResource``). A job stays Inqueue until it
finishes (also when volcano-gang evicts all of its workers). The pods of a Pending job are marked
unschedulable, as Volcano's ``RecordJobStatusEvent`` does for Pending and Inqueue PodGroups.

Under ``shares.plugin: capacity`` the ``capacity`` plugin's ``JobEnqueueableFn`` (capacity.go:742,
``quota.CapacityQuota.enqueueable``) replaces proportion's, per resource the job asks for: its
``minResources`` plus its queue's allocated less elastic plus its Inqueue reservations (gated pods
deducted, as capacity.go:1117 does) within the queue's real capability, and in hierarchy mode every
ancestor's; queues in the capacity plugin's order. ``overcommit`` decides as before.

A queue's ``admission`` setting (``policy.admission``, issue 38) holds new jobs behind the oldest
waiting gang of their queue: a held job stays Pending here, as a job whose PodGroup volcano-elastic's
controller has not created yet is invisible to Volcano; it is let in at the first pass after which
it is no longer held (``held`` names the held jobs and why).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from ..policy.admission import ADMISSION_VOLCANO, Gang, Hold, holds
from ..policy.settings import ElasticConfig
from .cluster import ClusterSpec
from .quota import CapacityQuota
from .state import SimJob


class AdmissionSim(Protocol):
    """What admission reads of the simulator (``engine.Simulator``, through ``volcano.Host``)."""

    @property
    def jobs(self) -> Sequence[SimJob]: ...
    @property
    def active(self) -> Mapping[int, SimJob]: ...
    @property
    def allocated_gpus(self) -> int: ...
    @property
    def cfg(self) -> ElasticConfig: ...


class AdmissionHost(Protocol):
    """What admission needs of the allocator that owns it (``volcano.Allocator``): passed in, so
    this module does not import ``volcano`` (which imports it)."""

    @property
    def sim(self) -> AdmissionSim: ...
    @property
    def quota(self) -> CapacityQuota | None: ...

    def queue_order(self, queues: Iterable[str]) -> list[str]: ...
    def gang_room(self) -> Mapping[str, float]: ...
    def job_admitted(self, job: SimJob) -> None: ...
    def mark_unschedulable(self, job: SimJob, now: float) -> None: ...


def reservation(job: SimJob) -> int:
    """GPUs an Inqueue job that is not running reserves: minResources less its gated pods'."""
    return reserved_pods(job) * job.spec.gpus


def reserved_pods(job: SimJob) -> int:
    """Pods' worth of minResources an Inqueue job that is not running reserves (less its gated pods)."""
    gated = sum(1 for p in job.pods if p.gated and not p.deleting)
    return max(0, job.min_member - gated)


def _add(acc: dict[str, dict[str, float]], queue: str, request: dict[str, int], n: int) -> None:
    if n > 0:
        res = acc.setdefault(queue, {})
        for k, v in request.items():
            res[k] = res.get(k, 0.0) + v * n


class Admission:
    def __init__(self, alloc: AdmissionHost, cluster: ClusterSpec, factor: float, enabled: bool = True) -> None:
        self.alloc = alloc
        self.factor = factor
        self.enabled = enabled
        self.total = float(cluster.total_gpus)
        self.queues = [q.name for q in cluster.queues]
        self.pending: dict[str, list[tuple[tuple[int, float, int], int]]] = {q: [] for q in self.queues}
        self.count = 0
        self.fresh: list[SimJob] = []  # arrived since the last pass (their pods not yet marked)
        self.admitted_total = 0
        self.held: dict[str, Hold] = {}  # new jobs held behind a waiting gang (policy.admission), by key
        self.holding = any(alloc.sim.cfg.queue_policy(q).admission != ADMISSION_VOLCANO
                           or alloc.sim.cfg.queue_policy(q).elasticMinShare < 1.0 for q in self.queues)

    def arrived(self, job: SimJob) -> None:
        if not self.enabled:
            self._admit(job)
            return
        insort(self.pending[job.queue], (job.cand_key, job.id))
        self.count += 1
        self.fresh.append(job)

    def finished(self, job: SimJob) -> None:
        if not job.admitted:  # cannot happen (a job runs only once admitted), kept safe
            lst = self.pending[job.queue]
            i = bisect_left(lst, (job.cand_key, job.id))
            if i < len(lst) and lst[i][1] == job.id:
                del lst[i]
                self.count -= 1

    def _admit(self, job: SimJob) -> None:
        job.admitted = True
        self.admitted_total += 1
        self.alloc.job_admitted(job)

    def enqueue(self, now: float) -> None:
        if not self.count:
            self.fresh.clear()
            return
        alloc = self.alloc
        sim = alloc.sim
        inq = dict.fromkeys(self.queues, 0.0)
        base = dict.fromkeys(self.queues, 0.0)  # allocated less elastic, per queue
        for job in sim.active.values():
            if job.done or not job.admitted:
                continue
            if job.running == 0:
                inq[job.queue] += reservation(job)
            else:
                base[job.queue] += min(job.running, job.min_member) * job.spec.gpus
        idle = self.factor * self.total - sim.allocated_gpus - sum(inq.values())
        quota = alloc.quota
        inq_res: dict[str, dict[str, float]] = {}  # capacity: the same per resource
        base_res: dict[str, dict[str, float]] = {}
        if quota is not None:
            for job in sim.active.values():
                if job.done or not job.admitted:
                    continue
                if job.running == 0:
                    _add(inq_res, job.queue, job.requests, reserved_pods(job))
                else:
                    _add(base_res, job.queue, job.requests, min(job.running, job.min_member))
        order = alloc.queue_order(self.queues)
        jobs = sim.jobs
        self.held = self._holds() if self.holding else {}
        for q in order:
            lst = self.pending[q]
            if not lst:
                continue
            keep: list[tuple[tuple[int, float, int], int]] = []
            for entry in lst:
                job = jobs[entry[1]]
                if job.key in self.held:
                    keep.append(entry)
                    continue
                need = job.min_member * job.spec.gpus
                if quota is not None:
                    fits = quota.enqueueable(q, {k: v * job.min_member for k, v in job.requests.items()},
                                             base_res, inq_res)
                else:
                    fits = need + base[q] + inq[q] <= self.total + 1e-6
                if need <= idle + 1e-6 and fits:
                    res = reservation(job)
                    idle -= res
                    inq[q] += res
                    if quota is not None:
                        _add(inq_res, q, job.requests, reserved_pods(job))
                    self.count -= 1
                    self._admit(job)
                else:
                    keep.append(entry)
            self.pending[q] = keep
        for job in self.fresh:
            if not job.admitted:
                alloc.mark_unschedulable(job, now)
        self.fresh.clear()

    def _holds(self) -> dict[str, Hold]:
        cfg = self.alloc.sim.cfg
        gangs = []
        for job in self.alloc.sim.active.values():
            if job.done:
                continue
            g = job.spec.gpus
            gangs.append(Gang(job.key, job.queue, (job.cand_key[0], job.cand_key[1], job.key),
                              float(job.min_member * g), job.bounds_max > job.bounds_min, job.running > 0,
                              job.admitted, float(min(job.running, job.min_member) * g)))
        return holds(gangs, self.alloc.gang_room(), lambda q: cfg.queue_policy(q).admission,
                     lambda q: cfg.queue_policy(q).elasticMinShare)
