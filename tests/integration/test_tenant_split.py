"""One job split into three small elastic ones (issue 36, T14) on a real kube-apiserver: the tenant
(ServiceAccount with `edit` and PyTorchJob rights in its namespace) creates its three jobs with its
own token; each runs 2 workers (below minWorkersToShrink 4), 6 together. Another department's gang
waits: the agent takes a worker of the tenant's (it counts the tenant's workers in the queue), where
it took none before (each job "below minWorkersToShrink")."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.agent import Agent
from elastic_controller.kube.caches import Caches
from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.resources import NAMESPACES, PODGROUPS, PODS, PYTORCHJOBS
from tests.harness import builders as b
from tests.harness.agentbox import FAST, ts
from tests.harness.tenantbox import cleanup, node, tenant_client

pytestmark = pytest.mark.integration


def bare(obj: dict[str, Any], ns: str) -> dict[str, Any]:
    for k in ("uid", "creationTimestamp", "resourceVersion"):
        obj["metadata"].pop(k, None)
    obj["metadata"]["namespace"] = ns
    return obj


def test_a_job_split_in_three_does_not_hold_a_gang(box: Any, namespace: str, tmp_path: Path) -> None:
    ns = namespace
    other = f"other-{uuid.uuid4().hex[:6]}"
    admin = KubeClient.from_kubeconfig(str(box.kubeconfig))
    name = node(admin, gpus=6)
    admin.create(NAMESPACES, {"metadata": {"name": other}})
    caches: Caches | None = None
    try:
        tenant = tenant_client(box, ns, tmp_path / "tenant.kubeconfig", pytorchjobs=True)
        hour_ago = datetime.now(UTC) - timedelta(hours=1)
        for i in range(3):
            # the tenant's write: three small jobs instead of one of six, with its own token
            tenant.create(PYTORCHJOBS, bare(b.pytorchjob(ns, f"part{i}", workers=2, min_r=1, max_r=4), ns), ns)
            # what the controller and the operator create for each (admin here)
            for o in b.elastic_job(ns, f"part{i}", min_r=1, max_r=4, running=2, nodes=[name], gated_rest=False,
                                   scheduled_at=hour_ago):
                if o["kind"] == "PodGroup":
                    admin.create(PODGROUPS, bare(o, ns), ns)
                elif o["kind"] == "Pod" and (o.get("status") or {}).get("phase") == "Running":
                    st = o.pop("status")
                    for c in st.get("conditions") or []:
                        c["lastTransitionTime"] = ts(hour_ago)
                    o["spec"]["nodeSelector"] = {"kubernetes.io/hostname": name}
                    admin.create(PODS, bare(o, ns), ns)
                    admin.patch(PODS, o["metadata"]["name"], {"status": st}, ns, subresource="status")
        for o in b.gang(other, "g", members=1, gpus=1):
            if o["kind"] == "PodGroup":
                admin.create(PODGROUPS, bare(o, other), other)
            elif o["kind"] == "Pod":
                o.pop("status", None)
                o["spec"]["nodeSelector"] = {"kubernetes.io/hostname": name}
                admin.create(PODS, bare(o, other), other)
                admin.patch(PODS, o["metadata"]["name"], {"status": {"phase": "Pending"}}, other,
                            subresource="status")

        caches = Caches(admin)
        caches.start()
        assert caches.wait_synced(30), caches.unsynced()
        deadline = time.monotonic() + 15
        while caches.get(PODS, "g-0", other) is None or caches.get(PODS, "part2-worker-1", ns) is None \
                or caches.stale():
            assert time.monotonic() < deadline, "the caches never showed the pods"
            time.sleep(0.2)
        report = Agent(admin, caches, FAST, EventRecorder(admin)).run_cycle()
        # old rule: "waiting ... 3 below minWorkersToShrink", nothing evicted
        assert len(report.evicted) == 1 and report.evicted[0].startswith(f"{ns}/part"), report.plan.starving
    finally:
        cleanup(admin, name, [ns, other], [caches], drop_namespaces=[other])
