"""The agent's state gauges (execute/gauges.py, exported by cli/controller.PrometheusMetrics): from
the planner's view of each cycle, per queue."""

from __future__ import annotations

from datetime import timedelta

from elastic_controller.agent import Agent
from elastic_controller.cli.controller import PrometheusMetrics
from elastic_controller.execute.gauges import cycle_state
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore
from elastic_controller.policy.cycle import PlanCache, plan_cycle
from elastic_controller.policy.settings import ElasticConfig, QueuePolicy
from tests.harness import builders as b
from tests.harness.fakecluster import fake_kube

CFG = ElasticConfig(defaults=QueuePolicy(cooldownSeconds=300, starvationSeconds=0))


def cluster(last_scale_ago: int = 20) -> FakeKube:
    """Queue vision: job a (2..6 workers, 4 running, 2 gated, scaled up ``last_scale_ago`` s ago) on
    an 8-GPU node; queue idle has nothing."""
    return fake_kube(b.node("n1", gpus=8), b.queue("vision"), b.queue("idle"),
                     b.pytorchjob("team-a", "a", workers=6, min_r=2, max_r=6, queue="vision"),
                     b.elastic_job("team-a", "a", min_r=2, max_r=6, nodes=["n1"], running=4, queue="vision",
                                   last_scale=b.ago(last_scale_ago)))


def test_state_of_a_cycle_from_its_world() -> None:
    kube = cluster()
    agent = Agent(kube, FakeStore(kube), CFG, EventRecorder(kube), clock=lambda: b.NOW)
    snap = agent.snapshot()
    cache = PlanCache()
    plan = plan_cycle(snap, CFG, b.NOW, cache=cache)
    assert cache.world is not None
    state = cycle_state(cache.world, plan)
    assert [n.reason for n in plan.notes] == ["Cooldown"]
    assert state.gated_pods == {"idle": 0, "vision": 2}
    assert state.held_jobs == {("vision", "Cooldown"): 1}
    assert state.under_notice == {"idle": 0, "vision": 0}
    # 4 running workers, min 2: two elastic workers of 1 GPU each; all 4 GPUs are the queue's allocation
    assert state.elastic_gpus == {"idle": 0, "vision": 2}
    assert state.allocated_gpus == {"idle": 0, "vision": 4}
    assert state.deserved_gpus["idle"] == 0 and 4 <= state.deserved_gpus["vision"] <= 8


def test_the_agent_exports_them_and_a_cleared_hold_reads_zero() -> None:
    kube = cluster()
    metrics = PrometheusMetrics()
    now = [b.NOW]
    agent = Agent(kube, FakeStore(kube), CFG, EventRecorder(kube), clock=lambda: now[0], metrics=metrics)
    agent.run_cycle()
    assert agent.plan_cache.world is None  # not kept past the cycle
    text = metrics.render()[0].decode()
    for line in ('volcano_elastic_gated_pods{queue="vision"} 2.0',
                 'volcano_elastic_scale_up_held_jobs{queue="vision",reason="Cooldown"} 1.0',
                 'volcano_elastic_pods_under_notice{queue="vision"} 0.0',
                 'volcano_elastic_queue_elastic_gpus{queue="vision"} 2.0',
                 'volcano_elastic_queue_allocated_gpus{queue="vision"} 4.0',
                 'volcano_elastic_gated_pods{queue="idle"} 0.0'):
        assert line in text, line
    now[0] = b.NOW + timedelta(seconds=400)  # the cooldown is over: +50% is below minScaleUpGain 1 now
    assert [n.reason for n in agent.run_cycle().plan.notes] == ["BelowMinScaleUpGain"]
    text = metrics.render()[0].decode()
    assert 'volcano_elastic_scale_up_held_jobs{queue="vision",reason="Cooldown"} 0.0' in text
    assert 'volcano_elastic_scale_up_held_jobs{queue="vision",reason="BelowMinScaleUpGain"} 1.0' in text


def test_a_replica_that_stops_leading_drops_its_state() -> None:
    kube = cluster()
    metrics = PrometheusMetrics()
    Agent(kube, FakeStore(kube), CFG, EventRecorder(kube), clock=lambda: b.NOW, metrics=metrics).run_cycle()
    assert "volcano_elastic_gated_pods{" in metrics.render()[0].decode()
    metrics.clear_state()
    text = metrics.render()[0].decode()
    assert "volcano_elastic_gated_pods{" not in text and "volcano_elastic_scale_up_held_jobs{" not in text
