"""Issue 39 item 3 in the simulator: a job resized in place stalls seconds per scale event and loses
no work (``RestartCost.in_place_fraction``, ``in_place``; ``simulate --in-place-fraction``)."""

from __future__ import annotations

import dataclasses

import pytest

from elastic_controller.policy.settings import ElasticConfig
from elastic_controller.simulate.cluster import ClusterSpec, NodePool, QueueSpec
from elastic_controller.simulate.engine import SimSettings, simulate
from elastic_controller.simulate.restarts import RestartCost, describe, fixed_cost
from elastic_controller.simulate.scaling import ScalingCurve
from elastic_controller.simulate.trace import JobSpec
from tests.harness.legacy import legacy_config, legacy_policy

LINEAR = SimSettings(curve=ScalingCurve(1.0), checkpoint_interval=100, restart_cost=fixed_cost(60))
CLUSTER = ClusterSpec((NodePool("n", 1, 8, 96_000, 2**40),), (QueueSpec("default"),))
ANY_SIZE = ElasticConfig(defaults=legacy_policy(minWorkersToShrink=0))
JOBS = [JobSpec("a", 0, 1, 2, 4, 8000), JobSpec("b", 200, 1, 1, 4, 4000)]


def test_a_job_resized_in_place_stalls_seconds_and_loses_no_work() -> None:
    # test_simulate_costs's scenario: A is shrunk for B at 300 s and regrows when B ends
    restart = simulate(JOBS, CLUSTER, ANY_SIZE, "elastic", LINEAR)
    a = next(j for j in restart.jobs if j.name == "a")
    assert a.lost_work == pytest.approx(280.0) and a.restart_seconds == pytest.approx(120.0)
    cost = dataclasses.replace(fixed_cost(60), in_place_fraction=1.0, in_place=2.0)
    r = simulate(JOBS, CLUSTER, ANY_SIZE, "elastic", dataclasses.replace(LINEAR, restart_cost=cost))
    a2 = next(j for j in r.jobs if j.name == "a")
    assert a2.lost_work == 0.0 and a2.restart_seconds == pytest.approx(4.0)  # two events, 2 s each
    assert a2.restarts == 0 and a2.finish < a.finish


def test_the_jobs_in_place_are_the_same_for_every_run_and_the_fraction() -> None:
    cost = RestartCost(in_place_fraction=0.3)
    picked = [i for i in range(2000) if cost.resizes_in_place(i)]
    assert picked == [i for i in range(2000) if RestartCost(in_place_fraction=0.3).resizes_in_place(i)]
    assert 0.25 < len(picked) / 2000 < 0.35
    assert not any(RestartCost().resizes_in_place(i) for i in range(200))
    assert "30% of jobs resize in place" in describe(cost)
    with pytest.raises(ValueError):
        RestartCost(in_place_fraction=1.5)


def test_only_our_agent_s_planned_events_are_in_place() -> None:
    """Volcano's own preemptions (volcano-gang) are not announced: the job restarts as before
    (test_simulate_costs's gangpreempt scenario: A restarts twice)."""
    cost = dataclasses.replace(fixed_cost(60), in_place_fraction=1.0, in_place=2.0)
    two = ClusterSpec((NodePool("n", 2, 8, 96_000, 2**40),), (QueueSpec("default"),))
    jobs = [JobSpec("a", 0, 1, 4, 4, 11200), JobSpec("b", 100, 1, 1, 2, 2000, priority=1)]
    linear = dataclasses.replace(LINEAR, checkpoint_interval=0)
    plain = simulate(jobs, two, legacy_config(), "volcano-gang", linear)
    other = simulate(jobs, two, legacy_config(), "volcano-gang", dataclasses.replace(linear, restart_cost=cost))
    assert next(j for j in plain.jobs if j.name == "a").restarts == 2
    assert [(j.name, j.finish, j.restarts, j.restart_seconds) for j in other.jobs] == \
        [(j.name, j.finish, j.restarts, j.restart_seconds) for j in plain.jobs]
