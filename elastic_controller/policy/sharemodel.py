"""The queue-share model: what a Volcano queue-share plugin decides, behind one interface.

Volcano's ``proportion`` plugin (and ``capacity``, its successor) registers a handful of hooks the
scheduler's actions call; the policy asks the same questions through ``ShareModel``:

============================  ==========================================  =========================
hook                          question                                    Volcano's counterpart
============================  ==========================================  =========================
``deserved(q)``               the queue's deserved share (our view)       ``deserved`` (attr)
``allocated(q)``              what the queue's placed pods hold           ``allocated`` (attr)
``reclaimable(q)``            may others ever take from ``q``             ``queue.spec.reclaimable``
``below_share(q, a, need)``   is ``q`` (holding ``a``) below its share:   ``reclaim`` action: the
                              may it reclaim for a gang asking ``need``   starving queue's check
                                                                          (``PreemptiveFn``)
``keeps_share(q, a, leaving)``  would ``q``, left holding ``a`` once the    ``ReclaimableFn``
                              pods asking ``leaving`` are gone, still be
                              at or above its share (and guarantee)
``overused(q, a)``            is ``q`` (holding ``a``) above its share    ``OverusedFn``
``admission_deserved(q)``     the share Volcano admits work against       ``deserved`` as the plugin
                              (gated pods requested, rounded down)        computes it
``enqueue_excess(q, need)``   how far placing ``need`` more would take    ``AllocatableFn`` /
                              ``q`` above that share (0: admitted)        ``JobEnqueueableFn``
``room(q)``                   what ``q`` may still be given               ``AllocatableFn``
``admits(q, r, placed)``      would Volcano place a pod asking ``r`` in   ``AllocatableFn``
                              ``q`` once ``placed`` (per queue) is placed
``relieved_by(q, v)``         does a victim of queue ``v`` lower what     (ours)
                              ``enqueue_excess(q, ...)`` counts
``enqueue_reason(pg)``        why the enqueue action keeps the Pending    ``JobEnqueueableFn``
                              PodGroup ``pg`` out whatever is evicted
============================  ==========================================  =========================

``need``, ``leaving``, ``held`` and ``r`` are per resource: the capacity plugin judges every dimension
a pod asks for (``ProportionModel`` reads only the dominant resource of them, or nothing: its answers
are those of the dominant amounts alone). ``held``: the queue's whole allocation in the caller's
running view (for ``keeps_share``, with ``leaving`` still in it); the snapshot's when not given.

Every other amount is of the cluster's one dominant resource (``nvidia.com/gpu`` when the cluster has GPUs,
else ``cpu``). ``ProportionModel`` is the proportion plugin's model (weighted water-filling, flat as
Volcano's is: ``spec.parent`` ignored, ``shares.py``); ``capacity_ledger.CapacityModel`` is the capacity
plugin's (flat or hierarchical). ``world.share_model`` builds the one config ``shares.plugin`` names.
Adding a model is one new module implementing ``ShareModel`` plus its branch in
``world.share_model`` (see ARCHITECTURE.md, "Recipes").

The simulator's allocator asks the same model for its deserved shares (``ProportionModel.fill``),
so the simulated Volcano and the policy share one water-filling; under ``capacity`` it asks
``capacity.py``'s rules through ``simulate/quota.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from .model import NodeView, PodGroupView, PodView, QueueView
from .quantity import Resources
from .shares import AdmissionRoom, QueueShare, Usage, _water_fill, plan_shares


class ShareModel(Protocol):
    """The hooks (see the module docstring). ``a``/``allocated``: an allocation to judge by instead of
    the snapshot's (planners track what their own decisions move)."""

    name: str
    dominant: str
    shares: dict[str, QueueShare]

    def deserved(self, queue: str) -> int: ...
    def allocated(self, queue: str) -> int: ...
    def reclaimable(self, queue: str) -> bool: ...
    def below_share(self, queue: str, allocated: int, need: Resources | None = None,
                    held: Resources | None = None) -> bool: ...
    def keeps_share(self, queue: str, allocated: int, leaving: Sequence[Resources] = (),
                    held: Resources | None = None) -> bool: ...
    def overused(self, queue: str, allocated: int) -> bool: ...
    def admission_deserved(self, queue: str) -> int: ...
    def enqueue_excess(self, queue: str, need: int, allocated: int | None = None) -> int: ...
    def room(self, queue: str) -> int: ...
    def admits(self, queue: str, request: Resources, placed: Mapping[str, Resources]) -> bool: ...
    def relieved_by(self, queue: str, victim_queue: str) -> bool: ...
    def enqueue_reason(self, pg: PodGroupView) -> str | None: ...


class ProportionModel(AdmissionRoom):
    """Volcano's proportion plugin. Our own view of the shares (``shares``: pending gated pods not
    requested, see ``shares.py``) judges reclaim; Volcano's view (gated pods requested, deserved
    rounded down), computed on first use, judges admission."""

    name = "proportion"

    def __init__(self, shares: dict[str, QueueShare], dominant: str, queues: Iterable[QueueView],
                 nodes: Iterable[NodeView], pods: Iterable[PodView], podgroups: Mapping[str, PodGroupView],
                 usage: Usage | None, cluster: Resources | None) -> None:
        self.shares = shares
        self.dominant = dominant
        self._inputs = (queues, nodes, pods, podgroups, usage, cluster)
        self._admission: dict[str, QueueShare] | None = None

    @classmethod
    def of(cls, queues: Iterable[QueueView], nodes: Iterable[NodeView], podgroups: Mapping[str, PodGroupView],
           usage: Usage, cluster: Resources, dominant: str, pods: Iterable[PodView] = ()) -> ProportionModel:
        shares = plan_shares(queues, nodes, (), podgroups, usage=usage, capacity=cluster)
        return cls(shares, dominant, queues, nodes, pods, podgroups, usage, cluster)

    # -- our view: reclaim ------------------------------------------------------------------------
    def deserved(self, queue: str) -> int:
        share = self.shares.get(queue)
        return share.deserved.get(self.dominant, 0) if share is not None else 0

    def allocated(self, queue: str) -> int:
        share = self.shares.get(queue)
        return share.allocated.get(self.dominant, 0) if share is not None else 0

    def reclaimable(self, queue: str) -> bool:
        share = self.shares.get(queue)
        return share is not None and share.reclaimable

    def below_share(self, queue: str, allocated: int, need: Resources | None = None,
                    held: Resources | None = None) -> bool:
        # Our rule for proportion: the gang's queue is below its deserved share; ``need`` and ``held``
        # are not read (whether the gang then fits the share is ``enqueue_excess``, met by own-queue
        # victims; Volcano's PreemptiveFn, proportion.go:383, asks allocated + the gang <= deserved).
        share = self.shares.get(queue)
        return share is not None and allocated < share.deserved.get(self.dominant, 0)

    def keeps_share(self, queue: str, allocated: int, leaving: Sequence[Resources] = (),
                    held: Resources | None = None) -> bool:
        share = self.shares.get(queue)
        return share is not None and allocated >= share.deserved.get(self.dominant, 0)

    def overused(self, queue: str, allocated: int) -> bool:
        # Strictly above (Volcano's OverusedFn). ``keeps_share`` with what is left is the exact test
        # for given victims; this is the quick bound ``gates.blocking_gangs`` uses, which therefore
        # never counts victims of no dominant resource from a queue exactly at its share.
        share = self.shares.get(queue)
        return share is not None and allocated > share.deserved.get(self.dominant, 0)

    # -- Volcano's view: admission ----------------------------------------------------------------
    def admission_deserved(self, queue: str) -> int:
        if self._admission is None:
            queues, nodes, pods, podgroups, usage, cluster = self._inputs
            self._admission = plan_shares(queues, nodes, pods, podgroups, volcano_view=True, usage=usage,
                                          capacity=cluster)
        share = self._admission.get(queue)
        return share.deserved.get(self.dominant, 0) if share is not None else 0

    def admits(self, queue: str, request: Resources, placed: Mapping[str, Resources]) -> bool:
        """The pod's dominant resource within what the queue's deserved share (Volcano's view) still
        has room for once ``placed[queue]`` is placed too."""
        taken = placed.get(queue, {}).get(self.dominant, 0)
        return request.get(self.dominant, 0) <= self.room(queue) - taken

    def relieved_by(self, queue: str, victim_queue: str) -> bool:
        """Only the queue's own pods count in its share (proportion is flat)."""
        return victim_queue == queue

    def enqueue_reason(self, pg: PodGroupView) -> str | None:
        """None: our proportion rules do not model its enqueue check (the gang's share is judged by
        ``enqueue_excess``, which own-queue victims can meet)."""
        return None

    # -- the simulator's allocator ------------------------------------------------------------------
    @staticmethod
    def fill(weights: Mapping[str, int], requests: Mapping[str, float], total: float) -> dict[str, float]:
        """Deserved shares of one resource for flat queues (no guarantee, capability or explicit
        deserved): ``total`` water-filled by weight, never above a queue's request; unrounded."""
        names = list(weights)
        shares = _water_fill([(float(max(1, weights[q])), 0.0, float(requests.get(q, 0))) for q in names], total)
        return dict(zip(names, shares, strict=True))


MODELS: dict[str, type[ProportionModel]] = {ProportionModel.name: ProportionModel}
