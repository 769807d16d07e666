"""Smoke tests of the integration box: a real kube-apiserver, etcd and the
kube-controller-manager controllers we rely on."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from hack.localbox import paths
from tests.harness.boxfixtures import node_manifest
from tests.harness.waiting import wait_until as _wait_until

pytestmark = pytest.mark.integration


def wait_until(what: str, fn: Callable[[], Any], timeout: float = 60, interval: float = 0.3) -> Any:
    return _wait_until(what, fn, timeout, interval)


def test_version_is_the_pinned_kubernetes(kube):
    info = kube(client.VersionApi).get_code()
    pinned = paths.versions()["KUBERNETES_VERSION"]
    assert info.git_version == pinned
    assert (info.major, info.minor) == tuple(pinned.lstrip("v").split(".")[:2])


def test_namespace_and_pod(kube, namespace):
    core = kube(client.CoreV1Api)
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="p"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]),
    )
    core.create_namespaced_pod(namespace, pod)
    got = core.read_namespaced_pod("p", namespace)
    assert got.status.phase == "Pending"  # no scheduler in the integration box
    # the service-account controller gives every namespace its default ServiceAccount
    wait_until("default ServiceAccount", lambda: core.list_namespaced_service_account(namespace).items)


@pytest.fixture
def static_node(kube):
    core = kube(client.CoreV1Api)
    name = f"static-{uuid.uuid4().hex[:6]}"
    core.create_node(node_manifest(name, gpus=8))
    yield name
    core.delete_node(name)


def _running_pod(core: client.CoreV1Api, ns: str, name: str, node: str, labels: dict[str, str]) -> None:
    core.create_namespaced_pod(ns, client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1PodSpec(node_name=node, containers=[client.V1Container(name="c", image="busybox")]),
    ))
    # no kubelet here: report the pod Running and Ready ourselves
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    core.patch_namespaced_pod_status(name, ns, {"status": {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now},
                       {"type": "PodScheduled", "status": "True", "lastTransitionTime": now}],
    }})


def _evict(core: client.CoreV1Api, ns: str, name: str) -> int:
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=ns))
    try:
        core.create_namespaced_pod_eviction(name, ns, body)
        return 201
    except client.ApiException as e:
        return e.status


def test_pdb_guards_evictions_once_the_disruption_controller_observed_it(kube, namespace, static_node):
    core, policy = kube(client.CoreV1Api), kube(client.PolicyV1Api)
    labels = {"app": "guarded"}
    _running_pod(core, namespace, "a", static_node, labels)
    _running_pod(core, namespace, "b", static_node, labels)
    policy.create_namespaced_pod_disruption_budget(namespace, client.V1PodDisruptionBudget(
        metadata=client.V1ObjectMeta(name="pdb"),
        spec=client.V1PodDisruptionBudgetSpec(min_available=1,
                                              selector=client.V1LabelSelector(match_labels=labels)),
    ))

    def observed() -> Any:
        pdb = policy.read_namespaced_pod_disruption_budget("pdb", namespace)
        st = pdb.status
        return (st and st.observed_generation == pdb.metadata.generation and st.current_healthy == 2
                and st.disruptions_allowed == 1)

    wait_until("the disruption controller to observe the PDB", observed)
    assert _evict(core, namespace, "a") == 201  # budget allows one
    # the budget is now spent: the next eviction is refused until the controller recomputes
    assert _evict(core, namespace, "b") == 429
    pdb = policy.read_namespaced_pod_disruption_budget("pdb", namespace)
    assert pdb.status.disruptions_allowed == 0


def test_garbage_collector_follows_owner_references(kube, namespace):
    core = kube(client.CoreV1Api)
    owner = core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owner")))
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(
        name="dependent",
        owner_references=[client.V1OwnerReference(api_version="v1", kind="ConfigMap", name="owner",
                                                  uid=owner.metadata.uid)],
    )))
    core.delete_namespaced_config_map("owner", namespace)

    def gone() -> bool:
        try:
            core.read_namespaced_config_map("dependent", namespace)
            return False
        except client.ApiException as e:
            return e.status == 404

    wait_until("the garbage collector to delete the dependent", gone)


@pytest.mark.parametrize("group,version,plural", [
    ("scheduling.volcano.sh", "v1beta1", "podgroups"),
    ("kubeflow.org", "v1", "pytorchjobs"),
])
def test_namespaced_crds_are_served(kube, namespace, group, version, plural):
    objs = kube(client.CustomObjectsApi)
    assert objs.list_namespaced_custom_object(group, version, namespace, plural)["items"] == []


def test_podgroup_round_trip(kube, namespace):
    objs = kube(client.CustomObjectsApi)
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
          "metadata": {"name": "pg"}, "spec": {"minMember": 2, "queue": "default"}}
    objs.create_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", namespace, "podgroups", pg)
    got = objs.get_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", namespace, "podgroups", "pg")
    assert got["spec"]["minMember"] == 2
    assert objs.list_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues") is not None


def test_kubectl_talks_to_the_box(box):
    out = box.kubectl("get", "--raw", "/readyz").stdout
    assert out.strip() == "ok"
