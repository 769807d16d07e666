"""``fairnessWhileGangsWait`` (``policy/fairness.py``, issue 38): a waiting gang of the queue that the
eviction planner cannot serve this cycle (decided ``wait``) no longer stops the fairness scale-down;
a gang it serves (``evict``) still does. Through ``decide()``, as the agent and the simulator call it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from elastic_controller.config import ConfigError, parse_config
from elastic_controller.policy.actions import Evict, RecordGang
from elastic_controller.policy.cycle import decide
from elastic_controller.policy.settings import ElasticConfig
from tests.harness.builders import NOW, ago, elastic_job, gang, node, snapshot_of
from tests.harness.legacy import legacy_config


def _cfg(**changes: Any) -> ElasticConfig:
    base = legacy_config()
    return replace(base, defaults=replace(base.defaults, **changes))


def _cluster(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    """n0 (8 GPUs) full with ``rich`` (8 of max 8, min 1, ten hours); n1 (2 GPUs) full with ``poor``
    (2 of max 4, ten minutes): poor waits to grow and rich has had far more (as in test_policy_fairness)."""
    return [node("n0", gpus=8), node("n1", gpus=2),
            *elastic_job("ns", "rich", min_r=1, max_r=8, running=8, nodes=["n0"], scheduled_at=ago(36_000)),
            *elastic_job("ns", "poor", min_r=1, max_r=4, running=2, nodes=["n1"], scheduled_at=ago(600)),
            *extra]


def _fairness(cfg: ElasticConfig, *extra: dict[str, Any]) -> tuple[list[tuple[str, str]], list[RecordGang]]:
    d = decide(snapshot_of(*_cluster(*extra), cfg=cfg), cfg, NOW)
    evicted = [(v.pod, v.for_gang) for a in d.actions if isinstance(a, Evict) for v in a.victims]
    return evicted, [a for a in d.actions if isinstance(a, RecordGang)]


def test_a_gang_the_planner_cannot_serve_no_longer_stops_it() -> None:
    # a gang of the same queue needing 16 GPUs on one node: no node has them, the planner decides wait
    huge = gang("ns", "huge", members=1, gpus=16)
    before, records = _fairness(_cfg(), *huge)
    assert [r.decision.decision for r in records] == ["wait"]
    assert before == []  # the behaviour before: any waiting gang of the queue stops the scale-down
    after, records = _fairness(_cfg(fairnessWhileGangsWait=True), *huge)
    assert [r.decision.decision for r in records] == ["wait"]
    assert after == [("ns/rich-worker-7", "ns/poor"), ("ns/rich-worker-6", "ns/poor")]


def test_a_gang_the_planner_serves_still_stops_it() -> None:
    # a gang of one GPU: the planner evicts one of rich's workers for it; no fairness eviction besides
    small = gang("ns", "g", members=1, gpus=1)
    evicted, records = _fairness(_cfg(fairnessWhileGangsWait=True), *small)
    assert [r.decision.decision for r in records] == ["evict"]
    assert evicted and all(g == "ns/g" for _, g in evicted)


def test_the_reason_names_the_rule_and_decide_is_pure() -> None:
    cfg = _cfg(fairnessWhileGangsWait=True)
    snap = snapshot_of(*_cluster(*gang("ns", "huge", members=1, gpus=16)), cfg=cfg)
    first = decide(snap, cfg, NOW)
    assert decide(snap, cfg, NOW) == first
    reasons = [v.reason for a in first.actions if isinstance(a, Evict) for v in a.victims]
    assert reasons and all(r.startswith("fairness: job ns/poor waits to grow") for r in reasons)
    assert all("ns/huge" in r and "no victims" in r for r in reasons)


def test_fairness_min_workers_to_shrink_lets_a_smaller_giver_give() -> None:
    """``fairnessMinWorkersToShrink``: the giver's floor for the fairness scale-down alone. rich runs 3
    workers (below minWorkersToShrink 4: no gang may take from it, nor, by default, the scale-down)."""
    objs = [node("n0", gpus=3), node("n1", gpus=2),
            *elastic_job("ns", "rich", min_r=1, max_r=8, running=3, nodes=["n0"], scheduled_at=ago(36_000)),
            # another tenant (namespace): minWorkersToShrink counts a tenant's workers (issue 36, T14)
            *elastic_job("ns2", "poor", min_r=1, max_r=4, running=2, nodes=["n1"], scheduled_at=ago(600))]

    def evicted(cfg: ElasticConfig) -> list[str]:
        d = decide(snapshot_of(*objs, cfg=cfg), cfg, NOW)
        return [v.pod for a in d.actions if isinstance(a, Evict) for v in a.victims]

    assert evicted(_cfg()) == []
    assert evicted(_cfg(fairnessMinWorkersToShrink=3)) == ["ns/rich-worker-2", "ns/rich-worker-1"]
    assert evicted(_cfg(fairnessMinWorkersToShrink=4)) == []
    assert evicted(_cfg(fairnessMinWorkersToShrink=3, minScaleUpGain=0.5)) == ["ns/rich-worker-2"]


def test_the_keys_are_validated() -> None:
    cfg = parse_config({"defaults": {"fairnessWhileGangsWait": True, "fairnessMinWorkersToShrink": 2}})
    assert cfg.defaults.fairnessWhileGangsWait and cfg.defaults.fairnessMinWorkersToShrink == 2
    assert parse_config({"defaults": {"fairnessMinWorkersToShrink": None}}).defaults.fairnessMinWorkersToShrink is None
    for bad in ({"fairnessWhileGangsWait": "yes"}, {"fairnessMinWorkersToShrink": -1}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            parse_config({"defaults": bad})
