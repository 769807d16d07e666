"""What a cycle derives from the pods alone, kept from one cycle to the next.

The agent memoises its pod views (a view is rebuilt only when its object changed) and the simulator
rebuilds a view only when its pod changed, so consecutive cycles hand in mostly the very same
``PodView`` objects. ``build_world`` used to walk every pod at every cycle to sum what each node and
queue holds and to group pods by PodGroup and job; ``PodIndex`` keeps those sums and groupings and
updates them from the views that came or went since the previous cycle (told apart by identity: the
views are frozen, so an unchanged identity is an unchanged pod).

Every aggregate is recomputed from its members, in the planners' order (pods sorted by
``PodView.order``), whenever one of its members changed, so an updated index equals one built from
scratch: ``tests/unit/test_policy_podindex.py`` checks that over random sequences of cycles, and
``bench/plan_equivalence.py trajectory`` that whole simulations plan the same with and without it.

The first cycle, and any cycle where most pods changed, is built the plain way (one pass, no index):
the index is only built once a cycle shares most of its pods with the one before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TypeVar

from .fit import build_gpu_index
from .keys import GPU, Role
from .model import ElasticBounds, PodView
from .quantity import Resources

_by_order = attrgetter("order")


@dataclass(slots=True)
class JobPods:
    """A job's pods (those with a job name) and what ``build_world`` reads of them."""

    members: dict[int, PodView] = field(default_factory=dict)
    first: PodView | None = None  # the first member in order: it names the job's PodGroup
    bounds: ElasticBounds | None = None  # the first member's bounds that are known
    running_workers: int = 0


@dataclass(slots=True)
class GroupPods:
    """A PodGroup's pods and what ``build_world`` reads of them."""

    members: dict[int, PodView] = field(default_factory=dict)
    ordered: list[PodView] = field(default_factory=list)
    pending: list[PodView] = field(default_factory=list)  # unbound, not gated, in order
    gated: list[PodView] = field(default_factory=list)  # elastic, unbound, gated (by any gate), in order
    placed: int = 0  # pods bound and holding their node
    # What the group's pods hold (placed, part 0), wait for (pending, 1) and keep gated (2), as
    # ``count_usage`` counts them: (part, requests summed) for each part some pod counts in (a pod
    # without requests still names its queue).
    usage: tuple[tuple[int, tuple[tuple[str, int], ...]], ...] = ()
    counted: tuple[str, tuple[tuple[int, tuple[tuple[str, int], ...]], ...]] | None = None  # in the totals


_Pods = TypeVar("_Pods", JobPods, GroupPods)


def _entry(index: dict[str, _Pods], key: str, new: Callable[[], _Pods]) -> _Pods:
    """``index[key]``, made with ``new()`` the first time."""
    entry = index.get(key)
    if entry is None:
        entry = index[key] = new()
    return entry


def ungated_pending(pods: list[PodView]) -> list[PodView]:
    """``pods``' unbound pods no scheduling gate holds (what a gang still needs placed), in order."""
    return [p for p in pods if p.pending and not p.scheduling_gates]


def gated_elastic(pods: list[PodView]) -> list[PodView]:
    """``pods``' unbound elastic pods held by any scheduling gate (what may scale up), in order."""
    return [p for p in pods if p.role is Role.ELASTIC and p.pending and p.scheduling_gates]


def _sum_into(acc: Resources, res: Resources) -> None:
    for k, v in res.items():
        acc[k] = acc.get(k, 0) + v


class PodIndex:
    """Per node, PodGroup and job aggregates of one cycle's pods (see the module docstring)."""

    def __init__(self) -> None:
        self.pods: dict[int, PodView] = {}  # id -> view (held, so identities stay valid)
        self.node_pods: dict[str, dict[int, PodView]] = {}  # pods holding resources, per node
        self.used: dict[str, Resources] = {}  # their demand summed per node (nodes with such pods)
        self.releasing: dict[str, list[PodView]] = {}  # terminating pods still holding, per node
        self.groups: dict[str, GroupPods] = {}
        self.jobs: dict[str, JobPods] = {}
        self.with_gated: dict[str, GroupPods] = {}  # the groups with gated elastic pods
        # How many views share each (namespace, name, uid) order key, and how many keys are shared:
        # a cold build sorts such views in the order the snapshot lists them, which identities
        # do not tell, so a cycle with any is built cold.
        self.orders: dict[str, int] = {}
        self.shared_orders = 0
        self._groups_sorted: list[tuple[str, GroupPods]] | None = None
        # Queue usage summed over the groups' ``usage`` (part -> queue -> resources), with how many
        # groups count in each (part, queue) and for each resource name there, so that a queue or a
        # name no group counts any more disappears as it would from a cold count.
        self.totals: tuple[dict[str, Resources], ...] = ({}, {}, {})
        self.counts: tuple[dict[str, dict[str, int]], ...] = ({}, {}, {})  # part -> queue -> name -> groups
        self.members: tuple[dict[str, int], ...] = ({}, {}, {})  # part -> queue -> groups
        self._jobs_sorted: list[tuple[str, JobPods]] | None = None
        self.elastic: dict[int, PodView] = {}  # elastic pods of a group holding resources, not terminating
        # Free resources per node for the node base ``free_base`` was computed from: the base's own
        # dict where nothing is used, else a dict of ours (shared with every cycle's Capacity, which
        # copies it before writing).
        self.free_base: dict[str, Resources] | None = None
        self.free: dict[str, Resources] = {}
        self.gpu_index: dict[tuple[int, int], set[str]] = {}
        self._own_buckets: set[tuple[int, int]] = set()  # index sets made during this update

    # --- updates ------------------------------------------------------------------------------

    def update(self, current: dict[int, PodView], gone_ids: set[int], came_ids: set[int]) -> None:
        """Make the index describe ``current`` (id -> view, now the index's own): drop the views that
        went (``gone_ids``), add the new (``came_ids``)."""
        gone = [self.pods[i] for i in gone_ids]
        came = [current[i] for i in came_ids]
        nodes: set[str] = set()
        groups: set[str] = set()
        jobs: set[str] = set()
        for pod in gone:
            self._unlink(pod, nodes, groups, jobs)
        for pod in came:
            self._link(pod, nodes, groups, jobs)
        self.pods = current
        self._own_buckets = set()
        for node in nodes:
            self._node_changed(node)
        for key in groups:
            self._group_changed(key)
        for jid in jobs:
            self._job_changed(jid)

    def _link(self, pod: PodView, nodes: set[str], groups: set[str], jobs: set[str]) -> None:
        i = id(pod)
        seen = self.orders.get(pod.order, 0)
        self.orders[pod.order] = seen + 1
        if seen == 1:
            self.shared_orders += 1
        if pod.holds_resources:
            self.node_pods.setdefault(pod.node_name, {})[i] = pod
            nodes.add(pod.node_name)
            if not pod.deleting and pod.role is Role.ELASTIC and pod.group_key:
                self.elastic[i] = pod
        if pod.group_key:
            _entry(self.groups, pod.group_key, GroupPods).members[i] = pod
            groups.add(pod.group_key)
        if pod.job_name:
            _entry(self.jobs, pod.job_id, JobPods).members[i] = pod
            jobs.add(pod.job_id)

    def _unlink(self, pod: PodView, nodes: set[str], groups: set[str], jobs: set[str]) -> None:
        i = id(pod)
        seen = self.orders.pop(pod.order)
        if seen > 1:
            self.orders[pod.order] = seen - 1
        if seen == 2:
            self.shared_orders -= 1
        if pod.holds_resources:
            self.node_pods[pod.node_name].pop(i)
            nodes.add(pod.node_name)
            self.elastic.pop(i, None)
        if pod.group_key:
            self.groups[pod.group_key].members.pop(i)
            groups.add(pod.group_key)
        if pod.job_name:
            self.jobs[pod.job_id].members.pop(i)
            jobs.add(pod.job_id)

    def _node_changed(self, node: str) -> None:
        members = self.node_pods.get(node)
        if not members:
            self.node_pods.pop(node, None)
            self.used.pop(node, None)
            self.releasing.pop(node, None)
        else:
            ordered = sorted(members.values(), key=_by_order)
            used: Resources = {}
            for pod in ordered:
                _sum_into(used, pod.demand)
            self.used[node] = used
            leaving = [p for p in ordered if p.deleting]
            if leaving:
                self.releasing[node] = leaving
            else:
                self.releasing.pop(node, None)
        if self.free_base is not None:
            self._set_free(node)

    def _group_changed(self, key: str) -> None:
        group = self.groups[key]
        if not group.members:
            self._count(group, None)
            del self.groups[key]
            self.with_gated.pop(key, None)
            self._groups_sorted = None
            return
        before = group.ordered[0].order if group.ordered else None
        group.ordered = ordered = sorted(group.members.values(), key=_by_order)
        if ordered[0].order != before:
            self._groups_sorted = None  # a new group, or one whose first pod changed
        group.pending = ungated_pending(ordered)
        sums: list[Resources | None] = [None, None, None]  # allocated, waiting, gated
        for pod in ordered:
            if pod.deleting or pod.terminal:
                continue
            part = 0 if pod.node_name else 2 if pod.scheduling_gates else 1
            acc = sums[part]
            if acc is None:
                acc = sums[part] = {}
            _sum_into(acc, pod.requests)
        group.usage = tuple((part, tuple(res.items())) for part, res in enumerate(sums) if res is not None)
        group.gated = gated_elastic(ordered)
        group.placed = sum(1 for p in ordered if p.placed)
        if group.gated:
            self.with_gated[key] = group
        else:
            self.with_gated.pop(key, None)

    def _job_changed(self, jid: str) -> None:
        job = self.jobs[jid]
        if not job.members:
            del self.jobs[jid]
            self._jobs_sorted = None
            return
        ordered = sorted(job.members.values(), key=_by_order)
        if job.first is None or job.first.order != ordered[0].order:
            self._jobs_sorted = None  # a new job, or one whose first pod changed
        job.first = ordered[0]
        job.bounds = next((p.bounds for p in ordered if p.bounds is not None), None)
        job.running_workers = sum(1 for p in ordered if p.replica_type == "worker" and p.running)

    # --- queue usage ---------------------------------------------------------------------------

    def _count(self, group: GroupPods, queue: str | None) -> None:
        """Make ``group``'s part of the totals its current ``usage`` in ``queue`` (None: no part)."""
        want = (queue, group.usage) if queue is not None and group.usage else None
        have = group.counted
        if have is want or (have is not None and want is not None and have[0] == want[0] and have[1] is want[1]):
            return
        for sign, entry in ((-1, have), (1, want)):
            if entry is None:
                continue
            q, usage = entry
            for part, res in usage:
                totals, counts, members = self.totals[part], self.counts[part], self.members[part]
                acc, names = totals.get(q), counts.get(q)
                if acc is None or names is None:
                    acc, names = totals[q], counts[q] = {}, {}
                for k, v in res:
                    acc[k] = acc.get(k, 0) + sign * v
                    n = names[k] = names.get(k, 0) + sign
                    if n == 0:
                        del acc[k], names[k]
                m = members[q] = members.get(q, 0) + sign
                if m == 0:
                    del totals[q], counts[q], members[q]
        group.counted = want

    def queue_usage(self, queue_of: Callable[[str], str | None]) -> tuple[dict[str, Resources], ...]:
        """(allocated, pending, gated) per queue, as ``count_usage`` over every pod would give them
        (``queue_of``: a group's queue, None when its PodGroup is unknown). Copies, the caller's own."""
        for key, group in self.groups.items():
            self._count(group, queue_of(key))
        return tuple({q: dict(res) for q, res in part.items()} for part in self.totals)

    # --- free capacity --------------------------------------------------------------------------

    def free_for(self, base_free: dict[str, Resources]) -> tuple[dict[str, Resources], dict[tuple[int, int], set[str]]]:
        """Free resources per node (allocatable minus what the pods hold) and the (free GPUs, 0)
        index of ``Capacity``, for the nodes ``base_free`` describes. Shared, never written by
        the caller (``Capacity`` copies a node's dict, or an index set, before changing it)."""
        if self.free_base is not base_free:
            self.free_base = base_free
            self.free = {}
            for name in base_free:
                self._set_free(name, index=False)
            self.gpu_index = build_gpu_index(self.free)
            self._own_buckets = set()
        return self.free, self.gpu_index

    def _set_free(self, node: str, index: bool = True) -> None:
        base = self.free_base
        assert base is not None
        alloc = base.get(node)
        if alloc is None:
            return  # a pod on a node the snapshot does not list: Capacity ignores it too
        used = self.used.get(node)
        if used is None:
            free = alloc
        else:
            free = dict(alloc)
            for k, v in used.items():
                free[k] = free.get(k, 0) - v
        if index:
            before = self.free[node].get(GPU, 0)
            after = free.get(GPU, 0)
            if before != after:
                self._bucket((before, 0)).discard(node)
                if not self.gpu_index[(before, 0)]:
                    del self.gpu_index[(before, 0)]
                self._bucket((after, 0)).add(node)
        self.free[node] = free

    def _bucket(self, key: tuple[int, int]) -> set[str]:
        """The index set of ``key``, to change: copied first unless made during this update (an
        earlier cycle's Capacity may still read the old one)."""
        names = self.gpu_index.get(key)
        if names is None:
            names = self.gpu_index[key] = set()
            self._own_buckets.add(key)
        elif key not in self._own_buckets:
            names = self.gpu_index[key] = set(names)
            self._own_buckets.add(key)
        return names

    # --- what build_world reads -----------------------------------------------------------------

    def groups_in_order(self) -> list[tuple[str, GroupPods]]:
        """Groups in the order of their first pod (the order a pass over the sorted pods meets them);
        sorted again only when a group came, went or got another first pod. Read-only."""
        if self._groups_sorted is None:
            self._groups_sorted = sorted(self.groups.items(), key=lambda kv: kv[1].ordered[0].order)
        return self._groups_sorted

    def jobs_in_order(self) -> list[tuple[str, JobPods]]:
        """Jobs in the order of their first pod (as ``groups_in_order``). Read-only."""
        if self._jobs_sorted is None:
            self._jobs_sorted = sorted(self.jobs.items(), key=lambda kv: kv[1].first.order if kv[1].first else "")
        return self._jobs_sorted

    def releasing_in_order(self) -> dict[str, list[PodView]]:
        return {node: list(pods) for node, pods in sorted(self.releasing.items(), key=lambda kv: kv[1][0].order)}

    def elastic_holding(self) -> list[PodView]:
        return sorted(self.elastic.values(), key=_by_order)


class PodIndexCache:
    """The pod index kept from one cycle to the next (part of a ``PlanCache``: its owner, the agent or
    one simulation, hands the same one to consecutive cycles), and the lock that keeps two threads'
    cycles from updating it at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: dict[str, object] = {}  # "index": the PodIndex, or "last": the ids of the last cold cycle

    def reset(self) -> None:
        """Forget the previous cycle: the next one is built cold (benchmarks of a first cycle use this)."""
        with self._lock:
            self._state.clear()

    @contextmanager
    def indexed(self, pods: Sequence[PodView] | None) -> Iterator[PodIndex | None]:
        """The index of ``pods``, updated from the previous cycle's, to read only within the ``with``
        block (the lock is held meanwhile: take copies of what is needed later); None when this cycle
        should be built cold: the first, one that shares less than half its pods with the previous,
        one that lists a view twice or two views of one pod, or one that starts while another
        thread's cycle holds the index (it does not wait). ``None`` for ``pods``: a cold cycle that
        leaves what is kept alone."""
        if pods is None:
            yield None
            return
        current = dict(zip(map(id, pods), pods, strict=True))
        if len(current) != len(pods) or not self._lock.acquire(blocking=False):
            yield None
            return
        try:
            yield self._update(current)
        finally:
            self._lock.release()

    def _update(self, current: dict[int, PodView]) -> PodIndex | None:
        """(Under the lock.) Update the index, build it when the last cold cycle shared most pods, or
        remember this cycle's views and answer None (cold)."""
        state = self._state
        index = state.get("index")
        previous = index.pods if isinstance(index, PodIndex) else state.get("last")
        if isinstance(previous, dict) and current:
            gone, came = previous.keys() - current.keys(), current.keys() - previous.keys()
            if 2 * (len(gone) + len(came)) <= len(current):
                if not isinstance(index, PodIndex):  # from scratch: every view came
                    index, gone, came = PodIndex(), set(), set(current)
                    state.clear()
                    state["index"] = index
                index.update(current, gone, came)
                return None if index.shared_orders else index
        state.clear()
        state["last"] = current  # held, so its ids stay those of these views
        return None
