"""What only real pods show: a process that starts, gets SIGTERM and its grace period on an
eviction, sees a downward-API annotation change, resolves a Service name, reaches the API server
from inside the cluster, and goes away with its node. Each test prints what it measured (the
numbers in the closing notes come from here)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from kubernetes import client

from hack.localbox import image, paths
from tests.harness import realstack
from tests.harness.realstack import PROBE, records
from tests.harness.waiting import wait_until

out_dir = realstack.out_dir  # a fixture

GRACE = 8  # terminationGracePeriodSeconds of the probe pods
WORK_AFTER_TERM = 3  # seconds the probe's SIGTERM handler works before it exits 0


def probe_pod(name: str, out_dir: Path, node: str | None = None, gpus: int = 0,
              annotations: dict[str, str] | None = None) -> dict[str, Any]:
    res = {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}}
    if gpus:
        res["requests"]["nvidia.com/gpu"] = str(gpus)
        res["limits"]["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "terminationGracePeriodSeconds": GRACE,
            **({"nodeName": node} if node else {}),
            "containers": [{
                "name": "probe", "image": image.IMAGE, "imagePullPolicy": "Never",
                "command": ["python3", "-c", PROBE],
                "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                        {"name": "WORK_AFTER_TERM", "value": str(WORK_AFTER_TERM)}],
                "resources": res,
                "volumeMounts": [{"name": "out", "mountPath": "/out"},
                                 {"name": "podinfo", "mountPath": "/podinfo"}],
            }],
            "volumes": [
                {"name": "out", "hostPath": {"path": str(out_dir), "type": "Directory"}},
                {"name": "podinfo", "downwardAPI": {"items": [
                    {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]}},
            ],
        },
    }


def test_real_nodes_are_ready_with_gpus_and_a_real_kubelet(kube: Any, box: Any) -> None:
    core = kube(client.CoreV1Api)
    nodes = core.list_node(label_selector="type=real").items
    assert len(nodes) == box.opts.real_nodes
    for n in nodes:
        assert n.status.node_info.kubelet_version == paths.versions()["KUBERNETES_VERSION"]
        assert n.status.node_info.container_runtime_version.startswith("containerd://")
        assert n.status.allocatable["nvidia.com/gpu"] == str(box.opts.real_node_gpus)
        ready = {c.type: c.status for c in n.status.conditions}["Ready"]
        assert ready == "True"


def test_pod_runs_and_gets_sigterm_and_its_grace_period_on_eviction(kube: Any, namespace: str,
                                                                   out_dir: Path) -> None:
    core = kube(client.CoreV1Api)
    t_create = time.time()
    core.create_namespaced_pod(namespace, probe_pod("probe", out_dir, gpus=1))
    start = wait_until("the probe process started", lambda: records(out_dir, "probe").get("start"), 60)
    started_in = start["t"] - t_create
    assert start["node"].startswith("real-")

    t_evict = time.time()
    core.create_namespaced_pod_eviction("probe", namespace, client.V1Eviction(
        metadata=client.V1ObjectMeta(name="probe", namespace=namespace)))
    term = wait_until("SIGTERM reached the probe", lambda: records(out_dir, "probe").get("term"), 30)
    sigterm_after = term["t"] - t_evict
    done = wait_until("the probe exited on its own within its grace period",
                      lambda: records(out_dir, "probe").get("exit"), GRACE + 5)
    assert done["t"] - term["t"] >= WORK_AFTER_TERM - 0.2  # it was given the time, not killed
    assert done["t"] - term["t"] < GRACE
    wait_until("the evicted pod is gone", lambda: not [
        p for p in core.list_namespaced_pod(namespace).items if p.metadata.name == "probe"], 60)
    print(f"\n[real] pod create -> process start {started_in:.2f}s; eviction -> SIGTERM {sigterm_after:.2f}s")


def test_handler_slower_than_the_grace_period_is_killed(kube: Any, namespace: str, out_dir: Path) -> None:
    core = kube(client.CoreV1Api)
    pod = probe_pod("slow", out_dir)
    pod["spec"]["terminationGracePeriodSeconds"] = 2
    pod["spec"]["containers"][0]["env"][2]["value"] = "30"
    core.create_namespaced_pod(namespace, pod)
    wait_until("the probe process started", lambda: records(out_dir, "slow").get("start"), 60)
    core.delete_namespaced_pod("slow", namespace)
    wait_until("SIGTERM reached the probe", lambda: records(out_dir, "slow").get("term"), 30)
    wait_until("the pod is gone", lambda: not [
        p for p in core.list_namespaced_pod(namespace).items if p.metadata.name == "slow"], 30)
    assert "exit" not in records(out_dir, "slow")  # SIGKILLed at the end of its grace period


def test_annotation_reaches_the_downward_api_file(kube: Any, namespace: str, out_dir: Path) -> None:
    core = kube(client.CoreV1Api)
    core.create_namespaced_pod(namespace, probe_pod("notice", out_dir))
    wait_until("the probe process started", lambda: records(out_dir, "notice").get("start"), 60)
    t = time.time()
    core.patch_namespaced_pod("notice", namespace, {"metadata": {"annotations": {
        "volcano-elastic.io/evict-after": "2030-01-01T00:00:00Z"}}})
    seen = wait_until("the notice in the pod's annotations file",
                      lambda: records(out_dir, "notice").get("notice"), 60)
    print(f"\n[real] annotate -> downward-API file {seen['t'] - t:.2f}s")


def test_pods_resolve_services_and_reach_the_api_server_in_cluster(kube: Any, namespace: str) -> None:
    """CoreDNS answers for a headless Service (what the training operator creates per replica),
    and the `kubernetes` Service with the pod's own token reaches the API server."""
    core = kube(client.CoreV1Api)
    core.create_namespaced_service(namespace, {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "target"},
        "spec": {"clusterIP": "None", "selector": {"app": "target"}, "ports": [{"port": 80}]}})
    target = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "target", "labels": {"app": "target"}},
              "spec": {"containers": [{"name": "c", "image": image.IMAGE, "imagePullPolicy": "Never",
                                       "command": ["python3", "-c", "import time; time.sleep(3600)"]}],
                       "terminationGracePeriodSeconds": 0}}
    core.create_namespaced_pod(namespace, target)
    ip = wait_until("target pod IP", lambda: core.read_namespaced_pod("target", namespace).status.pod_ip, 60)
    script = (
        "import json, os, socket, ssl, urllib.request\n"
        f"addr = socket.gethostbyname('target.{namespace}.svc.cluster.local')\n"
        "sa = '/var/run/secrets/kubernetes.io/serviceaccount'\n"
        "ctx = ssl.create_default_context(cafile=sa + '/ca.crt')\n"
        "req = urllib.request.Request('https://' + os.environ['KUBERNETES_SERVICE_HOST'] + ':' +\n"
        "    os.environ['KUBERNETES_SERVICE_PORT'] + '/version',\n"
        "    headers={'Authorization': 'Bearer ' + open(sa + '/token').read()})\n"
        "v = json.load(urllib.request.urlopen(req, context=ctx, timeout=10))\n"
        "print(json.dumps({'addr': addr, 'version': v['gitVersion']}))\n")
    core.create_namespaced_pod(namespace, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client"},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "c", "image": image.IMAGE, "imagePullPolicy": "Never", "command": ["python3", "-c", script]}]}})
    phase = wait_until("the client pod finished", lambda: (
        core.read_namespaced_pod("client", namespace).status.phase in ("Succeeded", "Failed")
        and core.read_namespaced_pod("client", namespace).status.phase), 90)
    log = core.read_namespaced_pod_log("client", namespace)
    assert phase == "Succeeded", log
    got = json.loads(log.strip().splitlines()[-1])
    assert got["addr"] == ip
    assert got["version"].startswith("v1.")


def test_a_lost_node_takes_its_pods_and_keeps_its_gpus_across_a_kubelet_restart(
        kube: Any, box: Any, namespace: str, out_dir: Path) -> None:
    """The kubelet of real-1 stops: its node goes NotReady (node-monitor grace 20 s), the pod that
    tolerates that for 2 s is evicted by the node lifecycle controller; the kubelet comes back:
    Ready again, and its fake GPUs are still allocatable."""
    core = kube(client.CoreV1Api)
    pod = probe_pod("lost", out_dir, node="real-1")
    pod["spec"]["tolerations"] = [{"key": k, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2}
                                  for k in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")]
    core.create_namespaced_pod(namespace, pod)
    wait_until("the probe on real-1 started", lambda: records(out_dir, "lost").get("start"), 60)
    nodes = box.real  # its kubelets stop and start through the box's runtime
    t = time.monotonic()
    nodes.stop_kubelet(1)
    try:
        def ready(name: str) -> str:
            conds = {c.type: c.status for c in core.read_node(name).status.conditions or []}
            return conds.get("Ready", "")

        wait_until("real-1 NotReady", lambda: ready("real-1") != "True", 60, interval=1)
        not_ready = time.monotonic() - t
        wait_until("the lost node's pod marked for deletion", lambda: any(
            p.metadata.name == "lost" and p.metadata.deletion_timestamp
            for p in core.list_namespaced_pod(namespace).items), 60, interval=1)
        evicted = time.monotonic() - t
    finally:
        nodes.start_kubelet(1)
    wait_until("real-1 Ready again", lambda: ready("real-1") == "True", 90, interval=1)
    wait_until("real-1's GPUs allocatable after the kubelet restart", lambda: core.read_node(
        "real-1").status.allocatable.get("nvidia.com/gpu") == str(box.opts.real_node_gpus), 30)
    wait_until("the lost pod gone once its kubelet is back", lambda: not [
        p for p in core.list_namespaced_pod(namespace).items if p.metadata.name == "lost"], 90, interval=1)
    print(f"\n[real] kubelet stopped -> node NotReady {not_ready:.1f}s, -> pod evicted {evicted:.1f}s")
