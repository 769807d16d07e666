"""A tenant's PodDisruptionBudget over its elastic workers (issue 36, T13) on a real kube-apiserver:
the tenant (ServiceAccount bound to `edit` in its namespace) creates a PDB `maxUnavailable: 0` over
its job's workers with its own token; the agent, acting with the controller's real token (RBAC and
the admission policy `volcano-elastic-controller-pod-deletes` of manifests/base applied), is refused
by the Eviction API, then deletes the two workers above min the starving gang needs, past the PDB.
The same token may not delete a pod it did not claim, nor a master."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.agent import Agent
from elastic_controller.kube.caches import Caches
from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.errors import KubeError, NotFoundError
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.resources import EVENTS, NODES, PDBS, PODGROUPS, PODS, PYTORCHJOBS, Resource
from elastic_controller.policy import keys
from elastic_controller.policy.settings import ElasticConfig, QueuePolicy
from tests.harness import builders as b

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SYSTEM_NS = "volcano-elastic-system"
CONTROLLER = "volcano-elastic-controller"
KINDS: dict[str, Resource] = {"Pod": PODS, "PodGroup": PODGROUPS, "PyTorchJob": PYTORCHJOBS}
FAST = ElasticConfig(defaults=QueuePolicy(starvationSeconds=0, minRuntimeSeconds=0, cooldownSeconds=300))


def ts(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def kubectl(box: Any, *args: str, stdin: str | None = None) -> str:
    proc = box.kubectl(*args, check=False, input=stdin)
    assert proc.returncode == 0, (args, proc.stderr)
    return str(proc.stdout)


def token_client(box: Any, sa: str, ns: str, path: Path) -> KubeClient:
    """A client authenticating with a real token of ServiceAccount ``ns/sa`` (TokenRequest)."""
    token = kubectl(box, "create", "token", sa, f"--namespace={ns}", "--duration=1h").strip()
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "box", "cluster": {"server": box.server, "certificate-authority": str(box.ca_file)}}],
        "users": [{"name": "t", "user": {"token": token}}],
        "contexts": [{"name": "t", "context": {"cluster": "box", "user": "t"}}]}))
    return KubeClient.from_kubeconfig(str(path))


@pytest.fixture
def ours(box: Any) -> Iterator[None]:
    """The controller's ServiceAccount, ClusterRole and binding, and the admission policies, as
    manifests/base ships them."""
    for name in ("namespace.yaml", "rbac-controller.yaml", "admission-policy.yaml"):
        kubectl(box, "apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "manifests/base" / name))
    yield


def create(kc: KubeClient, ns: str, objs: list[dict[str, Any]]) -> None:
    for obj in objs:
        if obj["kind"] not in KINDS:
            continue
        status = obj.pop("status", None) or {}
        for k in ("uid", "creationTimestamp", "resourceVersion"):
            obj["metadata"].pop(k, None)
        obj["metadata"]["namespace"] = ns
        out = kc.create(KINDS[obj["kind"]], obj, ns)
        if obj["kind"] == "PyTorchJob":
            for o in objs:  # the operator's ownerReference on every pod of the job
                if o["kind"] == "Pod" and "training.kubeflow.org/job-name" in (o["metadata"].get("labels") or {}):
                    o["metadata"]["ownerReferences"] = [{
                        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": out["metadata"]["name"],
                        "uid": out["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
        if obj["kind"] == "Pod" and status.get("phase") == "Running":
            kc.patch(PODS, out["metadata"]["name"], {"status": status}, ns, subresource="status")


def test_a_tenants_pdb_does_not_hold_a_starving_gang(box: Any, ours: None, namespace: str, tmp_path: Path) -> None:
    ns = namespace
    admin = KubeClient.from_kubeconfig(str(box.kubeconfig))
    node = f"n-{uuid.uuid4().hex[:6]}"
    obj = b.node(node, gpus=8, cpu="32", memory="256Gi")
    status = obj.pop("status")
    admin.create(NODES, obj)
    admin.patch(NODES, node, {"status": status}, subresource="status")
    caches: Caches | None = None
    try:
        # the tenant: `edit` in its namespace, its own token
        kubectl(box, "create", "serviceaccount", "researcher", f"--namespace={ns}")
        kubectl(box, "create", "rolebinding", "researcher-edit", "--clusterrole=edit",
                f"--serviceaccount={ns}:researcher", f"--namespace={ns}")
        tenant = token_client(box, "researcher", ns, tmp_path / "tenant.kubeconfig")
        controller = token_client(box, CONTROLLER, SYSTEM_NS, tmp_path / "controller.kubeconfig")

        # job a (2..6, all 6 running) fills the node; gang b (4 x 1 GPU) waits
        hour_ago = datetime.now(UTC) - timedelta(hours=1)
        job = [b.pytorchjob(ns, "a", workers=6, min_r=2, max_r=6),
               *b.elastic_job(ns, "a", min_r=2, max_r=6, nodes=[node], scheduled_at=hour_ago)]
        gang = b.gang(ns, "b", members=4, gpus=1)
        for o in job + gang:
            if o["kind"] == "Pod":
                o["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
                for c in (o.get("status") or {}).get("conditions") or []:
                    c["lastTransitionTime"] = ts(hour_ago)
        for o in gang:
            if o["kind"] == "Pod":
                o["status"] = {"phase": "Pending"}
        create(admin, ns, b.items(job, gang))

        # T13: the tenant's PDB, an innocent habit, with its own token
        tenant.create(PDBS, {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "keep-all"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"training.kubeflow.org/job-name": "a"}}}}, ns)

        # the policy is loaded asynchronously: the controller's token may not delete an unclaimed pod
        deadline = time.monotonic() + 30
        while True:
            try:
                controller.delete(PODS, "b-0", ns, dry_run=True)
            except KubeError as exc:
                assert exc.status in (403, 422), exc
                assert "claimed for a starving gang" in str(exc), exc
                break
            assert time.monotonic() < deadline, "the pod-deletes policy never denied"
            time.sleep(0.5)

        caches = Caches(controller)
        caches.start()
        assert caches.wait_synced(30), caches.unsynced()
        agent = Agent(controller, caches, FAST, EventRecorder(controller))
        deadline = time.monotonic() + 90
        reports = []
        while time.monotonic() < deadline:
            if caches.get(PODS, "b-3", ns) is not None and not caches.stale():
                reports.append(agent.run_cycle())
                gone = [n for n in (f"a-worker-{i}" for i in range(6)) if _deleting(admin, ns, n)]
                if gone:
                    break
            time.sleep(1)
        # the Eviction API first (the agent sees the whole box: a gang another test left in its
        # namespace, still being deleted, may take the first cycle)
        refused = [r.failed[f"{ns}/b"] for r in reports if f"{ns}/b" in r.failed]
        assert refused and "pdb" in refused[0], [r.failed for r in reports]
        assert sorted(gone) == ["a-worker-4", "a-worker-5"], ([r.failed for r in reports], reports[-1].plan.starving)
        passed = sorted(e["involvedObject"]["name"] for e in admin.list(EVENTS, ns)[0]
                        if e["reason"] == "DisruptionBudgetPassed")
        assert passed == ["a-worker-4", "a-worker-5"]
        assert admin.get(PODGROUPS, "a", ns)["metadata"]["annotations"][keys.LAST_SCALE_DIRECTION] == "down"

        # the bound: never a master (a-worker-0 carries job-role=master), even one it claimed
        admin.patch(PODS, "a-worker-0", {"metadata": {"annotations": {keys.EVICTED_FOR: f"{ns}/b"}}}, ns)
        with pytest.raises(KubeError) as info:
            controller.delete(PODS, "a-worker-0", ns, dry_run=True)
        assert info.value.status in (403, 422) and "never a master" in str(info.value), info.value
    finally:
        if caches is not None:
            caches.stop()
        for p in admin.list(PODS, ns)[0]:
            try:
                admin.delete(PODS, p["metadata"]["name"], ns)
            except NotFoundError:
                pass
        try:
            admin.delete(NODES, node)
        except NotFoundError:
            pass


def _deleting(kc: KubeClient, ns: str, name: str) -> bool:
    try:
        return bool(kc.get(PODS, name, ns)["metadata"].get("deletionTimestamp"))
    except NotFoundError:
        return True
