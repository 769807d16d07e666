"""Volcano's ``capacity`` plugin as the simulated scheduler asks it (``simulate --shares capacity``).

The rules are the policy's (``policy/capacity.py``, which cites Volcano v1.15.1 line by line); this
module only keeps what they need across a simulation: the session's queue attributes (built once:
the cluster's nodes and queues do not change) and each queue's allocation per resource, which the
allocator changes as it places and releases pods. Questions asked:

==========================  ==========================================  ==============================
method                      the simulated action's question             capacity plugin hook
==========================  ==========================================  ==============================
``fits(q, req, n)``         may ``n`` more pods asking ``req`` be       ``AllocatableFn``
                            placed in ``q`` (leaf and ancestors)        (capacity.go:717)
``enqueueable(...)``        may a Pending PodGroup go Inqueue           ``JobEnqueueableFn`` (:742)
``compare(l, r)``           which queue goes first (allocate, enqueue,  ``QueueOrderFn`` (:1183, :1348)
                            gang reclaim)
``compare_victims(...)``    whose victims gang reclaim takes first      ``VictimQueueOrderFn`` (:1383)
``preemptive(q, req)``      may ``q`` reclaim for a gang asking ``req`` ``PreemptiveFn`` (:648)
``allowed_victims(...)``    which of the ordered candidates gang        ``UnifiedEvictableFn`` (:607)
                            reclaim may take
==========================  ==========================================  ==============================

``Overused`` is not asked: the capacity plugin registers no ``OverusedFn``, so allocate and gang
reclaim skip no queue for it (framework/session_plugins.go:365) and a queue is bounded only by its
real capability.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from ..policy import capacity as cap
from ..policy.capacity_ledger import CapacityLedger
from ..policy.keys import GPU
from ..policy.model import QueueView
from ..policy.quantity import Resources
from .cluster import ClusterSpec
from .trace import JobSpec


def cluster_total(cluster: ClusterSpec) -> Resources:
    """The nodes' allocatable summed (``ssn.TotalResource``), ``pods`` left out as Volcano does."""
    out: Resources = {GPU: 0, "cpu": 0, "memory": 0}
    for p in cluster.pools:
        out[GPU] += p.count * p.gpus
        out["cpu"] += p.count * p.cpu
        out["memory"] += p.count * p.memory
    return out


def queue_views(cluster: ClusterSpec) -> tuple[QueueView, ...]:
    """The cluster file's queues as the policy sees them (``parent`` ``root`` when none)."""
    return tuple(QueueView(name=q.name, weight=q.weight, reclaimable=q.reclaimable, deserved=q.deserved,
                           guarantee=q.guarantee, capability=q.capability, parent=q.parent or "root")
                 for q in cluster.queues)


def scaled(request: Mapping[str, float], n: int) -> dict[str, float]:
    return {k: v * n for k, v in request.items()}


class CapacityQuota:
    """The capacity plugin's session for one simulation (see the module docstring)."""

    def __init__(self, cluster: ClusterSpec, hierarchy: bool, job_queues: Iterable[str]) -> None:
        self.shares = cap.build(queue_views(cluster), cluster_total(cluster), hierarchy, job_queues)
        self.ledger = CapacityLedger(self.shares, {})
        self._rolled: dict[str, dict[str, float]] | None = None

    @property
    def problem(self) -> str | None:
        """Why Volcano would schedule nothing at all (a broken hierarchy), or None."""
        return None if self.shares.ready else self.shares.problem

    # -- the allocation -----------------------------------------------------------------------------
    def take(self, queue: str, request: Mapping[str, float]) -> None:
        self.ledger.take(queue, request)
        self._rolled = None

    def give(self, queue: str, request: Mapping[str, float]) -> None:
        self.ledger.give(queue, request)
        self._rolled = None

    def held(self, queue: str) -> dict[str, float]:
        """What the queue's placed pods hold, with its subtree's in hierarchy mode."""
        return self.rolled().get(queue, {})

    def rolled(self) -> dict[str, dict[str, float]]:
        if self._rolled is None:
            self._rolled = self.shares.rolled_up(self.ledger.allocated)
        return self._rolled

    # -- the hooks ----------------------------------------------------------------------------------
    def fits(self, queue: str, request: Mapping[str, float], n: int = 1) -> bool:
        """``n`` pods asking ``request`` each within the real capability of ``queue`` and, in hierarchy
        mode, of every ancestor (Volcano asks task by task; the sum is the same test, as the check
        is monotone in what is placed)."""
        return self.ledger.allocatable(queue, scaled(request, n))

    def enqueueable(self, queue: str, min_resources: Mapping[str, float],
                    base: Mapping[str, Mapping[str, float]], inqueue: Mapping[str, Mapping[str, float]]) -> bool:
        """``minResources + allocated + inqueue - elastic`` within real capability; ``base`` is
        allocated less elastic per leaf queue (what running jobs hold up to their minimum)."""
        return cap.enqueueable(self.shares, queue, min_resources, base, inqueue, {})

    def compare(self, left: str, right: str) -> int:
        return cap.compare_queues(self.shares, self.rolled(), left, right)

    def compare_victims(self, left: str, right: str, reclaimer: str) -> int:
        return cap.compare_victim_queues(self.shares, self.rolled(), left, right, reclaimer)

    def preemptive(self, queue: str, request: Mapping[str, float]) -> bool:
        return cap.may_reclaim(self.shares, self.ledger.allocated, queue, request)

    def allowed_victims(self, candidates: Sequence[tuple[str, Mapping[str, float]]]) -> list[int]:
        """The indexes of ``candidates`` ((queue, request) in the order gang reclaim flattened its
        bundles) the plugin lets go: Volcano's rule (``strict=False``), each judged with the ones
        before it of its queue gone."""
        return cap.filter_victims(self.shares, self.ledger.allocated, candidates, strict=False)

    def real_capability(self, queue: str) -> dict[str, float]:
        attr = self.shares.get(queue)
        return dict(attr.real_capability) if attr is not None else {}


def capacity_problems(jobs: Sequence[JobSpec], cluster: ClusterSpec, policies: Sequence[str], hierarchy: bool,
                      source: str) -> list[str]:
    """Why the capacity plugin would never place some of ``jobs`` (as ``validate.check_jobs`` words
    it): a hierarchy it cannot build, or a gang above its queue's real capability on the empty cluster."""
    quota = CapacityQuota(cluster, hierarchy, (j.queue for j in jobs))
    if quota.problem:
        return [f"{source}: Volcano's capacity plugin would schedule nothing: {quota.problem}"]
    problems = []
    for job in jobs:
        gang = job.max_workers if "static-max" in policies else job.min_workers
        request = {GPU: job.gpus, "cpu": job.cpu_request, "memory": job.memory_request}
        if not quota.fits(job.queue, request, gang):
            where = f"{source}:{job.line}: job {job.name}" if job.line else f"{source}: job {job.name}"
            bounds = ((q, quota.real_capability(q).get(GPU, 0.0)) for q in quota.shares.chain(job.queue))
            chain = ", ".join(f"{q} {v:g}" for q, v in bounds if v != math.inf)
            problems.append(f"{where}: {gang} worker(s) of {job.gpus} GPU(s) exceed the real capability of its "
                            f"queue (GPUs: {chain}): the capacity plugin never places it")
    return problems
