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
    """Requests plus the pod slot it occupies (computed with the view: do not change it)."""
    return pod.demand


def _fits(demand: Mapping[str, int], free: Mapping[str, int]) -> bool:
    for k, v in demand.items():
        if free.get(k, 0) < v:
            return False
    return True


def build_gpu_index(free: Mapping[str, Mapping[str, int]],
                    tags: Mapping[str, int] | None = None) -> dict[tuple[int, int], set[str]]:
    """(free GPUs, tag) -> nodes, for nodes' free resources and optional tags (default 0)."""
    index: dict[tuple[int, int], set[str]] = {}
    tags = tags or {}
    for name, node_free in free.items():
        index.setdefault((node_free.get(GPU, 0), tags.get(name, 0)), set()).add(name)
    return index


@dataclass(slots=True)
class Capacity:
    """Free resources per node (a node lacking a resource has 0 of it).

    Copies are copy-on-write per node (``owned`` lists the nodes whose ``free`` dict this copy may
    change in place), and nodes are indexed by (free GPUs, tag) so that placing a GPU pod looks only
    at nodes with enough free GPUs: planning cost stays proportional to the nodes that can matter.
    ``tags`` is an optional static small integer per node the planners bucket by (default 0).
    """

    nodes: dict[str, NodeView]
    free: dict[str, Resources] = field(default_factory=dict)
    owned: set[str] = field(default_factory=set)
    index: dict[tuple[int, int], set[str]] | None = None
    tags: dict[str, int] | None = None
    owned_buckets: set[tuple[int, int]] = field(default_factory=set)  # index sets this copy may change
    owned_tags: bool = False  # whether ``tags`` is this copy's own map

    @classmethod
    def empty(cls, nodes: Iterable[NodeView], used: Mapping[str, Mapping[str, int]] | None = None) -> Capacity:
        """Every node's allocatable, minus ``used`` (node -> resources taken; unknown nodes ignored)."""
        by_name = {n.name: n for n in nodes}
        free = {}
        for n in by_name.values():
            alloc = dict(n.allocatable)
            alloc.setdefault("pods", 110)
            free[n.name] = alloc
        for name, demand in (used or {}).items():
            node_free = free.get(name)
            if node_free is not None:
                for k, v in demand.items():
                    node_free[k] = node_free.get(k, 0) - v
        return cls(by_name, free, set(free))

    @classmethod
    def over(cls, nodes: dict[str, NodeView], base: Mapping[str, Resources],
             used: Mapping[str, Mapping[str, int]]) -> Capacity:
        """``empty`` from free resources computed before (node -> allocatable with its pod slots,
        same keys and order as ``nodes``): ``base``'s dicts are shared, never written (copy on write),
        so one ``base`` serves every cycle while the nodes stay the same."""
        free: dict[str, Resources] = dict(base)
        for name, demand in used.items():
            node_free = free.get(name)
            if node_free is not None:
                node_free = free[name] = dict(node_free)
                for k, v in demand.items():
                    node_free[k] = node_free.get(k, 0) - v
        return cls(nodes, free, set(used).intersection(free))

    def copy(self) -> Capacity:
        self.owned = set()  # both copies now share every node's dict (and index set) until they write
        self.owned_buckets = set()
        self.owned_tags = False
        return Capacity(self.nodes, dict(self.free), set(), dict(self.gpu_index()), self.tags)

    def retag(self, tags: dict[str, int]) -> None:
        self.tags = tags
        self.owned_tags = False
        self.index = None

    def set_tag(self, node: str, tag: int) -> None:
        """Change one node's tag (the tag map is shared with copies until changed)."""
        old = (self.tags or {}).get(node, 0)
        if old == tag or node not in self.free:
            return
        if not self.owned_tags:
            self.tags = dict(self.tags or {})
            self.owned_tags = True
        assert self.tags is not None
        self.tags[node] = tag
        if self.index is not None:
            free = self.free[node].get(GPU, 0)
            if (free, old) in self.index:
                bucket = self._bucket((free, old))
                bucket.discard(node)
                if not bucket:
                    del self.index[(free, old)]
            self._bucket((free, tag)).add(node)

    def gpu_index(self) -> dict[tuple[int, int], set[str]]:
        """(free GPUs, tag) -> nodes (built on first use, then kept up to date)."""
        if self.index is None:
            self.index = build_gpu_index(self.free, self.tags)
            self.owned_buckets = set(self.index)
        return self.index

    def _bucket(self, key: tuple[int, int]) -> set[str]:
        assert self.index is not None
        names = self.index.get(key)
        if names is None:
            names = self.index[key] = set()
        elif key not in self.owned_buckets:
            names = self.index[key] = set(names)
        self.owned_buckets.add(key)
        return names

    def _writable(self, node: str) -> dict[str, int] | None:
        """``node``'s free resources as this copy's own dict (copied on first write); None if unknown."""
        free = self.free.get(node)
        if free is not None and node not in self.owned:
            free = self.free[node] = dict(free)
            self.owned.add(node)
        return free

    def _change(self, node: str, demand: Mapping[str, int], sign: int) -> None:
        free = self._writable(node)
        if free is None:
            return
        before = free.get(GPU, 0)
        for k, v in demand.items():
            free[k] = free.get(k, 0) + sign * v
        if self.index is not None:
            after = free.get(GPU, 0)
            if after != before:
                tag = (self.tags or {}).get(node, 0)
                if (before, tag) in self.index:
                    old = self._bucket((before, tag))
                    old.discard(node)
                    if not old:
                        del self.index[(before, tag)]
                self._bucket((after, tag)).add(node)

    def take(self, node: str, demand: Mapping[str, int]) -> None:
        self._change(node, demand, -1)

    def give(self, node: str, demand: Mapping[str, int]) -> None:
        self._change(node, demand, 1)

    def give_many(self, freed: Mapping[str, Mapping[str, int]]) -> None:
        """``give`` for many nodes at once (node -> resources freed): past an eighth of the nodes, the
        GPU index is rebuilt on next use instead of being updated node by node."""
        if self.index is not None and 8 * len(freed) < len(self.free):
            for node, demand in freed.items():
                self._change(node, demand, 1)
            return
        for node, demand in freed.items():
            free = self._writable(node)
            if free is None:
                continue
            for k, v in demand.items():
                free[k] = free.get(k, 0) + v
        if self.index is not None:
            self.index = None
            self.owned_buckets = set()

    def fits(self, node: str, demand: Mapping[str, int]) -> bool:
        free = self.free.get(node)
        return free is not None and _fits(demand, free)

    def choose_node(self, pod: PodView, candidates: Iterable[str] | None = None) -> str | None:
        """Best fit: the feasible node with the least GPU, then cpu, left after placing ``pod``."""
        demand = pod_demand(pod)
        gpus = demand.get(GPU, 0)
        if candidates is None and gpus > 0:
            # Only nodes with enough free GPUs, fewest first: the first such level with a feasible
            # node holds the best fit.
            index = self.gpu_index()
            keys = sorted(k for k in index if k[0] >= gpus)
            i = 0
            while i < len(keys):
                level = keys[i][0]
                names: list[str] = []
                while i < len(keys) and keys[i][0] == level:
                    names.extend(index[keys[i]])
                    i += 1
                best = self._best_of(pod, demand, names)
                if best is not None:
                    return best
            return None
        return self._best_of(pod, demand, candidates if candidates is not None else self.nodes)

    def room_for(self, pod: PodView, enough: int) -> int:
        """How many pods like ``pod`` the nodes have room for, counting stops at ``enough`` (GPU pods:
        nodes with the most free GPUs first, so a few nodes usually answer)."""
        demand = pod.demand
        wants = tuple(demand.items())
        gpus = demand.get(GPU, 0)
        names: Iterable[str]
        if gpus > 0:
            index = self.gpu_index()
            names = (n for key in sorted((k for k in index if k[0] >= gpus), reverse=True) for n in index[key])
        else:
            names = self.nodes
        nodes, all_free = self.nodes, self.free
        total = 0
        for name in names:
            free = all_free.get(name)
            if free is None:
                continue
            room = min(free.get(k, 0) // v for k, v in wants)
            if room <= 0:
                continue
            node = nodes.get(name)
            if node is None or not node_accepts(node, pod):
                continue
            total += room
            if total >= enough:
                break
        return total

    def _best_of(self, pod: PodView, demand: Mapping[str, int], names: Iterable[str]) -> str | None:
        """The feasible node among ``names`` with the least GPU, then cpu, then name left (the hot loop
        of every planner: checks inlined, cheapest first)."""
        best: str | None = None
        best_gpu = best_cpu = 0
        gpus, cpu = demand.get(GPU, 0), demand.get("cpu", 0)
        wants = tuple(demand.items())
        plain = not pod.node_selector  # then an untainted, ready, schedulable node always accepts it
        nodes, all_free = self.nodes, self.free
        for name in names:
            free = all_free.get(name)
            if free is None:
                continue
            for k, v in wants:
                if free.get(k, 0) < v:
                    break
            else:
                node = nodes.get(name)
                if node is None:
                    continue
                if not (plain and not node.taints and node.ready and not node.unschedulable) and (
                        not node_accepts(node, pod)):
                    continue
                left_gpu, left_cpu = free.get(GPU, 0) - gpus, free.get("cpu", 0) - cpu
                if best is None or (left_gpu, left_cpu, name) < (best_gpu, best_cpu, best):
                    best, best_gpu, best_cpu = name, left_gpu, left_cpu
        return best


def alike(a: PodView, b: PodView) -> bool:
    """Same demand, node selector and tolerations: wherever one of them fits, the other does."""
    return a.demand == b.demand and a.node_selector == b.node_selector and a.tolerations == b.tolerations


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
    last: PodView | None = None
    node: str | None = None
    for pod in sorted(pods, key=size_key):
        # A pod like the one just placed goes where it went while it fits there: taking it left that
        # node with less of everything and no other node changed, so it is still the best fit.
        if not (last is not None and node is not None and alike(pod, last) and capacity.fits(node, pod.demand)):
            node = capacity.choose_node(pod)
            if node is None:
                return None
        capacity.take(node, pod_demand(pod))
        placement[pod.key] = node
        last = pod
    return placement


def fits_all(pods: Sequence[PodView], capacity: Capacity) -> bool:
    """Whether ``place_all`` would place every pod (``capacity`` is left unchanged).

    Pods alike (same demand, selector and tolerations: a gang's needed pods, mostly) are counted
    instead of placed: best fit places identical pods while any node has room for one more, and a
    node with room for ``k`` of them still has room for ``k - 1`` after taking one, so every pod is
    placed exactly when the nodes' room adds up to their number."""
    if not pods:
        return True
    first = pods[0]
    if not all(alike(p, first) for p in pods[1:]):
        return place_all(pods, capacity.copy()) is not None
    return capacity.room_for(first, len(pods)) >= len(pods)
