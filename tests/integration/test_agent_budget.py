"""The restart budget against a real kube-apiserver: the agent counts a shrink in
``volcano-elastic.io/restarts-used`` in the same writes as the cooldown stamp (PodGroup and
PyTorchJob), and an agent started afresh (new process: new caches, nothing in memory) reads the
count back and refuses the shrink that would spend the job's last restart."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_controller.kube.resources import PODGROUPS, PODS, PYTORCHJOBS
from tests.harness import agentbox as support
from tests.harness import builders as b
from tests.harness.agentbox import Cluster, elastic_job, gang

kc, cluster, harness = support.kc, support.cluster, support.harness  # fixtures

pytestmark = pytest.mark.integration
USED = "volcano-elastic.io/restarts-used"
LAST = "volcano-elastic.io/last-scale-time"


def annotations(obj: dict[str, Any]) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


def test_the_count_is_written_with_the_stamp_and_survives_an_agent_restart(cluster: Cluster, harness: Any) -> None:
    # Job a (2..6, all 6 running, maxRestarts 2) fills an 8-GPU node; gang b (4 x 1 GPU) waits.
    n = cluster.node(gpus=8)
    cluster.add(elastic_job(cluster.ns, "a", n, min_r=2, max_r=6),
                b.pytorchjob(cluster.ns, "a", workers=6, min_r=2, max_r=6, max_restarts=2),
                gang(cluster.ns, "b", n, members=4))
    h = harness()
    h.settle(PODS, cluster.ns, "b-3", lambda o: True)
    h.settle(PYTORCHJOBS, cluster.ns, "a", lambda o: True)
    report = h.agent.run_cycle()
    assert sorted(report.evicted) == [f"{cluster.ns}/a-worker-4", f"{cluster.ns}/a-worker-5"], report
    pg, job = annotations(cluster.pg("a")), annotations(cluster.kc.get(PYTORCHJOBS, "a", cluster.ns))
    assert pg[USED] == job[USED] == "1"  # one shrink of the job (two victims): one restart
    assert pg[LAST] == job[LAST]  # written with the cooldown stamp
    h.stop()

    # A new agent: nothing in memory. Gang c (1 GPU) needs one more of a's workers; a has 1 of its 2
    # restarts left, which is the reserve: no victim, and the gang's reason says so.
    cluster.add(gang(cluster.ns, "c", n, members=1))
    again = harness()
    again.settle(PODGROUPS, cluster.ns, "a", lambda o: annotations(o).get(USED) == "1")
    again.settle(PODS, cluster.ns, "c-0", lambda o: True)
    report = again.agent.run_cycle()
    assert report.evicted == [] and report.resumed == [], report
    # b and c together need one GPU more than the free and releasing ones: whichever is planned
    # second (they waited equally long) waits, for this reason
    why = "restart budget spent (1 of 2 used, 1 kept in reserve)"
    waiting = [d for d in report.plan.starving if d.decision == "wait" and why in d.reason]
    assert [d.pod_group for d in waiting] in ([f"{cluster.ns}/b"], [f"{cluster.ns}/c"]), report.plan.starving
    assert annotations(cluster.pg("a"))[USED] == "1"  # nothing counted twice
