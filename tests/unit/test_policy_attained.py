"""Attained service (``policy/attained.py``, issue 38): the stamp, the service as of now, the stamps the
agent writes, and the scale-up order it gives (the least served job grows first)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from elastic_controller.policy import keys
from elastic_controller.policy.attained import attained_by_group, format_stamp, parse_stamp
from elastic_controller.policy.settings import ORDER_BY_FULFILLMENT, ElasticConfig
from elastic_controller.policy.world import build_world
from tests.harness.builders import NOW, ago, elastic_job, node, plan_of, snapshot_of


def test_stamp_round_trip_and_bad_values() -> None:
    raw = format_stamp(7200.25, NOW)
    assert raw == "7200.2@2026-01-01T13:00:00.000Z" or raw == "7200.3@2026-01-01T13:00:00.000Z"
    stamp = parse_stamp(raw)
    assert stamp is not None and stamp.as_of == NOW and abs(stamp.gpu_seconds - 7200.25) < 0.1
    for bad in (None, "", "7200", "x@2026-01-01T13:00:00Z", "1@not-a-time", "-5@2026-01-01T13:00:00Z",
                "nan@2026-01-01T13:00:00Z", "inf@2026-01-01T13:00:00Z"):
        assert parse_stamp(bad) is None, bad


def _job(name: str, *, running: int, gpus: int = 1, placed_ago: float = 3600, stamp: str | None = None,
         max_r: int = 4) -> list[dict[str, object]]:
    objs = elastic_job("ns", name, min_r=1, max_r=max_r, running=running, gpus=gpus, nodes=["n0", "n1"],
                       scheduled_at=ago(placed_ago))
    if stamp is not None:
        objs[0]["metadata"]["annotations"][keys.ATTAINED_SERVICE] = stamp  # type: ignore[index]
    return objs


def test_service_is_the_stamp_plus_the_placed_pods_since() -> None:
    # 2 workers of 2 GPUs placed an hour ago: 4 GPUs x 3600 s without a stamp
    snap = snapshot_of(node("n0"), node("n1"), *_job("a", running=2, gpus=2))
    assert attained_by_group(snap, NOW)["ns/a"] == pytest.approx(4 * 3600)
    # a stamp 10 minutes old with 50,000 GPU-seconds: + 4 GPUs x 600 s (not from the pods' placement)
    snap = snapshot_of(node("n0"), node("n1"),
                       *_job("a", running=2, gpus=2, stamp=format_stamp(50_000, NOW - timedelta(minutes=10))))
    assert attained_by_group(snap, NOW)["ns/a"] == pytest.approx(50_000 + 4 * 600)
    # pods placed after the stamp count from their placement
    snap = snapshot_of(node("n0"), node("n1"), *_job("a", running=2, gpus=2, placed_ago=60,
                                                     stamp=format_stamp(50_000, NOW - timedelta(minutes=10))))
    assert attained_by_group(snap, NOW)["ns/a"] == pytest.approx(50_000 + 4 * 60)


def test_the_world_carries_each_jobs_service() -> None:
    cfg = ElasticConfig()
    snap = snapshot_of(node("n0"), node("n1"), *_job("a", running=3), *_job("b", running=1, placed_ago=60))
    world = build_world(snap, cfg, NOW)
    assert world.jobs["ns/a"].served == pytest.approx(3 * 3600)
    assert world.jobs["ns/b"].served == pytest.approx(60)
    assert world.jobs["ns/a"].by_service


def test_the_least_served_job_grows_first() -> None:
    """Room for one worker, one job of the queue grows per cycle: ``rich`` (2 of max 8, placed 10 h
    ago: 72,000 GPU-seconds) is the less fulfilled and grows first by fulfillment; ``poor`` (3 of max
    4, placed 10 minutes ago: 1,800 GPU-seconds) is the least served and grows first by service."""
    cfg = replace(ElasticConfig(), defaults=replace(ElasticConfig().defaults, minScaleUpGain=0.0,
                                                    scaleUpAfterCheckpointSeconds=None, maxScaleUpPerCycle=1))
    objs = [node("n0", gpus=2), node("n1", gpus=3), node("n2", gpus=1),
            *elastic_job("ns", "rich", min_r=1, max_r=8, running=2, nodes=["n0"], scheduled_at=ago(36_000)),
            *elastic_job("ns", "poor", min_r=1, max_r=4, running=3, nodes=["n1"], scheduled_at=ago(600))]
    plan = plan_of(*objs, cfg=cfg)
    assert [r.job for r in plan.gate_releases] == ["ns/poor"], (plan.gate_releases, plan.notes)
    assert "least served job first: 0.5 GPU-hours attained" in plan.gate_releases[0].reason
    by_fulfillment = replace(cfg, defaults=replace(cfg.defaults, orderBy=ORDER_BY_FULFILLMENT))
    plan = plan_of(*objs, cfg=by_fulfillment)
    assert [r.job for r in plan.gate_releases] == ["ns/rich"], (plan.gate_releases, plan.notes)
