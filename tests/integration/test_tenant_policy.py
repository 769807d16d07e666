"""The tenant boundary on a real kube-apiserver (issue 36): a researcher's ServiceAccount bound to
the built-in `edit` ClusterRole in its own namespace (filled by the real clusterrole aggregation
controller, with PyTorchJob rights aggregated into it as Kubeflow's `kubeflow-edit` does), acting
with its own token. The probes that wrote what the agent or Volcano reads are refused by the
ValidatingAdmissionPolicy `volcano-elastic-tenant-writes` with a reason; what the job's own code and
owner write stays open."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.errors import KubeError
from elastic_controller.kube.resources import PODS, PYTORCHJOBS
from tests.harness import builders as b
from tests.harness.appliedbox import installed, kubectl  # noqa: F401 - fixture

pytestmark = pytest.mark.integration
GATE = "volcano-elastic.io/scale-up"
AGGREGATED = "volcano-elastic-test-pytorchjobs-edit"


def _tenant(box: Any, admin: KubeClient, ns: str, tmp_path: Path) -> KubeClient:
    """ServiceAccount `researcher` with ClusterRole `edit` bound in `ns` only; its own token."""
    _apply(box, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "researcher", "namespace": ns}})
    _apply(box, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "researcher-edit", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "researcher", "namespace": ns}]})
    proc = kubectl(box, "create", "token", "researcher", f"--namespace={ns}", "--duration=1h")
    assert proc.returncode == 0, proc.stderr
    path = tmp_path / "tenant.kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "box", "cluster": {"server": box.server, "certificate-authority": str(box.ca_file)}}],
        "users": [{"name": "t", "user": {"token": proc.stdout.strip()}}],
        "contexts": [{"name": "t", "context": {"cluster": "box", "user": "t"}}]}))
    return KubeClient.from_kubeconfig(str(path))


def _apply(box: Any, obj: dict[str, Any]) -> None:
    proc = kubectl(box, "apply", "-f", "-", stdin=json.dumps(obj))
    assert proc.returncode == 0, proc.stderr


def _edit_has_pytorchjobs(box: Any) -> bool:
    proc = kubectl(box, "get", "clusterrole", "edit", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    return any("pytorchjobs" in (r.get("resources") or []) for r in json.loads(proc.stdout).get("rules") or [])


def _eventually(what: str, fn: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not fn():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def _refused(fn: Callable[[], Any], *words: str) -> str:
    with pytest.raises(KubeError) as info:
        fn()
    assert info.value.status in (403, 422), info.value
    text = str(info.value)
    assert "tenant policy" in text, text
    for w in words:
        assert w in text, (w, text)
    return text


@pytest.fixture
def aggregated_edit(box: Any) -> Any:
    """Kubeflow's aggregation of PyTorchJob rights into `edit` (kubeflow-edit), for the test."""
    _apply(box, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": AGGREGATED, "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
        "rules": [{"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs"],
                   "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]})
    _eventually("the aggregation controller to fill `edit` with pytorchjobs", lambda: _edit_has_pytorchjobs(box), 60)
    yield
    kubectl(box, "delete", "clusterrole", AGGREGATED, "--ignore-not-found")


def _worker(ns: str, job: dict[str, Any], index: int, gated: bool) -> dict[str, Any]:
    name = job["metadata"]["name"]
    p = b.pod(ns, f"{name}-worker-{index}", group=name, gates=[GATE] if gated else [],
              labels={"training.kubeflow.org/operator-name": "pytorchjob-controller",
                      "training.kubeflow.org/job-name": name,
                      "training.kubeflow.org/replica-type": "worker",
                      "training.kubeflow.org/replica-index": str(index)},
              annotations={"volcano-elastic.io/role": "elastic", "volcano.sh/task-priority": "99",
                           "volcano.sh/preemptable": "true",
                           "volcano-elastic.io/evicted-for": f"{ns}/gang",
                           "volcano-elastic.io/evict-after": "2026-01-01T00:00:00Z"})
    for k in ("resourceVersion", "uid", "creationTimestamp"):
        p["metadata"].pop(k, None)
    p.pop("status", None)
    p["spec"].pop("nodeName", None)
    p["metadata"]["ownerReferences"] = [{
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": name,
        "uid": job["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
    return p


def test_a_tenant_with_edit_cannot_write_what_decides_for_others(
        box: Any, installed: list[dict[str, Any]], aggregated_edit: Any, namespace: str,  # noqa: F811
        tmp_path: Path) -> None:
    admin = KubeClient.from_kubeconfig(str(box.kubeconfig))
    ns = namespace
    tenant = _tenant(box, admin, ns, tmp_path)
    spec = b.pytorchjob(ns, "a", workers=8, min_r=2, max_r=8)
    for k in ("resourceVersion", "uid", "creationTimestamp"):
        spec["metadata"].pop(k, None)
    spec.pop("status", None)
    job = admin.create(PYTORCHJOBS, spec, ns)
    admin.create(PODS, _worker(ns, job, 3, gated=True), ns)
    admin.create(PODS, _worker(ns, job, 2, gated=False), ns)

    # the policy is loaded asynchronously: wait for its first refusal
    def enforced() -> bool:
        try:
            tenant.patch(PODS, "a-worker-3", {"metadata": {"labels": {
                "training.kubeflow.org/job-role": "master"}}}, ns)
        except KubeError as exc:
            assert exc.status in (403, 422), exc
            return True
        admin.patch(PODS, "a-worker-3", {"metadata": {"labels": {"training.kubeflow.org/job-role": None}}}, ns)
        return False
    _eventually("the tenant policy to be enforced", enforced)

    # T1: our gate stays until the agent lifts it
    _refused(lambda: tenant.patch(PODS, "a-worker-3", {"spec": {"schedulingGates": []}}, ns), GATE)
    # T2: a worker relabelled master (and any training.kubeflow.org/ label)
    _refused(lambda: tenant.patch(PODS, "a-worker-2", {"metadata": {"labels": {
        "training.kubeflow.org/job-role": "master"}}}, ns), "training.kubeflow.org/job-role")
    _refused(lambda: tenant.patch(PODS, "a-worker-2", {"metadata": {"labels": {
        "training.kubeflow.org/replica-index": "0"}}}, ns), "replica-index")
    # T5, T6: the notice's ledger and deadline on a victim
    _refused(lambda: tenant.patch(PODS, "a-worker-2", {"metadata": {"annotations": {
        "volcano-elastic.io/evicted-for": None}}}, ns), "volcano-elastic.io/evicted-for")
    _refused(lambda: tenant.patch(PODS, "a-worker-2", {"metadata": {"annotations": {
        "volcano-elastic.io/evict-after": "2099-01-01T00:00:00Z"}}}, ns), "volcano-elastic.io/evict-after")
    # T7: the PodGroup a pod belongs to; Volcano's task keys; our role
    _refused(lambda: tenant.patch(PODS, "a-worker-2", {"metadata": {"annotations": {
        "scheduling.k8s.io/group-name": "elsewhere"}}}, ns), "scheduling.k8s.io/group-name")
    _refused(lambda: tenant.patch(PODS, "a-worker-2", {"metadata": {"annotations": {
        "volcano.sh/preemptable": "false", "volcano-elastic.io/role": "core"}}}, ns),
        "volcano.sh/preemptable", "volcano-elastic.io/role")
    # T12: a pod posing as job A's worker, not owned by it
    impostor = _worker(ns, job, 1, gated=False)
    impostor["metadata"].pop("ownerReferences")
    _refused(lambda: tenant.create(PODS, impostor, ns), "ownerReference")
    # T3, T4: our records on the PyTorchJob
    _refused(lambda: tenant.patch(PYTORCHJOBS, "a", {"metadata": {"annotations": {
        "volcano-elastic.io/restarts-used": "99"}}}, ns), "restarts-used")
    _refused(lambda: tenant.patch(PYTORCHJOBS, "a", {"metadata": {"annotations": {
        "volcano-elastic.io/last-scale-time": "2099-01-01T00:00:00Z"}}}, ns), "last-scale-time")
    posed = b.pytorchjob(ns, "c", workers=2, min_r=1, max_r=2)
    for k in ("resourceVersion", "uid", "creationTimestamp"):
        posed["metadata"].pop(k, None)
    posed.pop("status", None)
    posed["metadata"]["annotations"] = {"volcano-elastic.io/restarts-used": "99"}
    _refused(lambda: tenant.create(PYTORCHJOBS, posed, ns), "restarts-used")

    # what stays open: the job kit's checkpoint stamp, the job contract, anyone else's keys
    tenant.patch(PODS, "a-worker-2", {"metadata": {"annotations": {
        "volcano-elastic.io/last-checkpoint-time": "2026-11-28T00:00:00Z", "volcano-elastic.io/left": "1",
        "example.com/note": "x"},
        "labels": {"team": "nlp"}}}, ns)
    tenant.patch(PYTORCHJOBS, "a", {"metadata": {"annotations": {
        "volcano-elastic.io/worker-counts": "2,4,8", "volcano-elastic.io/resize": "in-place",
        "volcano-elastic.io/last-checkpoint-time": "2026-11-28T00:00:00Z"}}}, ns)
    del posed["metadata"]["annotations"]
    tenant.create(PYTORCHJOBS, posed, ns)
    # nothing above was written
    pod = admin.get(PODS, "a-worker-3", ns)
    assert [g["name"] for g in pod["spec"].get("schedulingGates") or []] == [GATE]
    pod2 = admin.get(PODS, "a-worker-2", ns)
    assert "training.kubeflow.org/job-role" not in pod2["metadata"]["labels"]
    assert pod2["metadata"]["annotations"]["volcano-elastic.io/evicted-for"] == f"{ns}/gang"
    assert pod2["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "a"
    job_ann = admin.get(PYTORCHJOBS, "a", ns)["metadata"].get("annotations") or {}
    assert "volcano-elastic.io/restarts-used" not in job_ann
    # the cluster admin (system:masters) is not checked
    admin.patch(PODS, "a-worker-3", {"spec": {"schedulingGates": []}}, ns)
