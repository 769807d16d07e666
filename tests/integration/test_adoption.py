"""Adopting a running job on a real API server: its pods were created before our webhook was
registered (no group annotation, default scheduler). Our controller creates the job's PodGroup,
the agent counts the pods by their labels and evicts its elastic workers for a starving gang
through the Eviction API, and ``status`` marks the job adopted."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_controller.cli.status import build_rows, list_everything
from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.resources import PODS, PYTORCHJOBS
from tests.harness import agentbox as support
from tests.harness import builders as b
from tests.harness.agentbox import FAST, Cluster, clean, elastic_job, gang, wait_until
from tests.harness.controllerbox import Running, pg_of

kc, cluster, harness = support.kc, support.cluster, support.harness  # fixtures

pytestmark = pytest.mark.integration
GROUP = "scheduling.k8s.io/group-name"


def test_running_job_created_before_the_webhook_is_adopted(cluster: Cluster, harness: Any, kc: KubeClient) -> None:
    n = cluster.node(gpus=8)
    ns = cluster.ns
    kc.create(PYTORCHJOBS, clean(b.pytorchjob(ns, "a", workers=6, min_r=2, max_r=6), ns), ns)
    pods = []
    for o in elastic_job(ns, "a", n, min_r=2, max_r=6):
        if o["kind"] == "Pod":  # as the operator created them with no webhook of ours registered
            o["metadata"]["annotations"].pop(GROUP)
            o["spec"]["schedulerName"] = "default-scheduler"
            pods.append(o)
    cluster.add(pods, gang(ns, "b", n, members=4))
    assert all(GROUP not in (p["metadata"].get("annotations") or {}) for p in kc.list(PODS, ns)[0]
               if p["metadata"]["name"].startswith("a-"))

    ctl = Running(kc)  # the controller writes the job's PodGroup, as for any PyTorchJob
    try:
        wait_until("the controller creates PodGroup a", lambda: pg_of(kc, ns, "a"), timeout=30)
    finally:
        ctl.stop()

    rows = build_rows(list_everything(kc), FAST, b.NOW, ns)
    (row,) = [r for r in rows["default"] if r["job"] == f"{ns}/a"]
    assert (row["adoptedPods"], row["current"], row["min"], row["max"]) == (6, 6, 2, 6)

    h = harness()
    h.settle(PODS, ns, "b-3", lambda o: True)
    h.settle(PODS, ns, "a-worker-5", lambda o: True)
    report = h.agent.run_cycle()
    assert sorted(report.evicted) == [f"{ns}/a-worker-4", f"{ns}/a-worker-5"], report
    victim = cluster.pod("a-worker-5")
    conds = {c["type"]: c for c in victim["status"].get("conditions") or []}
    assert conds["DisruptionTarget"]["reason"] == "EvictionByEvictionAPI"
    assert victim["metadata"]["annotations"]["volcano-elastic.io/evicted-for"] == f"{ns}/b"
