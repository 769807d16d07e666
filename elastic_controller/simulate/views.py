"""The simulated objects as the policy core reads them: the ``Snapshot`` one agent cycle plans on
(pods, PodGroups with the stamps the agent and the training code write, PyTorchJobs with a restart
budget). A mixin of ``engine.Simulator``, whose state it reads."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime

from ..policy import keys
from ..policy.attained import format_stamp
from ..policy.keys import Role
from ..policy.model import JobView, NodeView, PodGroupView, PodView, QueueView, Snapshot
from ..policy.parse import format_time
from ..policy.roles import plan_role, task_priority
from ..policy.settings import ElasticConfig
from .nodes import NodeTable
from .simtypes import SimNotice, SimSettings
from .state import SimJob, SimPod


class SnapshotViews:
    """Builds the planner's views of the simulation (``snapshot``); the state is ``Simulator``'s."""

    settings: SimSettings
    cfg: ElasticConfig
    gate: str
    now: float
    nodes: NodeTable
    active: dict[int, SimJob]
    grown: dict[int, SimJob]
    gated: dict[int, SimJob]
    notice_checkpoints: dict[int, float]
    noticed: dict[str, SimNotice]
    restarts_used: dict[int, int]
    node_views: tuple[NodeView, ...]
    queue_views: tuple[QueueView, ...]
    priority_classes: dict[str, int]
    dt: Callable[[float], datetime]

    def snapshot(self) -> Snapshot:
        pods: list[PodView] = []
        groups: list[PodGroupView] = []
        publish = self.settings.publish_checkpoints and self.settings.checkpoint_interval > 0
        for job in self.active.values():
            if not job.done:
                view = job.pg_view
                if view is None or (publish and job.rate > 0 and (job.id in self.grown or job.id in self.gated)) \
                        or job.id in self.notice_checkpoints:
                    view = self._group_view(job)  # (its checkpoint time moves while it runs)
                groups.append(view)
            views = job.views
            if views is None:
                views = job.views = tuple(pod.view or self._pod_view(pod) for pod in job.pods)
            pods.extend(views)
        # PyTorchJobs: every job's with a restart budget, else only those resized in place (what says so)
        jobs = tuple(self._job_view(job) for job in self.active.values()
                     if not job.done and (job.in_place or self.settings.max_restarts is not None))
        return Snapshot(nodes=self.node_views, pods=tuple(pods), podgroups=tuple(groups),
                        queues=self.queue_views, priority_classes=self.priority_classes, jobs=jobs)

    def _job_view(self, job: SimJob) -> JobView:
        """The job's PyTorchJob as the planner reads it: its restart budget (``max_restarts``) and
        ``resize: in-place`` when it resizes in place (issue 39: no budget then, its queue's inPlace*
        settings); no elasticPolicy bounds or stamps of its own: the pods and PodGroup say those."""
        used = self.restarts_used.get(job.id)
        annotations = {keys.RESTARTS_USED: str(used)} if used else {}
        if job.in_place:
            annotations[keys.RESIZE] = keys.RESIZE_IN_PLACE
        return JobView(namespace=job.namespace, name=job.spec.name, max_restarts=self.settings.max_restarts,
                       annotations=annotations)

    def _group_view(self, job: SimJob) -> PodGroupView:
        annotations: dict[str, str] = {}
        if job.last_scale >= 0:
            annotations[keys.LAST_SCALE_TIME] = format_time(self.dt(job.last_scale))
            annotations[keys.LAST_SCALE_DIRECTION] = job.last_scale_direction
        if job.id in self.restarts_used:
            annotations[keys.RESTARTS_USED] = str(self.restarts_used[job.id])
        checkpoint = -1.0
        if self.settings.publish_checkpoints and self.settings.checkpoint_interval > 0 and job.rate > 0:
            # what the training code writes (docs/checkpointing.md): its last checkpoint's time
            checkpoint = self._last_checkpoint(job)
        at = self.notice_checkpoints.get(job.id, math.inf)
        if self.settings.publish_checkpoints and at <= self.now:
            checkpoint = max(checkpoint, at)  # it checkpointed under notice
        if checkpoint >= 0:
            annotations[keys.LAST_CHECKPOINT_TIME] = format_time(self.dt(checkpoint))
        # the job contract, as the controller copies it from the PyTorchJob to the PodGroup
        annotations.update(job.spec.counts_annotation)
        annotations[keys.ATTAINED_SERVICE] = self._attained_stamp(job)
        spec = job.spec
        view = PodGroupView(
            namespace=job.namespace, name=spec.name, min_member=job.min_member, queue=spec.queue,
            priority_class_name=f"p{spec.priority}" if spec.priority else "",
            min_task_member={"worker": job.min_member},
            min_resources={k: v * job.min_member for k, v in job.requests.items()},
            annotations=annotations, labels={keys.MANAGED_BY_LABEL: keys.MANAGED_BY},
            created=self.dt(spec.submit), phase="Running" if job.started else "Pending",
            uid=f"pg-{job.id}")
        job.pg_view = view
        return view

    def _attained_stamp(self, job: SimJob) -> str:
        """The job's exact attained service now, as the agent stamps it (policy.attained; a pod freed
        drops the job's view, so a stamp never misses a pod's time)."""
        held = job.held_gpu_seconds + sum(job.spec.gpus * (self.now - p.placed_at) for p in job.pods if p.node >= 0)
        return format_stamp(held, self.dt(self.now))

    def _last_checkpoint(self, job: SimJob) -> float:
        """When ``job`` last checkpointed (or resumed from one), as of now: progress since the last
        settle counts, checkpoints fall every ``checkpoint_interval`` seconds of progress."""
        interval = self.settings.checkpoint_interval
        progress = max(0.0, self.now - job.resume_at)  # progress since the last settle
        return self.now - math.fmod(job.since_checkpoint + progress, interval)

    def _pod_view(self, pod: SimPod) -> PodView:
        job = pod.job
        placed = pod.node >= 0
        rp = plan_role({keys.REPLICA_TYPE_LABEL: "worker", keys.REPLICA_INDEX_LABEL: str(pod.index),
                        **({keys.JOB_ROLE_LABEL: "master"} if pod.index == 0 else {})}, job.bounds)
        view = PodView(
            namespace=job.namespace, name=pod.name, uid=pod.uid,
            phase="Running" if placed else "Pending",
            node_name=self.nodes.names[pod.node] if placed else "",
            requests=job.requests,
            scheduling_gates=(self.gate,) if pod.gated else (),
            deleting=pod.deleting,
            created=self.dt(pod.created),
            scheduled_at=self.dt(pod.placed_at) if placed else None,
            unschedulable_since=(self.dt(pod.unschedulable_since)
                                 if not placed and pod.unschedulable_since >= 0 else None),
            group=job.spec.name, job_name=job.spec.name, replica_type="worker",
            replica_index=pod.index, job_role_master=pod.role is Role.MASTER, bounds=job.bounds,
            role=pod.role, task_priority=task_priority(rp, self.cfg.priorities),
            annotations=self._pod_annotations(pod),
        )
        pod.view = view
        return view

    def _pod_annotations(self, pod: SimPod) -> dict[str, str]:
        if not pod.evicted_for:
            return {}
        notice = self.noticed.get(pod.uid)
        if notice is None:
            return {keys.EVICTED_FOR: pod.evicted_for}
        return {keys.EVICTED_FOR: pod.evicted_for, keys.EVICT_AFTER: format_time(notice.deadline)}
