"""The tenant boundary in the validating webhook (issue 36): what a job's owner may not write.

A researcher with the ``edit`` role writes their PyTorchJob; Volcano and our agent read from it
what decides about other tenants' jobs. The fields below are refused when they would move or grow
a job at others' expense (docs/failure-model.md, "The tenant boundary"):

- T8 ``runPolicy.schedulingPolicy.priorityClass``: a ``system-*`` class (the cluster's own, meant for
  its components) is refused; changing the class of a job that has started is refused (the
  PodGroup's priority decides who Volcano preempts; recreate the job to change it).
- T9 ``runPolicy.schedulingPolicy.queue``: a namespace the config binds to a queue
  (``namespaceQueues``) may name only that queue; changing the queue of a job that has started is
  refused. (A namespace bound by its ``scheduling.volcano.sh/queue-name`` annotation, which the
  webhook does not read, is bound by the controller: its PodGroup gets the namespace's queue
  whatever the job names, ``policy/podgroups.resolve_queue``.)
- T10 ``elasticPolicy.minReplicas`` raised on a job that has started: refused (it would make
  borrowed workers unevictable members of the gang).
- T11 ``PET_NNODES`` in a replica template: set twice in one container, or set at all in an elastic
  job's template (the training operator appends its own ``min:max``, so the pod would carry two):
  refused. The pod webhook and the agent read the value torchrun gets, the last one
  (``policy/parse.pet_nnodes``), for pods created before this rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elastic_controller.policy import keys
from elastic_controller.policy.parse import ParseError, parse_job
from elastic_controller.policy.podgroups import JobSpecError, job_bounds
from elastic_controller.policy.settings import ElasticConfig

SYSTEM_PRIORITY_PREFIX = "system-"


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _sched(obj: Mapping[str, Any], field: str) -> str:
    value = _get(obj, "spec", "runPolicy", "schedulingPolicy", field)
    return value if isinstance(value, str) else ""


def min_members(obj: Mapping[str, Any]) -> int | None:
    """The job's gang minimum as the controller plans it (the operator's defaults applied), None when
    it cannot be planned (refused by the other rules)."""
    try:
        return job_bounds(parse_job(obj)).min_replicas
    except (JobSpecError, ParseError, AttributeError, TypeError, ValueError):
        return None


def started(obj: Mapping[str, Any] | None) -> bool:
    """Whether the job has started (the operator set ``status.startTime``, or a Running/Restarting
    condition is true): its pods exist and its PodGroup was admitted with what it said then."""
    status = _get(obj, "status")
    if not isinstance(status, Mapping):
        return False
    if status.get("startTime"):
        return True
    conditions = status.get("conditions")
    return any(isinstance(c, Mapping) and c.get("type") in ("Running", "Restarting") and c.get("status") == "True"
               for c in (conditions if isinstance(conditions, list) else []))


def env_setters(obj: Mapping[str, Any], name: str = keys.PET_NNODES) -> list[tuple[str, int]]:
    """(``Rtype/container``, how many times) for each container of a replica template that sets ``name``."""
    out = []
    specs = _get(obj, "spec", "pytorchReplicaSpecs")
    for rtype, rspec in (specs.items() if isinstance(specs, Mapping) else ()):
        for kind in ("initContainers", "containers"):
            containers = _get(rspec, "template", "spec", kind)
            for i, c in enumerate(containers if isinstance(containers, list) else []):
                env = c.get("env") if isinstance(c, Mapping) else None
                names = [e.get("name") for e in (env if isinstance(env, list) else []) if isinstance(e, Mapping)]
                if names.count(name):
                    out.append((f"{rtype}/{c.get('name') or i}", names.count(name)))
    return out


def tenant_rules(obj: Mapping[str, Any], old: Mapping[str, Any] | None, namespace: str,
                 cfg: ElasticConfig) -> list[str]:
    """Errors for what the job's owner may not write (CREATE: ``old`` is None)."""
    errors: list[str] = []
    running = old is not None and started(old)
    pc = _sched(obj, "priorityClass")
    if pc.startswith(SYSTEM_PRIORITY_PREFIX):
        errors.append(f"runPolicy.schedulingPolicy.priorityClass {pc!r} is reserved for the cluster's own "
                      "components: use your namespace's priority class (or none)")
    if running and old is not None and pc != _sched(old, "priorityClass"):
        errors.append(f"runPolicy.schedulingPolicy.priorityClass cannot change on a started job "
                      f"({_sched(old, 'priorityClass') or 'none'!r} -> {pc or 'none'!r}): its PodGroup was "
                      "admitted with the first; delete and recreate the job to change it")
    queue = _sched(obj, "queue")
    bound = cfg.namespaceQueues.get(namespace)
    if queue and bound and queue != bound:
        errors.append(f"runPolicy.schedulingPolicy.queue {queue!r}: namespace {namespace} uses queue {bound!r} "
                      "(namespaceQueues); name it or leave the queue unset")
    if running and old is not None and queue != _sched(old, "queue"):
        errors.append(f"runPolicy.schedulingPolicy.queue cannot change on a started job "
                      f"({_sched(old, 'queue') or 'none'!r} -> {queue or 'none'!r}); delete and recreate the job")
    new_min, old_min = (min_members(obj), min_members(old)) if running and old is not None else (None, None)
    if new_min is not None and old_min is not None and new_min > old_min:
        errors.append(f"elasticPolicy.minReplicas cannot be raised on a started job ({old_min} -> {new_min}): "
                      "the workers above the old minimum are elastic (evictable) by the terms the job "
                      "started with; delete and recreate the job for a larger minimum")
    elastic = isinstance(_get(obj, "spec", "elasticPolicy"), Mapping)
    for where, times in env_setters(obj):
        if times > 1:
            errors.append(f"{where}: {keys.PET_NNODES} is set {times} times; the pods would carry several "
                          "values: leave it to the training operator")
        elif elastic:
            errors.append(f"{where}: {keys.PET_NNODES} is set in the template of an elastic job; the training "
                          "operator sets it from elasticPolicy (min:max) and yours would be a second value: "
                          "remove it")
    return errors
