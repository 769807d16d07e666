"""Mutable simulation state of jobs and pods (the engine's bookkeeping, not policy)."""

from __future__ import annotations

from ..policy.keys import GPU, Role
from ..policy.model import ElasticBounds, PodGroupView, PodView
from .trace import JobSpec


class SimPod:
    __slots__ = ("_view", "created", "deleting", "evicted_for", "gated", "index", "job", "key", "name",
                 "node", "pin", "placed_at", "role", "uid", "unschedulable_since")

    def __init__(self, job: SimJob, index: int, role: Role, gated: bool, created: float, uid: str) -> None:
        self.job = job
        self.index = index
        self.name = f"{job.spec.name}-worker-{index}"
        self.key = f"{job.namespace}/{self.name}"
        self.uid = uid
        self.role = role
        self.gated = gated
        self.created = created
        self.node = -1
        self.pin = -1  # node the agent checked when it lifted the gate
        self.placed_at = -1.0
        self.deleting = False
        self.evicted_for = ""
        self.unschedulable_since = -1.0
        self._view: PodView | None = None

    @property
    def view(self) -> PodView | None:
        """The pod's view for the agent's snapshot, built when needed (None: stale or not built)."""
        return self._view

    @view.setter
    def view(self, view: PodView | None) -> None:
        self._view = view
        if view is None:
            self.job.views = None  # the job's tuple of views is stale too

    @property
    def pending(self) -> bool:
        return self.node < 0


class SimJob:
    __slots__ = (
        "admitted",
        "bounds",
        "bounds_max",
        "bounds_min",
        "busy_gpus",
        "cand_key",
        "done",
        "evictions",
        "fail_gen",
        "finished_at",
        "held_gpu_seconds",
        "id",
        "in_place",
        "key",
        "last_restart",
        "last_scale",
        "last_scale_direction",
        "lost_work",
        "marked",
        "max_seen",
        "min_member",
        "min_seen",
        "namespace",
        "nominated",
        "pg_view",
        "pods",
        "queue",
        "rate",
        "replicas",
        "requests",
        "restart_seconds",
        "restarts",
        "resume_at",
        "running",
        "scale_events",
        "since_checkpoint",
        "spec",
        "started_at",
        "version",
        "views",
        "whole_evicted",
        "work_done",
        "work_left",
    )

    def __init__(self, job_id: int, spec: JobSpec, namespace: str, replicas: int, lo: int, hi: int) -> None:
        self.id = job_id
        self.spec = spec
        self.namespace = namespace
        self.key = f"{namespace}/{spec.name}"
        self.replicas = replicas
        self.bounds_min = lo
        self.bounds_max = hi
        self.bounds = ElasticBounds(lo, hi)
        self.queue = spec.queue
        self.requests = {GPU: spec.gpus, "cpu": spec.cpu_request, "memory": spec.memory_request}
        self.min_member = lo
        self.pods: list[SimPod] = []
        self.views: tuple[PodView, ...] | None = None  # its pods' views in order (None: rebuild)
        self.started_at = -1.0
        self.finished_at = -1.0
        self.done = False
        self.running = 0
        self.rate = 0.0
        self.busy_gpus = 0  # GPUs of its running workers (rate = busy_gpus * efficiency)
        self.resume_at = 0.0
        self.work_left = spec.work
        self.work_done = 0.0
        self.version = 0
        self.restarts = 0
        self.last_restart = -1.0
        self.evictions = 0
        self.last_scale = -1.0
        self.last_scale_direction = ""
        self.scale_events: list[tuple[float, str]] = []
        self.min_seen = 1 << 30
        self.max_seen = 0
        self.held_gpu_seconds = 0.0
        self.fail_gen = -1
        self.marked = False  # its pending gang pods carry PodScheduled=False
        self.pg_view: PodGroupView | None = None
        self.cand_key = (-spec.priority, spec.submit, job_id)
        self.admitted = False  # Volcano's enqueue let its PodGroup in (Inqueue)
        self.since_checkpoint = 0.0  # seconds of progress since its last checkpoint
        self.lost_work = 0.0  # GPU-seconds of work redone after restarts
        self.restart_seconds = 0.0  # seconds without progress after scale events
        self.whole_evicted = False  # all its workers were evicted; its next start is a restart
        self.nominated: list[SimPod] = []  # victims evicted for it, still terminating (volcano-gang)
        # its PyTorchJob says resize: in-place (issue 39; RestartCost.in_place_fraction, elastic policy only)
        self.in_place = False

    @property
    def started(self) -> bool:
        return self.started_at >= 0
