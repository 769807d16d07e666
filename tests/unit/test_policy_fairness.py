"""The fairness scale-down (``policy/fairness.py``, issue 38): a job that waits to grow takes elastic
workers from a far more served job of its queue, when nothing else moves, within its bounds."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from elastic_controller.policy.settings import ElasticConfig
from tests.harness.builders import ago, elastic_job, gang, node, plan_of


def _cfg(**changes: Any) -> ElasticConfig:
    base = ElasticConfig()
    return replace(base, defaults=replace(base.defaults, **changes))


def _cluster(rich_ago: float = 36_000, poor_ago: float = 600, rich_last_scale: Any = None,
             extra: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """n0 (8 GPUs) full with ``rich`` (8 of max 8, min 1); n1 (2 GPUs) full with ``poor`` (2 of max 4)."""
    return [node("n0", gpus=8), node("n1", gpus=2),
            *elastic_job("ns", "rich", min_r=1, max_r=8, running=8, nodes=["n0"], scheduled_at=ago(rich_ago),
                         last_scale=rich_last_scale),
            *elastic_job("ns", "poor", min_r=1, max_r=4, running=2, nodes=["n1"], scheduled_at=ago(poor_ago)),
            *(extra or [])]


def test_the_most_served_job_gives_to_the_least_served() -> None:
    plan = plan_of(*_cluster(), cfg=_cfg())
    # poor (2 workers, minScaleUpGain 1) waits for 2 more; rich's two highest workers make that room
    assert [(e.pod, e.job, e.for_gang) for e in plan.evictions] == [
        ("ns/rich-worker-7", "ns/rich", "ns/poor"), ("ns/rich-worker-6", "ns/rich", "ns/poor")]
    assert plan.evictions[0].reason.startswith("fairness: job ns/poor waits to grow with 2 of max 4 workers")
    assert "fairnessRatio 2" in plan.evictions[0].reason
    assert not plan.starving and not plan.gate_releases


def test_nothing_is_taken_when_not_far_from_even() -> None:
    # rich placed 15 minutes ago: 8 x 900 = 7,200 GPU-seconds against poor's 2 x 600 = 1,200 (6x) but
    # a ratio of 10 is not met; and with the ratio met, fairnessMinGpuSeconds 7,200 is not
    assert plan_of(*_cluster(rich_ago=900), cfg=_cfg()).evictions  # 6x, 6,000 more: taken
    assert not plan_of(*_cluster(rich_ago=900), cfg=_cfg(fairnessRatio=10.0)).evictions
    assert not plan_of(*_cluster(rich_ago=900), cfg=_cfg(fairnessMinGpuSeconds=7200)).evictions


def test_bounded_by_switch_cooldown_min_workers_and_runtime() -> None:
    assert not plan_of(*_cluster(), cfg=_cfg(fairnessScaleDown=False)).evictions
    assert not plan_of(*_cluster(rich_last_scale=ago(60)), cfg=_cfg()).evictions  # rich in cooldown
    # rich too small to give (11: its tenant, namespace ns, runs 10 elastic workers in the queue; issue 36 T14)
    assert not plan_of(*_cluster(), cfg=_cfg(minWorkersToShrink=11)).evictions
    assert not plan_of(*_cluster(), cfg=_cfg(maxEvictionsPerCycle=1)).evictions  # one is not enough room
    # growth by one worker is enough with minScaleUpGain 0.5: one victim
    assert [e.pod for e in plan_of(*_cluster(), cfg=_cfg(minScaleUpGain=0.5)).evictions] == ["ns/rich-worker-7"]


def test_not_while_a_gang_starves_or_room_is_free() -> None:
    starving = plan_of(*_cluster(extra=gang("ns", "g", members=1, gpus=1)), cfg=_cfg())
    assert starving.starving and all(e.for_gang == "ns/g" for e in starving.evictions)
    free = plan_of(*_cluster(extra=[node("n2", gpus=2)]), cfg=_cfg())
    assert not free.evictions and [r.job for r in free.gate_releases] == ["ns/poor", "ns/poor"]


def test_a_gang_of_another_queue_does_not_stop_it() -> None:
    """Per queue: a gang starving in queue other (its own planner serves it; this one can never be
    placed) leaves the default queue's fairness scale-down as it is; room free for the taker (held
    back by something else) means nothing is taken."""
    plan = plan_of(*_cluster(extra=gang("ns", "g", members=1, gpus=16, queue="other")), cfg=_cfg())
    assert plan.starving
    assert [(e.pod, e.for_gang) for e in plan.evictions if e.job == "ns/rich"] == [
        ("ns/rich-worker-7", "ns/poor"), ("ns/rich-worker-6", "ns/poor")]
    held = plan_of(*_cluster(extra=[node("n9", gpus=8), *gang("ns", "g", members=2, gpus=8, queue="other")]),
                   cfg=_cfg())
    assert not [e for e in held.evictions if e.for_gang == "ns/poor"]
