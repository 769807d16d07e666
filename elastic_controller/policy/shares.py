"""Deserved share per Volcano queue: weighted water-filling, the way proportion/capacity do it.

Per resource dimension, the cluster's capacity is shared by weight (water-filling) among the queues,
never above a queue's request or ``capability`` and never below its ``guarantee`` (a floor, as in
proportion: ``deserved = max(weighted share, guarantee)``). ``spec.deserved`` is not read, as
Volcano's proportion plugin does not read it (``pkg/scheduler/plugins/proportion/proportion.go``
v1.15.1: a queue's ``deserved`` starts empty, :113, and only the weighted loop, :215-258, raises it;
only the capacity plugin reads ``spec.deserved``). **Flat**, as Volcano's proportion plugin is:
``spec.parent`` is ignored, every queue is a child of ``root`` (``OnSessionOpen``: one loop over
``ssn.Queues``, no parent). Hierarchical queues are the capacity
plugin's (``capacity.py``, ``shares: {plugin: capacity, hierarchy: true}``).

**Pending gated pods are not counted in a queue's request.** Volcano counts them, but a gated
pod is an elastic worker that has not been allowed to run: counting its appetite would let a
queue that is growing opportunistically claim a larger share and so shield its running elastic
workers from reclaim by a queue that needs its min. Running (bound) pods and pending ungated
pods count. Whether Volcano will place a gang at all is judged on Volcano's own view
(``volcano_view``: gated pods requested, deserved rounded down), see ``sharemodel.ProportionModel.admission_deserved``.

Over/under share is judged on one dominant resource: ``nvidia.com/gpu`` when the cluster has
GPUs, else ``cpu``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from .keys import GPU
from .model import NodeView, PodGroupView, PodView, QueueView
from .quantity import Resources, add, total


@dataclass(frozen=True, slots=True)
class QueueShare:
    name: str
    deserved: Resources
    allocated: Resources
    request: Resources
    reclaimable: bool = True


def dominant_resource(nodes: Iterable[NodeView]) -> str:
    return GPU if any(n.allocatable.get(GPU, 0) > 0 for n in nodes) else "cpu"


def cluster_capacity(nodes: Iterable[NodeView]) -> Resources:
    return total(n.allocatable for n in nodes if n.ready and not n.unschedulable)


@dataclass(frozen=True, slots=True)
class Usage:
    """Resources per queue: ``allocated`` (placed pods), ``pending`` (ungated pending pods) and
    ``gated`` (pending gated pods). Terminating pods are leaving and count for none."""

    allocated: dict[str, Resources]
    pending: dict[str, Resources]
    gated: dict[str, Resources]

    def request(self, count_gated: bool = False) -> dict[str, Resources]:
        """Placed plus pending pods per queue; gated ones too with ``count_gated`` (as Volcano)."""
        out: dict[str, Resources] = {}
        for part in (self.allocated, self.pending, self.gated) if count_gated else (self.allocated, self.pending):
            for queue, res in part.items():
                out[queue] = add(out.get(queue, {}), res)
        return out


def usage_of(pods: Iterable[PodView], podgroups: Mapping[str, PodGroupView]) -> Usage:
    """One pass over the pods: what each queue holds, waits for, and keeps gated."""
    usage = Usage({}, {}, {})
    for pod in pods:
        count_usage(usage, pod, podgroups)
    return usage


def count_usage(usage: Usage, pod: PodView, podgroups: Mapping[str, PodGroupView]) -> None:
    """Add ``pod``'s requests to what its PodGroup's queue holds (placed), waits for (pending) or keeps
    gated; a pod without a known PodGroup, terminating or finished counts for none."""
    if not pod.group or pod.deleting or pod.terminal:
        return
    pg = podgroups.get(pod.group_key)
    if pg is None:
        return
    to = usage.allocated if pod.node_name else usage.gated if pod.scheduling_gates else usage.pending
    acc = to.get(pg.queue)
    if acc is None:
        acc = to[pg.queue] = {}
    for k, v in pod.requests.items():
        acc[k] = acc.get(k, 0) + v


def queue_usage(
    pods: Iterable[PodView], podgroups: Mapping[str, PodGroupView], count_gated: bool = False
) -> tuple[dict[str, Resources], dict[str, Resources]]:
    """(allocated, request) per queue. Terminating pods are leaving and count for neither; pending
    gated pods count in the request only with ``count_gated`` (as Volcano counts them)."""
    usage = usage_of(pods, podgroups)
    return usage.allocated, usage.request(count_gated)


def _floor(v: float) -> int:
    return math.floor(v + 1e-6)  # water-filling's float error must not cost a whole unit


def _water_fill(bounds: list[tuple[float, float, float]], pool: float) -> list[float]:
    """Shares ``min(max(weight * L, floor), cap)`` for the water level L that spends ``pool``
    (every child at its cap when the pool is enough; every child at its floor when it is not)."""

    def at(level: float) -> list[float]:
        return [min(max(w * level, lo), hi) for w, lo, hi in bounds]

    if sum(hi for _, _, hi in bounds) <= pool:
        return [hi for _, _, hi in bounds]
    lo, hi = 0.0, max(pool, 1.0)
    while sum(at(hi)) < pool:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        if sum(at(mid)) <= pool:
            lo = mid
        else:
            hi = mid
    return at(lo)


def _fill(
    capacity: Mapping[str, int], children: list[QueueView], request: Mapping[str, Resources],
    rounding: Callable[[float], int] = round,
) -> dict[str, Resources]:
    dims = set(capacity)
    for c in children:
        dims |= set(request.get(c.name, {}))
    out: dict[str, dict[str, float]] = {c.name: {} for c in children}
    for r in sorted(dims):
        remaining = float(capacity.get(r, 0))

        def limit(q: QueueView, r: str = r) -> float:
            want = float(request.get(q.name, {}).get(r, 0))
            if q.capability is not None and r in q.capability:
                want = min(want, float(q.capability[r]))
            return want

        share = {c.name: 0.0 for c in children}
        for c in children:
            g = float((c.guarantee or {}).get(r, 0))
            if g:
                share[c.name] = min(g, remaining)
                remaining -= share[c.name]
        # Weighted water-filling among all children (spec.deserved is not read: proportion.go never
        # reads it). A guarantee is a floor (proportion: deserved = max(weighted share, guarantee)),
        # not a head start on top of the weighted share.
        pool = remaining + sum(share.values())
        bounds = [(float(max(1, c.weight)), share[c.name], max(share[c.name], limit(c))) for c in children]
        for c, v in zip(children, _water_fill(bounds, pool), strict=True):
            share[c.name] = v
        for name, v in share.items():
            out[name][r] = v
    return {name: {r: rounding(v) for r, v in res.items() if v > 0} for name, res in out.items()}


def plan_shares(
    queues: Iterable[QueueView],
    nodes: Iterable[NodeView],
    pods: Iterable[PodView],
    podgroups: Mapping[str, PodGroupView],
    volcano_view: bool = False,
    usage: Usage | None = None,
    capacity: Resources | None = None,
) -> dict[str, QueueShare]:
    """Deserved, allocated and requested resources of every queue (queues referenced by
    PodGroups but not listed are treated as weight-1 children of root).

    ``volcano_view``: the shares Volcano's proportion plugin computes, which decide whether it
    places a gang at all: gated pods count in requests, and deserved shares are rounded down (a
    queue is admitted work only while allocated + request <= deserved).
    ``usage`` and ``capacity`` (the cluster's): computed from the pods and nodes when not given.
    """
    if usage is None:
        usage = usage_of(pods, podgroups)
    allocated, request = usage.allocated, usage.request(volcano_view)
    rounding: Callable[[float], int] = _floor if volcano_view else round
    by_name = {q.name: q for q in queues}
    for name in set(request) | set(allocated):
        by_name.setdefault(name, QueueView(name=name))
    by_name.pop("root", None)
    # Flat, as Volcano's proportion plugin: every queue shares the cluster with every other, whatever
    # its spec.parent says (proportion.go, OnSessionOpen).
    queues_flat = sorted(by_name.values(), key=lambda q: q.name)
    all_request = {name: dict(request.get(name, {})) for name in by_name}
    cap = capacity if capacity is not None else cluster_capacity(nodes)
    deserved: dict[str, Resources] = _fill(cap, queues_flat, all_request, rounding) if queues_flat else {}
    return {
        name: QueueShare(
            name=name,
            deserved=deserved.get(name, {}),
            allocated=allocated.get(name, {}),
            request=all_request.get(name, {}),
            reclaimable=q.reclaimable,
        )
        for name, q in by_name.items()
    }


class AdmissionRoom:
    """``enqueue_excess`` and ``room`` of a share model, derived from its ``allocated`` and
    ``admission_deserved`` (the dominant resource), the same for every model (``sharemodel.ShareModel``)."""

    def allocated(self, queue: str) -> int:
        raise NotImplementedError

    def admission_deserved(self, queue: str) -> int:
        raise NotImplementedError

    def enqueue_excess(self, queue: str, need: int, allocated: int | None = None) -> int:
        if allocated is None:
            allocated = self.allocated(queue)
        return max(0, allocated + need - self.admission_deserved(queue))

    def room(self, queue: str) -> int:
        return self.admission_deserved(queue) - self.allocated(queue)
