"""Issue 36 against a real kube-apiserver: F2 (a notice withdrawn counts no torchrun restart; the
victims evicted when it ends count one, once) and T3/T4 (what the job's owner writes on its
PyTorchJob does not shield it)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from elastic_controller.execute.executor import RECORD_GRACE_SECONDS
from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.resources import PODGROUPS, PODS, PYTORCHJOBS
from elastic_controller.policy import keys
from tests.harness import agentbox as support
from tests.harness import builders as b
from tests.harness.agentbox import FAST, NOTICE, Cluster, noticing

kc, cluster, harness = support.kc, support.cluster, support.harness  # fixtures

pytestmark = pytest.mark.integration


def used(c: Cluster) -> str | None:
    return (c.pg("a")["metadata"].get("annotations") or {}).get(keys.RESTARTS_USED)


def test_a_withdrawn_notice_counts_no_restart(cluster: Cluster, harness: Any, kc: KubeClient) -> None:
    h, agent = noticing(cluster, harness, kc)
    assert used(cluster) is None  # a notice restarts nothing
    cluster.kc.delete(PODGROUPS, "b", cluster.ns)
    for i in range(4):
        cluster.kc.delete(PODS, f"b-{i}", cluster.ns)
    support.wait_until("the gang's deletion is seen", lambda: h.caches.get(PODGROUPS, "b", cluster.ns) is None)
    time.sleep(RECORD_GRACE_SECONDS + 0.5)
    report = agent.run_cycle()
    assert len(report.withdrawn) == 2, report
    agent.run_cycle()
    assert used(cluster) is None


def test_a_notice_that_ends_counts_one_restart(cluster: Cluster, harness: Any, kc: KubeClient) -> None:
    h, agent = noticing(cluster, harness, kc)
    for name in ("a-worker-4", "a-worker-5"):
        h.settle(PODS, cluster.ns, name, lambda o: keys.EVICT_AFTER in (o["metadata"].get("annotations") or {}))
    time.sleep(NOTICE.defaults.noticeSeconds + 0.5)
    evicted: list[str] = []

    def cycle() -> bool:
        evicted.extend(agent.run_cycle().evicted)
        return len(evicted) == 2

    support.wait_until("the victims are evicted when the notice ends", cycle, timeout=20)
    assert sorted(evicted) == [f"{cluster.ns}/a-worker-4", f"{cluster.ns}/a-worker-5"]
    h.settle(PODGROUPS, cluster.ns, "a", lambda o: True)
    for _ in range(2):
        agent.run_cycle()
    assert used(cluster) == "1"


@pytest.mark.parametrize("written", [{keys.RESTARTS_USED: "99"}, {keys.LAST_SCALE_TIME: "2099-01-01T00:00:00Z"}],
                         ids=["restarts-used-99", "last-scale-time-2099"])
def test_what_the_owner_writes_on_its_job_does_not_shield_it(cluster: Cluster, harness: Any,
                                                              written: dict[str, str]) -> None:
    n = cluster.node(gpus=8)
    job = b.pytorchjob(cluster.ns, "a", workers=6, min_r=2, max_r=6, max_restarts=5)
    job["metadata"]["annotations"] = dict(written)
    cluster.add(support.elastic_job(cluster.ns, "a", n, min_r=2, max_r=6), [job],
                support.gang(cluster.ns, "b", n, members=4))
    h = harness(cfg=FAST)
    h.settle(PODS, cluster.ns, "b-3", lambda o: True)
    h.settle(PYTORCHJOBS, cluster.ns, "a", lambda o: True)
    report = h.agent.run_cycle()
    assert sorted(report.evicted) == [f"{cluster.ns}/a-worker-4", f"{cluster.ns}/a-worker-5"], report.plan.starving
    assert any(e["reason"] == "UntrustedJobAnnotation" for e in cluster.events())
