"""A tenant's PodDisruptionBudget over its elastic workers (issue 36, T13) on a real kube-apiserver:
the tenant (ServiceAccount bound to `edit` in its namespace) creates a PDB `maxUnavailable: 0` over
its job's workers with its own token; the agent, acting with the controller's real token (RBAC and
the admission policy `volcano-elastic-controller-pod-deletes` of manifests/base applied), is refused
by the Eviction API, then deletes the two workers above min the starving gang needs, past the PDB.
The same token may not delete a pod it did not claim, nor a master."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.agent import Agent
from elastic_controller.kube.caches import Caches
from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.errors import KubeError, NotFoundError
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.resources import EVENTS, PDBS, PODGROUPS, PODS
from elastic_controller.policy import keys
from tests.harness.agentbox import FAST
from tests.harness.tenantbox import cleanup, kubectl, starving_world, tenant_client, token_client

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SYSTEM_NS = "volcano-elastic-system"
CONTROLLER = "volcano-elastic-controller"


@pytest.fixture
def ours(box: Any) -> Iterator[None]:
    """The controller's ServiceAccount, ClusterRole and binding, and the admission policies, as
    manifests/base ships them."""
    for name in ("namespace.yaml", "rbac-controller.yaml", "admission-policy.yaml"):
        kubectl(box, "apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "manifests/base" / name))
    yield


def test_a_tenants_pdb_does_not_hold_a_starving_gang(box: Any, ours: None, namespace: str, tmp_path: Path) -> None:
    ns = namespace
    admin = KubeClient.from_kubeconfig(str(box.kubeconfig))
    caches: Caches | None = None
    # job a (2..6, all 6 running, its pods owned by the PyTorchJob) fills the node; gang b (4 x 1 GPU) waits
    node = starving_world(admin, ns, owned=True)
    try:
        # the tenant: `edit` in its namespace, its own token
        tenant = tenant_client(box, ns, tmp_path / "tenant.kubeconfig")
        controller = token_client(box, CONTROLLER, SYSTEM_NS, tmp_path / "controller.kubeconfig")

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
        cleanup(admin, node, [ns], [caches])


def _deleting(kc: KubeClient, ns: str, name: str) -> bool:
    try:
        return bool(kc.get(PODS, name, ns)["metadata"].get("deletionTimestamp"))
    except NotFoundError:
        return True
