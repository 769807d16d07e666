"""What the validating webhook says about a PyTorchJob: denials and warnings for its owner.

Denials are the specs the controller could not plan (``plan_podgroup``, so the webhook and
the controller never disagree) plus ``restartPolicy: Never`` on elastic workers. Warnings
are specs that work but not the way their owner probably expects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from elastic_controller.policy.model import JobView
from elastic_controller.policy.parse import ParseError, parse_job
from elastic_controller.policy.podgroups import JobSpecError, plan_podgroup
from elastic_controller.policy.settings import ElasticConfig

# torchrun restarts the whole worker group whenever a node leaves, and counts it against
# --max-restarts (PET_MAX_RESTARTS, from elasticPolicy.maxRestarts; torchrun's default is 0).
# Every eviction of an elastic worker is one such restart, so fewer than this is a warning.
MIN_MAX_RESTARTS = 3


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
    return JobVerdict(errors=tuple(errors), warnings=tuple(warnings))
