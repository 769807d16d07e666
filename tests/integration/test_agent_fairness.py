"""The fairness scale-down and the attained-service stamp against a real kube-apiserver (issue 38; no
scheduler, no kubelet: an evicted pod stays Terminating until the test removes it)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from elastic_controller.cli.status import build_rows, list_everything
from elastic_controller.kube.resources import PODS
from elastic_controller.policy import keys
from elastic_controller.policy.attained import parse_stamp
from elastic_controller.policy.cycle import plan_cycle
from tests.harness import agentbox as support
from tests.harness.agentbox import FAST, Cluster, elastic_job, gang, ts

kc, cluster, harness = support.kc, support.cluster, support.harness  # fixtures

pytestmark = pytest.mark.integration


def _recent(objs: list[dict[str, Any]], seconds: float) -> list[dict[str, Any]]:
    """``objs`` with their running pods placed ``seconds`` ago (PodScheduled's transition)."""
    at = ts(datetime.now(UTC) - timedelta(seconds=seconds))
    for o in objs:
        for c in (o.get("status") or {}).get("conditions") or []:
            c["lastTransitionTime"] = at
    return objs


def _gone(c: Cluster, name: str) -> None:
    c.kc.patch(PODS, name, {"metadata": {"finalizers": None}}, c.ns)
    c.kc._send("DELETE", PODS.path(c.ns, name), body={"gracePeriodSeconds": 0})


def test_the_most_served_job_gives_and_the_stamp_keeps_its_service(cluster: Cluster, harness: Any) -> None:
    """rich (6 of max 8, placed an hour ago) and poor (2 of max 4, placed 5 minutes ago) fill one
    8-GPU node; nothing starves: rich gives poor the two workers its growth waits for."""
    n = cluster.node(gpus=8)
    cluster.add(elastic_job(cluster.ns, "rich", n, min_r=1, max_r=8, running=6),
                _recent(elastic_job(cluster.ns, "poor", n, min_r=1, max_r=4, running=2), 300))
    h = harness()
    h.settle(PODS, cluster.ns, "poor-worker-3", lambda o: True)
    h.settle(PODS, cluster.ns, "rich-worker-7", lambda o: True)
    plan = plan_cycle(h.agent.snapshot(), FAST, datetime.now(UTC))
    assert [(e.pod, e.for_gang) for e in plan.evictions] == [
        (f"{cluster.ns}/rich-worker-5", f"{cluster.ns}/poor"), (f"{cluster.ns}/rich-worker-4", f"{cluster.ns}/poor")]
    assert plan.evictions[0].reason.startswith(f"fairness: job {cluster.ns}/poor waits to grow")
    report = h.agent.run_cycle()
    assert sorted(report.evicted) == [f"{cluster.ns}/rich-worker-4", f"{cluster.ns}/rich-worker-5"], report
    assert cluster.pod("rich-worker-5")["metadata"]["annotations"][keys.EVICTED_FOR] == f"{cluster.ns}/poor"
    reasons = {(e["involvedObject"]["kind"], e["reason"]) for e in cluster.events()}
    assert ("Pod", "EvictedForGang") in reasons
    # status shows each job's attained service (an hour of 6 GPUs against five minutes of 2)
    rows = {r["job"]: r for rows in build_rows(list_everything(cluster.kc), FAST, datetime.now(UTC)).values()
            for r in rows}
    assert rows[f"{cluster.ns}/rich"]["attainedGpuSeconds"] > 5 * rows[f"{cluster.ns}/poor"]["attainedGpuSeconds"]
    # the victims go: the next cycle stamps rich's service with their hour in it
    for name in ("rich-worker-4", "rich-worker-5"):
        _gone(cluster, name)
        h.settle(PODS, cluster.ns, "rich-worker-3", lambda o: True)
    support.wait_until("the cache loses the victims", lambda: all(
        h.caches.get(PODS, name, cluster.ns) is None for name in ("rich-worker-4", "rich-worker-5")))
    report = h.agent.run_cycle()
    # the freed room goes to poor, the least served (rich is in its cooldown anyway)
    assert sorted(report.released) == [f"{cluster.ns}/poor-worker-2", f"{cluster.ns}/poor-worker-3"], report
    assert "least served job first" in cluster.pg("poor")["metadata"]["annotations"][keys.LAST_DECISION]
    stamp = parse_stamp(cluster.pg("rich")["metadata"]["annotations"].get(keys.ATTAINED_SERVICE))
    assert stamp is not None and stamp.gpu_seconds >= 6 * 3600


def test_a_gang_the_planner_cannot_serve_does_not_stop_the_scale_down(cluster: Cluster, harness: Any) -> None:
    """``fairnessWhileGangsWait``: as above, plus a gang of the same queue that no node can hold (16
    GPUs on one pod): the planner decides it waits. Off (the behaviour before), the agent takes nothing;
    on, rich gives poor its two workers (Events, evicted-for), and the plan's reason names the waiting gang."""
    n = cluster.node(gpus=8)
    cluster.add(elastic_job(cluster.ns, "rich", n, min_r=1, max_r=8, running=6),
                _recent(elastic_job(cluster.ns, "poor", n, min_r=1, max_r=4, running=2), 300),
                gang(cluster.ns, "huge", n, members=1, gpus=16))
    off = harness()
    off.settle(PODS, cluster.ns, "poor-worker-3", lambda o: True)
    off.settle(PODS, cluster.ns, "rich-worker-7", lambda o: True)
    off.settle(PODS, cluster.ns, "huge-0", lambda o: True)
    report = off.agent.run_cycle()
    assert not report.evicted, report
    assert "wait" in cluster.pg("huge")["metadata"]["annotations"][keys.LAST_DECISION]
    on_cfg = replace(FAST, defaults=replace(FAST.defaults, fairnessWhileGangsWait=True))
    on = harness(cfg=on_cfg)
    on.settle(PODS, cluster.ns, "huge-0", lambda o: True)
    plan = plan_cycle(on.agent.snapshot(), on_cfg, datetime.now(UTC))
    assert [d.decision for d in plan.starving] == ["wait"]
    assert [(e.pod, e.for_gang) for e in plan.evictions] == [
        (f"{cluster.ns}/rich-worker-5", f"{cluster.ns}/poor"), (f"{cluster.ns}/rich-worker-4", f"{cluster.ns}/poor")]
    assert f"waiting gang(s) {cluster.ns}/huge have no victims" in plan.evictions[0].reason
    report = on.agent.run_cycle()
    assert sorted(report.evicted) == [f"{cluster.ns}/rich-worker-4", f"{cluster.ns}/rich-worker-5"], report
    assert ("Pod", "EvictedForGang") in {(e["involvedObject"]["kind"], e["reason"]) for e in cluster.events()}
    assert cluster.pod("rich-worker-5")["metadata"]["annotations"][keys.EVICTED_FOR] == f"{cluster.ns}/poor"
