"""What the mutating webhook writes on a PyTorchJob pod at CREATE, as RFC 6902 operations.

The role comes from the pod's labels and ``PET_NNODES`` through ``plan_role``, the rule the
agent uses too; no API call is needed. Values the user set are never overwritten, and an
already mutated pod (a reinvoked webhook) gets no operation at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from elastic_controller.policy import keys
from elastic_controller.policy.admission import gang_workers
from elastic_controller.policy.keys import Role
from elastic_controller.policy.model import ElasticBounds
from elastic_controller.policy.neighbours import pod_neighbour
from elastic_controller.policy.parse import pet_nnodes
from elastic_controller.policy.roles import BoundsError, RolePlan, parse_nnodes, plan_role, task_priority
from elastic_controller.policy.settings import ElasticConfig

from .envelope import BadReviewError
from .podinfo import plan_podinfo

DEFAULT_SCHEDULER = "default-scheduler"

# What torchrun needs on an elastic job's pods (docs/checkpointing.md, "What the webhook sets"):
# torch >= 2.x reuses the rendezvous' TCPStore for the workers by default, and a node that joins
# after the first rendezvous then waits for a MASTER_ADDR key nobody writes: every agent exits ~90 s
# later. Setting this makes each round start its own store; torch versions without the switch ignore it.
DISABLE_SHARED_STORE = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"
# The training operator writes PET_STANDALONE="" for elasticPolicy.standalone; torchrun parses the
# flag with int() and fails at start (1.13 and 2.x). "1" is what the operator means.
PET_STANDALONE = "PET_STANDALONE"


@dataclass(frozen=True, slots=True)
class PodPatch:
    """The operations for one pod, the warnings for its creator and fields for the log."""

    ops: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    role: Role | None = None  # None: not a PyTorchJob pod
    job: str = ""
    kept: dict[str, str] = field(default_factory=dict)  # user values we did not overwrite
    bounds_unknown: bool = False
    neighbour: str = ""  # why a neighbour (Kueue, another scheduler) owns this pod: left alone


def escape(key: str) -> str:
    """A JSON Pointer reference token (RFC 6901): ``~`` -> ``~0``, ``/`` -> ``~1``."""
    return key.replace("~", "~0").replace("/", "~1")


def is_pytorchjob_pod(labels: Mapping[str, Any]) -> bool:
    return labels.get(keys.OPERATOR_NAME_LABEL) == keys.OPERATOR_NAME and bool(labels.get(keys.JOB_NAME_LABEL))


def _mapping_or_none(value: Any, path: str) -> Mapping[str, Any] | None:
    if value is None or isinstance(value, dict):
        return value
    raise BadReviewError(f"{path} must be an object, got {type(value).__name__}")


def _check_list_of_objects(value: Any, path: str) -> None:
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise BadReviewError(f"{path} must be a list of objects")


def _check_pod_shape(spec: Any) -> Mapping[str, Any]:
    """The parts of a Pod spec we read, type-checked (the API server never sends others)."""
    if not isinstance(spec, dict):
        raise BadReviewError("request.object.spec must be an object")
    _check_list_of_objects(spec.get("containers"), "request.object.spec.containers")
    for i, container in enumerate(spec.get("containers") or []):
        _check_list_of_objects(container.get("env"), f"request.object.spec.containers[{i}].env")
        _check_list_of_objects(container.get("volumeMounts"), f"request.object.spec.containers[{i}].volumeMounts")
    _check_list_of_objects(spec.get("volumes"), "request.object.spec.volumes")
    _check_list_of_objects(spec.get("schedulingGates"), "request.object.spec.schedulingGates")
    scheduler = spec.get("schedulerName")
    if scheduler is not None and not isinstance(scheduler, str):
        raise BadReviewError("request.object.spec.schedulerName must be a string")
    return spec


def _bounds(spec: Mapping[str, Any], warnings: list[str]) -> tuple[ElasticBounds | None, bool]:
    raw = pet_nnodes(spec)
    try:
        bounds = parse_nnodes(raw)
    except BoundsError as exc:
        warnings.append(f"volcano-elastic: {exc}; the pod is neither gated nor elastic")
        return None, True
    if bounds is None:
        warnings.append(
            "volcano-elastic: PET_NNODES is not set on the pytorch container, so the job's "
            "min/max replicas are unknown; the pod is neither gated nor elastic"
        )
        return None, True
    return bounds, False


def env_ops(spec: Mapping[str, Any], elastic: bool, warnings: list[str]) -> list[dict[str, Any]]:
    """The pytorch container's environment: the shared-store switch on elastic jobs' pods (unless the
    user set it), and the operator's empty PET_STANDALONE read as "1"; on elastic jobs' pods also what
    the job kit needs (``webhook/podinfo.py``: the downward-API pod info and ``POD_NAME``)."""
    ops: list[dict[str, Any]] = []
    for i, container in enumerate(spec.get("containers") or []):
        if not isinstance(container, Mapping) or container.get("name") != keys.PYTORCH_CONTAINER:
            continue
        env = container.get("env") or []
        if not isinstance(env, list):  # malformed: the API server's own validation refuses it
            break
        names = {e["name"]: e for e in env if isinstance(e, Mapping) and isinstance(e.get("name"), str)}
        for j, e in enumerate(env):
            if not isinstance(e, Mapping):
                continue
            if e.get("name") == PET_STANDALONE and e.get("value") == "" and "valueFrom" not in e:
                ops.append({"op": "replace", "path": f"/spec/containers/{i}/env/{j}/value", "value": "1"})
        if not elastic:
            break
        add: list[dict[str, Any]] = []
        if DISABLE_SHARED_STORE not in names:
            add.append({"name": DISABLE_SHARED_STORE, "value": "1"})
        elif str(names[DISABLE_SHARED_STORE].get("value")) != "1":
            warnings.append(f"volcano-elastic: {DISABLE_SHARED_STORE} is set to "
                            f"{names[DISABLE_SHARED_STORE].get('value')!r} and kept; with torch 2.x a worker "
                            "added after the job started can make every torchrun agent exit (docs/checkpointing.md)")
        kit = plan_podinfo(spec, i, container, names)
        add += kit.env
        warnings += kit.warnings
        if add and container.get("env") is None:
            ops.append({"op": "add", "path": f"/spec/containers/{i}/env", "value": add})
        else:
            ops += [{"op": "add", "path": f"/spec/containers/{i}/env/-", "value": var} for var in add]
        ops += kit.ops
        break
    return ops


def wanted_annotations(plan: RolePlan, job: str, cfg: ElasticConfig) -> dict[str, str]:
    want = {
        keys.ROLE: plan.role.value,
        keys.GROUP_NAME: job,
        keys.TASK_PRIORITY: str(task_priority(plan, cfg.priorities)),
        keys.PREEMPTABLE: "true" if plan.role is Role.ELASTIC else "false",
    }
    if plan.task_spec:
        want[keys.TASK_SPEC] = plan.task_spec
    if plan.bounds is not None:
        want[keys.MIN_REPLICAS] = str(plan.bounds.min_replicas)
        want[keys.MAX_REPLICAS] = str(plan.bounds.max_replicas)
    return want


def whole_up_to(cfg: ElasticConfig) -> int | None:
    """The ``wholeGangUpTo`` of every queue, when the config gives them all the same (the defaults'
    and each listed queue's); None when it depends on the queue. A pod does not say its job's queue
    (the job's ``schedulingPolicy.queue``, its namespace's annotation: the controller resolves it,
    ``policy/podgroups.resolve_queue``), so the webhook knows a job is admitted whole only then."""
    values = {cfg.defaults.wholeGangUpTo, *(q.wholeGangUpTo for q in cfg.queues.values())}
    return values.pop() if len(values) == 1 else None


def in_whole_gang(plan: RolePlan, cfg: ElasticConfig) -> bool:
    """An elastic worker its job's gang needs because the job is admitted whole (``wholeGangUpTo``,
    ``admission.gang_workers``): it gets no scale-up gate, as Volcano must place the whole gang. When
    the setting depends on the queue, the pod is gated as any elastic worker and the controller lifts
    the gang's gates once it has written the PodGroup (``Controller._ungate_gang``)."""
    limit = whole_up_to(cfg)
    if plan.bounds is None or not plan.bounds.elastic or limit is None:
        return False
    return plan.replica_index < gang_workers(plan.bounds.min_replicas, plan.bounds.max_replicas, limit)


def plan_pod_patch(pod: Mapping[str, Any], cfg: ElasticConfig) -> PodPatch:
    """The JSONPatch for a Pod being created; empty for pods that are not a PyTorchJob's."""
    meta = _mapping_or_none(pod.get("metadata"), "request.object.metadata")
    labels = _mapping_or_none((meta or {}).get("labels"), "request.object.metadata.labels") or {}
    if not is_pytorchjob_pod(labels):
        return PodPatch()
    annotations = _mapping_or_none((meta or {}).get("annotations"), "request.object.metadata.annotations")
    spec = _check_pod_shape(pod.get("spec"))
    job = str(labels[keys.JOB_NAME_LABEL])
    neighbour = pod_neighbour(labels, spec.get("schedulerName"), cfg.schedulerName)
    if neighbour:
        # Someone else schedules this pod: no gang, no gate, no role (docs/compatibility.md).
        return PodPatch(warnings=[f"volcano-elastic: left alone because {neighbour}; it joins no "
                                  f"{cfg.schedulerName} gang and is never gated or evicted by volcano-elastic"],
                        job=job, neighbour=neighbour)
    warnings: list[str] = []
    bounds, unknown = _bounds(spec, warnings)
    plan = plan_role({str(k): str(v) for k, v in labels.items()}, bounds)
    ops: list[dict[str, Any]] = []
    kept: dict[str, str] = {}

    want = wanted_annotations(plan, job, cfg)
    if annotations is None:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": want})
    else:
        for key, value in want.items():
            if key not in annotations:
                ops.append({"op": "add", "path": f"/metadata/annotations/{escape(key)}", "value": value})
            elif annotations[key] != value:
                kept[key] = str(annotations[key])

    scheduler = spec.get("schedulerName")
    if scheduler in (None, "", DEFAULT_SCHEDULER):
        ops.append({"op": "add", "path": "/spec/schedulerName", "value": cfg.schedulerName})
    elif scheduler != cfg.schedulerName:
        kept["schedulerName"] = str(scheduler)
        warnings.append(
            f"volcano-elastic: spec.schedulerName {scheduler!r} was set explicitly and is kept; "
            f"this pod is not scheduled as part of its job's gang by {cfg.schedulerName!r}"
        )

    if plan.role is Role.ELASTIC and cfg.gating.enabled and not in_whole_gang(plan, cfg):
        gate = cfg.gating.gateName
        gates = spec.get("schedulingGates")
        if not gates:
            ops.append({"op": "add", "path": "/spec/schedulingGates", "value": [{"name": gate}]})
        elif all(g.get("name") != gate for g in gates):
            ops.append({"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": gate}})

    ops += env_ops(spec, bounds is not None and bounds.elastic, warnings)

    return PodPatch(ops=ops, warnings=warnings, role=plan.role, job=job, kept=kept, bounds_unknown=unknown)
