"""Decisions where ``kubectl describe`` shows them, on a real kube-apiserver: a job whose growth the
cooldown holds back gets one ``ScaleUpHeld`` Event on its PyTorchJob and the hold in its PodGroup's
``last-decision``; the next cycles write nothing and record no second Event, and neither does a new
agent (a restart: the annotation is the memory)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from elastic_controller.kube.resources import PODGROUPS, PODS
from tests.harness import agentbox as support
from tests.harness import builders as b
from tests.harness.agentbox import Cluster, elastic_job, ts

kc, cluster, harness = support.kc, support.cluster, support.harness  # fixtures

pytestmark = pytest.mark.integration
DECISION = "volcano-elastic.io/last-decision"


def held_events(c: Cluster) -> list[dict[str, Any]]:
    return [e for e in c.events() if e["reason"] == "ScaleUpHeld"]


def test_a_job_in_cooldown_gets_one_event_and_the_annotation(cluster: Cluster, harness: Any) -> None:
    n = cluster.node(gpus=8)
    scaled = datetime.now(UTC) - timedelta(seconds=20)  # cooldownSeconds 300 (FAST): 280 s left
    objs = elastic_job(cluster.ns, "j", n, min_r=2, max_r=4, running=2)
    for o in objs:
        if o["kind"] == "PodGroup":
            o["metadata"]["annotations"].update({"volcano-elastic.io/last-scale-time": ts(scaled),
                                                 "volcano-elastic.io/last-scale-direction": "up"})
    cluster.add(b.pytorchjob(cluster.ns, "j", workers=4, min_r=2, max_r=4), objs)
    h = harness()
    h.settle(PODS, cluster.ns, "j-worker-3", lambda o: True)
    first = h.agent.run_cycle()
    assert first.released == [] and [n.reason for n in first.plan.notes] == ["Cooldown"], first.plan.notes
    h.settle(PODGROUPS, cluster.ns, "j", lambda o: DECISION in (o["metadata"].get("annotations") or {}))
    text = cluster.pg("j")["metadata"]["annotations"][DECISION]
    assert " held (Cooldown): job " in text and "in cooldown until" in text, text
    (event,) = held_events(cluster)
    assert event["involvedObject"]["kind"] == "PyTorchJob" and event["involvedObject"]["name"] == "j"
    assert event["type"] == "Normal" and "in cooldown until" in event["message"]
    rv = cluster.pg("j")["metadata"]["resourceVersion"]
    for _ in range(3):  # the next cycles: the same hold, nothing written, no second Event
        assert [n.reason for n in h.agent.run_cycle().plan.notes] == ["Cooldown"]
    h.stop()
    restarted = harness()  # a new leader: empty memory, a new Event recorder
    restarted.settle(PODGROUPS, cluster.ns, "j", lambda o: o["metadata"]["resourceVersion"] == rv)
    restarted.agent.run_cycle()
    assert cluster.pg("j")["metadata"]["resourceVersion"] == rv
    assert cluster.pg("j")["metadata"]["annotations"][DECISION] == text
    assert len(held_events(cluster)) == 1
