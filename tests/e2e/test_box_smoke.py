"""Smoke tests of the whole box: Volcano (scheduler + queue controller), kwok GPU nodes and the
Kubeflow training operator, all through the real API server."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from tests.harness.waiting import wait_until as _wait_until

pytestmark = pytest.mark.e2e

VC = ("scheduling.volcano.sh", "v1beta1")
KF = ("kubeflow.org", "v1")


def wait_until(what: str, fn: Callable[[], Any], timeout: float = 90, interval: float = 0.5) -> Any:
    return _wait_until(what, fn, timeout, interval)


def test_kwok_gpu_nodes_are_ready(kube, box):
    nodes = kube(client.CoreV1Api).list_node(label_selector="type=kwok").items
    assert len(nodes) == box.opts.nodes
    for n in nodes:
        assert n.status.allocatable["nvidia.com/gpu"] == str(box.opts.gpus_per_node)
        ready = {c.type: c.status for c in n.status.conditions}
        assert ready.get("Ready") == "True"
        assert not n.spec.taints


@pytest.fixture
def queue(kube):
    objs = kube(client.CustomObjectsApi)
    name = f"q-{uuid.uuid4().hex[:6]}"
    objs.create_cluster_custom_object(*VC, "queues", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": name}, "spec": {"weight": 1, "reclaimable": True},
    })
    yield name
    objs.delete_cluster_custom_object(*VC, "queues", name)


def test_queue_reaches_open(kube, queue):
    objs = kube(client.CustomObjectsApi)
    wait_until(f"queue {queue} Open", lambda: objs.get_cluster_custom_object(*VC, "queues", queue)
               .get("status", {}).get("state") == "Open", timeout=60)


def _gpu_pod(name: str, group: str | None, gpus: int = 1) -> client.V1Pod:
    ann = {"scheduling.k8s.io/group-name": group} if group else {}
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, annotations=ann),
        spec=client.V1PodSpec(scheduler_name="volcano", containers=[client.V1Container(
            name="c", image="busybox",
            resources=client.V1ResourceRequirements(requests={"cpu": "1", "nvidia.com/gpu": str(gpus)},
                                                    limits={"nvidia.com/gpu": str(gpus)}))]),
    )


def _bound_and_running(core: client.CoreV1Api, ns: str, names: list[str]) -> Any:
    pods = [core.read_namespaced_pod(n, ns) for n in names]
    return all(p.spec.node_name and p.spec.node_name.startswith("kwok-node-") and p.status.phase == "Running"
               for p in pods) and pods


def test_gang_is_bound_to_kwok_nodes_and_running(kube, namespace, queue):
    core, objs = kube(client.CoreV1Api), kube(client.CustomObjectsApi)
    wait_until(f"queue {queue} Open", lambda: objs.get_cluster_custom_object(*VC, "queues", queue)
               .get("status", {}).get("state") == "Open", timeout=60)
    objs.create_namespaced_custom_object(*VC, namespace, "podgroups", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "gang"}, "spec": {"minMember": 2, "queue": queue,
                                               "minResources": {"nvidia.com/gpu": "8"}},
    })
    for i in range(2):
        core.create_namespaced_pod(namespace, _gpu_pod(f"gang-{i}", "gang", gpus=4))
    pods = wait_until("both gang pods bound to kwok nodes and Running",
                      lambda: _bound_and_running(core, namespace, ["gang-0", "gang-1"]))
    assert all(p.spec.node_name for p in pods)
    pg = objs.get_namespaced_custom_object(*VC, namespace, "podgroups", "gang")
    wait_until("PodGroup Running", lambda: objs.get_namespaced_custom_object(*VC, namespace, "podgroups", "gang")
               .get("status", {}).get("phase") == "Running", timeout=30)
    assert pg["spec"]["queue"] == queue


def test_gang_that_cannot_fit_stays_pending(kube, namespace, box):
    core, objs = kube(client.CoreV1Api), kube(client.CustomObjectsApi)
    too_many = box.opts.gpus_per_node + 1  # no single node has that many GPUs
    objs.create_namespaced_custom_object(*VC, namespace, "podgroups", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "big"}, "spec": {"minMember": 1, "queue": "default"},
    })
    core.create_namespaced_pod(namespace, _gpu_pod("big-0", "big", gpus=too_many))
    time.sleep(3)
    assert not core.read_namespaced_pod("big-0", namespace).spec.node_name


def _pytorchjob(name: str, container: str = "pytorch") -> dict[str, Any]:
    template = {
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": container, "image": "docker.io/pytorch/pytorch:latest",
                            "command": ["torchrun", "train.py"],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        }
    }
    return {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
        "spec": {
            "elasticPolicy": {"minReplicas": 1, "maxReplicas": 2, "rdzvBackend": "c10d", "maxRestarts": 10},
            "pytorchReplicaSpecs": {"Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": template}},
        },
    }


def test_pytorchjob_gets_pods_from_the_operator_that_volcano_binds(kube, namespace):
    core, objs = kube(client.CoreV1Api), kube(client.CustomObjectsApi)
    objs.create_namespaced_custom_object(*KF, namespace, "pytorchjobs", _pytorchjob("elastic"))
    sel = "training.kubeflow.org/job-name=elastic"

    def pods() -> Any:
        items = core.list_namespaced_pod(namespace, label_selector=sel).items
        return len(items) == 2 and items

    got = wait_until("the training operator to create 2 worker pods", pods)
    assert sorted(p.metadata.labels["training.kubeflow.org/replica-index"] for p in got) == ["0", "1"]
    for p in got:
        assert p.spec.scheduler_name == "volcano"
        env = {e.name: e.value for e in p.spec.containers[0].env or []}
        assert env.get("PET_NNODES") == "1:2"
    names = [p.metadata.name for p in got]
    wait_until("PyTorchJob pods bound to kwok nodes and Running", lambda: _bound_and_running(core, namespace, names))


def test_operator_validating_webhook_is_reachable(kube, namespace):
    objs = kube(client.CustomObjectsApi)
    with pytest.raises(client.ApiException) as e:
        objs.create_namespaced_custom_object(*KF, namespace, "pytorchjobs", _pytorchjob("bad", container="main"))
    assert e.value.status in (400, 403, 422)  # controller-runtime denies with 403
    assert "must have at least one container with name pytorch" in e.value.body
