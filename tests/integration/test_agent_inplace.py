"""Issue 39: the agent's side of in-place resizing against a real kube-apiserver: a shrink of a job
with ``volcano-elastic.io/resize: in-place`` tells its pods the event (``resize-generation``,
``target-workers``, ``leaving`` on the victims), evicts a victim through the Eviction API only once
its pod says ``left`` (what the job kit writes), and counts no torchrun restart."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_controller.kube.resources import PODS, PYTORCHJOBS
from elastic_controller.policy import contract, keys
from tests.harness import agentbox as support
from tests.harness import builders as b
from tests.harness.agentbox import Cluster, elastic_job, gang

kc, cluster, harness = support.kc, support.cluster, support.harness  # fixtures

pytestmark = pytest.mark.integration
VICTIMS = ["a-worker-4", "a-worker-5"]


def annotations(obj: dict[str, Any]) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


def terminating(c: Cluster) -> list[str]:
    return sorted(p["metadata"]["name"] for p in c.kc.list(PODS, c.ns)[0] if p["metadata"].get("deletionTimestamp"))


def test_an_in_place_shrink_evicts_each_victim_once_it_left(cluster: Cluster, harness: Any) -> None:
    n = cluster.node(gpus=8)
    job = b.pytorchjob(cluster.ns, "a", workers=6, min_r=2, max_r=6, max_restarts=2)
    job["metadata"].setdefault("annotations", {})[keys.RESIZE] = keys.RESIZE_IN_PLACE
    cluster.add(elastic_job(cluster.ns, "a", n, min_r=2, max_r=6), job, gang(cluster.ns, "b", n, members=4))
    h = harness()
    h.settle(PODS, cluster.ns, "b-3", lambda o: True)
    h.settle(PYTORCHJOBS, cluster.ns, "a", lambda o: keys.RESIZE in annotations(o))
    report = h.agent.run_cycle()
    assert report.evicted == [] and terminating(cluster) == [], report
    assert report.in_place == {f"{cluster.ns}/b"} and report.resized == {f"{cluster.ns}/a": 1}
    for name in VICTIMS:
        ann = annotations(cluster.pod(name))
        assert ann[keys.EVICTED_FOR] == f"{cluster.ns}/b"
        assert (ann[keys.LEAVING], ann[keys.RESIZE_GENERATION], ann[keys.TARGET_WORKERS]) == ("1", "1", "4")
    for name in ("a-worker-1", "a-worker-3"):
        ann = annotations(cluster.pod(name))
        assert (ann[keys.RESIZE_GENERATION], ann[keys.TARGET_WORKERS]) == ("1", "4") and keys.LEAVING not in ann
    said = contract.Decision.decode(annotations(cluster.pg("a"))[keys.LAST_DECISION])
    assert said is not None and said.extra.get("inPlace") is True and said.path == "in-place"
    assert {e["reason"] for e in cluster.events()} >= {"ResizingInPlace", "ScalingDownInPlace"}

    # nobody left yet: nothing evicted
    for name in VICTIMS:
        h.settle(PODS, cluster.ns, name, lambda o: keys.LEAVING in annotations(o))
    report = h.agent.run_cycle()
    assert report.evicted == [] and terminating(cluster) == [] and report.plan.evictions == ()
    assert "in place" in report.plan.starving[0].reason

    # the kit's leaving rank writes left: G on its own pod; the agent evicts that pod, through the Eviction API
    for i, name in enumerate(VICTIMS):
        cluster.kc.patch(PODS, name, {"metadata": {"annotations": {keys.LEFT: "1"}}}, cluster.ns)
        h.settle(PODS, cluster.ns, name, lambda o: annotations(o).get(keys.LEFT) == "1")
        report = h.agent.run_cycle()
        assert report.evicted == [f"{cluster.ns}/{name}"], report
        assert terminating(cluster) == VICTIMS[:i + 1]
    conds = {c["type"]: c for c in cluster.pod("a-worker-5")["status"].get("conditions") or []}
    assert conds["DisruptionTarget"]["reason"] == "EvictionByEvictionAPI"
    h.agent.run_cycle()
    assert keys.RESTARTS_USED not in annotations(cluster.pg("a"))  # no restart counted for an in-place shrink
