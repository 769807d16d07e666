"""One cycle's indexed view of the cluster: gangs, jobs, capacity. Built once, read by planners."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter, is_

from . import keys
from .attained import attained_service
from .budget import RestartBudget, budget_of
from .capacity_ledger import CapacityModel
from .contract import in_place
from .cooldowns import fulfillment, in_cooldown
from .fit import Capacity, pod_demand
from .keys import Role
from .model import ElasticBounds, JobView, NodeView, PodGroupView, PodView, Snapshot
from .podindex import PodIndex, PodIndexCache, gated_elastic, ungated_pending
from .quantity import Resources
from .settings import ORDER_BY_SERVICE, ElasticConfig, QueuePolicy, SharesConfig
from .sharemodel import ProportionModel, ShareModel
from .shares import QueueShare, Usage, cluster_capacity, count_usage, dominant_resource
from .worldsizes import AllowedCounts

_by_order = attrgetter("order")

# Why a job's workers are never victims this cycle, whatever the gang (``World.never_victim``): the
# eviction search's exclusion reasons, and what keeps ``gates.blocking_gangs`` from counting them.
TOO_SMALL = "below minWorkersToShrink"  # it runs fewer workers than its queue's minWorkersToShrink
# It has allowed counts (worker-counts, worker-step) none of which is below its count, or its contract
# is unusable: it is never shrunk.
ALLOWED_COUNTS = "no smaller allowed count"
# Why a node's running pods are ghosts (``World.ghosts``; a reason reads ``on node N (not Ready)``).
NOT_READY = "not Ready"
NO_SUCH_NODE = "not in the snapshot"


@dataclass(slots=True)
class JobState:
    """An elastic job as the planners see it (keyed by its PodGroup, ``ns/name``)."""

    key: str
    pg: PodGroupView | None
    queue: str
    priority: int
    bounds: ElasticBounds | None
    running_workers: int = 0
    cooling: bool = False
    taken: int = 0  # victims taken this cycle
    added: int = 0  # gates lifted this cycle
    # What disrupting the job loses beyond fairness (victim criterion 3, see ordering.py), fixed for
    # the cycle: (-its last checkpoint's POSIX time, or +inf when unknown; the GPUs that restart).
    loss: tuple[float, int] = (math.inf, 0)
    job_ref: str = ""  # ns/PyTorchJob name (from the pods' job-name label; "" when none)
    # torchrun's restarts our shrinks have used (budget.py); None when the PyTorchJob is not known.
    budget: RestartBudget | None = None
    # GPU-seconds the job has held (attained.py), as of the cycle's now: the fair order's criterion.
    served: float = 0.0
    by_service: bool = False  # its queue orders by attained service (orderBy: attainedService)
    # Its PyTorchJob says ``resize: in-place`` (issue 39): its queue's inPlace* settings relax the
    # rules that exist because a scale event restarts a job (settings.QueuePolicy).
    in_place: bool = False

    def current_workers(self) -> int:
        return self.running_workers - self.taken + self.added

    def fulfillment(self) -> float:
        if self.bounds is None:
            return 1.0
        return fulfillment(self.current_workers(), self.bounds.min_replicas, self.bounds.max_replicas)

    def can_lose(self) -> bool:
        """One more victim leaves at least min workers running."""
        return self.bounds is not None and self.current_workers() - 1 >= self.bounds.min_replicas


def allowed_of(job: JobState) -> AllowedCounts | None:
    """The Worker counts ``job`` may be shrunk or grown to (its PodGroup's ``worker-counts`` or
    ``worker-step``, as the controller copied them), or None when any count in [min, max] is."""
    if job.pg is None or job.bounds is None or not job.pg.worker_sizes.constrained:
        return None
    allowed = job.pg.worker_sizes.allowed(job.bounds.min_replicas, job.bounds.max_replicas)
    return None if allowed.every else allowed


def no_smaller_count(allowed: AllowedCounts | None, workers: int) -> bool:
    """A job at ``workers`` with ``allowed`` counts (None: any) has no allowed count to shrink to
    (``ALLOWED_COUNTS``; an unusable contract allows none). The one test the eviction search and the
    gates share."""
    return allowed is not None and allowed.floor(workers - 1) is None


@dataclass(slots=True)
class Gang:
    pg: PodGroupView
    priority: int
    placed: int
    pending: list[PodView]  # ungated pending pods, highest task priority first, then name
    needed: list[PodView]
    since: datetime | None
    releasing_for: list[PodView] = field(default_factory=list)  # terminating victims evicted for it

    @property
    def key(self) -> str:
        return self.pg.key

    @property
    def queue(self) -> str:
        return self.pg.queue


@dataclass(slots=True)
class World:
    snapshot: Snapshot
    cfg: ElasticConfig
    now: datetime
    pods_by_group: dict[str, list[PodView]]
    podgroups: dict[str, PodGroupView]
    jobs: dict[str, JobState]
    free_now: Capacity  # allocatable minus every pod still holding resources
    releasing: dict[str, list[PodView]]  # node -> terminating pods still holding resources
    shares: dict[str, QueueShare]  # = model.shares
    dominant: str
    waiting: list[Gang]
    elastic_holding: list[PodView]  # elastic pods of a group holding resources, not terminating
    model: ShareModel  # the queue-share model (sharemodel.py): every share rule asks it
    # Ghost pods: running on a node that is lost (not Ready, or not in the snapshot), pod key -> why
    # (``on node N (not Ready)``). Their kubelet may be gone: they count in no job's running workers
    # and are never victims (until the node lifecycle controller deletes them, or the node is back).
    # Their resources stay accounted to their node (which takes no new pods anyway).
    ghosts: dict[str, str] = field(default_factory=dict)
    usage: Usage | None = None  # per queue, as counted for the shares (reused for Volcano's view)
    cluster: Resources | None = None  # the schedulable nodes' allocatable
    # Per group with gated elastic pods: (those pods in order, its pods placed); None: not known yet.
    _gated: dict[str, tuple[list[PodView], int]] | None = None
    # (namespace, queue) -> the elastic workers running there at the cycle's start; None: not counted yet.
    _tenants: dict[tuple[str, str], int] | None = None

    def gated_elastic(self) -> dict[str, tuple[list[PodView], int]]:
        """Groups with pending elastic pods held by any scheduling gate: group key -> (those pods
        in pod order, how many of the group's pods are placed)."""
        if self._gated is None:
            self._gated = {}
            for key, pods in self.pods_by_group.items():
                gated = gated_elastic(pods)
                if gated:
                    self._gated[key] = (gated, sum(1 for p in pods if p.placed))
        return self._gated

    def share_excess(self, gang: Gang, allocated: int | None = None) -> int:
        """How much of the dominant resource ``gang``'s queue would be above its admitted share
        with the gang's needed pods placed (``ShareModel.enqueue_excess``): 0 when the share model
        admits the gang. ``allocated``: the queue's allocation to assume (default: the snapshot's)."""
        need = sum(p.requests.get(self.dominant, 0) for p in gang.needed)
        return self.model.enqueue_excess(gang.queue, need, allocated)

    def policy(self, queue: str) -> QueuePolicy:
        return self.cfg.queue_policy(queue)

    def too_small_to_shrink(self, job_key: str) -> bool:
        """The job runs fewer workers than its queue's ``minWorkersToShrink`` (counted at the cycle's
        start), and so does its tenant in that queue (``tenant_workers``): none of its workers is a
        victim this cycle (issue 19: a shrink would cost it a large part of its speed;
        ``tests/unit/test_policy_small_jobs.py``)."""
        return self.never_victim(job_key) == TOO_SMALL

    def tenant_workers(self, job_key: str, workers: int | None = None) -> int:
        """The elastic workers the job's tenant (its namespace) runs in the job's queue at the cycle's
        start in its small jobs (each below its own ``minWorkersToShrink``), this one counted whatever
        its size, at ``workers`` when given. ``minWorkersToShrink`` protects a small tenant, not a
        small job: one job split into several small ones (issue 36, T14) is as shrinkable as the job
        was; a big job of the same namespace (shrinkable anyway) does not count, so a small neighbour
        in a shared team namespace keeps its protection."""
        if self._tenants is None:
            self._tenants = {}
            for j in self.jobs.values():
                if j.bounds is not None and self._small(j.key, j.running_workers):
                    at = (j.key.partition("/")[0], j.queue)
                    self._tenants[at] = self._tenants.get(at, 0) + j.running_workers
        job = self.jobs[job_key]
        total = self._tenants.get((job_key.partition("/")[0], job.queue), 0)
        if job.bounds is not None:
            counted = job.running_workers if self._small(job_key, job.running_workers) else 0
            total += (job.running_workers if workers is None else workers) - counted
        return total

    def _small(self, job_key: str, workers: int) -> bool:
        job = self.jobs[job_key]
        return workers < self.policy(job.queue).min_workers_to_shrink(job.in_place)

    def never_victim(self, job_key: str, workers: int | None = None) -> str | None:
        """Why none of the job's workers can be a victim this cycle, for any gang (``TOO_SMALL``,
        ``ALLOWED_COUNTS``, its restart budget spent: ``budget.RestartBudget.reason``), or None.
        ``workers``: the size to judge it at (default: its running workers at the cycle's start, as
        the eviction search does; the gates ask about the size a growth would give it). The eviction
        search (``eviction.admissibility``) and the gates (``gates.blocking_gangs``) both ask this, so
        that they cannot disagree on who may give."""
        job = self.jobs.get(job_key)
        if job is None:
            return None
        n = job.running_workers if workers is None else workers
        least = self.policy(job.queue).min_workers_to_shrink(job.in_place)
        if n < least and self.tenant_workers(job_key, workers) < least:  # (T14: the tenant's size)
            return TOO_SMALL
        if no_smaller_count(allowed_of(job), n):
            return ALLOWED_COUNTS
        if job.budget is not None and job.budget.spent:
            return job.budget.reason()
        return None

    def future_capacity(self) -> Capacity:
        """Free capacity once every terminating pod has released its resources."""
        cap = self.free_now.copy()
        for node, pods in self.releasing.items():
            for pod in pods:
                cap.give(node, pod_demand(pod))
        return cap


@dataclass(frozen=True, slots=True)
class NodeBase:
    """What a cycle derives from the nodes alone. The agent's views are memoised and the simulator's
    nodes never change, so consecutive cycles usually hand in the very same node views: this is then
    computed once, not at every cycle (kept in the ``PlanCache``, see ``node_base``)."""

    nodes: tuple[NodeView, ...]  # as handed in: the memo's key (held, so identities stay valid)
    by_name: dict[str, NodeView]  # sorted by name
    free: dict[str, Resources]  # allocatable with the default pod slots; shared, never written
    cluster: Resources  # the schedulable nodes' allocatable
    dominant: str
    down: dict[str, str]  # nodes that are not Ready: name -> why (their running pods are ghosts)


class PlanCache:
    """What one planner's owner (the agent, one simulation) keeps from one cycle to the next: the node
    base of the last cycle's nodes and the pod index (``podindex``). Hand the same one to consecutive
    ``plan_cycle`` calls; without one, every cycle is built cold. The plans are the same either way."""

    def __init__(self) -> None:
        self.pods = PodIndexCache()
        self.nodes: NodeBase | None = None  # the nodes of the previous cycle
        self.world: World | None = None  # the last cycle's world (the agent's state gauges read it, then drop it)

    def reset(self) -> None:
        """Forget everything: the next cycle is built cold."""
        self.pods.reset()
        self.nodes = None
        self.world = None


def node_base(nodes: tuple[NodeView, ...], cache: PlanCache | None = None) -> NodeBase:
    """``NodeBase`` for ``nodes``, reused from ``cache`` while the same node views come in the same order."""
    last = cache.nodes if cache is not None else None
    if last is not None:
        if last.nodes is nodes or (len(last.nodes) == len(nodes) and all(map(is_, last.nodes, nodes))):
            return last
    by_name = {n.name: n for n in sorted(nodes, key=attrgetter("name"))}
    free: dict[str, Resources] = {}
    for n in by_name.values():
        alloc = dict(n.allocatable)
        alloc.setdefault("pods", 110)
        free[n.name] = alloc
    down = {n.name: NOT_READY for n in by_name.values() if not n.ready}
    base = NodeBase(nodes, by_name, free, cluster_capacity(nodes), dominant_resource(nodes), down)
    if cache is not None:
        cache.nodes = base
    return base


def group_priority(pg: PodGroupView | None, classes: Mapping[str, int]) -> int:
    if pg is None or not pg.priority_class_name:
        return 0
    return classes.get(pg.priority_class_name, 0)


def job_id(pod: PodView) -> str:
    return pod.job_id


def _needed_order(pod: PodView) -> tuple[int, str]:
    return (-pod.task_priority, pod.name)


def share_model(shares: SharesConfig, snapshot: Snapshot, podgroups: Mapping[str, PodGroupView], usage: Usage,
                cluster: Resources, dominant: str) -> ShareModel:
    """The queue-share model ``shares.plugin`` names (config ``shares``): ``proportion`` (flat
    water-filling, ``sharemodel.ProportionModel``) or ``capacity`` (``capacity.CapacityModel``,
    hierarchical with ``shares.hierarchy``)."""
    if shares.plugin == CapacityModel.name:
        return CapacityModel.of(snapshot.queues, snapshot.nodes, podgroups, usage, cluster, dominant,
                                snapshot.pods, hierarchy=shares.hierarchy)
    return ProportionModel.of(snapshot.queues, snapshot.nodes, podgroups, usage, cluster, dominant, snapshot.pods)


def build_world(snapshot: Snapshot, cfg: ElasticConfig, now: datetime, cache: PlanCache | None = None) -> World:
    """The cycle's World. ``cache``: update what the previous cycle derived from its nodes and pods
    (see ``PlanCache``) instead of walking every pod; the World is the same either way."""
    podgroups = {pg.key: pg for pg in sorted(snapshot.podgroups, key=lambda g: g.key)}
    base = node_base(snapshot.nodes, cache)
    gated: dict[str, tuple[list[PodView], int]] | None = None  # computed on first use when cold
    kept: AbstractContextManager[PodIndex | None] = (cache.pods.indexed(snapshot.pods) if cache is not None
                                                     else nullcontext(None))
    with kept as index:
        if index is None:
            pods = sorted(snapshot.pods, key=attrgetter("order"))  # = by (namespace, name, uid)
            parts = _from_pods(pods, podgroups, snapshot, cfg, now, base)
        else:
            parts = _from_index(index, podgroups, snapshot, cfg, now, base)
            gated = {key: (list(group.gated), group.placed) for key, group in index.with_gated.items()}
    pods_by_group, releasing, jobs, elastic_holding, usage, cap, pending_of, ghosts = parts
    _apply_job_objects(jobs, snapshot, cfg, now, pods_by_group)
    stamp_jobs(jobs, pods_by_group, now)  # attained service (issue 38)

    waiting: list[Gang] = []
    for key, pg in podgroups.items():
        pending = pending_of(key)
        if not pending:
            continue  # nothing to place (most groups): no need to count the placed ones
        members = pods_by_group.get(key, [])
        placed = sum(1 for p in members if p.node_name and not p.deleting and p.phase != "Failed")
        if placed >= pg.min_member:
            continue
        pending.sort(key=_needed_order)
        needed = pending[: pg.min_member - placed]
        times = [p.unschedulable_since or p.created for p in needed]
        known = [t for t in times if t is not None]
        since = min(known) if known else None
        waiting.append(Gang(pg, group_priority(pg, snapshot.priority_classes), placed, pending, needed,
                            since))
    if releasing and waiting:
        waiting_by_key = {gang.key: gang for gang in waiting}
        for node_pods in releasing.values():
            for pod in node_pods:
                gang = waiting_by_key.get(pod.annotations.get(keys.EVICTED_FOR, ""))
                if gang is not None:
                    gang.releasing_for.append(pod)

    cluster = base.cluster
    model = share_model(cfg.shares, snapshot, podgroups, usage, cluster, base.dominant)
    return World(
        snapshot=snapshot,
        cfg=cfg,
        now=now,
        pods_by_group=pods_by_group,
        podgroups=podgroups,
        jobs=jobs,
        free_now=cap,
        releasing=releasing,
        shares=model.shares,
        dominant=base.dominant,
        waiting=waiting,
        elastic_holding=elastic_holding,
        usage=usage,
        cluster=cluster,
        model=model,
        ghosts=ghosts,
        _gated=gated,
    )


_Parts = tuple[
    dict[str, list[PodView]],  # pods_by_group
    dict[str, list[PodView]],  # releasing
    dict[str, JobState],
    list[PodView],  # elastic_holding
    Usage,
    Capacity,  # free now
    Callable[[str], list[PodView]],  # a group's ungated pending pods, in order (a list of the caller's)
    dict[str, str],  # ghosts (World.ghosts)
]


def _new_job(jid: str, first: PodView, podgroups: Mapping[str, PodGroupView], snapshot: Snapshot,
             cfg: ElasticConfig, now: datetime) -> JobState:
    pg = podgroups.get(first.group_key)
    queue = pg.queue if pg else cfg.defaultQueue
    job = JobState(jid, pg, queue, group_priority(pg, snapshot.priority_classes), first.bounds,
                   job_ref=f"{first.namespace}/{first.job_name}" if first.job_name else "")
    policy = cfg.queue_policy(queue)
    job.cooling = in_cooldown(pg, policy, now)
    job.by_service = policy.orderBy == ORDER_BY_SERVICE
    return job


def stamp_jobs(jobs: Mapping[str, JobState], pods_by_group: Mapping[str, list[PodView]], now: datetime) -> None:
    """Set every job's ``served``: its attained service as of ``now`` (``attained.py``)."""
    for job in jobs.values():
        key = job.pg.key if job.pg is not None else job.key
        job.served = attained_service(job.pg, pods_by_group.get(key, ()), now)


def current_bounds(pod_bounds: ElasticBounds | None, view: JobView | None, pg: PodGroupView | None,
                   masters: int) -> ElasticBounds | None:
    """The job's elastic range now. Running pods keep the ``PET_NNODES`` they were created with (the
    operator does not recreate them when a user edits the job), so the PyTorchJob's elasticPolicy
    wins over them, and the PodGroup's minMember (masters + min workers) is a floor: a job whose min
    was raised 2 -> 4 is never cut below 4 because its older pods still say 2."""
    if pod_bounds is None:
        return None
    lo, hi = pod_bounds.min_replicas, pod_bounds.max_replicas
    if view is not None and view.has_elastic_policy:
        if view.min_replicas is not None and view.min_replicas >= 1:
            lo = view.min_replicas
        if view.max_replicas is not None and view.max_replicas >= 1:
            hi = view.max_replicas
    if pg is not None:
        lo = max(lo, pg.min_member - masters)
    hi = max(hi, lo)
    if (lo, hi) == (pod_bounds.min_replicas, pod_bounds.max_replicas):
        return pod_bounds
    return ElasticBounds(lo, hi)


def _apply_job_objects(jobs: dict[str, JobState], snapshot: Snapshot, cfg: ElasticConfig, now: datetime,
                       pods_by_group: Mapping[str, list[PodView]]) -> None:
    """What the PyTorchJob objects say over what the pods say: current bounds, the job's own
    cooldown stamp (kept on the job so that a recreated PodGroup does not lose it) and its restart
    budget (``budget.budget_of``: left unknown for a job whose PyTorchJob is not in the snapshot)."""
    if not snapshot.jobs:
        for job in jobs.values():
            if job.bounds is not None and job.pg is not None:
                masters = _masters(pods_by_group.get(job.key, ()))
                job.bounds = current_bounds(job.bounds, None, job.pg, masters)
        return
    views = {v.key: v for v in snapshot.jobs}
    for job in jobs.values():
        view = views.get(job.job_ref)
        if job.bounds is not None:
            job.bounds = current_bounds(job.bounds, view, job.pg, _masters(pods_by_group.get(job.key, ())))
        job.budget = budget_of(job.pg, view)
        if view is not None and in_place(view.annotations):
            job.in_place = True  # (its cooldown: QueuePolicy.cooldown_seconds(in_place=True))
            job.cooling = in_cooldown(job.pg, cfg.queue_policy(job.queue), now, view, in_place=True)
        elif view is not None and not job.cooling and (view.last_scale is not None or view.last_scale_invalid):
            job.cooling = in_cooldown(job.pg, cfg.queue_policy(job.queue), now, view)


def _masters(pods: Iterable[PodView]) -> int:
    return len({p.replica_index for p in pods if p.replica_type == "master"})


def _from_pods(pods: list[PodView], podgroups: dict[str, PodGroupView], snapshot: Snapshot,
               cfg: ElasticConfig, now: datetime, base: NodeBase) -> _Parts:
    """A cold cycle: one pass over the pods (sorted: every map below fills in a deterministic order)."""
    pods_by_group: dict[str, list[PodView]] = {}
    releasing: dict[str, list[PodView]] = {}
    used: dict[str, Resources] = {}  # summed per node first: one update per node, not per pod
    jobs: dict[str, JobState] = {}
    elastic_holding: list[PodView] = []
    usage = Usage({}, {}, {})
    for pod in pods:
        if pod.group_key:
            members = pods_by_group.get(pod.group_key)
            if members is None:
                members = pods_by_group[pod.group_key] = []
            members.append(pod)
        if pod.holds_resources:
            acc = used.get(pod.node_name)
            if acc is None:
                acc = used[pod.node_name] = {}
            for k, v in pod.demand.items():
                acc[k] = acc.get(k, 0) + v
            if pod.deleting:
                releasing.setdefault(pod.node_name, []).append(pod)
            elif pod.role is Role.ELASTIC and pod.group_key:
                elastic_holding.append(pod)
        count_usage(usage, pod, podgroups)  # usage_of, in the same pass
        if not pod.job_name:
            continue
        jid = job_id(pod)
        job = jobs.get(jid)
        if job is None:
            job = jobs[jid] = _new_job(jid, pod, podgroups, snapshot, cfg, now)
        if job.bounds is None and pod.bounds is not None:
            job.bounds = pod.bounds
        if pod.replica_type == "worker" and pod.running:
            job.running_workers += 1
    cap = Capacity.over(base.by_name, base.free, used)
    lost = lost_nodes(base, used)
    ghosts = _ghosts(lost, pods, jobs) if lost else {}

    def pending_of(key: str) -> list[PodView]:
        return ungated_pending(pods_by_group.get(key, []))

    return pods_by_group, releasing, jobs, elastic_holding, usage, cap, pending_of, ghosts


def _from_index(index: PodIndex, podgroups: dict[str, PodGroupView], snapshot: Snapshot,
                cfg: ElasticConfig, now: datetime, base: NodeBase) -> _Parts:
    """A cycle after one that shared most of its pods: read the aggregates kept up to date."""
    groups = index.groups_in_order()
    pods_by_group = {key: list(group.ordered) for key, group in groups}
    def queue_of(key: str) -> str | None:
        pg = podgroups.get(key)
        return pg.queue if pg is not None else None

    usage = Usage(*index.queue_usage(queue_of))
    jobs: dict[str, JobState] = {}
    for jid, pods in index.jobs_in_order():
        assert pods.first is not None
        job = jobs[jid] = _new_job(jid, pods.first, podgroups, snapshot, cfg, now)
        job.bounds = pods.bounds
        job.running_workers = pods.running_workers
    free, gpu_index = index.free_for(base.free)
    cap = Capacity(base.by_name, dict(free), set(), dict(gpu_index))
    # Not kept in the index: node readiness is no pod's, and a flip must count at once (the jobs'
    # running workers above are the index's, every pod that runs; the ghosts are taken off here).
    lost = lost_nodes(base, index.node_pods)
    ghosts = _ghosts(lost, sorted((p for n in lost for p in index.node_pods[n].values()), key=_by_order),
                     jobs) if lost else {}

    # Everything handed out is the caller's own (the index changes with the next cycle, possibly in
    # another thread once the lock is released): lists copied, dicts copied before writing.
    pending = {key: group.pending for key, group in groups if group.pending}

    def pending_of(key: str) -> list[PodView]:
        return list(pending.get(key, ()))

    return (pods_by_group, index.releasing_in_order(), jobs, index.elastic_holding(), usage, cap, pending_of,
            ghosts)


def lost_nodes(base: NodeBase, holding: Mapping[str, object]) -> dict[str, str]:
    """The nodes among ``holding`` (names of the nodes some pod holds resources on) whose running
    pods are ghosts, name -> why: not Ready (``base.down``), or not in the snapshot (a deleted Node:
    the pod garbage collector deletes its pods). Cheap when every node is Ready and known."""
    if not base.down and holding.keys() <= base.by_name.keys():
        return {}
    lost = {n: why for n, why in base.down.items() if n in holding}
    for n in holding.keys() - base.by_name.keys():
        lost[n] = NO_SUCH_NODE
    return lost


def ghosts_of(snapshot: Snapshot) -> dict[str, str]:
    """``World.ghosts`` of ``snapshot`` without planning (``volcano-elastic status`` counts them)."""
    holding = {p.node_name: None for p in snapshot.pods if p.holds_resources}
    lost = lost_nodes(node_base(snapshot.nodes), holding)
    return _ghosts(lost, snapshot.pods) if lost else {}


def _ghosts(lost: Mapping[str, str], pods: Iterable[PodView], jobs: dict[str, JobState] | None = None,
            ) -> dict[str, str]:
    """The running pods of ``pods`` on a ``lost`` node (``World.ghosts``), taken off their jobs'
    running workers (``jobs``: the cycle's)."""
    ghosts: dict[str, str] = {}
    for pod in pods:
        why = lost.get(pod.node_name) if pod.running else None
        if why is None:
            continue
        ghosts[pod.key] = f"on node {pod.node_name} ({why})"
        if jobs is not None and pod.job_name and pod.replica_type == "worker":
            jobs[pod.job_id].running_workers -= 1
    return ghosts


def is_candidate_role(pod: PodView) -> bool:
    return pod.role is Role.ELASTIC and pod.running and pod.replica_type == "worker"
