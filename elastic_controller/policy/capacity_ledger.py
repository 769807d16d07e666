"""The capacity plugin over one planning cycle (Volcano v1.15.1, ``capacity.go``): what each leaf queue
holds at session open (``QueueUsage``), a cycle's ledger of allocations that plans change as they
commit (``CapacityLedger``), and the share-model hooks the planners ask (``CapacityModel``). The rules
themselves are ``capacity.py``'s; the arithmetic ``volcano_amounts.py``'s. Pure, standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .capacity import (
    ROOT,
    CapacityShares,
    _why_not_open,
    allocatable,
    allocatable_reason,
    build,
    capability_excess,
    enqueueable,
    job_elastic,
    job_inqueue,
    may_reclaim_reason,
    victims_reason,
)
from .keys import VOLCANO_QUEUE_ALLOCATION_GATE
from .model import NodeView, PodGroupView, PodView, QueueView
from .quantity import Resources
from .shares import AdmissionRoom, QueueShare, Usage
from .volcano_amounts import INF, Amounts, _clean, add, is_empty, sub


@dataclass(slots=True)
class QueueUsage:
    """Per leaf queue, what the capacity plugin counts at session open (capacity.go:1093-1131):
    ``allocated`` (pods bound and not terminating: ``AllocatedStatus``), ``inqueue`` (what admitted
    jobs still reserve, ``job_inqueue``) and ``elastic`` (what jobs hold beyond their
    ``minResources``, ``job_elastic``)."""

    allocated: dict[str, dict[str, float]] = field(default_factory=dict)
    inqueue: dict[str, dict[str, float]] = field(default_factory=dict)
    elastic: dict[str, dict[str, float]] = field(default_factory=dict)


def usage_of_groups(groups: Iterable[tuple[PodGroupView, Sequence[PodView]]]) -> QueueUsage:
    """``QueueUsage`` from each PodGroup and its pods."""
    out = QueueUsage()
    for pg, pods in groups:
        held: dict[str, float] = {}
        gated: dict[str, float] = {}
        tasks = 0
        for p in pods:
            if p.deleting or p.terminal:
                continue
            if p.node_name:
                held = add(held, _clean(p.requests))
                tasks += 1
            elif p.scheduling_gates and p.scheduling_gates != (VOLCANO_QUEUE_ALLOCATION_GATE,):
                # Gated pods are deducted from what the job reserves, except those gated only by Volcano's
                # own queue-allocation gate, which count as inqueue (Volcano v1.15.1
                # pkg/scheduler/api/job_info.go:612-620 GetSchGatedPodResources, helpers.go:143
                # HasOnlyVolcanoSchedulingGate). Our scale-up gate is not Volcano's: deducted.
                gated = add(gated, _clean(p.requests))
        q = pg.queue
        if held:
            out.allocated[q] = add(out.allocated.get(q, {}), held)
        minimum = pg.min_resources or None
        reserved = job_inqueue(minimum, held, pg.phase, tasks, pg.min_member, gated)
        if reserved:
            out.inqueue[q] = add(out.inqueue.get(q, {}), reserved)
        beyond = {k: v for k, v in job_elastic(held, minimum).items() if v > 0}
        if beyond:
            out.elastic[q] = add(out.elastic.get(q, {}), beyond)
    return out


class CapacityLedger:
    """One planning cycle's view of the capacity plugin: the session's attributes and each leaf
    queue's allocation, which plans change as they commit (victims leave, gangs and released pods
    arrive), so that every later question sees them."""

    def __init__(self, shares: CapacityShares, allocated: Mapping[str, Amounts]) -> None:
        self.shares = shares
        self.allocated: dict[str, dict[str, float]] = {q: _clean(a) for q, a in allocated.items()}

    def of(self, queue: str) -> dict[str, float]:
        return self.allocated.get(queue, {})

    def take(self, queue: str, request: Amounts) -> None:
        """``request`` is placed in ``queue``."""
        self.allocated[queue] = add(self.of(queue), _clean(request))

    def give(self, queue: str, request: Amounts) -> None:
        """``request`` leaves ``queue``."""
        self.allocated[queue] = sub(self.of(queue), _clean(request))

    def allocatable(self, queue: str, request: Amounts) -> bool:
        return allocatable(self.shares, self.allocated, queue, request)

    def allocatable_reason(self, queue: str, request: Amounts) -> str | None:
        return allocatable_reason(self.shares, self.allocated, queue, request)

    def excess(self, queue: str, request: Amounts) -> dict[str, dict[str, float]]:
        return capability_excess(self.shares, self.allocated, queue, request)

    def may_reclaim_reason(self, queue: str, request: Amounts) -> str | None:
        return may_reclaim_reason(self.shares, self.allocated, queue, request)

    def victims_reason(self, queue: str, requests: Sequence[Amounts],
                       gang_request: Amounts | None = None) -> str | None:
        return victims_reason(self.shares, self.of(queue), queue, requests, gang_request)

    def without(self, leaving: Iterable[tuple[str, Amounts]]) -> CapacityLedger:
        """A copy with the (queue, request) pods of ``leaving`` gone (victims being weighed)."""
        out = CapacityLedger(self.shares, {})
        out.allocated = dict(self.allocated)
        for queue, request in leaving:
            out.give(queue, request)
        return out

    def in_subtree(self, queue: str, ancestor: str) -> bool:
        """``queue`` is ``ancestor`` or below it (its allocation counts in the ancestor's)."""
        attr = self.shares.get(queue)
        return queue == ancestor or (attr is not None and ancestor in attr.ancestors)


# -- The share model (policy/sharemodel.py's ShareModel hooks) --------------------------------------


class CapacityModel(AdmissionRoom):
    """Volcano's capacity plugin behind the share-model hooks the planners ask (``ShareModel``).

    Every amount is of the cluster's dominant resource, as the hooks are; the rules behind them are
    the functions above. ``deserved`` is the plugin's deserved (``spec.deserved`` raised to the
    guarantee); *admission* is the queue's real capability, in hierarchy mode the tightest of the leaf
    and its ancestors given what the rest of each ancestor's subtree holds: Volcano places work
    while the queue stays within it, whatever deserved says. A queue may reclaim (``below_share``)
    while, with what it asks for, it stays within deserved and within its real capability, never
    when it has no deserved; a victim's queue keeps its share (``keeps_share``) while it stays at or
    above its deserved and guarantee (ours: Volcano lets the last victim take it under). Only leaves
    are compared for reclaim (``ancestorReclaimLevel`` 0)."""

    name = "capacity"

    def __init__(self, attrs: CapacityShares, dominant: str, allocated: Mapping[str, Amounts],
                 request: Mapping[str, Amounts], groups: Sequence[tuple[PodGroupView, Sequence[PodView]]] = ()) -> None:
        self.attrs = attrs
        self.dominant = dominant
        self._alloc = {q: _clean(a) for q, a in allocated.items()}
        self._rolled = attrs.rolled_up(self._alloc)
        self._groups = groups
        self._usage: QueueUsage | None = None
        self.shares: dict[str, QueueShare] = {
            name: QueueShare(
                name=name,
                deserved={k: int(v) for k, v in attr.deserved.items() if v > 0 and v != INF},
                allocated={k: int(v) for k, v in self._rolled.get(name, {}).items()},
                request={k: int(v) for k, v in request.get(name, {}).items()},
                reclaimable=attr.reclaimable,
            )
            for name, attr in attrs.queues.items()
        }

    @classmethod
    def of(cls, queues: Iterable[QueueView], nodes: Iterable[NodeView], podgroups: Mapping[str, PodGroupView],
           usage: Usage, cluster: Resources, dominant: str, pods: Iterable[PodView] = (), *,
           hierarchy: bool = False) -> CapacityModel:
        """The model for one cycle: ``usage`` as the World counts it (placed, pending, gated pods per
        queue), ``cluster`` the schedulable nodes' allocatable."""
        job_queues = {pg.queue for pg in podgroups.values()}
        attrs = build(queues, cluster, hierarchy, job_queues)
        by_group: dict[str, list[PodView]] = {}
        for p in pods:
            if p.group_key:
                by_group.setdefault(p.group_key, []).append(p)
        groups = [(pg, by_group.get(key, [])) for key, pg in sorted(podgroups.items())]
        return cls(attrs, dominant, usage.allocated, usage.request(count_gated=True), groups)

    # -- our view: reclaim ------------------------------------------------------------------------
    def _dom(self, res: Amounts) -> int:
        v = res.get(self.dominant, 0.0)
        return int(v) if v != INF else 2**62

    def deserved(self, queue: str) -> int:
        attr = self.attrs.get(queue)
        return self._dom(attr.deserved) if attr is not None else 0

    def allocated(self, queue: str) -> int:
        return self._dom(self._alloc.get(queue, {}))

    def reclaimable(self, queue: str) -> bool:
        attr = self.attrs.get(queue)
        return attr is not None and attr.reclaimable and self.attrs.ready

    def _held(self, queue: str, allocated: int, held: Resources | None) -> dict[str, float]:
        """The queue's allocation per resource (``held``, else the snapshot's), its dominant amount ``allocated``."""
        out = _clean(held) if held is not None else dict(self._alloc.get(queue, {}))
        out[self.dominant] = float(allocated)
        return out

    def below_share(self, queue: str, allocated: int, need: Resources | None = None,
                    held: Resources | None = None) -> bool:
        """``AddPreemptiveFn`` (capacity.go:648, ``may_reclaim_reason``): with the gang asking ``need``
        (per resource), the queue stays within its real capability on the gang's dimensions and within
        its deserved on at least one; a best-effort queue never. Without ``need``: the dominant resource
        alone, strictly below deserved (the quick bound for "may it reclaim at all")."""
        attr = self.attrs.get(queue)
        if attr is None or not attr.open or not self.attrs.ready or attr.best_effort:
            return False
        if need is not None and not is_empty(_clean(need)):
            return may_reclaim_reason(self.attrs, {queue: self._held(queue, allocated, held)}, queue, need) is None
        if allocated > self._dom(attr.real_capability):
            return False
        if self.dominant not in attr.deserved:
            return False  # deserved says nothing of it: no dimension to reclaim on (capacity.go:677)
        return allocated < self._dom(attr.deserved)

    def keeps_share(self, queue: str, allocated: int, leaving: Sequence[Resources] = (),
                    held: Resources | None = None) -> bool:
        """A victim's queue left holding ``allocated`` (dominant) once the pods asking ``leaving`` are
        gone (``held``: its allocation with them still in it): Volcano's victim rules with ours
        (``victims_reason``: reclaimable, guarantee kept, above deserved on a dimension each pod asks
        for or no deserved for them, and not left below deserved). Without ``leaving``: the dominant
        resource alone, at or above its guarantee and deserved (the quick bound)."""
        attr = self.attrs.get(queue)
        if attr is None or not self.attrs.ready:
            return False
        if leaving:
            gone = sum(p.get(self.dominant, 0) for p in leaving)
            before = self._held(queue, allocated + gone, held)
            return victims_reason(self.attrs, before, queue, leaving) is None
        return allocated >= self._dom(attr.guarantee) and allocated >= self._dom(attr.deserved)

    def overused(self, queue: str, allocated: int) -> bool:
        """Above deserved (strictly; 0 when deserved does not name the resource): a victim may come from it."""
        attr = self.attrs.get(queue)
        return attr is not None and allocated > max(self._dom(attr.deserved), self._dom(attr.guarantee))

    # -- Volcano's view: admission ----------------------------------------------------------------
    def admission_deserved(self, queue: str) -> int:
        """The most the queue may hold (dominant resource) with everything else as it is: its real
        capability, and in hierarchy mode each ancestor's less what the rest of its subtree holds
        (``checkQueueAllocatableHierarchically``, capacity.go:1662). 0 for a queue that is not
        schedulable (unknown, closed, not a leaf, or the hierarchy is broken)."""
        if _why_not_open(self.attrs, queue) is not None:
            return 0
        own = self.allocated(queue)
        bound = None
        for q in self.attrs.chain(queue):
            cap_q = self._dom(self.attrs.queues[q].real_capability)
            others = self._dom(self._rolled.get(q, {})) - own if q != queue else 0
            limit = cap_q - others
            bound = limit if bound is None else min(bound, limit)
        return max(0, bound or 0)

    def admits(self, queue: str, request: Resources, placed: Mapping[str, Resources]) -> bool:
        """``allocatable`` (``AddAllocatableFn``, capacity.go:717) with ``placed`` (per queue, what
        this cycle places besides the snapshot) added: the pod's requested dimensions within the real
        capability of its queue and, in hierarchy mode, of every ancestor. Deserved is not consulted."""
        if not placed:
            return allocatable(self.attrs, self._alloc, queue, request)
        alloc = dict(self._alloc)
        for q, res in placed.items():
            alloc[q] = add(alloc.get(q, {}), _clean(res))
        return allocatable(self.attrs, alloc, queue, request)

    # -- beyond the proportion hooks ------------------------------------------------------------------
    def why_not_placed(self, queue: str) -> str | None:
        """Why Volcano places nothing in ``queue`` at all, or None."""
        return _why_not_open(self.attrs, queue)

    def enqueue_reason(self, pg: PodGroupView) -> str | None:
        """Why Volcano's enqueue would not admit ``pg`` now (a PodGroup still ``Pending``), or None
        (``AddJobEnqueueableFn``, capacity.go:742). Evicting elastic workers does not change it: the
        check subtracts what jobs hold beyond their minResources."""
        if pg.phase not in ("", "Pending"):
            return None
        if self._usage is None:
            self._usage = usage_of_groups(self._groups)
        u = self._usage
        if enqueueable(self.attrs, pg.queue, pg.min_resources or None, u.allocated, u.inqueue, u.elastic):
            return None
        return (f"Volcano's capacity plugin does not admit it (enqueue): its minResources with what queue "
                f"{pg.queue} holds and has admitted exceed the real capability of the queue or an ancestor")

    def relieved_by(self, queue: str, victim_queue: str) -> bool:
        """Whether a victim of ``victim_queue`` makes room in ``queue``'s admission (it is the queue, or,
        in hierarchy mode, shares an ancestor whose capability is what bounds ``queue``)."""
        if victim_queue == queue:
            return True
        if not self.attrs.hierarchy:
            return False
        attr, other = self.attrs.get(queue), self.attrs.get(victim_queue)
        if attr is None or other is None:
            return False
        own = self.allocated(queue)
        leaf = self._dom(attr.real_capability)
        for anc in attr.ancestors:
            if anc == ROOT or anc not in other.ancestors:
                continue
            limit = self._dom(self.attrs.queues[anc].real_capability) - (self._dom(self._rolled.get(anc, {})) - own)
            if limit < leaf:
                return True
        return False
