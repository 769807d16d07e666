"""The pods the training operator creates for an elastic PyTorchJob that names no volume and no env
get, from our mutating webhook (registered for real on the box), what the job kit needs: the
downward-API file of the pod's annotations at /etc/podinfo/annotations and POD_NAME. The API
server accepts the patched pods (the patch is validated as a real Pod), a static job's pods get
none of it, and a job that already mounts its own pod info keeps it (no duplicate volume)."""

from __future__ import annotations

import socket
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.errors import KubeError
from elastic_controller.kube.resources import PODS, PYTORCHJOBS, Resource
from tests.harness.kubeflow import pytorchjob_manifest
from tests.harness.waiting import wait_until

pytestmark = pytest.mark.e2e
WEBHOOKS = Resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
                    "MutatingWebhookConfiguration", namespaced=False)
ANNOTATIONS_ITEM = {"path": "annotations", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.annotations"}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _template(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "pytorch", "image": "docker.io/pytorch/pytorch:latest",
                                 "command": ["python", "-m", "volcano_elastic_job.run", "train.py"],
                                 "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "1", "memory": "1Gi"}}}
    spec: dict[str, Any] = {"containers": [container]}
    if extra:
        container.update(extra.get("container", {}))
        spec.update(extra.get("spec", {}))
    return {"spec": spec}


@pytest.fixture
def kc(kubeconfig: str) -> Any:
    client = KubeClient.from_kubeconfig(kubeconfig)
    yield client
    client.close()


@pytest.fixture
def webhook(kc: KubeClient, box: Any, box_process: Any, serving_cert: tuple[Path, Path], tmp_path: Path) -> Any:
    cfg = tmp_path / "config.yaml"
    cfg.write_text("gating: {enabled: true}\n")
    port = _free_port()
    box_process("webhook", [sys.executable, "-m", "elastic_controller", "webhook", "--tls-cert-file",
                            str(serving_cert[0]), "--tls-private-key-file", str(serving_cert[1]), "--port", str(port),
                            "--host", "127.0.0.1", "--config", str(cfg), "--workers", "1"])
    wait_until("webhook listening", lambda: _port_open(port), 30)
    name = f"volcano-elastic-podinfo-{uuid.uuid4().hex[:5]}"
    kc.create(WEBHOOKS, {"metadata": {"name": name}, "webhooks": [{
        "name": "pods.volcano-elastic.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
        "failurePolicy": "Fail", "timeoutSeconds": 10, "reinvocationPolicy": "IfNeeded",
        "clientConfig": box.webhook_client_config(port, "/mutate-pods"),
        "objectSelector": {"matchLabels": {"training.kubeflow.org/operator-name": "pytorchjob-controller"}},
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}],
    }]})
    yield name
    try:
        kc.delete(WEBHOOKS, name)
    except KubeError:
        pass


def _pods(kc: KubeClient, ns: str, job: str, n: int) -> list[dict[str, Any]]:
    def created() -> list[dict[str, Any]] | None:
        pods = kc.list(PODS, ns, label_selector=f"training.kubeflow.org/job-name={job}")[0]
        return pods if len(pods) >= n else None
    found: list[dict[str, Any]] = wait_until(f"the operator created {n} pods of {job}", created, 120, 0.5)
    return sorted(found, key=lambda p: p["metadata"]["name"])


def _pytorch(pod: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = next(c for c in pod["spec"]["containers"] if c["name"] == "pytorch")
    return container


def _podinfo_volumes(pod: dict[str, Any]) -> list[str]:
    return [v["name"] for v in pod["spec"].get("volumes") or []
            if ANNOTATIONS_ITEM in ((v.get("downwardAPI") or {}).get("items") or [])]


def test_the_operators_pods_of_an_elastic_job_get_the_kits_pod_info(kc: KubeClient, namespace: str,
                                                                     webhook: str) -> None:
    kc.create(PYTORCHJOBS, pytorchjob_manifest("elastic", "default", 4, (2, 4), _template()), namespace)
    kc.create(PYTORCHJOBS, pytorchjob_manifest("static", "default", 2, None, _template()), namespace)
    # A job written the old way (its own volume "podinfo", mount and POD_NAME): kept, nothing doubled.
    own = {"container": {"env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                         "volumeMounts": [{"name": "podinfo", "mountPath": "/etc/podinfo", "readOnly": True}]},
           "spec": {"volumes": [{"name": "podinfo", "downwardAPI": {"items": [
               {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]}}]}}
    kc.create(PYTORCHJOBS, pytorchjob_manifest("old-yaml", "default", 3, (1, 3), _template(own)), namespace)

    elastic = _pods(kc, namespace, "elastic", 4)
    for pod in elastic:  # worker-0 and the core worker run the kit too, not only the elastic ones
        name, c = pod["metadata"]["name"], _pytorch(pod)
        assert _podinfo_volumes(pod) == ["volcano-elastic-podinfo"], name
        mounts = [m for m in c.get("volumeMounts") or [] if m["name"] == "volcano-elastic-podinfo"]
        assert mounts == [{"name": "volcano-elastic-podinfo", "mountPath": "/etc/podinfo", "readOnly": True}], name
        env = [e for e in c.get("env") or [] if e["name"] == "POD_NAME"]
        assert env == [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                                                                       "fieldPath": "metadata.name"}}}], name
    assert {(p["metadata"].get("annotations") or {}).get("volcano-elastic.io/role") for p in elastic} >= \
        {"master", "elastic"}  # our webhook did mutate them

    for pod in _pods(kc, namespace, "static", 2):
        assert _podinfo_volumes(pod) == [] and "POD_NAME" not in {e["name"] for e in _pytorch(pod).get("env") or []}

    for pod in _pods(kc, namespace, "old-yaml", 3):
        c = _pytorch(pod)
        assert _podinfo_volumes(pod) == ["podinfo"], pod["metadata"]["name"]
        assert [m["mountPath"] for m in c["volumeMounts"] if m["mountPath"].startswith("/etc/podinfo")] == \
            ["/etc/podinfo"]
        assert [e["name"] for e in c["env"]].count("POD_NAME") == 1
