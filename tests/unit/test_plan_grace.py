"""The F3 grace of another writer's interrupted plan (issue 36; review S7): a record whose time is
unreadable, or in this agent's future (clock skew between replicas), is a live writer only for
PLAN_GRACE_SECONDS from when this agent first saw it; then the drop takes its stamp back, as for a
crashed predecessor, instead of leaving the victims stamped forever."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from elastic_controller.agent import Agent
from elastic_controller.execute.resume import PLAN_GRACE_SECONDS
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore
from elastic_controller.kube.resources import PODGROUPS, PODS
from elastic_controller.policy import keys
from elastic_controller.policy.contract import ScaleRecord
from elastic_controller.policy.settings import ElasticConfig
from tests.harness import builders as b
from tests.harness.fakecluster import fake_kube
from tests.harness.legacy import legacy_config, legacy_policy

SLOW = ElasticConfig(defaults=legacy_policy(starvationSeconds=3600))  # the other agent's view: b has not starved


def world() -> list[Any]:
    return b.items(b.node("n1"), b.queue("default"),
                   b.pytorchjob("team-a", "a", workers=6, min_r=2, max_r=6),
                   b.elastic_job("team-a", "a", min_r=2, max_r=6, nodes=["n1"]),
                   b.gang("team-b", "b", members=4, gpus=1))


def agent(kube: FakeKube, identity: str, clock: Callable[[], datetime], cfg: ElasticConfig | None = None) -> Agent:
    return Agent(kube, FakeStore(kube), cfg or legacy_config(), EventRecorder(kube), clock=clock, identity=identity)


def direction(kube: FakeKube) -> str | None:
    return (kube.get(PODGROUPS, "a", "team-a")["metadata"].get("annotations") or {}).get(keys.LAST_SCALE_DIRECTION)


def claimed(kube: FakeKube) -> list[str]:
    return sorted(p["metadata"]["name"] for p in kube.of(PODS)
                  if (p["metadata"].get("annotations") or {}).get(keys.EVICTED_FOR) == "team-b/b")


def interrupted(kube: FakeKube, at: str | None = None) -> None:
    """Another writer stamps its plan and stops before evicting; ``at``: its record's time rewritten."""
    first = agent(kube, "first", lambda: b.NOW)
    first.faults = {"jobs-stamped": "raise"}
    with pytest.raises(BaseException, match="jobs-stamped"):
        first.run_cycle()
    if at is not None:
        pg = kube.get(PODGROUPS, "a", "team-a")
        rec = ScaleRecord.decode(pg["metadata"]["annotations"][keys.SCALE_RECORD])
        assert rec is not None
        pg["metadata"]["annotations"][keys.SCALE_RECORD] = dataclasses.replace(rec, at=at).encode()
        kube.add(PODGROUPS, pg)
    assert direction(kube) == "down" and claimed(kube) == ["a-worker-4", "a-worker-5"]


@pytest.mark.parametrize(("at", "start"), [("not a time", b.NOW), (None, b.NOW - timedelta(hours=1))],
                         ids=["no-time", "future-time"])
def test_a_record_of_no_or_future_time_is_live_only_for_the_grace(at: str | None, start: datetime) -> None:
    kube = fake_kube(world())
    interrupted(kube, at)
    now = [start]
    other = agent(kube, "other", lambda: now[0], SLOW)
    other.run_cycle()
    assert direction(kube) == "down" and claimed(kube) == ["a-worker-4", "a-worker-5"]  # a live writer, first
    now[0] = start + timedelta(seconds=PLAN_GRACE_SECONDS - 1)
    other.run_cycle()
    assert direction(kube) == "down"
    now[0] = start + timedelta(seconds=PLAN_GRACE_SECONDS + 1)  # (still before the record's time: skew)
    other.run_cycle()
    # old code: a live writer forever, the victims stamped and the job in cooldown for nothing
    assert direction(kube) is None and claimed(kube) == []
