"""The checkpoint grant tried on a real kube-apiserver: the controller's Role and RoleBinding for
the example job (elastic_controller/checkpoint_access.py), a real token of the job's ServiceAccount
(TokenRequest), and the job kit's ``record_checkpoint`` run as a standalone program the way a pod
runs it (only the kit on its path; token, namespace and CA files, KUBERNETES_SERVICE_HOST/PORT,
POD_NAME).

It may annotate the job's own pods and gets 403 for another job's pod in the same namespace.
"""

from __future__ import annotations

import copy
import subprocess
import sys
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.checkpoint_access import CheckpointAccess
from elastic_controller.kube.client import KubeClient
from elastic_controller.policy import keys
from elastic_controller.policy.parse import parse_time
from tests.harness.manifests import EXAMPLE, _example, example_job

pytestmark = pytest.mark.integration
KIT_SRC = Path(__file__).resolve().parents[2] / "jobkit" / "src"


def in_namespace(obj: dict[str, Any], ns: str) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"]["namespace"] = ns
    for subject in obj.get("subjects") or []:
        subject["namespace"] = ns
    return obj


def plain_pod(ns: str, name: str, service_account: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"serviceAccountName": service_account,
                     "containers": [{"name": "pytorch", "image": "registry.example.com/train:1"}]}}


@pytest.fixture
def kc(kubeconfig: str) -> Iterator[KubeClient]:
    client = KubeClient.from_kubeconfig(kubeconfig)
    yield client
    client.close()


@pytest.fixture
def job_rbac(kube: Callable[[type], Any], kc: KubeClient, namespace: str) -> dict[str, Any]:
    """The example's ServiceAccount, the controller's grant for the example job, a pod of the job
    and a pod of another job, and a one-hour token of the ServiceAccount."""
    from kubernetes import client

    core = kube(client.CoreV1Api)
    sa_obj = in_namespace(next(d for d in _example(EXAMPLE) if d["kind"] == "ServiceAccount"), namespace)
    core.create_namespaced_service_account(namespace, sa_obj)
    job = in_namespace(example_job(EXAMPLE), namespace)
    # the job exists, so that the garbage collector keeps what it owns (a made-up owner uid was
    # collected within the test on a loaded machine)
    created = client.CustomObjectsApi(core.api_client).create_namespaced_custom_object(
        "kubeflow.org", "v1", namespace, "pytorchjobs", job)
    job["metadata"]["uid"] = created["metadata"]["uid"]
    assert CheckpointAccess(kc).ensure(job) == "applied"
    sa = sa_obj["metadata"]["name"]
    name = job["metadata"]["name"]
    for pod in (f"{name}-worker-0", f"{name}-worker-1", "other-job-worker-0"):
        core.create_namespaced_pod(namespace, plain_pod(namespace, pod, sa))
    token = core.create_namespaced_service_account_token(sa, namespace, {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600}}).status.token
    return {"job": name, "token": token, "core": core}


def run_kit(box: Any, tmp_path: Path, namespace: str, token: str, pod: str) -> subprocess.CompletedProcess[str]:
    """The kit's record_checkpoint in a fresh interpreter, with only what a pod has."""
    sa_dir = tmp_path / "serviceaccount"
    sa_dir.mkdir(exist_ok=True)
    (sa_dir / "token").write_text(token)
    (sa_dir / "namespace").write_text(namespace)
    (sa_dir / "ca.crt").write_bytes(Path(box.ca_file).read_bytes())
    url = urllib.parse.urlsplit(box.server)
    env = {"PATH": "/usr/bin:/bin", "KUBERNETES_SERVICE_HOST": str(url.hostname),
           "KUBERNETES_SERVICE_PORT": str(url.port), "POD_NAME": pod}
    return subprocess.run(
        [sys.executable, "-I", "-c",
         f"import sys, logging; sys.path.insert(0, {str(KIT_SRC)!r}); logging.basicConfig(); "
         "import volcano_elastic_job as kit; from datetime import datetime, timezone; "
         "now = datetime.now(timezone.utc).replace(microsecond=0); "
         f"print(kit.record_checkpoint(now, sa_dir={str(sa_dir)!r}), now.isoformat())"],
        capture_output=True, text=True, env=env, timeout=60)


def annotation(core: Any, namespace: str, pod: str) -> str | None:
    ann = core.read_namespaced_pod(pod, namespace).metadata.annotations or {}
    value: str | None = ann.get(keys.LAST_CHECKPOINT_TIME)
    return value


def test_the_job_records_checkpoints_on_its_own_pods_only(box: Any, namespace: str, job_rbac: dict[str, Any],
                                                           tmp_path: Path) -> None:
    core, job, token = job_rbac["core"], job_rbac["job"], job_rbac["token"]
    for own in (f"{job}-worker-1", f"{job}-worker-0"):  # rank 0 may run in any pod of the job
        done = run_kit(box, tmp_path, namespace, token, own)
        assert done.returncode == 0, done.stderr
        ok, when = done.stdout.split()
        assert ok == "True", done.stderr
        written = annotation(core, namespace, own)
        assert written is not None and parse_time(written) == parse_time(when)
    # another job's pod in the same namespace: forbidden, logged (never raised), and left untouched
    refused = run_kit(box, tmp_path, namespace, token, "other-job-worker-0")
    assert refused.returncode == 0 and refused.stdout.startswith("False"), refused.stderr
    assert "HTTP 403" in refused.stderr
    assert annotation(core, namespace, "other-job-worker-0") is None


def test_the_token_can_do_nothing_else(kube: Callable[[type], Any], namespace: str, job_rbac: dict[str, Any]) -> None:
    """Least privilege: no read, no delete, no eviction, nothing on the PyTorchJob."""
    from kubernetes import client

    authz = kube(client.AuthorizationV1Api)
    template = example_job(EXAMPLE)["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    sa = f"system:serviceaccount:{namespace}:{template['serviceAccountName']}"

    def allowed(verb: str, resource: str, name: str, group: str = "", sub: str = "") -> bool:
        review = authz.create_subject_access_review({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": sa, "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"],
                     "resourceAttributes": {"namespace": namespace, "verb": verb, "group": group,
                                            "resource": resource, "name": name, "subresource": sub}}})
        return bool(review.status.allowed)

    job = job_rbac["job"]
    assert allowed("patch", "pods", f"{job}-worker-3")
    assert not allowed("patch", "pods", f"{job}-worker-4")  # beyond Worker.replicas
    assert not any([
        allowed("get", "pods", f"{job}-worker-0"), allowed("delete", "pods", f"{job}-worker-0"),
        allowed("update", "pods", f"{job}-worker-0"), allowed("list", "pods", ""),
        allowed("create", "pods", f"{job}-worker-0", sub="eviction"),
        allowed("patch", "pytorchjobs", job, group="kubeflow.org"),
    ])
