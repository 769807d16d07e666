"""minWorkersToShrink (issue 19): a job running fewer workers than its queue's minWorkersToShrink is
no victim; its workers are counted among a waiting gang's excluded candidates, and they hold back no
scale-up for a gang they could never be evicted for."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_controller.policy.decisions import CyclePlan
from elastic_controller.policy.settings import ElasticConfig, QueuePolicy
from tests.harness.builders import ago, elastic_job, gang, node, plan_of

TOO_SMALL = "below minWorkersToShrink"


def names(plan: CyclePlan) -> list[str]:
    return [e.pod.split("/", 1)[1] for e in plan.evictions]


def cfg(**defaults: Any) -> ElasticConfig:
    return ElasticConfig(defaults=QueuePolicy(**defaults))


def reason(plan: CyclePlan, pg: str = "ns/g") -> tuple[str, str]:
    (d,) = [d for d in plan.starving if d.pod_group == pg]
    return d.decision, d.reason


@pytest.mark.parametrize(("running", "limit", "victims"), [
    (3, 4, []),  # the default: 3 workers < 4, no victim
    (4, 4, ["a-worker-3"]),  # 4 workers: one victim costs a quarter of its speed
    (3, 3, ["a-worker-2"]),
    (2, 2, ["a-worker-1"]),  # 2 or less: every job above its min may give
    (2, 0, ["a-worker-1"]),
])
def test_a_job_gives_only_from_min_workers_to_shrink(running: int, limit: int, victims: list[str]) -> None:
    objs = [node("n0", gpus=running), *elastic_job("ns", "a", min_r=1, max_r=8, running=running, nodes=["n0"]),
            *gang("ns", "g", members=1, gpus=1)]
    plan = plan_of(*objs, cfg=cfg(minWorkersToShrink=limit))
    assert names(plan) == victims
    decision, why = reason(plan)
    if victims:
        assert decision == "evict"
    else:
        assert decision == "wait" and f"{running - 1} {TOO_SMALL}" in why, why


def test_the_small_job_is_passed_over_for_a_larger_one() -> None:
    # a (1..2, running 2) is the most fulfilled and restarts the fewest GPUs: the order alone picks it
    # (test_policy_eviction.test_fewer_gpus_restarted_among_equals); at 2 workers it keeps them.
    objs = [node("n0", gpus=6), *elastic_job("ns", "a", min_r=1, max_r=2, running=2, nodes=["n0"]),
            *elastic_job("ns", "b", min_r=2, max_r=8, running=4, nodes=["n0"]),
            *gang("ns", "g", members=1, gpus=1)]
    # (orderBy fulfillment: by attained service b, 4 GPUs for the same hour, is the more served anyway)
    assert names(plan_of(*objs, cfg=cfg(minWorkersToShrink=0, orderBy="fulfillment"))) == ["a-worker-1"]
    assert names(plan_of(*objs, cfg=cfg(minWorkersToShrink=0))) == ["b-worker-3"]
    assert names(plan_of(*objs)) == ["b-worker-3"]


def test_counted_at_the_cycle_start() -> None:
    # b runs 4 (>= 4): it may give two in one cycle, down to its min of 2 (the rule bars jobs, it sets
    # no new minimum).
    objs = [node("n0", gpus=4), *elastic_job("ns", "b", min_r=2, max_r=8, running=4, nodes=["n0"]),
            *gang("ns", "g", members=1, gpus=2)]
    assert sorted(names(plan_of(*objs))) == ["b-worker-2", "b-worker-3"]


def test_the_victims_queue_decides() -> None:
    # minWorkersToShrink is the victim's queue's: queue "small" lets its 2-worker jobs give.
    objs = [node("n0", gpus=2), *elastic_job("ns", "a", min_r=1, max_r=2, running=2, nodes=["n0"], queue="small"),
            *gang("ns", "g", members=1, gpus=1, queue="small")]
    lenient = ElasticConfig(queues={"small": QueuePolicy(minWorkersToShrink=2)})
    assert names(plan_of(*objs, cfg=lenient)) == ["a-worker-1"]
    assert names(plan_of(*objs)) == []


def test_small_jobs_hold_back_no_scale_up() -> None:
    # n0 is full with a (1..3 running 3); n1 has 1 GPU free. The 2-GPU gang g fits nowhere; only
    # evicting a's workers could make room, which minWorkersToShrink forbids: g holds back no growth,
    # and c (1..2, running 1) grows into n1 (at 2 it is still no victim: it feeds no gang).
    objs = [node("n0", gpus=3), node("n1", gpus=2),
            *elastic_job("ta", "a", min_r=1, max_r=3, running=3, nodes=["n0"]),  # two tenants (T14: the
            *elastic_job("tc", "c", min_r=1, max_r=2, running=1, nodes=["n1"]),  # rule counts a tenant's)
            *gang("ns", "g", members=1, gpus=2)]
    plan = plan_of(*objs)
    assert names(plan) == []
    assert [r.pod.split("/", 1)[1] for r in plan.gate_releases] == ["c-worker-1"]
    assert "ns/g" not in plan.scale_up_blocked_by and plan.notes == ()
    # a job that may give (minWorkersToShrink 0) makes g a blocking gang: no growth while it waits
    held = plan_of(*objs, cfg=cfg(minWorkersToShrink=0, maxEvictionsPerCycle=0))
    assert held.gate_releases == ()


def flapping(c_running: int, n1_gpus: int = 4, gang_gpus: int = 3, **c: Any) -> list[dict[str, Any]]:
    # n0 is full with a (1..2, running 2, too small to give); c (1..4) runs on n1 with room to grow.
    # (Two tenants: minWorkersToShrink counts a tenant's workers in the queue, issue 36 T14.)
    return [node("n0", gpus=2), node("n1", gpus=n1_gpus),
            *elastic_job("ta", "a", min_r=1, max_r=2, running=2, nodes=["n0"]),
            *elastic_job("tc", "c", min_r=1, max_r=4, running=c_running, nodes=["n1"], **c),
            *gang("ns", "g", members=1, gpus=gang_gpus)]


def test_no_growth_into_the_room_a_waiting_gang_is_about_to_need() -> None:
    # c at 2 is no victim (2 < 4), so g (3 GPUs) is not blocking; growing c 2 -> 4 on n1 would make
    # it one, and evicting its 3 elastic workers would then place g: c would restart to grow, then
    # restart again when evicted for g (and g would wait a cooldown longer). The agent keeps c at 2.
    plan = plan_of(*flapping(2))
    assert plan.gate_releases == () and names(plan) == []
    (note,) = plan.notes
    assert note.startswith("job tc/c stays at 2 of max 4 workers, not to 4") and "waiting gang ns/g" in note, note
    assert "minWorkersToShrink 4" in note and "(3 would not be worth a restart)" in note, note
    # Once c runs 4 (grown before this rule, its cooldown over) g takes three of its workers, as before.
    later = plan_of(*flapping(4, last_scale=ago(301)))
    assert sorted(names(later)) == ["c-worker-1", "c-worker-2", "c-worker-3"]


def test_growth_stops_below_the_size_that_would_feed_the_gang() -> None:
    # n1 has 5 GPUs, g needs 4: c at 2 could grow to 4 (then g fits once c's elastic workers go), but
    # 3 keeps it out of reach (3 < minWorkersToShrink 4); with minScaleUpGain 0.5, 2 -> 3 is worth it.
    plan = plan_of(*flapping(2, n1_gpus=5, gang_gpus=4), cfg=cfg(minScaleUpGain=0.5))
    assert [r.pod.split("/", 1)[1] for r in plan.gate_releases] == ["c-worker-2"]
    (release,) = plan.gate_releases
    assert "grows from 2 to 3" in release.reason and "not to 4 although it fits" in release.reason, release.reason
    assert plan.notes and plan.notes[0].startswith("job tc/c grows to 3 of max 4 workers")


def test_growth_that_feeds_no_gang_goes_on() -> None:
    # The same, with g needing 5 GPUs: no node holds 5, so c at 4 feeds nobody and grows 2 -> 4.
    plan = plan_of(*flapping(2, gang_gpus=5))
    assert sorted(r.pod.split("/", 1)[1] for r in plan.gate_releases) == ["c-worker-2", "c-worker-3"]
    assert plan.notes == ()
