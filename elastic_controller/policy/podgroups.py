"""What a PyTorchJob's Volcano PodGroup should say: minMember = gang (+ master), and so on.

The gang is the job's min workers, or its max when its queue admits it whole (``wholeGangUpTo``,
``admission.gang_workers``): such a job starts at its max or not at all, and its gang is the floor
the agent never shrinks it below (``world.current_bounds``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .admission import gang_workers
from .keys import COPIED_TO_PODGROUP
from .model import ElasticBounds, JobView
from .quantity import Resources, add
from .settings import ElasticConfig
from .worldsizes import check_worker_sizes


class JobSpecError(ValueError):
    """A PyTorchJob whose elastic spec cannot work; the message is for the job's owner."""


@dataclass(frozen=True, slots=True)
class PodGroupPlan:
    namespace: str
    name: str
    min_member: int
    min_task_member: dict[str, int]
    min_resources: Resources
    queue: str
    queue_source: str  # job | namespace-annotation | config | default
    priority_class_name: str
    bounds: ElasticBounds
    has_master: bool
    warnings: tuple[str, ...] = field(default=())
    # The job contract's annotations copied to the PodGroup (worker-counts / worker-step), as the
    # job's owner wrote them; a key the job does not carry is absent here and removed from the group.
    annotations: dict[str, str] = field(default_factory=dict)
    # What is wrong with them (the webhook denies such jobs; one admitted before it gets an Event).
    contract_problems: tuple[str, ...] = field(default=())
    # The workers of its gang (min_task_member's worker count): bounds.min_replicas, or its max when
    # its queue admits it whole; whole_up_to is then that queue's wholeGangUpTo (0: not whole).
    gang_workers: int = 0
    whole_up_to: int = 0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def whole(self) -> bool:
        """Admitted whole: an elastic job whose gang is its max (its queue's ``wholeGangUpTo``)."""
        return self.whole_up_to > 0


def whole_gang(bounds: ElasticBounds, whole_up_to: int) -> int:
    """The workers of an elastic job's gang under its queue's ``wholeGangUpTo`` (``gang_workers``);
    a job that is not elastic has its replicas as its gang, whatever the setting."""
    if not bounds.elastic:
        return bounds.min_replicas
    return gang_workers(bounds.min_replicas, bounds.max_replicas, whole_up_to)


def job_bounds(job: JobView) -> ElasticBounds:
    """The job's (min, max) with the training operator's defaults; raises JobSpecError."""
    worker = job.replicas.get("worker")
    if job.has_elastic_policy and worker is None:
        raise JobSpecError("elasticPolicy is set but the job has no Worker replica spec: "
                           "elastic PyTorchJobs scale their Worker replicas")
    replicas = worker.replicas if worker else 0
    lo, hi = job.min_replicas, job.max_replicas
    if not job.has_elastic_policy:
        return ElasticBounds(replicas, replicas)
    if lo is None and hi is None:
        lo = hi = replicas
    elif lo is None:
        lo = hi
    elif hi is None:
        hi = lo
    assert lo is not None and hi is not None
    if lo < 1:
        raise JobSpecError(f"elasticPolicy.minReplicas is {lo}: it must be at least 1")
    if lo > hi:
        raise JobSpecError(f"elasticPolicy.minReplicas ({lo}) is greater than maxReplicas ({hi})")
    if not lo <= replicas <= hi:
        raise JobSpecError(f"Worker.replicas ({replicas}) is outside elasticPolicy [minReplicas={lo}, "
                           f"maxReplicas={hi}]: set Worker.replicas to {hi} so the job can grow to max")
    return ElasticBounds(lo, hi)


def resolve_queue(job: JobView, namespace_queue: str | None, cfg: ElasticConfig) -> tuple[str, str]:
    """The PodGroup's queue and where it came from. A namespace bound to a queue (its
    ``scheduling.volcano.sh/queue-name`` annotation, else ``namespaceQueues``) puts every job of it
    there, whatever the job names: the job is its owner's to write, the namespace is not (issue 36,
    T9: a job naming another department's queue took that department's workers). The job's own
    queue counts in an unbound namespace."""
    if namespace_queue:
        return namespace_queue, "namespace-annotation"
    if job.namespace in cfg.namespaceQueues:
        return cfg.namespaceQueues[job.namespace], "config"
    if job.queue:
        return job.queue, "job"
    return cfg.defaultQueue, "default"


def plan_podgroup(job: JobView, cfg: ElasticConfig, namespace_queue: str | None = None) -> PodGroupPlan:
    """The PodGroup for ``job``; raises JobSpecError for a job that cannot be planned."""
    if not job.replicas:
        raise JobSpecError("spec.pytorchReplicaSpecs is empty: nothing to schedule")
    bounds = job_bounds(job)
    master = job.replicas.get("master")
    worker = job.replicas.get("worker")
    queue, source = resolve_queue(job, namespace_queue, cfg)
    whole_up_to = cfg.queue_policy(queue).wholeGangUpTo
    gang = whole_gang(bounds, whole_up_to) if worker is not None else bounds.min_replicas
    min_task: dict[str, int] = {}
    resources: Resources = {}
    if master is not None:
        if master.replicas != 1:
            raise JobSpecError(f"Master.replicas is {master.replicas}: a PyTorchJob has exactly one master")
        min_task["master"] = 1
        resources = add(resources, master.requests)
    if worker is not None:
        min_task["worker"] = gang
        for _ in range(gang):
            resources = add(resources, worker.requests)
    copied = {k: job.annotations[k] for k in COPIED_TO_PODGROUP if k in job.annotations}
    problems = check_worker_sizes(job.annotations, bounds.min_replicas, bounds.max_replicas).errors
    priority = job.priority_class or (worker.priority_class_name if worker else "") or (
        master.priority_class_name if master else ""
    )
    return PodGroupPlan(
        namespace=job.namespace,
        name=job.name,
        min_member=gang + (1 if master is not None else 0),
        min_task_member=min_task,
        min_resources={k: v for k, v in resources.items() if v},
        queue=queue,
        queue_source=source,
        priority_class_name=priority,
        bounds=bounds,
        has_master=master is not None,
        annotations=copied,
        contract_problems=problems,
        gang_workers=gang,
        whole_up_to=whole_up_to if gang > bounds.min_replicas else 0,
    )
