"""Object builders for the webhook tests: PyTorchJob pods, PyTorchJobs, AdmissionReviews."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import jsonpatch

from tests.harness.builders import elastic_policy

OPERATOR = {"training.kubeflow.org/operator-name": "pytorchjob-controller"}


def pod(
    job: str = "train",
    rtype: str = "worker",
    index: int = 0,
    nnodes: str | None = "2:4",
    master_label: bool = False,
    annotations: dict[str, str] | None = None,
    gates: list[str] | None = None,
    scheduler: str | None = None,
    operator: bool = True,
    namespace: str = "team-a",
) -> dict[str, Any]:
    labels: dict[str, str] = {
        **(OPERATOR if operator else {}),
        "training.kubeflow.org/job-name": job,
        "training.kubeflow.org/replica-type": rtype,
        "training.kubeflow.org/replica-index": str(index),
    }
    if master_label:
        labels["training.kubeflow.org/job-role"] = "master"
    env = [{"name": "PET_NNODES", "value": nnodes}] if nnodes is not None else []
    meta: dict[str, Any] = {"name": f"{job}-{rtype}-{index}", "namespace": namespace, "labels": labels}
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    spec: dict[str, Any] = {
        "containers": [
            {"name": "sidecar", "image": "busybox"},
            {"name": "pytorch", "image": "pytorch", "env": [{"name": "PET_RDZV_ENDPOINT", "value": "x"}, *env]},
        ],
        "restartPolicy": "OnFailure",
    }
    if gates is not None:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def job(
    name: str = "train",
    workers: int | None = 4,
    min_replicas: int | None = 2,
    max_replicas: int | None = 4,
    elastic: bool = True,
    master: bool = False,
    restart_policy: str = "OnFailure",
    max_restarts: int | None = 10,
    metrics: bool = False,
) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "pytorch", "image": "pytorch",
                                         "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    specs: dict[str, Any] = {}
    if master:
        specs["Master"] = {"replicas": 1, "restartPolicy": "OnFailure", "template": copy.deepcopy(template)}
    if workers is not None:
        specs["Worker"] = {"replicas": workers, "restartPolicy": restart_policy, "template": copy.deepcopy(template)}
    spec: dict[str, Any] = {"pytorchReplicaSpecs": specs}
    if elastic:
        spec["elasticPolicy"] = elastic_policy(min_replicas, max_replicas, max_restarts, metrics)
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": "team-a"}, "spec": spec}


def review(
    obj: dict[str, Any] | None,
    operation: str = "CREATE",
    kind: str = "Pod",
    group: str = "",
    uid: str = "705ab4f5-6393-11e8-b7cc-42010a800002",
    dry_run: bool = False,
    old: dict[str, Any] | None = None,
    sub_resource: str | None = None,
) -> dict[str, Any]:
    request: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": group, "version": "v1", "kind": kind},
        "resource": {"group": group, "version": "v1", "resource": kind.lower() + "s"},
        "namespace": "team-a",
        "operation": operation,
        "userInfo": {"username": "system:serviceaccount:kubeflow:training-operator"},
        "object": obj,
        "oldObject": old,
        "dryRun": dry_run,
    }
    if sub_resource:
        request["subResource"] = sub_resource
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def decode_patch(response: dict[str, Any]) -> list[dict[str, Any]]:
    inner = response["response"]
    if "patch" not in inner:
        return []
    assert inner["patchType"] == "JSONPatch"
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(inner["patch"]))
    return ops


def apply(obj: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    """The object as the API server stores it after our patch (a real RFC 6902 implementation)."""
    result: dict[str, Any] = jsonpatch.apply_patch(obj, decode_patch(response), in_place=False)
    return result
