"""Eviction notices (queue ``noticeSeconds``) against a real kube-apiserver: the notice's
annotations and Events, the eviction through the Eviction API when the notice ends (or at once
after a newer checkpoint), and the withdrawal when the gang no longer needs the victims."""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from elastic_controller.kube.resources import PODGROUPS, PODS
from elastic_controller.policy import keys
from elastic_controller.policy.parse import parse_time
from elastic_controller.policy.settings import ElasticConfig
from tests.harness import agentbox as support
from tests.harness.agentbox import FAST, Cluster, elastic_job, gang, ts

kc, cluster, harness = support.kc, support.cluster, support.harness  # fixtures

pytestmark = pytest.mark.integration
VICTIMS = ["a-worker-4", "a-worker-5"]


def with_notice(seconds: int) -> ElasticConfig:
    return dataclasses.replace(FAST, defaults=dataclasses.replace(FAST.defaults, noticeSeconds=seconds))


def scenario(c: Cluster) -> None:
    """Job A (2..6 workers, all running) fills an 8-GPU node; gang B (4 x 1 GPU) waits for it."""
    n = c.node(gpus=8)
    c.add(elastic_job(c.ns, "a", n, min_r=2, max_r=6), gang(c.ns, "b", n, members=4))


def terminating(c: Cluster) -> list[str]:
    return sorted(p["metadata"]["name"] for p in c.kc.list(PODS, c.ns)[0] if p["metadata"].get("deletionTimestamp"))


def annotations(c: Cluster, name: str) -> dict[str, str]:
    return dict(c.pod(name)["metadata"].get("annotations") or {})


def events(c: Cluster, reason: str) -> list[tuple[str, str]]:
    return sorted((e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in c.events()
                  if e["reason"] == reason)


def give_notice(c: Cluster, h: Any) -> datetime:
    """One cycle: both victims under notice; returns their evict-after."""
    h.settle(PODS, c.ns, "b-3", lambda o: True)
    given = datetime.now(UTC)
    report = h.agent.run_cycle()
    assert sorted(report.noticed.get(f"{c.ns}/b", [])) == [f"{c.ns}/{v}" for v in VICTIMS], report
    assert report.evicted == [] and terminating(c) == []
    deadlines = set()
    for name in VICTIMS:
        ann = annotations(c, name)
        assert ann[keys.EVICTED_FOR] == f"{c.ns}/b"
        deadlines.add(ann[keys.EVICT_AFTER])
    (raw,) = deadlines
    deadline = parse_time(raw)
    assert deadline is not None
    notice = h.agent.cfg.defaults.noticeSeconds
    assert given + timedelta(seconds=notice - 1) <= deadline <= given + timedelta(seconds=notice + 2)
    return deadline


def test_a_notice_is_given_then_the_victims_are_evicted_when_it_ends(cluster: Cluster, harness: Any) -> None:
    scenario(cluster)
    h = harness(cfg=with_notice(6))
    deadline = give_notice(cluster, h)
    assert set(events(cluster, "EvictionNotice")) == {("Pod", "a-worker-4"), ("Pod", "a-worker-5"), ("PodGroup", "a")}
    ann = cluster.pg("a")["metadata"]["annotations"]
    assert ann[keys.LAST_SCALE_DIRECTION] == "down"  # the cooldown starts with the notice
    # while the notice runs: nothing evicted, no further victims, the gang says why
    for name in VICTIMS:
        h.settle(PODS, cluster.ns, name, lambda o: keys.EVICT_AFTER in (o["metadata"].get("annotations") or {}))
    report = h.agent.run_cycle()
    assert datetime.now(UTC) < deadline, "the box was too slow for this test's 6 s notice"
    assert report.evicted == [] and report.plan.evictions == () and terminating(cluster) == []
    assert "under an eviction notice" in report.plan.starving[0].reason
    time.sleep(max(0.0, (deadline - datetime.now(UTC)).total_seconds()) + 0.1)
    report = h.agent.run_cycle()
    assert sorted(report.evicted) == [f"{cluster.ns}/{v}" for v in VICTIMS], report
    assert terminating(cluster) == VICTIMS
    conds = {c["type"]: c for c in cluster.pod("a-worker-5")["status"].get("conditions") or []}
    assert conds["DisruptionTarget"]["reason"] == "EvictionByEvictionAPI"  # not a plain delete
    assert ("Pod", "a-worker-4") in events(cluster, "EvictedForGang")


def test_a_newer_checkpoint_ends_the_notice_at_once(cluster: Cluster, harness: Any) -> None:
    scenario(cluster)
    h = harness(cfg=with_notice(600))
    deadline = give_notice(cluster, h)
    # the training code records a checkpoint after the notice began (times are whole seconds)
    began = deadline - timedelta(seconds=600)
    time.sleep(max(0.0, (began - datetime.now(UTC)).total_seconds()) + 1.05)
    stamp = ts(datetime.now(UTC))
    cluster.kc.patch(PODS, "a-worker-0", {"metadata": {"annotations": {keys.LAST_CHECKPOINT_TIME: stamp}}},
                     cluster.ns)
    h.settle(PODS, cluster.ns, "a-worker-0",
             lambda o: (o["metadata"].get("annotations") or {}).get(keys.LAST_CHECKPOINT_TIME) == stamp)
    report = h.agent.run_cycle()
    assert sorted(report.evicted) == [f"{cluster.ns}/{v}" for v in VICTIMS], report
    assert terminating(cluster) == VICTIMS


def test_the_notice_is_withdrawn_when_the_gang_is_gone(cluster: Cluster, harness: Any) -> None:
    scenario(cluster)
    h = harness(cfg=with_notice(600))
    give_notice(cluster, h)
    cluster.kc.delete(PODGROUPS, "b", cluster.ns)
    h.settle(PODGROUPS, cluster.ns, "a", lambda o: True)
    support.wait_until("the cache loses PodGroup b", lambda: h.caches.get(PODGROUPS, "b", cluster.ns) is None)
    report = h.agent.run_cycle()
    assert sorted(report.withdrawn) == [f"{cluster.ns}/{v}" for v in VICTIMS], report
    assert report.evicted == [] and terminating(cluster) == []
    for name in VICTIMS:
        ann = annotations(cluster, name)
        assert keys.EVICT_AFTER not in ann and keys.EVICTED_FOR not in ann
    assert set(events(cluster, "EvictionNoticeWithdrawn")) == {("Pod", "a-worker-4"), ("Pod", "a-worker-5"),
                                                               ("PodGroup", "a")}
