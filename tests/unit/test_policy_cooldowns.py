"""Cooldowns read from PodGroup annotations, fulfillment, minimum runtime."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from elastic_controller.policy import keys
from elastic_controller.policy.cooldowns import (
    cooldown_remaining,
    fulfillment,
    in_cooldown,
    last_scale_time,
    old_enough,
)
from elastic_controller.policy.model import PodGroupView
from elastic_controller.policy.settings import QueuePolicy
from tests.harness.builders import NOW, ago, ts

POLICY = QueuePolicy(cooldownSeconds=300)


def pg(annotation: str | None) -> PodGroupView:
    ann = {keys.LAST_SCALE_TIME: annotation} if annotation is not None else {}
    return PodGroupView("ns", "j", 2, annotations=ann)


@pytest.mark.parametrize(
    ("annotation", "remaining"),
    [
        pytest.param(ts(ago(60)), 240.0, id="scaled-a-minute-ago"),
        pytest.param(ts(ago(300)), 0.0, id="exactly-over"),
        pytest.param(ts(ago(900)), 0.0, id="long-ago"),
        pytest.param(None, 0.0, id="never-scaled"),
        pytest.param("yesterday", 300.0, id="unparseable-is-a-scale-event-now"),
        pytest.param("", 300.0, id="empty-is-a-scale-event-now"),
        pytest.param("2026-01-01T12:59:00+00:00", 240.0, id="offset-form"),
        pytest.param("2026-01-01T12:59:00", 240.0, id="naive-is-utc"),
        pytest.param(ts(NOW + timedelta(seconds=60)), 300.0, id="future-stamp-clamped-to-full"),
    ],
)
def test_cooldown_remaining(annotation: str | None, remaining: float) -> None:
    got = cooldown_remaining(pg(annotation), POLICY, NOW)
    assert got == pytest.approx(remaining)
    assert in_cooldown(pg(annotation), POLICY, NOW) is (got > 0)


def test_future_stamp_counts_as_cooling() -> None:
    # A stamp from a clock ahead of ours keeps the job cooling, but never longer than cooldownSeconds.
    assert in_cooldown(pg(ts(NOW + timedelta(seconds=60))), POLICY, NOW)
    assert cooldown_remaining(pg(ts(NOW + timedelta(days=1))), POLICY, NOW) == 300.0


def test_no_podgroup() -> None:
    assert last_scale_time(None) is None
    assert cooldown_remaining(None, POLICY, NOW) == 0.0


def test_last_scale_time_parsed() -> None:
    assert last_scale_time(pg("2026-01-01T12:00:00Z")) == datetime.fromisoformat("2026-01-01T12:00:00+00:00")


def test_zero_cooldown_setting() -> None:
    assert not in_cooldown(pg(ts(NOW)), QueuePolicy(cooldownSeconds=0), NOW)


@pytest.mark.parametrize(
    ("running", "lo", "hi", "expected"),
    [
        pytest.param(4, 2, 6, 0.5, id="half"),
        pytest.param(2, 2, 6, 0.0, id="at-min"),
        pytest.param(6, 2, 6, 1.0, id="at-max"),
        pytest.param(3, 3, 3, 1.0, id="cannot-grow"),
        pytest.param(1, 2, 6, -0.25, id="below-min-negative"),
    ],
)
def test_fulfillment(running: int, lo: int, hi: int, expected: float) -> None:
    assert fulfillment(running, lo, hi) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("scheduled", "min_runtime", "ok"),
    [
        pytest.param(ago(60), 120, False, id="young"),
        pytest.param(ago(120), 120, True, id="exactly"),
        pytest.param(ago(3600), 120, True, id="old"),
        pytest.param(None, 120, False, id="unknown-schedule-time-is-young"),
        pytest.param(None, 0, True, id="unknown-but-no-minimum"),
    ],
)
def test_old_enough(scheduled: datetime | None, min_runtime: int, ok: bool) -> None:
    assert old_enough(scheduled, min_runtime, NOW) is ok
