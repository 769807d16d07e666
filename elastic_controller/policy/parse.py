"""Kubernetes JSON (plain dicts) -> frozen views. Pure; the edge of the policy core.

Every ``parse_*`` raises ``ParseError`` naming what is missing; ``parse_objects`` skips such
objects and reports each in a warning so that the rest can still be planned.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, ParamSpec, TypeVar

from . import keys
from .keys import Role
from .model import (
    JobView,
    NodeView,
    PodGroupView,
    PodView,
    QueueView,
    ReplicaSpecView,
    Snapshot,
    Taint,
    Toleration,
)
from .quantity import QuantityError, Resources, add, maximum, parse_resources
from .roles import BoundsError, parse_nnodes, plan_role, task_priority
from .settings import ElasticConfig
from .times import format_time as format_time  # re-exported: callers import them from here
from .times import parse_time as parse_time


class ParseError(ValueError):
    """An object lacks what the planner needs."""


_P = ParamSpec("_P")
_R = TypeVar("_R")


# The API group each kind is ours to read from; a kind of the same name from another group (KAI's
# scheduling.run.ai Queue and PodGroup, Kubernetes' own scheduling.k8s.io PodGroup) is not it.
_GROUPS = {"PodGroup": "scheduling.volcano.sh", "Queue": "scheduling.volcano.sh", "PyTorchJob": "kubeflow.org",
           "Node": "", "Pod": "", "Namespace": "", "PriorityClass": "scheduling.k8s.io"}


def _other_api(obj: Mapping[str, Any]) -> str:
    """Why ``obj`` is not the kind it names (its ``apiVersion`` is another API group's), else ""."""
    want = _GROUPS.get(str(obj.get("kind")))
    api = obj.get("apiVersion")
    if want is None or not isinstance(api, str) or not api:  # no apiVersion: as a hand-written test object
        return ""
    group = api.rpartition("/")[0]
    if group == want:
        return ""
    return f"of apiVersion {api}, another API's {obj.get('kind')} (the planner reads {want or 'core'} ones)"


def _display_name(obj: object) -> str:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        return "(no metadata)"
    name, ns = meta.get("name"), meta.get("namespace")
    return f"{ns}/{name}" if ns else str(name)


def _shape_checked(kind: str) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """A field of the wrong shape (a string where an object belongs, ...) is a ParseError like a
    missing one, so that callers that skip bad objects never crash on them."""

    def wrap(fn: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(fn)
        def checked(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return fn(*args, **kwargs)
            except ParseError:
                raise
            except (AttributeError, TypeError, ValueError, KeyError) as exc:
                name = _display_name(args[0]) if args else "?"
                raise ParseError(f"{kind} {name} is malformed ({type(exc).__name__}: {exc})") from exc

        return checked

    return wrap


def _meta(obj: Mapping[str, Any], kind: str) -> tuple[Mapping[str, Any], str]:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise ParseError(f"{kind} without metadata.name")
    return meta, str(meta["name"])


def _dict(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def _requests(container: Mapping[str, Any]) -> Resources:
    res = container.get("resources") or {}
    requests = dict(res.get("limits") or {})  # limits default requests when requests are unset
    requests.update(res.get("requests") or {})
    return parse_resources(requests)


def effective_requests(spec: Mapping[str, Any]) -> Resources:
    """What the scheduler reserves for a pod: max(sum of containers (+ sidecars), each init
    container plus the sidecars started before it) plus overhead."""
    running: Resources = {}
    for c in spec.get("containers") or []:
        running = add(running, _requests(c))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for c in spec.get("initContainers") or []:
        req = _requests(c)
        if c.get("restartPolicy") == "Always":
            sidecars = add(sidecars, req)
        else:
            init_peak = maximum(init_peak, add(sidecars, req))
    result = maximum(add(running, sidecars), init_peak)
    return add(result, parse_resources(spec.get("overhead")))


def pet_nnodes(spec: Mapping[str, Any]) -> str | None:
    """PET_NNODES of the ``pytorch`` container (else of any container that sets it). Set twice in one
    container, the last value is the one the process gets (the kubelet's env map: a later entry
    overrides an earlier one of the same name), so the last is read (issue 36, T11)."""
    containers = list(spec.get("containers") or [])
    containers.sort(key=lambda c: c.get("name") != keys.PYTORCH_CONTAINER)
    for c in containers:
        values = [str(env["value"]) for env in c.get("env") or []
                  if env.get("name") == keys.PET_NNODES and "value" in env]
        if values:
            return values[-1]
    return None


def _condition_time(status: Mapping[str, Any], ctype: str, cstatus: str) -> datetime | None:
    for cond in status.get("conditions") or []:
        if cond.get("type") == ctype and cond.get("status") == cstatus:
            return parse_time(cond.get("lastTransitionTime"))
    return None


@_shape_checked("Pod")
def parse_pod(obj: Mapping[str, Any], cfg: ElasticConfig | None = None) -> PodView:
    cfg = cfg or ElasticConfig()
    meta, name = _meta(obj, "Pod")
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise ParseError(f"Pod {meta.get('namespace', '')}/{name} without spec")
    status = obj.get("status") or {}
    labels = _dict(meta.get("labels"))
    annotations = _dict(meta.get("annotations"))
    try:
        requests = effective_requests(spec)
    except QuantityError as exc:
        raise ParseError(f"Pod {meta.get('namespace', '')}/{name}: {exc}") from exc
    job_name = labels.get(keys.JOB_NAME_LABEL, "") if labels.get(keys.OPERATOR_NAME_LABEL) else ""
    role = Role.CORE
    bounds = None
    rtype, index, prio = "", -1, 0
    if job_name:
        try:
            bounds = parse_nnodes(pet_nnodes(spec))
        except BoundsError:
            bounds = None
        rp = plan_role(labels, bounds)
        role, rtype, index = rp.role, rp.replica_type, rp.replica_index
        prio = task_priority(rp, cfg.priorities)
    if keys.TASK_PRIORITY in annotations:
        try:
            prio = int(annotations[keys.TASK_PRIORITY])
        except ValueError:
            pass
    # Adoption: a PyTorchJob pod that no webhook of ours admitted carries no group annotation, yet
    # it belongs to its job's PodGroup (named after the job, as our webhook would have annotated
    # it). Counted by its labels as a member, candidate and usage wherever the planners look.
    group = annotations.get(keys.GROUP_NAME) or labels.get(keys.GROUP_NAME, "")
    adopted = bool(job_name) and not group
    if adopted:
        group = job_name
    preempted = any(
        c.get("type") == "DisruptionTarget" and c.get("reason") == "PreemptionByScheduler"
        for c in status.get("conditions") or []
    )
    return PodView(
        namespace=str(meta.get("namespace") or "default"),
        name=name,
        uid=str(meta.get("uid") or f"{meta.get('namespace')}/{name}"),
        phase=str(status.get("phase") or "Pending"),
        node_name=str(spec.get("nodeName") or ""),
        requests=requests,
        node_selector=_dict(spec.get("nodeSelector")),
        tolerations=tuple(
            Toleration(
                key=str(t.get("key") or ""),
                operator=str(t.get("operator") or "Equal"),
                value=str(t.get("value") or ""),
                effect=str(t.get("effect") or ""),
            )
            for t in spec.get("tolerations") or []
        ),
        scheduling_gates=tuple(str(g.get("name")) for g in spec.get("schedulingGates") or []),
        deleting=bool(meta.get("deletionTimestamp")),
        created=parse_time(meta.get("creationTimestamp")),
        scheduled_at=_condition_time(status, "PodScheduled", "True"),
        unschedulable_since=_condition_time(status, "PodScheduled", "False"),
        group=group,
        job_name=job_name,
        replica_type=rtype,
        replica_index=index,
        job_role_master=role is Role.MASTER,
        bounds=bounds,
        role=role,
        task_priority=prio,
        annotations=annotations,
        preempted_by_scheduler=preempted,
        adopted=adopted,
    )


@_shape_checked("Node")
def parse_node(obj: Mapping[str, Any]) -> NodeView:
    meta, name = _meta(obj, "Node")
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    alloc_raw = status.get("allocatable") or status.get("capacity")
    if not isinstance(alloc_raw, Mapping):
        raise ParseError(f"Node {name} without status.allocatable")
    try:
        allocatable = parse_resources(alloc_raw)
    except QuantityError as exc:
        raise ParseError(f"Node {name}: {exc}") from exc
    problems = []
    for res, amount in sorted(allocatable.items()):
        cap = PLAUSIBLE_ALLOCATABLE.get(res) or (PLAUSIBLE_ALLOCATABLE["memory"] if res.startswith("hugepages-")
                                                 else PLAUSIBLE_EXTENDED)
        if amount > cap:
            allocatable[res] = 0
            problems.append(f"allocatable {res}={alloc_raw.get(res)} is not plausible (over {cap}): counted as 0")
    ready = False  # no Ready condition (a node just registered, or a broken status): not ready
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready":
            ready = cond.get("status") == "True"
    return NodeView(
        problems=tuple(problems),
        name=name,
        allocatable=allocatable,
        labels=_dict(meta.get("labels")),
        taints=tuple(
            Taint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or "NoSchedule"))
            for t in spec.get("taints") or []
        ),
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready,
    )


# A node's allocatable beyond these is a broken status (or a hostile one), not capacity: planning
# with 1e18 GPUs on a node would make every gang "fit" there. Units as ``parse_resources`` gives them
# (cpu in millicores, memory and storage in bytes).
PLAUSIBLE_ALLOCATABLE: dict[str, int] = {"cpu": 100_000 * 1000, "memory": 2**50, "ephemeral-storage": 2**60,
                                         "pods": 100_000}
PLAUSIBLE_EXTENDED = 1_000_000  # GPUs and other devices per node


@_shape_checked("PodGroup")
def parse_podgroup(obj: Mapping[str, Any]) -> PodGroupView:
    meta, name = _meta(obj, "PodGroup")
    spec = obj.get("spec") or {}
    mm = spec.get("minMember", 1)
    if not isinstance(mm, int) or isinstance(mm, bool) or mm < 0:
        raise ParseError(f"PodGroup {meta.get('namespace')}/{name}: spec.minMember {mm!r} is not a count")
    try:
        min_resources = parse_resources(spec.get("minResources"))
    except QuantityError as exc:
        raise ParseError(f"PodGroup {meta.get('namespace')}/{name}: {exc}") from exc
    mtm = spec.get("minTaskMember") or {}
    return PodGroupView(
        namespace=str(meta.get("namespace") or "default"),
        name=name,
        min_member=mm,
        queue=str(spec.get("queue") or "default"),
        priority_class_name=str(spec.get("priorityClassName") or ""),
        min_task_member={str(k): int(v) for k, v in mtm.items() if isinstance(v, int)},
        min_resources=min_resources,
        annotations=_dict(meta.get("annotations")),
        labels=_dict(meta.get("labels")),
        created=parse_time(meta.get("creationTimestamp")),
        phase=str((obj.get("status") or {}).get("phase") or ""),
        uid=str(meta.get("uid") or ""),
    )


def _opt_resources(value: Any) -> Resources | None:
    return parse_resources(value) if isinstance(value, Mapping) and value else None


@_shape_checked("Queue")
def parse_queue(obj: Mapping[str, Any]) -> QueueView:
    _, name = _meta(obj, "Queue")
    spec = obj.get("spec") or {}
    weight = spec.get("weight", 1)
    try:
        return QueueView(
            name=name,
            weight=int(weight) if isinstance(weight, int | str) and str(weight).isdigit() else 1,
            capability=_opt_resources(spec.get("capability")),
            deserved=_opt_resources(spec.get("deserved")),
            guarantee=_opt_resources((spec.get("guarantee") or {}).get("resource")),
            parent=str(spec.get("parent") or ("" if name == "root" else "root")),
            reclaimable=spec.get("reclaimable", True) is not False,
            state=str((obj.get("status") or {}).get("state") or "Open"),
        )
    except QuantityError as exc:
        raise ParseError(f"Queue {name}: {exc}") from exc


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@_shape_checked("PyTorchJob")
def parse_job(obj: Mapping[str, Any]) -> JobView:
    meta, name = _meta(obj, "PyTorchJob")
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise ParseError(f"PyTorchJob {meta.get('namespace')}/{name} without spec")
    replicas: dict[str, ReplicaSpecView] = {}
    for rtype, rspec in (spec.get("pytorchReplicaSpecs") or {}).items():
        if not isinstance(rspec, Mapping):
            continue
        template = rspec.get("template") or {}
        pod_spec = template.get("spec") or {}
        try:
            req = effective_requests(pod_spec)
        except QuantityError as exc:
            raise ParseError(f"PyTorchJob {meta.get('namespace')}/{name} {rtype}: {exc}") from exc
        count = rspec.get("replicas", 1)
        replicas[str(rtype).lower()] = ReplicaSpecView(
            replicas=count if isinstance(count, int) and not isinstance(count, bool) else 1,
            requests=req,
            restart_policy=str(rspec.get("restartPolicy") or ""),
            priority_class_name=str(pod_spec.get("priorityClassName") or ""),
            scheduler_name=str(pod_spec.get("schedulerName") or ""),
        )
    elastic = spec.get("elasticPolicy")
    elastic = elastic if isinstance(elastic, Mapping) else None
    run = spec.get("runPolicy") or {}
    sched = run.get("schedulingPolicy") or {}
    status = obj.get("status") or {}
    finished = any(
        c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    stamp = _dict(meta.get("annotations")).get(keys.LAST_SCALE_TIME)
    last_scale = parse_time(stamp)
    return JobView(
        namespace=str(meta.get("namespace") or "default"),
        name=name,
        uid=str(meta.get("uid") or ""),
        last_scale=last_scale,
        last_scale_invalid=stamp is not None and last_scale is None,
        replicas=replicas,
        min_replicas=_int_or_none((elastic or {}).get("minReplicas")),
        max_replicas=_int_or_none((elastic or {}).get("maxReplicas")),
        has_elastic_policy=elastic is not None,
        max_restarts=_int_or_none((elastic or {}).get("maxRestarts")),
        has_metrics=bool((elastic or {}).get("metrics")),
        queue=str(sched.get("queue") or ""),
        priority_class=str(sched.get("priorityClass") or ""),
        suspended=bool(run.get("suspend")),
        finished=finished,
        created=parse_time(meta.get("creationTimestamp")),
        raw=obj,
        annotations=_dict(meta.get("annotations")),
    )


def parse_objects(
    items: Iterable[Mapping[str, Any]], cfg: ElasticConfig | None = None
) -> tuple[Snapshot, list[str]]:
    """Sort a mixed list of objects (as ``kubectl get ... -o json`` prints them) into a Snapshot.

    Objects the planner cannot use are skipped; each is named in the returned warnings.
    """
    cfg = cfg or ElasticConfig()
    nodes: list[NodeView] = []
    pods: list[PodView] = []
    pgs: list[PodGroupView] = []
    queues: list[QueueView] = []
    jobs: list[JobView] = []
    pcs: dict[str, int] = {}
    ns_queues: dict[str, str] = {}
    warnings: list[str] = []
    # The same object in several dumps (--from a.json --from b.json) counts once: the last copy wins.
    items = list(items)
    last: dict[tuple[object, object, object], int] = {}
    for i, obj in enumerate(items):
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        if isinstance(meta, Mapping) and isinstance(meta.get("name"), str):
            last[(obj.get("kind"), meta.get("namespace"), meta["name"])] = i
    for i, obj in enumerate(items):
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        if isinstance(meta, Mapping) and isinstance(meta.get("name"), str):
            j = last[(obj.get("kind"), meta.get("namespace"), meta["name"])]
            if j != i:
                if items[j] != obj:
                    warnings.append(f"item {i}: {obj.get('kind')} {_display_name(obj)} appears again as item {j}, "
                                    "which is used")
                continue
        if not isinstance(obj, Mapping):
            warnings.append(f"item {i}: not an object, skipped")
            continue
        kind = obj.get("kind")
        other_api = _other_api(obj)
        if other_api:
            warnings.append(f"item {i}: {kind} {_display_name(obj)} is {other_api}, skipped")
            continue
        try:
            if kind == "Node":
                nodes.append(parse_node(obj))
            elif kind == "Pod":
                pods.append(parse_pod(obj, cfg))
            elif kind == "PodGroup":
                pgs.append(parse_podgroup(obj))
            elif kind == "Queue":
                queues.append(parse_queue(obj))
            elif kind == "PyTorchJob":
                jobs.append(parse_job(obj))
            elif kind == "PriorityClass":
                _, name = _meta(obj, "PriorityClass")
                value = obj.get("value")
                if not isinstance(value, int):
                    raise ParseError(f"PriorityClass {name} without an integer value")
                pcs[name] = value
            elif kind == "Namespace":
                meta, name = _meta(obj, "Namespace")
                q = _dict(meta.get("annotations")).get(keys.NAMESPACE_QUEUE)
                if q:
                    ns_queues[name] = q
            else:
                warnings.append(f"item {i}: kind {kind!r} is not used by the planner, skipped")
        except ParseError as exc:
            warnings.append(f"item {i}: {exc}, skipped")
        except (AttributeError, TypeError, ValueError, KeyError) as exc:
            # A field of the wrong shape (a string where an object belongs, ...): skip, never crash.
            warnings.append(f"item {i}: {kind} {_display_name(obj)} is malformed "
                            f"({type(exc).__name__}: {exc}), skipped")
    return (
        Snapshot(
            nodes=tuple(nodes),
            pods=tuple(pods),
            podgroups=tuple(pgs),
            queues=tuple(queues),
            priority_classes=pcs,
            jobs=tuple(jobs),
            namespace_queues=ns_queues,
        ),
        warnings,
    )
