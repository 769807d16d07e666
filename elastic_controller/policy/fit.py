"""Will these pods fit on these nodes? Resources, pod count, nodeSelector, unschedulable, taints.

``Capacity`` is the planner's mutable working copy of free resources per node; every decision
that places or frees something goes through it so later decisions see earlier promises.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .keys import GPU
from .model import NodeView, PodView
from .quantity import Resources

_HARD_EFFECTS = ("NoSchedule", "NoExecute")


def node_accepts(node: NodeView, pod: PodView) -> bool:
    """Static feasibility: ready, schedulable, selector matches, hard taints tolerated."""
    if not node.ready or node.unschedulable:
        return False
    for k, v in pod.node_selector.items():
        if node.labels.get(k) != v:
            return False
    for taint in node.taints:
        if taint.effect in _HARD_EFFECTS and not any(t.tolerates(taint) for t in pod.tolerations):
            return False
    return True


def pod_demand(pod: PodView) -> Resources:
    """Requests plus the pod slot it occupies."""
    demand = {k: v for k, v in pod.requests.items() if v > 0}
    demand["pods"] = 1
    return demand


def _fits(demand: Mapping[str, int], free: Mapping[str, int]) -> bool:
    for k, v in demand.items():
        if free.get(k, 0) < v:
            return False
    return True


@dataclass(slots=True)
class Capacity:
    """Free resources per node (a node lacking a resource has 0 of it)."""

    nodes: dict[str, NodeView]
    free: dict[str, Resources] = field(default_factory=dict)

    @classmethod
    def empty(cls, nodes: Iterable[NodeView]) -> Capacity:
        by_name = {n.name: n for n in nodes}
        free = {}
        for n in by_name.values():
            alloc = dict(n.allocatable)
            alloc.setdefault("pods", 110)
            free[n.name] = alloc
        return cls(by_name, free)

    def copy(self) -> Capacity:
        return Capacity(self.nodes, {k: dict(v) for k, v in self.free.items()})

    def take(self, node: str, demand: Mapping[str, int]) -> None:
        free = self.free.get(node)
        if free is None:
            return
        for k, v in demand.items():
            free[k] = free.get(k, 0) - v

    def give(self, node: str, demand: Mapping[str, int]) -> None:
        free = self.free.get(node)
        if free is None:
            return
        for k, v in demand.items():
            free[k] = free.get(k, 0) + v

    def fits(self, node: str, demand: Mapping[str, int]) -> bool:
        free = self.free.get(node)
        return free is not None and _fits(demand, free)

    def choose_node(self, pod: PodView, candidates: Iterable[str] | None = None) -> str | None:
        """Best fit: the feasible node with the least GPU, then cpu, left after placing ``pod``."""
        demand = pod_demand(pod)
        best: tuple[int, int, str] | None = None
        for name in candidates if candidates is not None else self.nodes:
            node = self.nodes.get(name)
            if node is None or not node_accepts(node, pod):
                continue
            free = self.free[name]
            if not _fits(demand, free):
                continue
            score = (free.get(GPU, 0) - demand.get(GPU, 0), free.get("cpu", 0) - demand.get("cpu", 0), name)
            if best is None or score < best:
                best = score
        return best[2] if best else None


def size_key(pod: PodView) -> tuple[int, int, int, str]:
    """Largest first: GPUs, then cpu, then memory; name breaks ties."""
    r = pod.requests
    return (-r.get(GPU, 0), -r.get("cpu", 0), -r.get("memory", 0), pod.key)


def place_all(pods: Sequence[PodView], capacity: Capacity) -> dict[str, str] | None:
    """Place every pod (largest first, best fit) on a copy-free basis: mutates ``capacity``.

    Returns pod key -> node, or None when some pod does not fit (``capacity`` is then partly used:
    callers pass a copy).
    """
    placement: dict[str, str] = {}
    for pod in sorted(pods, key=size_key):
        node = capacity.choose_node(pod)
        if node is None:
            return None
        capacity.take(node, pod_demand(pod))
        placement[pod.key] = node
    return placement


def fits_all(pods: Sequence[PodView], capacity: Capacity) -> bool:
    return place_all(pods, capacity.copy()) is not None
