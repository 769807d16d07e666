"""The preemption agent against a real kube-apiserver (no scheduler, no kubelet: evicted pods stay
Terminating, which is exactly a victim that is still releasing its GPUs)."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_controller.agent import Agent
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.resources import PDBS, PODGROUPS, PODS
from tests.harness import agentbox as support
from tests.harness.agentbox import EVICTED_FOR, FAST, LAST, Cluster, elastic_job, scenario, terminating, wait_until

kc, cluster, harness = support.kc, support.cluster, support.harness  # fixtures

pytestmark = pytest.mark.integration
GATE = "volcano-elastic.io/scale-up"


def test_evicts_through_the_eviction_api(cluster: Cluster, harness: Any) -> None:
    scenario(cluster)
    h = harness()
    h.settle(PODS, cluster.ns, "b-3", lambda o: True)
    report = h.agent.run_cycle()
    assert sorted(report.evicted) == [f"{cluster.ns}/a-worker-4", f"{cluster.ns}/a-worker-5"], report
    assert terminating(cluster) == ["a-worker-4", "a-worker-5"]
    victim = cluster.pod("a-worker-5")
    conds = {c["type"]: c for c in victim["status"].get("conditions") or []}
    assert conds["DisruptionTarget"]["reason"] == "EvictionByEvictionAPI"  # not a plain delete
    assert victim["metadata"]["annotations"][EVICTED_FOR] == f"{cluster.ns}/b"
    ann = cluster.pg("a")["metadata"]["annotations"]
    assert ann["volcano-elastic.io/last-scale-direction"] == "down" and ann[LAST]
    reasons = {(e["involvedObject"]["kind"], e["reason"]) for e in cluster.events()}
    assert ("Pod", "EvictedForGang") in reasons


def test_a_pdb_on_one_victim_stops_the_whole_plan(cluster: Cluster, harness: Any) -> None:
    scenario(cluster)
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "keep-4"},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {
               "training.kubeflow.org/job-name": "a", "training.kubeflow.org/replica-index": "4"}}}}
    cluster.kc.create(PDBS, pdb, cluster.ns)
    h = harness()
    h.settle(PODS, cluster.ns, "b-3", lambda o: True)
    report = h.agent.run_cycle()
    assert report.evicted == [] and "pdb" in report.failed[f"{cluster.ns}/b"], report
    assert terminating(cluster) == []
    for name in ("a-worker-4", "a-worker-5"):
        assert EVICTED_FOR not in (cluster.pod(name)["metadata"].get("annotations") or {})
    assert LAST not in (cluster.pg("a")["metadata"].get("annotations") or {})
    cluster.kc.delete(PDBS, "keep-4", cluster.ns)
    h.settle(PODGROUPS, cluster.ns, "a", lambda o: LAST not in (o["metadata"].get("annotations") or {}))
    assert len(h.agent.run_cycle().evicted) == 2


def test_a_gang_with_terminating_victims_gets_no_more(cluster: Cluster, harness: Any) -> None:
    scenario(cluster)
    h = harness()
    h.settle(PODS, cluster.ns, "b-3", lambda o: True)
    assert len(h.agent.run_cycle().evicted) == 2
    fresh = harness()  # a cache that sees the victims Terminating (no in-memory ledger)
    for name in ("a-worker-4", "a-worker-5"):
        fresh.settle(PODS, cluster.ns, name, lambda o: bool(o["metadata"].get("deletionTimestamp")))
    agent = Agent(cluster.kc, fresh.caches, FAST, EventRecorder(cluster.kc))
    for _ in range(2):
        report = agent.run_cycle()
        assert report.evicted == []
        assert report.plan.starving[0].decision == "wait"
    assert terminating(cluster) == ["a-worker-4", "a-worker-5"]


def test_gates_are_lifted_and_other_gates_survive(cluster: Cluster, harness: Any) -> None:
    n = cluster.node(gpus=8)
    objs = elastic_job(cluster.ns, "j", n, min_r=2, max_r=4, running=2)
    for o in objs:
        if o["metadata"]["name"] == "j-worker-2":
            o["spec"]["schedulingGates"].append({"name": "example.com/other"})
    cluster.add(objs)
    h = harness()
    h.settle(PODS, cluster.ns, "j-worker-3", lambda o: True)
    report = h.agent.run_cycle()
    assert sorted(report.released) == [f"{cluster.ns}/j-worker-2", f"{cluster.ns}/j-worker-3"]
    assert cluster.pod("j-worker-2")["spec"]["schedulingGates"] == [{"name": "example.com/other"}]
    assert not cluster.pod("j-worker-3")["spec"].get("schedulingGates")
    ann = cluster.pg("j")["metadata"]["annotations"]
    assert ann["volcano-elastic.io/last-scale-direction"] == "up"


class Killed(BaseException):
    pass


class DiesOnSecondEviction:
    """Our client, except the process 'dies' right before its second real eviction."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.real = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def evict(self, namespace: str, name: str, *, uid: str | None = None, dry_run: bool = False) -> None:
        if not dry_run:
            self.real += 1
            if self.real == 2:
                raise Killed()
        self.inner.evict(namespace, name, uid=uid, dry_run=dry_run)


def test_agent_killed_mid_plan_does_not_evict_twice_or_forget_cooldowns(cluster: Cluster, harness: Any) -> None:
    scenario(cluster)
    dying = DiesOnSecondEviction(cluster.kc)
    h = harness(dying)
    h.settle(PODS, cluster.ns, "b-3", lambda o: True)
    with pytest.raises(Killed):
        h.agent.run_cycle()
    assert len(terminating(cluster)) == 1
    stamp = cluster.pg("a")["metadata"]["annotations"][LAST]
    h.stop()
    restarted = harness()  # new process: new caches, empty ledger
    restarted.settle(PODGROUPS, cluster.ns, "a", lambda o: LAST in (o["metadata"].get("annotations") or {}))
    first = restarted.agent.run_cycle()
    assert len(first.resumed) == 1 and first.evicted == []
    assert terminating(cluster) == ["a-worker-4", "a-worker-5"]
    for _ in range(2):
        assert restarted.agent.run_cycle().evicted == []
    assert terminating(cluster) == ["a-worker-4", "a-worker-5"]
    assert cluster.pg("a")["metadata"]["annotations"][LAST] == stamp  # cooldown kept, not restarted


def test_dry_run_agent_changes_nothing(cluster: Cluster, harness: Any) -> None:
    import dataclasses

    scenario(cluster)
    cfg = dataclasses.replace(FAST, agent=dataclasses.replace(FAST.agent, dryRun=True))
    h = harness(cfg=cfg)
    h.settle(PODS, cluster.ns, "b-3", lambda o: True)
    report = h.agent.run_cycle()
    assert len(report.plan.evictions) == 2 and report.evicted == []
    assert terminating(cluster) == []
    assert not (cluster.pg("a")["metadata"].get("annotations") or {})
    wait_until("no events", lambda: not cluster.events(), timeout=2)
