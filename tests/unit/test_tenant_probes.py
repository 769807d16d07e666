"""Issue 36, T2: a tenant relabels its elastic workers ``training.kubeflow.org/job-role=master``;
the agent derives the role from the replica type and index (the operator puts that label on
master-0 or worker-0 only), so they stay elastic and the starving gang still gets them. The agent
runs real cycles against the fake API server."""

from __future__ import annotations

from elastic_controller.config import parse_config
from elastic_controller.kube.resources import PODS
from elastic_controller.policy import keys
from tests.harness.legacy import LEGACY
from tests.harness.noticeworld import VICTIMS, make


def test_elastic_workers_relabelled_master_are_still_victims() -> None:
    kube, agent, _ = make(parse_config({"defaults": LEGACY}))
    for i in range(2, 6):  # every elastic worker of A (2..6)
        kube.patch(PODS, f"a-worker-{i}", {"metadata": {"labels": {keys.JOB_ROLE_LABEL: "master"}}}, "team-a")
    report = agent.run_cycle()
    assert sorted(report.evicted) == [f"team-a/{n}" for n in VICTIMS], report.plan.starving

