"""Kubernetes JSON builders shared by every test tier (one place, like kueue's wrappers.go)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from elastic_controller.policy.cycle import plan_cycle
from elastic_controller.policy.keys import WORKER_COUNTS, WORKER_STEP
from tests.harness.legacy import legacy_config

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
NOW = T0 + timedelta(hours=1)


def ts(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def ago(seconds: float, now: datetime = NOW) -> datetime:
    return now - timedelta(seconds=seconds)


def node(name: str, gpus: int = 8, cpu: str = "64", memory: str = "512Gi", pods: int = 110,
         labels: dict[str, str] | None = None, taints: Sequence[dict[str, str]] = (),
         unschedulable: bool = False, ready: bool = True) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels or {"kubernetes.io/hostname": name},
                     "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "spec": {"taints": list(taints), **({"unschedulable": True} if unschedulable else {})},
        "status": {"capacity": dict(alloc), "allocatable": alloc,
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def queue(name: str, weight: int = 1, capability: dict[str, Any] | None = None,
          deserved: dict[str, Any] | None = None, reclaimable: bool = True, parent: str | None = None,
          guarantee: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": weight, "reclaimable": reclaimable}
    if capability:
        spec["capability"] = capability
    if deserved:
        spec["deserved"] = deserved
    if parent:
        spec["parent"] = parent
    if guarantee:
        spec["guarantee"] = {"resource": guarantee}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
            "spec": spec, "status": {"state": "Open"}}


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value}


def podgroup(ns: str, name: str, min_member: int, queue: str = "default", priority_class: str = "",
             last_scale: datetime | None = None, created: datetime = T0,
             annotations: dict[str, str] | None = None) -> dict[str, Any]:
    ann = dict(annotations or {})
    if last_scale is not None:
        ann["volcano-elastic.io/last-scale-time"] = ts(last_scale)
    spec: dict[str, Any] = {"minMember": min_member, "queue": queue}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"namespace": ns, "name": name, "uid": f"uid-pg-{ns}-{name}",
                     "creationTimestamp": ts(created), "annotations": ann,
                     "labels": {"app.kubernetes.io/managed-by": "volcano-elastic"}},
        "spec": spec, "status": {"phase": "Running"},
    }


def pod(ns: str, name: str, *, group: str = "", gpus: int = 1, cpu: str = "4", memory: str = "16Gi",
        node_name: str = "", phase: str | None = None, created: datetime = T0,
        scheduled_at: datetime | None = None, unschedulable_since: datetime | None = None,
        gates: Iterable[str] = (), deleting: bool = False, labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, env: dict[str, str] | None = None,
        node_selector: dict[str, str] | None = None, tolerations: Sequence[dict[str, str]] = (),
        uid: str | None = None) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": cpu, "memory": memory}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    ann = dict(annotations or {})
    if group:
        ann["scheduling.k8s.io/group-name"] = group
    conditions = []
    if node_name:
        conditions.append({"type": "PodScheduled", "status": "True",
                           "lastTransitionTime": ts(scheduled_at or created)})
    elif unschedulable_since is not None:
        conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                           "lastTransitionTime": ts(unschedulable_since)})
    meta: dict[str, Any] = {"namespace": ns, "name": name, "uid": uid or f"uid-{ns}-{name}",
                            "creationTimestamp": ts(created), "labels": dict(labels or {}),
                            "annotations": ann}
    if deleting:
        meta["deletionTimestamp"] = ts(NOW)
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "containers": [{"name": "pytorch", "image": "pytorch",
                        "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
                        "resources": {"requests": requests, "limits": dict(requests)}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = list(tolerations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
            "status": {"phase": phase or ("Running" if node_name else "Pending"), "conditions": conditions}}


def preempted_by_scheduler(obj: dict[str, Any], at: datetime | None = None) -> dict[str, Any]:
    """Pod ``obj`` (changed in place) with the DisruptionTarget condition Volcano's preemption sets
    (reason PreemptionByScheduler), since ``at`` when given."""
    condition = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
    if at is not None:
        condition["lastTransitionTime"] = ts(at)
    obj["status"]["conditions"].append(condition)
    return obj


def job_pod(ns: str, job: str, rtype: str, index: int, *, nnodes: str | None, master_replica: bool = False,
            **kw: Any) -> dict[str, Any]:
    labels = {
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/job-name": job,
        "training.kubeflow.org/replica-type": rtype,
        "training.kubeflow.org/replica-index": str(index),
    }
    if rtype == "master" or (rtype == "worker" and index == 0 and not master_replica):
        labels["training.kubeflow.org/job-role"] = "master"
    env = {"PET_NNODES": nnodes} if nnodes is not None else {}
    return pod(ns, f"{job}-{rtype}-{index}", group=job, labels=labels, env=env, **kw)


def elastic_job(ns: str, job: str, *, min_r: int, max_r: int, nodes: Sequence[str], running: int | None = None,
                gpus: int = 1, queue: str = "default", master: bool = False, gated_rest: bool = True,
                scheduled_at: datetime | None = None, last_scale: datetime | None = None,
                priority_class: str = "", created: datetime = T0,
                gate: str = "volcano-elastic.io/scale-up") -> list[dict[str, Any]]:
    """A PyTorchJob's PodGroup plus pods: ``running`` workers bound round-robin to ``nodes``, the
    rest pending (gated when elastic and ``gated_rest``)."""
    running = max_r if running is None else running
    started = scheduled_at or ago(3600)
    objs = [podgroup(ns, job, min_r + (1 if master else 0), queue, priority_class, last_scale, created)]
    nn = f"{min_r}:{max_r}"
    slot = 0
    if master:
        objs.append(job_pod(ns, job, "master", 0, nnodes=nn, master_replica=True, gpus=gpus,
                            node_name=nodes[slot % len(nodes)], scheduled_at=started, created=created))
        slot += 1
    for i in range(max_r):
        if i < running:
            objs.append(job_pod(ns, job, "worker", i, nnodes=nn, master_replica=master, gpus=gpus,
                                node_name=nodes[slot % len(nodes)], scheduled_at=started, created=created))
            slot += 1
        else:
            gates = [gate] if gated_rest and i >= min_r else []
            objs.append(job_pod(ns, job, "worker", i, nnodes=nn, master_replica=master, gpus=gpus,
                                gates=gates, created=created))
    return objs


def gang(ns: str, name: str, *, members: int, gpus: int, queue: str = "default", waiting_since: datetime | None = None,
         priority_class: str = "", created: datetime | None = None) -> list[dict[str, Any]]:
    """A plain (non-PyTorchJob) Volcano gang whose pods are all pending."""
    since = waiting_since or ago(600)
    objs = [podgroup(ns, name, members, queue, priority_class, created=created or since)]
    for i in range(members):
        objs.append(pod(ns, f"{name}-{i}", group=name, gpus=gpus, created=since, unschedulable_since=since))
    return objs


def over_share(a_last_scale: datetime | None = None, a_elastic: bool = True) -> list[dict[str, Any]]:
    """16 GPUs, queues qa and qb of equal weight, each requesting 8 (b's 4 gated pods count, as in
    Volcano): qa deserves 8 and already holds 8, so its gang g (2 GPUs) is not admitted although
    n1 has 4 GPUs free."""
    a = (elastic_job("ns", "a", min_r=2, max_r=8, nodes=["n0"], queue="qa", last_scale=a_last_scale)
         if a_elastic else elastic_job("ns", "a", min_r=8, max_r=8, nodes=["n0"], queue="qa"))
    return [node("n0"), node("n1"), queue("qa"), queue("qb"), *a,
            *elastic_job("ns", "b", min_r=2, max_r=8, running=4, nodes=["n1"], queue="qb"),
            *gang("ns", "g", members=1, gpus=2, queue="qa")]


def elastic_policy(min_r: int | None, max_r: int | None, max_restarts: int | None = None,
                   metrics: bool = False) -> dict[str, Any]:
    """``spec.elasticPolicy`` with only the fields given (stored jobs often lack min or max)."""
    ep: dict[str, Any] = {}
    if min_r is not None:
        ep["minReplicas"] = min_r
    if max_r is not None:
        ep["maxReplicas"] = max_r
    if max_restarts is not None:
        ep["maxRestarts"] = max_restarts
    if metrics:
        ep["metrics"] = [{"type": "Resource", "resource": {"name": "cpu"}}]
    return ep


def pytorchjob(ns: str, name: str, *, workers: int, min_r: int | None = None, max_r: int | None = None,
               master: bool = False, gpus: int = 1, queue: str = "", priority_class: str = "",
               restart_policy: str = "OnFailure", elastic: bool = True, max_restarts: int | None = 10,
               metrics: bool = False) -> dict[str, Any]:
    def template() -> dict[str, Any]:
        spec: dict[str, Any] = {"containers": [{
            "name": "pytorch", "image": "pytorch",
            "resources": {"limits": {"nvidia.com/gpu": str(gpus), "cpu": "4", "memory": "16Gi"}}}]}
        if priority_class:
            spec["priorityClassName"] = priority_class
        return {"spec": spec}

    replicas: dict[str, Any] = {}
    if master:
        replicas["Master"] = {"replicas": 1, "restartPolicy": restart_policy, "template": template()}
    if workers >= 0:
        replicas["Worker"] = {"replicas": workers, "restartPolicy": restart_policy, "template": template()}
    spec: dict[str, Any] = {"pytorchReplicaSpecs": replicas, "runPolicy": {}}
    if elastic:
        spec["elasticPolicy"] = elastic_policy(min_r, max_r, max_restarts, metrics)
    if queue or priority_class:
        spec["runPolicy"]["schedulingPolicy"] = {k: v for k, v in
                                                 (("queue", queue), ("priorityClass", priority_class)) if v}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"namespace": ns, "name": name, "uid": f"uid-job-{ns}-{name}",
                         "creationTimestamp": ts(T0)},
            "spec": spec}


def dump(*groups: Any) -> dict[str, Any]:
    """A kubectl List of the given objects (lists are flattened)."""
    items: list[dict[str, Any]] = []
    for g in groups:
        if isinstance(g, list):
            items.extend(g)
        else:
            items.append(g)
    return {"apiVersion": "v1", "kind": "List", "items": items}


def items(*groups: Any) -> list[dict[str, Any]]:
    """The objects of ``dump(*groups)`` as a flat list."""
    return list(dump(*groups)["items"])


def snapshot_of(*groups: Any, cfg: Any = None) -> Any:
    """Parse builder objects into a policy Snapshot (fails on any warning except unused kinds)."""
    from elastic_controller.policy.parse import parse_objects

    snap, warnings = parse_objects(items(*groups), cfg)
    problems = [w for w in warnings if "not used by the planner" not in w]
    assert not problems, problems
    return snap


def plan_of(*groups: Any, cfg: Any = None, now: datetime = NOW) -> Any:
    """``plan_cycle`` on builder objects (the old defaults, tests/harness/legacy.py, unless ``cfg``; ``NOW``)."""

    cfg = cfg or legacy_config()
    return plan_cycle(snapshot_of(*groups, cfg=cfg), cfg, now)


def plan_fast_and_exhaustive(snap: Any, cfg: Any, now: datetime = NOW) -> tuple[Any, Any]:
    """``plan_cycle`` twice: with the indexed node search, then with the exhaustive node scan."""

    return plan_cycle(snap, cfg, now), plan_cycle(snap, cfg, now, search="exhaustive")


def decided(plan: Any, *, notices: Any = None) -> Any:
    """``plan`` as the decision whose records the writers carry out (``policy.cycle.records``; no
    eviction or gate action: tests hand those to their writers themselves)."""
    from elastic_controller.policy.actions import CycleDecision
    from elastic_controller.policy.cycle import records
    from elastic_controller.policy.notices import NoticeReview

    return CycleDecision(plan, plan, notices or NoticeReview(), tuple(records(plan)))


def constrained(objs: list[dict[str, Any]], **annotations: str) -> list[dict[str, Any]]:
    """``objs`` (an ``elastic_job``) with the contract annotations on its PodGroup, as the controller
    copies them (``counts=``/``step=``)."""
    keys = {"counts": WORKER_COUNTS, "step": WORKER_STEP}
    objs[0]["metadata"]["annotations"].update({keys[k]: v for k, v in annotations.items()})
    return objs
