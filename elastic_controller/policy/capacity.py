"""Queue shares as Volcano's ``capacity`` plugin computes them (Volcano v1.15.1).

Pure rules, standard library only. Every function names the Volcano code it follows; paths are
relative to ``volcano.sh/volcano@v1.15.1`` and line numbers are those of that release:
``capacity.go`` is ``pkg/scheduler/plugins/capacity/capacity.go``, ``resource_info.go`` is
``pkg/scheduler/api/resource_info.go``. The user-facing story is in Volcano's
``docs/user-guide/how_to_use_capacity_plugin.md`` and ``docs/design/hierarchical-queue-on-capacity-plugin.md``.

What the capacity plugin decides, unlike ``proportion``:

- **Deserved** is ``spec.deserved`` as written, per resource: no weights, no water-filling. It is
  raised to ``spec.guarantee`` (``helpers.Max``); in flat mode it is first capped by the queue's real
  capability. A queue whose deserved is empty is *best-effort*: it never reclaims.
- **Real capability**: what the queue may hold at all. Flat: the cluster less every queue's guarantee,
  plus the queue's own guarantee, capped by ``spec.capability``. Hierarchical: the same from the
  parent's real capability and the siblings' guarantees, capability inherited downward; ``root`` is
  unbounded unless it has a capability.
- **Allocatable** (allocate, so also whether a lifted scale-up gate gets its pod placed): the queue's
  allocation plus the pod stays within its real capability on the dimensions the pod asks for, in
  hierarchy mode for the leaf and every ancestor. Deserved is *not* consulted: a gang is placed on
  idle GPUs beyond its queue's deserved share.
- **Enqueue**: ``minResources + allocated + inqueue - elastic <= real capability`` (leaf and ancestors).
- **Reclaim**: the gang's queue may take from others only when, with the gang, it stays within its
  real capability and is within deserved on at least one dimension the gang asks for. A victim's
  queue must be reclaimable, above deserved on a dimension the victim asks for (or have no deserved
  for those dimensions at all), and keep its guarantee once the victim is gone. With the default
  ``ancestorReclaimLevel`` 0 only leaves are compared.

One rule is ours and stricter: the planner never takes a victim queue *below* its deserved on a
dimension the victim asks for (Volcano only asks the queue to be above it before the victim leaves,
so its last victim may take the queue under). ``victim_allowed(..., strict=False)`` is Volcano's rule.

Units are this project's (``quantity.py``: cpu in millicores, memory in bytes, other resources in
whole units); Volcano keeps scalars in milli-units and compares with a 0.1 tolerance
(``minResource``), which for integer amounts is the same as comparing exactly and treating "at
least 0.1" as "positive". The ``pods`` resource is left out everywhere, as Volcano ignores it in
these comparisons (``IsIgnoredScalarResource``). Unbounded amounts are ``math.inf`` (Volcano's
``math.MaxFloat64``).

Not modelled: DRA quotas (``capacity.DynamicResourceAllocationEnable``), the queue-allocation-gate
reservations (feature gate ``SchedulingGatesQueueAdmission``), and ``ancestorReclaimLevel`` above 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .model import QueueView
from .volcano_amounts import (
    _STANDARD,
    CPU,
    INF,
    MEMORY,
    Amounts,
    _clean,
    _get,
    _scalars,
    add,
    exceeded_part,
    greater_partly_relevant,
    guarantee_kept,
    has_relevant_deserved,
    is_empty,
    less_equal_on,
    less_equal_partly_on,
    maximum,
    min_dimension,
    names,
    relevant_dimensions,
    sub,
)

ROOT = "root"  # capacity.go:49 rootQueueID
DEFAULT_QUEUE = "default"
# -- Queue attributes (buildQueueAttrs / buildHierarchicalQueueAttrs) ------------------------------


@dataclass(frozen=True, slots=True)
class QueueAttr:
    """One queue as the plugin sees it at session open (capacity.go:81 ``queueAttr``), without the
    usage: that is passed to each rule, as it changes while a plan is built."""

    name: str
    deserved: dict[str, float]
    guarantee: dict[str, float]
    capability: dict[str, float]  # as enforced: {} when none (unbounded)
    real_capability: dict[str, float]
    ancestors: tuple[str, ...] = ()  # root first, parent last; () in flat mode
    children: tuple[str, ...] = ()
    reclaimable: bool = True
    open: bool = True

    @property
    def best_effort(self) -> bool:
        """No deserved: the queue never reclaims (capacity.go:1817, :677)."""
        return is_empty(self.deserved)


@dataclass(frozen=True, slots=True)
class CapacityShares:
    """Every queue's attributes for one session, and whether the plugin would schedule at all.

    ``ready`` False is Volcano's ``readyToSchedule`` false (capacity.go:451): a hierarchy it cannot
    build (a parent that does not exist, a cycle, a job in a queue with children, no ``root``); every
    hook then refuses. ``problem`` says why."""

    queues: dict[str, QueueAttr]
    hierarchy: bool
    ready: bool = True
    problem: str = ""
    total: dict[str, float] = field(default_factory=dict)

    def get(self, queue: str) -> QueueAttr | None:
        return self.queues.get(queue)

    def is_leaf(self, queue: str) -> bool:
        """``isLeafQueue`` (capacity.go:1568)."""
        attr = self.queues.get(queue)
        return attr is not None and not attr.children

    def chain(self, queue: str) -> list[str]:
        """The queue, then its ancestors from its parent up to ``root`` (capacity.go:1664: checked
        from the leaf up); just the queue in flat mode."""
        attr = self.queues.get(queue)
        if attr is None:
            return []
        return [queue, *reversed(attr.ancestors)]

    def rolled_up(self, allocated: Mapping[str, Amounts]) -> dict[str, dict[str, float]]:
        """Each queue's allocation with its descendants' added (capacity.go:1285: a job's usage is
        added to every ancestor); ``allocated`` as given in flat mode. Only leaves hold jobs."""
        out: dict[str, dict[str, float]] = {q: _clean(res) for q, res in allocated.items()}
        if not self.hierarchy:
            return out
        for queue, res in allocated.items():
            attr = self.queues.get(queue)
            if attr is None:
                continue
            for anc in attr.ancestors:
                out[anc] = add(out.get(anc, {}), _clean(res))
        return out


def _synthesized(queues: Iterable[QueueView]) -> dict[str, QueueView]:
    by_name = {q.name: q for q in queues}
    # The scheduler creates both at start-up (pkg/scheduler/cache/cache.go:513 newDefaultAndRootQueue).
    by_name.setdefault(ROOT, QueueView(name=ROOT, parent=""))
    by_name.setdefault(DEFAULT_QUEUE, QueueView(name=DEFAULT_QUEUE, parent=ROOT))
    return by_name


def build(queues: Iterable[QueueView], total: Mapping[str, int], hierarchy: bool = False,
          job_queues: Iterable[str] = ()) -> CapacityShares:
    """Every queue's attributes as the plugin builds them at session open.

    ``total``: the cluster's allocatable (``ssn.TotalResource``). ``job_queues``: the queues that
    hold jobs (in hierarchy mode a job in a queue with children stops all scheduling).
    ``root`` and ``default`` are added when not listed (the scheduler creates them)."""
    by_name = _synthesized(queues)
    total_f = _clean(total)
    if hierarchy:
        return _build_hierarchy(by_name, total_f, set(job_queues))
    return _build_flat(by_name, total_f)


def _build_flat(by_name: Mapping[str, QueueView], total: dict[str, float]) -> CapacityShares:
    """``buildQueueAttrs`` (capacity.go:1042)."""
    total_guarantee: dict[str, float] = {}
    for q in by_name.values():  # capacity.go:1043: every queue's guarantee, with jobs or not
        total_guarantee = add(total_guarantee, _clean(q.guarantee))
    attrs: dict[str, QueueAttr] = {}
    free = exceeded_part(total, total_guarantee)
    for name, q in sorted(by_name.items()):
        guarantee = _clean(q.guarantee)
        capability: dict[str, float] = {}
        if q.capability:  # capacity.go:1068: cpu/memory not set (or <= 0) are unbounded
            capability = _clean(q.capability)
            for k in _STANDARD:
                if _get(capability, k) <= 0:
                    capability[k] = INF
        real = add(free, guarantee)  # capacity.go:1081
        if capability:
            real = min_dimension(real, capability)  # capacity.go:1086
        deserved = min_dimension(_clean(q.deserved), real)  # capacity.go:1138
        deserved = maximum(deserved, guarantee)  # capacity.go:1141
        attrs[name] = QueueAttr(name, deserved, guarantee, capability, real,
                                reclaimable=q.reclaimable, open=q.state == "Open")
    return CapacityShares(attrs, hierarchy=False, total=total)


def _build_hierarchy(by_name: Mapping[str, QueueView], total: dict[str, float],
                     job_queues: set[str]) -> CapacityShares:
    """``buildHierarchicalQueueAttrs`` (capacity.go:1196), ``updateAncestors`` (:1435) and
    ``checkHierarchicalQueue`` (:1470)."""
    parent_of: dict[str, str] = {}
    problem = ""
    for name, q in sorted(by_name.items()):
        if name == ROOT:
            continue
        parent = q.parent or ROOT
        if parent not in by_name and not problem:
            problem = f"queue {name} has parent {parent}, which does not exist"  # capacity.go:1451
        parent_of[name] = parent
    ancestors: dict[str, tuple[str, ...]] = {ROOT: ()}

    def walk(name: str, seen: tuple[str, ...]) -> tuple[str, ...] | None:
        if name in ancestors:
            return ancestors[name]
        if name in seen:
            return None  # capacity.go:1441: a cycle
        parent = parent_of.get(name)
        if parent is None or parent not in by_name:
            return None
        up = walk(parent, (*seen, name))
        if up is None:
            return None
        ancestors[name] = (*up, parent)
        return ancestors[name]

    for name in sorted(by_name):
        if walk(name, ()) is None and not problem:
            problem = f"queue {name}: cycle in the queue hierarchy"
    children: dict[str, list[str]] = {}
    for name in sorted(ancestors):
        if name != ROOT:
            children.setdefault(ancestors[name][-1], []).append(name)
    for name in sorted(job_queues):
        if children.get(name) and not problem:  # capacity.go:1225
            problem = f"queue {name} holds jobs but is not a leaf queue"

    deserved = {n: _clean(by_name[n].deserved) for n in ancestors}
    guarantee = {n: _clean(by_name[n].guarantee) for n in ancestors}
    capability = {n: _clean(by_name[n].capability) for n in ancestors}  # capacity.go:1422 (no inf here)
    real: dict[str, dict[str, float]] = {}
    if is_empty(capability[ROOT]):  # capacity.go:1323: root is unbounded unless it has a capability
        root_cap = {CPU: INF, MEMORY: INF}
        root_cap.update({k: INF for k in _scalars(total)})
        capability[ROOT] = root_cap
    real[ROOT] = dict(capability[ROOT])  # capacity.go:1326

    def check(parent: str) -> None:  # capacity.go:1470 checkHierarchicalQueue
        kids = children.get(parent, [])
        total_deserved: dict[str, float] = {}
        total_guarantee: dict[str, float] = {}
        for c in kids:
            deserved[c] = maximum(deserved[c], guarantee[c])  # capacity.go:1474
            total_deserved = add(total_deserved, deserved[c])
            total_guarantee = add(total_guarantee, guarantee[c])
            cap = capability[c]
            for k in _STANDARD:  # capacity.go:1478: cpu/memory not set are the parent's
                if _get(cap, k) <= 0:
                    cap[k] = _get(capability[parent], k)
            for k in _scalars(capability[parent]):  # capacity.go:1486: scalars not set are the parent's
                cap.setdefault(k, capability[parent][k])
        if parent == ROOT:  # capacity.go:1505
            guarantee[ROOT] = total_guarantee
            deserved[ROOT] = total_deserved
        for c in kids:  # capacity.go:1510
            real[c] = min_dimension(add(exceeded_part(real[parent], total_guarantee), guarantee[c]), capability[c])
        for c in kids:
            check(c)

    check(ROOT)
    attrs = {
        n: QueueAttr(n, deserved[n], guarantee[n], capability[n], real.get(n, {}),
                     ancestors=ancestors[n], children=tuple(children.get(n, ())),
                     reclaimable=by_name[n].reclaimable, open=by_name[n].state == "Open")
        for n in sorted(ancestors)
    }
    return CapacityShares(attrs, hierarchy=True, ready=not problem, problem=problem, total=total)


# -- The hooks ------------------------------------------------------------------------------------


def share(attr: QueueAttr, allocated: Amounts) -> float:
    """``updateQueueAttrShare`` (capacity.go:1800): the largest allocated/deserved over the
    dimensions deserved names; a best-effort queue is always at 1."""
    if attr.best_effort:
        return 1.0
    out = 0.0
    for k in names(attr.deserved):
        d, a = attr.deserved[k], _get(allocated, k)
        out = max(out, a / d if d else (0.0 if a == 0 else 1.0))  # helpers.Share
    return out


def queue_order_key(attr: QueueAttr, allocated: Amounts) -> tuple[float, int]:
    """``compareShareWithDeserved`` (capacity.go:1544), flat ``QueueOrderFn`` (:1183) without the
    priority: lower share first, and at equal shares a queue with deserved before a best-effort one."""
    return (share(attr, allocated), 1 if attr.best_effort else 0)


def _common_level(left: QueueAttr, right: QueueAttr) -> int:
    """``getQueueLevel`` (capacity.go:1916): the index, in both ancestor lists (root first), of the
    deepest ancestor the two queues share."""
    level = 0
    for i in range(min(len(left.ancestors), len(right.ancestors))):
        if left.ancestors[i] != right.ancestors[i]:
            return level
        level = i
    return level


def compare_queues(shares: CapacityShares, rolled: Mapping[str, Amounts], left: str, right: str) -> int:
    """The capacity plugin's ``QueueOrderFn``: negative when ``left`` goes first. ``rolled``: each
    queue's allocation with its subtree's (``CapacityShares.rolled_up``).

    Flat (capacity.go:1183): ``compareShareWithDeserved`` (:1544), lower ``share`` first, at equal
    shares a queue with deserved first. Hierarchical (:1348): a leaf before a queue with children;
    two leaves are compared by their ancestors just below the deepest one they share (the queue
    itself where its ancestors end). Queue ``spec.priority`` (compared first) is not modelled."""
    lattr, rattr = shares.queues[left], shares.queues[right]
    if shares.hierarchy:
        lleaf, rleaf = not lattr.children, not rattr.children
        if lleaf != rleaf:
            return -1 if lleaf else 1
        if lleaf:
            level = _common_level(lattr, rattr)
            if level + 1 < len(lattr.ancestors):
                lattr = shares.queues[lattr.ancestors[level + 1]]
            if level + 1 < len(rattr.ancestors):
                rattr = shares.queues[rattr.ancestors[level + 1]]
    lkey = queue_order_key(lattr, rolled.get(lattr.name, {}))
    rkey = queue_order_key(rattr, rolled.get(rattr.name, {}))
    return -1 if lkey < rkey else 1 if lkey > rkey else 0


def compare_victim_queues(shares: CapacityShares, rolled: Mapping[str, Amounts], left: str, right: str,
                          reclaimer: str) -> int:
    """The order gang reclaim takes victim queues in (``VictimQueueOrderFn`` through
    ``queueLessFn``, gangreclaim.go): negative when ``left``'s victims come first. Hierarchical
    (capacity.go:1383): a queue sharing a deeper ancestor with the ``reclaimer``'s first; otherwise
    (and always in flat mode, where the plugin registers none) the reverse of ``compare_queues``
    (framework/session_plugins.go:814 ``!QueueOrderFn``)."""
    if shares.hierarchy:
        me = shares.queues[reclaimer]
        llevel = _common_level(shares.queues[left], me)
        rlevel = _common_level(shares.queues[right], me)
        if llevel != rlevel:
            return -1 if llevel > rlevel else 1
    return -compare_queues(shares, rolled, left, right)


def _queue_or_why_not(shares: CapacityShares, queue: str) -> QueueAttr | str:
    """``queue``'s attributes, or why no hook of the plugin takes it: the plugin does not schedule
    (``readyToSchedule``), or the queue does not exist."""
    if not shares.ready:
        return f"the capacity plugin does not schedule: {shares.problem}"
    attr = shares.get(queue)
    if attr is None:
        return f"queue {queue} does not exist"
    return attr


def _why_not_open(shares: CapacityShares, queue: str) -> str | None:
    attr = _queue_or_why_not(shares, queue)
    if isinstance(attr, str):
        return attr
    if not attr.open:
        return f"queue {queue} is not open"
    if shares.hierarchy and attr.children:
        return f"queue {queue} is not a leaf queue"
    return None


def allocatable_reason(shares: CapacityShares, allocated: Mapping[str, Amounts], queue: str,
                       request: Amounts) -> str | None:
    """None when Volcano's allocate would place a pod asking ``request`` in ``queue`` as far as the
    capacity plugin is concerned, else why not. ``allocated``: per leaf queue (rolled up here).

    ``AddAllocatableFn`` (capacity.go:717): the queue is open, schedulable, a leaf in hierarchy mode;
    ``checkQueueAllocatableHierarchically`` (:1662) and ``queueAllocatableWithReserved`` (:1629): the
    queue's allocation plus the request within its real capability on the requested dimensions, for
    the queue and every ancestor."""
    why = _why_not_open(shares, queue)
    if why is not None:
        return why
    rolled = shares.rolled_up(allocated)
    req = _clean(request)
    for q in shares.chain(queue):
        attr = shares.queues[q]
        future = add(rolled.get(q, {}), req)
        if not less_equal_on(future, attr.real_capability, req):
            over = sorted(k for k, v in req.items() if v > 0 and _get(future, k) > _get(attr.real_capability, k))
            return f"queue {q} would be above its real capability on {', '.join(over)}"
    return None


def allocatable(shares: CapacityShares, allocated: Mapping[str, Amounts], queue: str, request: Amounts) -> bool:
    """``allocatable_reason`` is None."""
    return allocatable_reason(shares, allocated, queue, request) is None


def capability_excess(shares: CapacityShares, allocated: Mapping[str, Amounts], queue: str,
                      request: Amounts) -> dict[str, dict[str, float]]:
    """Per queue of ``queue``'s chain (leaf and ancestors): by how much, per requested dimension, its
    allocation plus ``request`` would be above its real capability ({} when allocatable on capacity
    grounds). What must leave the queue (or, for an ancestor, its subtree) first."""
    rolled = shares.rolled_up(allocated)
    req = _clean(request)
    out: dict[str, dict[str, float]] = {}
    for q in shares.chain(queue):
        attr = shares.queues[q]
        future = add(rolled.get(q, {}), req)
        over = {k: _get(future, k) - _get(attr.real_capability, k) for k, v in req.items() if v > 0}
        over = {k: v for k, v in over.items() if v > 0}
        if over:
            out[q] = over
    return out


def enqueueable(shares: CapacityShares, queue: str, min_resources: Amounts | None,
                allocated: Mapping[str, Amounts], inqueue: Mapping[str, Amounts],
                elastic: Mapping[str, Amounts]) -> bool:
    """Whether Volcano's enqueue admits a PodGroup with ``min_resources`` into ``queue``.

    ``AddJobEnqueueableFn`` (capacity.go:742): open, schedulable, a leaf in hierarchy mode; no
    ``minResources``: admitted; else ``jobEnqueueable`` (:1680) for the queue and every ancestor
    (:1708): ``minResources + allocated + inqueue - elastic`` within real capability on the
    dimensions ``minResources`` names. ``allocated``, ``inqueue`` (``job_inqueue``) and ``elastic``
    (``job_elastic``) are per leaf queue, rolled up here."""
    if _why_not_open(shares, queue) is not None:
        return False
    if not min_resources or is_empty(_clean(min_resources)):
        return True  # capacity.go:769
    minimum = _clean(min_resources)
    rolled_alloc = shares.rolled_up(allocated)
    rolled_in = shares.rolled_up(inqueue)
    rolled_el = shares.rolled_up(elastic)
    for q in shares.chain(queue):
        attr = shares.queues[q]
        r = sub(add(add(minimum, rolled_alloc.get(q, {})), rolled_in.get(q, {})), rolled_el.get(q, {}))
        if not less_equal_on(r, attr.real_capability, minimum):
            return False
    return True


def job_elastic(allocated: Amounts, min_resources: Amounts | None) -> dict[str, float]:
    """``JobInfo.GetElasticResources`` (pkg/scheduler/api/job_info.go:654): what a job holds beyond
    its ``minResources``."""
    return exceeded_part(_clean(allocated), _clean(min_resources))


def job_inqueue(min_resources: Amounts | None, allocated: Amounts, phase: str,
                allocated_tasks: int = 0, min_member: int = 0, gated: Amounts | None = None) -> dict[str, float]:
    """What an admitted job still reserves in its queue (capacity.go:1110-1130 with
    ``util.GetInqueueResource``, pkg/scheduler/plugins/util/util.go:97): for an ``Inqueue`` PodGroup,
    and for a ``Running`` one with at least ``minMember`` tasks allocated, its ``minResources`` less
    what it holds, per dimension ``minResources`` names (never negative), less what its
    scheduling-gated pods ask (``gated``; ``JobInfo.DeductSchGatedResources``, api/job_info.go:631,
    applied at capacity.go:1117 and :1129; floored at 0)."""
    if not min_resources:
        return {}
    if phase == "Inqueue" or (phase == "Running" and allocated_tasks >= min_member):
        minimum = _clean(min_resources)
        out = {k: v - _get(allocated, k) for k, v in minimum.items() if v - _get(allocated, k) > 0}
        if gated:
            out = {k: v - _get(gated, k) for k, v in out.items() if v - _get(gated, k) > 0}
        return out
    return {}


def may_reclaim_reason(shares: CapacityShares, allocated: Mapping[str, Amounts], queue: str,
                       request: Amounts) -> str | None:
    """None when ``queue`` may reclaim from other queues for a gang asking ``request`` in all, else why not.

    ``AddPreemptiveFn`` (capacity.go:648): open and schedulable; with the gang, the queue's
    allocation stays within its real capability on the gang's dimensions (:670), and is within its
    deserved on at least one of them (:677, ``LessEqualPartlyWithDimensionZeroFiltered``); a queue
    without deserved never reclaims. With ``ancestorReclaimLevel`` 0 only the leaf is compared."""
    attr = _queue_or_why_not(shares, queue)
    if isinstance(attr, str):
        return attr
    if not attr.open:
        return f"queue {queue} is not open"
    req = _clean(request)
    future = add(_clean(allocated.get(queue, {})), req)
    if not less_equal_on(future, attr.real_capability, req):
        return f"queue {queue} would be above its real capability with the gang"
    if attr.best_effort:
        return f"queue {queue} has no deserved (best-effort): it never reclaims"
    if not less_equal_partly_on(future, attr.deserved, req):
        return f"queue {queue} would be above its deserved on every dimension the gang asks for"
    return None


def may_reclaim(shares: CapacityShares, allocated: Mapping[str, Amounts], queue: str, request: Amounts) -> bool:
    """``may_reclaim_reason`` is None."""
    return may_reclaim_reason(shares, allocated, queue, request) is None


def victim_reason(shares: CapacityShares, allocated: Amounts, queue: str, request: Amounts,
                  gang_request: Amounts | None = None, strict: bool = True) -> str | None:
    """None when a pod asking ``request`` of ``queue`` (whose allocation is ``allocated`` *with the
    pod still in it*) may be taken for a gang of another queue, else why not.

    Volcano (``AddUnifiedEvictableFn`` for gang reclaim, capacity.go:613-643; ``AddReclaimableFn``,
    :459-603): the queue is reclaimable (gangreclaim.go ``selectDomainBundles``); its guarantee is
    kept once the pod is gone (``checkGuaranteeConstraint``, :1842); and either its deserved names
    none of the pod's dimensions (``isImmediateVictim``, :1855) or its allocation is above deserved on
    a dimension the pod asks for that deserved has (``checkDeservedExceedance``, :1876). With
    ``gang_request``, a pod sharing no dimension with the gang is skipped (``shouldSkipReclaimee``, :1831).
    With ``ancestorReclaimLevel`` 0 only the leaf queue is compared (:554).

    ``strict`` (ours): the queue also stays at or above its deserved, once the pod is gone, on every
    dimension the pod asks for that deserved has: the planner never takes a queue below its deserved
    share, where Volcano lets the last victim do so."""
    attr = _queue_or_why_not(shares, queue)
    if isinstance(attr, str):
        return attr
    if not attr.reclaimable:
        return f"queue {queue} is not reclaimable"
    req = _clean(request)
    alloc = _clean(allocated)
    if gang_request is not None and not names(req) & names(_clean(gang_request)):
        return "it shares no resource with the gang"
    if not guarantee_kept(alloc, req, attr.guarantee):
        return f"queue {queue} would fall below its guarantee"
    if has_relevant_deserved(req, attr.deserved):
        if not greater_partly_relevant(alloc, attr.deserved, req):
            return f"queue {queue} is not above its deserved on a resource the pod asks for"
    if strict:
        after = sub(alloc, req)
        below = [k for k in relevant_dimensions(attr.deserved, req) if _get(after, k) < _get(attr.deserved, k)]
        if below:
            return f"queue {queue} would fall below its deserved on {', '.join(below)}"
    return None


def victim_allowed(shares: CapacityShares, allocated: Amounts, queue: str, request: Amounts,
                   gang_request: Amounts | None = None, strict: bool = True) -> bool:
    """``victim_reason`` is None."""
    return victim_reason(shares, allocated, queue, request, gang_request, strict) is None


def filter_victims(shares: CapacityShares, allocated: Mapping[str, Amounts],
                   candidates: Sequence[tuple[str, Amounts]], gang_request: Amounts | None = None,
                   strict: bool = True) -> list[int]:
    """The indexes of ``candidates`` ((queue, request), in the order they are considered) that may
    be victims, each judged with the ones accepted before it gone from its queue (capacity.go:621-643:
    ``allocations`` cloned per queue and lowered as victims are accepted)."""
    left: dict[str, dict[str, float]] = {}
    out = []
    for i, (queue, request) in enumerate(candidates):
        if queue not in left:
            left[queue] = _clean(allocated.get(queue, {}))
        if victim_allowed(shares, left[queue], queue, request, gang_request, strict):
            left[queue] = sub(left[queue], _clean(request))
            out.append(i)
    return out


def victims_reason(shares: CapacityShares, allocated: Amounts, queue: str, requests: Sequence[Amounts],
                   gang_request: Amounts | None = None) -> str | None:
    """None when every pod of ``requests`` (all of ``queue``, whose allocation ``allocated`` still
    holds them) may be taken together for a gang of another queue, with our stricter rule; else why not.

    The same as ``victim_reason(strict=True)`` for each pod in turn, each judged with the ones before
    it gone (``filter_victims``), in whatever order: with the stricter rule every condition is
    checked on the dimensions the pod asks for, and only pods asking for a dimension lower it, so
    the set passes exactly when each pod passes against the allocation with the whole set gone."""
    after = _clean(allocated)
    for req in requests:
        after = sub(after, _clean(req))
    for req in requests:
        why = victim_reason(shares, add(after, _clean(req)), queue, req, gang_request, strict=True)
        if why is not None:
            return why
    return None
