"""Planner tables for issue 23: a job's current bounds win over its older pods (item 3); the
cooldown survives a recreated PodGroup and an unreadable stamp (item 4); nodes without a Ready
condition and absurd allocatable (minor items)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from elastic_controller.policy import keys
from elastic_controller.policy.cooldowns import cooldown_remaining
from elastic_controller.policy.model import JobView, PodGroupView
from elastic_controller.policy.parse import parse_job, parse_node
from elastic_controller.policy.settings import QueuePolicy
from tests.harness import builders as b

LAST = keys.LAST_SCALE_TIME


def world(*, job_min: int | None = None, pg_min: int | None = None, pg_stamp: str | None = None,
          job_stamp: str | None = None) -> list[Any]:
    """Job A: 6 workers running on n1 with pods saying PET_NNODES=2:6; gang B needs 4 GPUs."""
    job = b.pytorchjob("team-a", "a", workers=6, min_r=2 if job_min is None else job_min, max_r=6)
    if job_stamp is not None:
        job["metadata"]["annotations"] = {LAST: job_stamp}
    objs = b.elastic_job("team-a", "a", min_r=2, max_r=6, nodes=["n1"])
    if pg_min is not None:
        objs[0]["spec"]["minMember"] = pg_min
    if pg_stamp is not None:
        objs[0]["metadata"]["annotations"][LAST] = pg_stamp
    return b.items(b.node("n1"), b.queue("default"), job, objs, b.gang("team-b", "b", members=4, gpus=1))


@pytest.mark.parametrize(
    ("job_min", "pg_min", "victims"),
    [
        pytest.param(None, None, ["team-a/a-worker-4", "team-a/a-worker-5"], id="bounds-as-the-pods-say"),
        pytest.param(4, None, ["team-a/a-worker-4", "team-a/a-worker-5"], id="job-min-raised-to-4-still-room"),
        pytest.param(5, None, [], id="job-min-raised-to-5-pods-still-say-2"),
        pytest.param(None, 5, [], id="podgroup-min-member-raised-to-5"),
        pytest.param(6, None, [], id="job-min-raised-to-max"),
    ],
)
def test_current_bounds_win_over_older_pods(job_min: int | None, pg_min: int | None, victims: list[str]) -> None:
    plan = b.plan_of(world(job_min=job_min, pg_min=pg_min))
    assert sorted(e.pod for e in plan.evictions) == victims


COOLDOWN = 300  # the default queue policy


@pytest.mark.parametrize(
    ("pg_stamp", "job_stamp", "evicts"),
    [
        pytest.param(None, None, True, id="never-scaled"),
        pytest.param(b.ts(b.ago(10)), None, False, id="podgroup-stamp-cooling"),
        # issue 36, T4: the job's copy is its owner's to write; only the PodGroup's stamp is read
        pytest.param(None, b.ts(b.ago(10)), True, id="job-copy-alone-is-not-read"),
        pytest.param(b.ts(b.ago(900)), b.ts(b.ago(10)), True, id="job-copy-later-is-not-read"),
        pytest.param(None, "2099-01-01T00:00:00Z", True, id="job-copy-in-2099-is-not-read"),
        pytest.param(b.ts(b.ago(10)), b.ts(b.ago(900)), False, id="podgroup-stamp-counts"),
        pytest.param(b.ts(b.ago(900)), b.ts(b.ago(900)), True, id="both-expired"),
        pytest.param("not a time", None, False, id="unparseable-podgroup-stamp-is-now"),
        pytest.param(None, "2026-13-45", True, id="unparseable-job-stamp-is-not-read"),
    ],
)
def test_cooldown_survives_recreated_podgroups_and_bad_stamps(pg_stamp: str | None, job_stamp: str | None,
                                                              evicts: bool) -> None:
    plan = b.plan_of(world(pg_stamp=pg_stamp, job_stamp=job_stamp))
    assert bool(plan.evictions) is evicts


def test_gates_follow_the_podgroup_stamp_not_the_job_copy() -> None:
    objs = b.items(b.node("n1"), b.queue("default"),
                   {**b.pytorchjob("ns", "j", workers=4, min_r=2, max_r=4),
                    "metadata": {"namespace": "ns", "name": "j", "uid": "u",
                                 "annotations": {LAST: b.ts(b.ago(9))}}},
                   b.elastic_job("ns", "j", min_r=2, max_r=4, nodes=["n1"], running=2))
    assert b.plan_of(objs).gate_releases  # the job's copy alone holds nothing back
    objs[3]["metadata"].setdefault("annotations", {})[LAST] = b.ts(b.ago(9))
    assert objs[3]["kind"] == "PodGroup"
    assert not b.plan_of(objs).gate_releases
    objs[3]["metadata"]["annotations"][LAST] = b.ts(b.ago(COOLDOWN + 1))
    assert b.plan_of(objs).gate_releases


def test_cooldown_remaining_reads_the_podgroup_stamp_only() -> None:
    policy = QueuePolicy(cooldownSeconds=100)
    pg = PodGroupView("ns", "j", 2)
    job = JobView("ns", "j", last_scale=b.ago(30))
    assert cooldown_remaining(pg, policy, b.NOW, job) == 0
    assert cooldown_remaining(pg, policy, b.NOW, JobView("ns", "j", last_scale_invalid=True)) == 0
    pg_stamped = PodGroupView("ns", "j", 2, annotations={LAST: b.ts(b.ago(30))})
    assert cooldown_remaining(pg_stamped, policy, b.NOW, job) == pytest.approx(70)
    assert cooldown_remaining(None, policy, b.NOW + timedelta(seconds=100), job) == 0
    job_obj = b.pytorchjob("ns", "j", workers=2, min_r=1, max_r=2)
    job_obj["metadata"]["annotations"] = {LAST: "garbage"}
    parsed = parse_job(job_obj)
    assert parsed.last_scale is None and parsed.last_scale_invalid


@pytest.mark.parametrize(
    ("conditions", "ready"),
    [
        pytest.param([{"type": "Ready", "status": "True"}], True, id="ready"),
        pytest.param([{"type": "Ready", "status": "False"}], False, id="not-ready"),
        pytest.param([{"type": "Ready", "status": "Unknown"}], False, id="unknown"),
        pytest.param([], False, id="no-conditions-is-not-ready"),
        pytest.param([{"type": "MemoryPressure", "status": "False"}], False, id="no-ready-condition"),
    ],
)
def test_a_node_without_a_ready_condition_is_not_ready(conditions: list[dict[str, str]], ready: bool) -> None:
    node = b.node("n1")
    node["status"]["conditions"] = conditions
    assert parse_node(node).ready is ready


@pytest.mark.parametrize(
    ("gpus", "taken"),
    [
        pytest.param("8", 8, id="eight"),
        pytest.param("1024", 1024, id="large-but-plausible"),
        pytest.param("1e18", 0, id="absurd-is-not-taken-at-face-value"),
        pytest.param("1000000000", 0, id="a-billion"),
    ],
)
def test_absurd_allocatable_is_not_taken_at_face_value(gpus: str, taken: int) -> None:
    node = b.node("n1")
    node["status"]["allocatable"]["nvidia.com/gpu"] = gpus
    assert parse_node(node).allocatable.get("nvidia.com/gpu", 0) == taken


@pytest.mark.parametrize(
    ("queue", "needle"),
    [
        pytest.param(b.queue("default"), "waiting for the scheduler", id="open-queue"),
        pytest.param({**b.queue("default"), "status": {"state": "Closed"}}, "queue default is Closed",
                     id="closed-queue"),
        pytest.param(b.queue("other"), "queue default does not exist", id="missing-queue"),
    ],
)
def test_a_gang_volcano_will_never_place_is_not_reported_as_waiting_for_it(queue: dict[str, Any],
                                                                           needle: str) -> None:
    plan = b.plan_of(b.items(b.node("n1"), queue, b.gang("team-b", "b", members=2, gpus=1)))
    (decision,) = plan.starving
    assert decision.decision == "wait" and needle in decision.reason
