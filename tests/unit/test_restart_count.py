"""Issue 36, F2: ``restarts-used`` counts restarts that happened, never a stamp whose evictions did not.

A notice withdrawn, a notice withdrawn and given again (a tenant removing ``evicted-for`` from its
noticed pods, T5), or an interrupted plan dropped restarted none of torchrun's workers: the count
stays. A victim evicted when its notice ends, or gone by itself while under notice, is one
restart of the job: counted once, however many cycles see it. The agent runs real cycles against
the fake API server (tests/harness/fakecluster.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from elastic_controller.kube.resources import PODGROUPS, PODS, PYTORCHJOBS
from elastic_controller.policy import keys
from tests.harness.legacy import LEGACY
from tests.harness.noticeworld import NOTICE, VICTIMS, make, noticed

USED = keys.RESTARTS_USED


def counts(kube: Any) -> tuple[str | None, str | None]:
    """(the PodGroup's count, the PyTorchJob's copy) of team-a/a."""
    pg = kube.get(PODGROUPS, "a", "team-a")["metadata"].get("annotations") or {}
    job = kube.get(PYTORCHJOBS, "a", "team-a")["metadata"].get("annotations") or {}
    return pg.get(USED), job.get(USED)


def test_a_withdrawn_notice_counts_no_restart() -> None:
    kube, agent, clock = make()
    noticed(kube, agent)
    kube.delete(PODGROUPS, "b", "team-b")  # the gang goes away: the notice is withdrawn
    for i in range(2):
        kube.delete(PODS, f"b-{i}", "team-b")
    for t in (30, 40, 60, NOTICE + 10):
        clock.at(t)
        agent.run_cycle()
    assert all(keys.EVICTED_FOR not in (kube.get(PODS, n, "team-a")["metadata"].get("annotations") or {})
               for n in VICTIMS)
    assert counts(kube) == (None, None)


def test_a_notice_withdrawn_and_given_again_counts_nothing() -> None:
    # T5: the tenant keeps removing evicted-for from its noticed pods; every round the notice is
    # withdrawn and given again. No worker ever restarted: the budget is untouched.
    kube, agent, clock = make()
    noticed(kube, agent)
    t = 0.0
    rounds = 0
    for _ in range(12):
        for name in VICTIMS:
            kube.patch(PODS, name, {"metadata": {"annotations": {keys.EVICTED_FOR: None}}}, "team-a")
        t += 6
        clock.at(t)
        report = agent.run_cycle()
        rounds += bool(report.noticed)
    assert rounds >= 2, "the probe did not make the agent give the notice again"
    assert counts(kube) in ((None, None), ("0", "0"))


def test_a_notice_that_ends_in_evictions_counts_one_restart_once() -> None:
    kube, agent, clock = make()
    noticed(kube, agent)
    assert counts(kube) == (None, None)  # a notice is no restart yet
    clock.at(NOTICE)
    assert sorted(agent.run_cycle().evicted) == [f"team-a/{n}" for n in VICTIMS]
    for t in (NOTICE + 1, NOTICE + 7, NOTICE + 20):
        clock.at(t)
        agent.run_cycle()
    assert counts(kube) == ("1", "1")  # two victims of one job, one stamp: one restart, counted once


def test_victims_gone_by_themselves_under_notice_count_one_restart() -> None:
    kube, agent, clock = make()
    noticed(kube, agent)
    for name in VICTIMS:
        kube.delete(PODS, name, "team-a")
    for t in (10, 20):
        clock.at(t)
        agent.run_cycle()
    assert counts(kube) == ("1", "1")


def test_an_immediate_eviction_counts_in_its_own_cycle() -> None:
    from elastic_controller.config import parse_config

    kube, agent, clock = make(parse_config({"defaults": LEGACY}))
    report = agent.run_cycle()
    assert sorted(report.evicted) == [f"team-a/{n}" for n in VICTIMS]
    assert counts(kube) == ("1", "1")
    clock.at(10)
    agent.run_cycle()
    assert counts(kube) == ("1", "1")


# -- issue 36, T3/T4: the tenant's own PyTorchJob annotations -------------------------------------

def tenant_writes(kube: Any, annotations: dict[str, str]) -> None:
    kube.patch(PYTORCHJOBS, "a", {"metadata": {"annotations": annotations}}, "team-a")


def warnings(kube: Any) -> list[str]:
    from elastic_controller.kube.resources import EVENTS

    return [e["message"] for e in kube.of(EVENTS) if e["reason"] == "UntrustedJobAnnotation"]


@pytest.mark.parametrize("written", [
    {keys.RESTARTS_USED: "99"},
    {keys.RESTARTS_USED: "lots"},
    {keys.LAST_SCALE_TIME: "2099-01-01T00:00:00Z"},
    {keys.LAST_SCALE_TIME: "last tuesday"},
    {keys.RESTARTS_USED: "99", keys.LAST_SCALE_TIME: "2099-01-01T00:00:00Z"},
], ids=["used-99", "used-garbage", "last-scale-2099", "last-scale-garbage", "both"])
def test_what_a_tenant_writes_on_its_job_does_not_shield_it(written: dict[str, str]) -> None:
    from elastic_controller.config import parse_config

    kube, agent, _ = make(parse_config({"defaults": LEGACY}))
    tenant_writes(kube, written)
    report = agent.run_cycle()
    # job A gives its two workers to gang B as if nothing had been written
    assert sorted(report.evicted) == [f"team-a/{n}" for n in VICTIMS], report.plan.starving
    said = warnings(kube)
    assert len(said) == 1 and all(k in said[0] for k in written), said
    job = kube.get(PYTORCHJOBS, "a", "team-a")["metadata"]["annotations"]
    pg = kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"]
    assert job.get(keys.RESTARTS_USED) == pg.get(keys.RESTARTS_USED) == "1"  # our count, set back
    assert job.get(keys.LAST_SCALE_TIME) == pg.get(keys.LAST_SCALE_TIME)
