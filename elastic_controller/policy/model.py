"""Frozen views of cluster objects: what the policy core decides on.

Views are parsed at the edge (see ``parse.py``) from Kubernetes JSON; nothing here does I/O.
Resources are integer maps (cpu in millicores, memory in bytes; see ``quantity.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from .keys import EVICT_AFTER, LAST_CHECKPOINT_TIME, LAST_SCALE_TIME, Role
from .quantity import Resources
from .times import parse_time
from .worldsizes import UNCONSTRAINED, WorkerSizes, parse_worker_sizes

EMPTY: MappingProxyType[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    allocatable: Resources
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    problems: tuple[str, ...] = ()  # what parsing did not take at face value (reported, never silent)


@dataclass(frozen=True, slots=True)
class ElasticBounds:
    """A job's elastic range as the pods know it (PET_NNODES=min:max)."""

    min_replicas: int
    max_replicas: int

    @property
    def elastic(self) -> bool:
        return self.max_replicas > self.min_replicas


@dataclass(frozen=True, slots=True)
class PodView:
    namespace: str
    name: str
    uid: str
    phase: str = "Pending"
    node_name: str = ""
    requests: Resources = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    scheduling_gates: tuple[str, ...] = ()
    deleting: bool = False
    created: datetime | None = None
    scheduled_at: datetime | None = None  # PodScheduled=True transition
    unschedulable_since: datetime | None = None  # PodScheduled=False transition
    group: str = ""  # Volcano PodGroup name ("" when none)
    job_name: str = ""  # training.kubeflow.org/job-name ("" when not a PyTorchJob pod)
    replica_type: str = ""  # lowercased: master | worker
    replica_index: int = -1
    job_role_master: bool = False
    bounds: ElasticBounds | None = None
    role: Role = Role.CORE
    task_priority: int = 0
    annotations: dict[str, str] = field(default_factory=dict)
    preempted_by_scheduler: bool = False
    # A PyTorchJob pod without a group annotation (created before our webhook was registered, or
    # while it was bypassed): a member of its job's PodGroup by its labels (``group`` = job name).
    adopted: bool = False
    # Derived once at construction (the planners read them for every pod, every cycle; the view is
    # frozen, so they cannot go stale): plain attributes, not properties.
    key: str = field(default="", init=False, repr=False, compare=False)  # ns/name
    group_key: str = field(default="", init=False, repr=False, compare=False)  # ns/group ("" when none)
    job_id: str = field(default="", init=False, repr=False, compare=False)  # group_key, else ns/job-name
    terminal: bool = field(default=False, init=False, repr=False, compare=False)  # Succeeded or Failed
    # Bound to a node and still holding it (Pending-with-node counts: it was scheduled).
    placed: bool = field(default=False, init=False, repr=False, compare=False)
    running: bool = field(default=False, init=False, repr=False, compare=False)  # Running, bound, not deleting
    holds_resources: bool = field(default=False, init=False, repr=False, compare=False)  # bound, not terminal
    pending: bool = field(default=False, init=False, repr=False, compare=False)  # unbound Pending, not deleting
    # Requests plus the pod slot it occupies (read-only: shared by every caller).
    demand: Resources = field(default_factory=dict, init=False, repr=False, compare=False)
    # (namespace, name, uid) as one string that sorts the same way (names hold no NUL): cheaper to sort by.
    order: str = field(default="", init=False, repr=False, compare=False)
    # The contract's annotations parsed (None when absent or unreadable): when the training code last
    # checkpointed (as written on this pod), and when a victim under notice is evicted.
    last_checkpoint: datetime | None = field(default=None, init=False, repr=False, compare=False)
    evict_after: datetime | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        put = object.__setattr__
        put(self, "key", f"{self.namespace}/{self.name}")
        group_key = f"{self.namespace}/{self.group}" if self.group else ""
        put(self, "group_key", group_key)
        put(self, "job_id", group_key or self.job_key)
        terminal = self.phase in ("Succeeded", "Failed")
        bound = bool(self.node_name)
        put(self, "terminal", terminal)
        put(self, "placed", bound and not terminal and not self.deleting)
        put(self, "running", self.phase == "Running" and bound and not self.deleting)
        put(self, "holds_resources", bound and not terminal)
        put(self, "pending", not bound and self.phase == "Pending" and not self.deleting)
        demand = {k: v for k, v in self.requests.items() if v > 0}
        demand["pods"] = 1
        put(self, "demand", demand)
        put(self, "order", f"{self.namespace}\0{self.name}\0{self.uid}")
        ann = self.annotations
        if LAST_CHECKPOINT_TIME in ann:  # rare: skip the calls for the other pods
            put(self, "last_checkpoint", parse_time(ann[LAST_CHECKPOINT_TIME]))
        if EVICT_AFTER in ann:
            put(self, "evict_after", parse_time(ann[EVICT_AFTER]))

    @property
    def job_key(self) -> str:
        return f"{self.namespace}/{self.job_name}" if self.job_name else ""

    def gated(self, gate: str | None = None) -> bool:
        if gate is None:
            return bool(self.scheduling_gates)
        return gate in self.scheduling_gates


@dataclass(frozen=True, slots=True)
class PodGroupView:
    namespace: str
    name: str
    min_member: int
    queue: str = "default"
    priority_class_name: str = ""
    min_task_member: dict[str, int] = field(default_factory=dict)
    min_resources: Resources = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    created: datetime | None = None
    phase: str = ""
    uid: str = ""
    # Derived once at construction, like PodView's: ns/name, and the last-scale-time annotation parsed
    # (None when absent or unreadable) that every cycle's cooldown check reads.
    key: str = field(default="", init=False, repr=False, compare=False)
    last_scale: datetime | None = field(default=None, init=False, repr=False, compare=False)
    # The job contract as copied by the controller (worker-counts / worker-step; see worldsizes.py:
    # ``worker_sizes.allowed(min, max)`` gives the allowed counts), and a checkpoint time if one
    # was written here.
    worker_sizes: WorkerSizes = field(default=UNCONSTRAINED, init=False, repr=False, compare=False)
    last_checkpoint: datetime | None = field(default=None, init=False, repr=False, compare=False)
    # The annotation is there but is no time: read as a scale event now (cooldown in force; the agent
    # re-stamps it with the time it saw it and emits a Warning Event).
    last_scale_invalid: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        put = object.__setattr__
        put(self, "key", f"{self.namespace}/{self.name}")
        ann = self.annotations
        raw = ann.get(LAST_SCALE_TIME)
        put(self, "last_scale", parse_time(raw))
        put(self, "last_scale_invalid", raw is not None and self.last_scale is None)
        put(self, "worker_sizes", parse_worker_sizes(ann))
        put(self, "last_checkpoint", parse_time(ann.get(LAST_CHECKPOINT_TIME)))


@dataclass(frozen=True, slots=True)
class QueueView:
    name: str
    weight: int = 1
    capability: Resources | None = None
    deserved: Resources | None = None
    guarantee: Resources | None = None
    parent: str = ""
    reclaimable: bool = True
    state: str = "Open"


@dataclass(frozen=True, slots=True)
class ReplicaSpecView:
    replicas: int
    requests: Resources  # effective requests of one pod of this replica type
    restart_policy: str = ""
    priority_class_name: str = ""
    scheduler_name: str = ""


@dataclass(frozen=True, slots=True)
class JobView:
    """A PyTorchJob as the controller and planners need it."""

    namespace: str
    name: str
    uid: str = ""
    replicas: dict[str, ReplicaSpecView] = field(default_factory=dict)  # lowercased type -> spec
    min_replicas: int | None = None  # elasticPolicy.minReplicas as stored (None when absent)
    max_replicas: int | None = None
    has_elastic_policy: bool = False
    max_restarts: int | None = None
    has_metrics: bool = False
    queue: str = ""  # runPolicy.schedulingPolicy.queue
    priority_class: str = ""  # runPolicy.schedulingPolicy.priorityClass
    suspended: bool = False
    finished: bool = False
    created: datetime | None = None
    raw: Any = None
    # The job's own copy of its cooldown stamp (``volcano-elastic.io/last-scale-time`` on the
    # PyTorchJob): a PodGroup deleted by hand and recreated without annotations keeps no cooldown.
    last_scale: datetime | None = None
    last_scale_invalid: bool = False
    annotations: dict[str, str] = field(default_factory=dict)
    # Derived from the annotations at construction: the job contract as its owner wrote it, and
    # the checkpoint time the training code wrote on the job (None when absent or unreadable).
    worker_sizes: WorkerSizes = field(default=UNCONSTRAINED, init=False, repr=False, compare=False)
    last_checkpoint: datetime | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        put = object.__setattr__
        put(self, "worker_sizes", parse_worker_sizes(self.annotations))
        put(self, "last_checkpoint", parse_time(self.annotations.get(LAST_CHECKPOINT_TIME)))

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def newest_checkpoint(
    job: JobView | None = None, group: PodGroupView | None = None, pods: Iterable[PodView] = ()
) -> datetime | None:
    """The job's last checkpoint time: the newest written on the PyTorchJob, its PodGroup or any
    of its pods (None when none was written)."""
    newest: datetime | None = None
    for t in (job.last_checkpoint if job else None, group.last_checkpoint if group else None):
        if t is not None and (newest is None or t > newest):
            newest = t
    for pod in pods:
        t = pod.last_checkpoint
        if t is not None and (newest is None or t > newest):
            newest = t
    return newest


def job_worker_sizes(job: JobView | None, group: PodGroupView | None) -> WorkerSizes:
    """The contract of a job: the PyTorchJob's own annotations when the job is known (the source;
    the PodGroup's copy may lag a cycle), else its PodGroup's copy (a dump without jobs)."""
    if job is not None:
        return job.worker_sizes
    return group.worker_sizes if group is not None else UNCONSTRAINED


@dataclass(frozen=True, slots=True)
class Snapshot:
    nodes: tuple[NodeView, ...] = ()
    pods: tuple[PodView, ...] = ()
    podgroups: tuple[PodGroupView, ...] = ()
    queues: tuple[QueueView, ...] = ()
    priority_classes: dict[str, int] = field(default_factory=dict)
    jobs: tuple[JobView, ...] = ()
    namespace_queues: dict[str, str] = field(default_factory=dict)  # namespace annotation
