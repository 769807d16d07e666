"""What the validating webhook says about a PyTorchJob: denials and warnings for its owner.

Denials are the specs the controller could not plan (``plan_podgroup``, so the webhook and
the controller never disagree) plus ``restartPolicy: Never`` on elastic workers. Warnings
are specs that work but not the way their owner probably expects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from elastic_controller.policy import keys
from elastic_controller.policy.model import JobView
from elastic_controller.policy.parse import ParseError, parse_job
from elastic_controller.policy.podgroups import JobSpecError, PodGroupPlan, plan_podgroup, resolve_queue
from elastic_controller.policy.settings import ElasticConfig
from elastic_controller.policy.worldsizes import check_worker_sizes

# torchrun restarts the whole worker group whenever a node leaves, and counts it against
# --max-restarts (PET_MAX_RESTARTS, from elasticPolicy.maxRestarts; torchrun's default is 0).
# Every eviction of an elastic worker is one such restart, so fewer than this is a warning.
MIN_MAX_RESTARTS = 3
# What the kubelet gives a pod between SIGTERM and SIGKILL when its spec does not say.
DEFAULT_GRACE_SECONDS = 30


@dataclass(frozen=True, slots=True)
class JobVerdict:
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def allowed(self) -> bool:
        return not self.errors


def _job_view(obj: Mapping[str, Any]) -> JobView:
    meta = obj.get("metadata")
    if isinstance(meta, Mapping) and not meta.get("name"):
        # CREATE with generateName: the name is not chosen yet.
        obj = {**obj, "metadata": {**meta, "name": meta.get("generateName") or "(generated)"}}
    try:
        return parse_job(obj)
    except ParseError as exc:
        # Its message starts with "PyTorchJob ns/name"; the response names the job already.
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        who = f"PyTorchJob {meta.get('namespace')}/{meta.get('name')}"
        raise JobSpecError(str(exc).removeprefix(who).lstrip(" :").removeprefix("is ") or str(exc)) from exc
    except (AttributeError, TypeError, ValueError) as exc:
        # Only reachable with objects the CRD schema would have rejected before us.
        raise JobSpecError(f"the PyTorchJob spec cannot be read: {exc}") from exc


def validate_job(obj: Mapping[str, Any], cfg: ElasticConfig) -> JobVerdict:
    try:
        job = _job_view(obj)
        plan = plan_podgroup(job, cfg)
    except JobSpecError as exc:
        return JobVerdict(errors=(str(exc),))
    bounds = plan.bounds
    worker = job.replicas.get("worker")
    errors: list[str] = []
    warnings: list[str] = []
    if bounds.elastic and worker is not None and worker.restart_policy == "Never":
        errors.append(
            "Worker.restartPolicy is Never: volcano-elastic evicts elastic workers (index >= "
            f"minReplicas={bounds.min_replicas}) to make room for other jobs, and with Never an evicted "
            "worker fails the whole job; use OnFailure (or ExitCode)"
        )
    if job.has_elastic_policy and worker is not None and worker.replicas < bounds.max_replicas:
        warnings.append(
            f"Worker.replicas ({worker.replicas}) is below elasticPolicy.maxReplicas ({bounds.max_replicas}): "
            f"the operator creates exactly Worker.replicas pods, so the job never grows beyond "
            f"{worker.replicas}; set replicas to {bounds.max_replicas}"
        )
    if job.has_metrics:
        warnings.append(
            "elasticPolicy.metrics creates an autoscaler that also changes Worker.replicas and "
            "fights volcano-elastic's scaling; remove metrics"
        )
    if job.has_elastic_policy and "master" in job.replicas:
        warnings.append(
            "a Master replica with elasticPolicy: torchrun counts the master among its nodes "
            "(PET_NNODES); prefer Worker replicas only (worker-0 then acts as the master)"
        )
    if bounds.elastic and (job.max_restarts is None or job.max_restarts < MIN_MAX_RESTARTS):
        shown = "unset (torchrun's default is 0)" if job.max_restarts is None else str(job.max_restarts)
        warnings.append(
            f"elasticPolicy.maxRestarts is {shown}: every scale-down by volcano-elastic is a torchrun "
            f"restart; set it to at least {MIN_MAX_RESTARTS} (more for long jobs)"
        )
    contract = contract_verdict(obj, job, plan, cfg)
    errors += contract.errors
    warnings += contract.warnings
    return JobVerdict(errors=tuple(errors), warnings=tuple(warnings))


def contract_verdict(obj: Mapping[str, Any], job: JobView, plan: PodGroupPlan, cfg: ElasticConfig) -> JobVerdict:
    """The job contract of issue 20: the allowed Worker counts (``worker-counts`` / ``worker-step``)
    against the job's bounds, and the eviction notice of its queue against the workers' grace period."""
    sizes = check_worker_sizes(job.annotations, plan.bounds.min_replicas, plan.bounds.max_replicas)
    warnings = list(sizes.warnings)
    notice = notice_warning(obj, job, plan, cfg)
    if notice:
        warnings.append(notice)
    return JobVerdict(errors=sizes.errors, warnings=tuple(warnings))


def worker_grace_seconds(obj: Mapping[str, Any]) -> int:
    """The Worker pods' terminationGracePeriodSeconds (the kubelet's default when unset)."""
    specs = (obj.get("spec") or {}).get("pytorchReplicaSpecs") or {}
    for rtype, rspec in specs.items() if isinstance(specs, Mapping) else ():
        if str(rtype).lower() == "worker" and isinstance(rspec, Mapping):
            pod_spec = (rspec.get("template") or {}).get("spec") or {}
            value = pod_spec.get("terminationGracePeriodSeconds") if isinstance(pod_spec, Mapping) else None
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
    return DEFAULT_GRACE_SECONDS


def notice_warning(obj: Mapping[str, Any], job: JobView, plan: PodGroupPlan, cfg: ElasticConfig) -> str:
    """A notice longer than the workers' grace period: the time the queue gives a victim to
    checkpoint is only there for training code that watches ``evict-after``; on SIGTERM alone
    the job has just the grace period. "" when there is nothing to say.

    The queue is the one the webhook can see (the job's, else the config's namespace map, else
    the default); a namespace annotation it cannot read may route the job elsewhere."""
    if not plan.bounds.elastic:
        return ""  # only elastic workers are ever victims
    queue, _ = resolve_queue(job, None, cfg)
    notice = cfg.queue_policy(queue).noticeSeconds
    grace = worker_grace_seconds(obj)
    if notice <= grace:
        return ""
    return (f"queue {queue!r} gives evicted workers a {notice}s notice ({keys.EVICT_AFTER}) but their "
            f"terminationGracePeriodSeconds is {grace}: checkpoint when the notice appears (see "
            f"docs/checkpointing.md) or set it to {notice}")
