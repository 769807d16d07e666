"""Which workers the fairness scale-down (``policy/fairness.py``, issue 38) may take, as every victim:
never a ghost (a worker ``Running`` on a lost node, ``World.ghosts``; docs/failure-model.md, "A lost
node": evicting it frees nothing the taker can use), and, from a job with allowed counts
(``worker-counts`` / ``-step``), only as many as leave it at one of them. Random hunts of
``test_policy_lost_nodes.py::test_never_below_min_counting_live_workers_only`` and
``test_policy_properties.py::test_allowed_counts_are_never_violated`` found both taken; these are
those cases made small."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from elastic_controller.policy.decisions import EvictionKind
from elastic_controller.policy.settings import ElasticConfig
from tests.harness.builders import ago, constrained, elastic_job, node, plan_of

CFG = ElasticConfig()


def cluster(lost: str | None) -> list[dict[str, Any]]:
    """``rich`` (8 workers of max 8, min 1, placed 10 hours ago) runs workers 0-5 on n0 (6 GPUs) and
    6-7 on n2 (2 GPUs); ``poor`` (2 of max 4, placed 10 minutes ago) fills n1 (2 GPUs) and waits for
    2 more. ``lost``: n2 not Ready ("not-ready"), or left out of the snapshot ("gone")."""
    nodes = [node("n0", gpus=6), node("n1", gpus=2)]
    if lost != "gone":
        nodes.append(node("n2", gpus=2, ready=lost != "not-ready"))
    placement = ["n0"] * 6 + ["n2"] * 2
    return [*nodes,
            *elastic_job("ns", "rich", min_r=1, max_r=8, nodes=placement, scheduled_at=ago(36_000)),
            *elastic_job("ns", "poor", min_r=1, max_r=4, running=2, nodes=["n1"], scheduled_at=ago(600))]


def test_with_every_node_ready_the_highest_indexes_give() -> None:
    """The control: rich's workers 7 and 6 (on n2) make the room poor waits for."""
    plan = plan_of(*cluster(None), cfg=CFG)
    assert [(e.pod, e.node, e.kind) for e in plan.evictions] == [
        ("ns/rich-worker-7", "n2", EvictionKind.FAIRNESS), ("ns/rich-worker-6", "n2", EvictionKind.FAIRNESS)]


@pytest.mark.parametrize("lost", ["not-ready", "gone"])
def test_a_lost_nodes_workers_never_give(lost: str) -> None:
    plan = plan_of(*cluster(lost), cfg=CFG)
    # rich has 6 live workers; its next highest, 5 and 4 on n0, make the room on a live node
    assert [(e.pod, e.node) for e in plan.evictions] == [("ns/rich-worker-5", "n0"), ("ns/rich-worker-4", "n0")]
    assert all(e.kind == EvictionKind.FAIRNESS and e.for_gang == "ns/poor" for e in plan.evictions)
    assert "it gives 2 of its 6 workers (min 1)" in plan.evictions[0].reason


def test_a_lost_nodes_workers_never_give_with_one_gang_pod_either() -> None:
    """minScaleUpGain 0.5: poor waits for one more; one live worker of rich gives, no ghost."""
    cfg = replace(CFG, defaults=replace(CFG.defaults, minScaleUpGain=0.5))
    plan = plan_of(*cluster("not-ready"), cfg=cfg)
    assert [e.pod for e in plan.evictions] == ["ns/rich-worker-5"]


# -- allowed counts ------------------------------------------------------------------------------------
def counted(**annotations: str) -> list[dict[str, Any]]:
    """n0 (8 GPUs) full with ``rich`` (8 of max 8, min 1, placed 10 hours ago, ``annotations`` as its
    contract); n1 (2 GPUs) full with ``poor`` (2 of max 4, placed 10 minutes ago), waiting for 2 more."""
    rich = elastic_job("ns", "rich", min_r=1, max_r=8, nodes=["n0"], scheduled_at=ago(36_000))
    return [node("n0", gpus=8), node("n1", gpus=2), *(constrained(rich, **annotations) if annotations else rich),
            *elastic_job("ns", "poor", min_r=1, max_r=4, running=2, nodes=["n1"], scheduled_at=ago(600))]


def test_without_allowed_counts_the_fewest_that_make_room_give() -> None:
    """The control: 2 workers make room for poor's 2 (8 -> 6)."""
    assert [e.pod for e in plan_of(*counted(), cfg=CFG).evictions] == ["ns/rich-worker-7", "ns/rich-worker-6"]


@pytest.mark.parametrize(("annotations", "gives"), [
    ({"counts": "2,4,8"}, 4),  # 8 -> 6 is not allowed: 8 -> 4
    ({"step": "2"}, 3),  # counts 1,3,5,7 (from min): 8 -> 7 makes too little room, 8 -> 6 is none: 8 -> 5
    ({"counts": "1,6,8"}, 2),  # 8 -> 6 is allowed
])
def test_a_job_with_allowed_counts_gives_to_one_of_them(annotations: dict[str, str], gives: int) -> None:
    plan = plan_of(*counted(**annotations), cfg=CFG)
    assert [e.pod for e in plan.evictions] == [f"ns/rich-worker-{i}" for i in range(7, 7 - gives, -1)]
    assert all(e.kind == EvictionKind.FAIRNESS for e in plan.evictions)
    assert f"it gives {gives} of its 8 workers" in plan.evictions[0].reason


def test_nothing_is_taken_when_no_allowed_count_is_within_the_evictions_left() -> None:
    """maxEvictionsPerCycle 3: 8 -> 4 (counts 2,4,8) takes 4, too many; 8 -> 5 (8 -> 6 not allowed) is no count."""
    cfg = replace(CFG, defaults=replace(CFG.defaults, maxEvictionsPerCycle=3))
    assert not plan_of(*counted(counts="2,4,8"), cfg=cfg).evictions
    assert [e.pod for e in plan_of(*counted(), cfg=cfg).evictions] == ["ns/rich-worker-7", "ns/rich-worker-6"]


def taker_counted(**annotations: str) -> list[dict[str, Any]]:
    """``counted()`` with ``annotations`` as the contract of the taker, ``poor`` (2 of max 4)."""
    rich = elastic_job("ns", "rich", min_r=1, max_r=8, nodes=["n0"], scheduled_at=ago(36_000))
    poor = elastic_job("ns", "poor", min_r=1, max_r=4, running=2, nodes=["n1"], scheduled_at=ago(600))
    return [node("n0", gpus=8), node("n1", gpus=2), *rich, *constrained(poor, **annotations)]


@pytest.mark.parametrize(("annotations", "gives"), [
    ({}, 1),  # the control: minScaleUpGain 0.5 of 2 is one more worker: 1 GPU of room
    ({"counts": "2,4"}, 2),  # 2 -> 3 is not allowed: the room is made for 2 -> 4
    ({"counts": "1,2"}, 0),  # no allowed count above 2: a giver's restart would buy nothing
])
def test_the_room_made_is_for_a_count_the_taker_may_grow_to(annotations: dict[str, str], gives: int) -> None:
    """A taker with allowed counts grows only to one of them (the scale-up planner's rule): the room
    made for it is for the nearest allowed count at least minScaleUpGain above, or none is made.
    Before, room for one worker was made for a job that may only grow by two: the giver restarted and
    the taker could not use it."""
    cfg = replace(CFG, defaults=replace(CFG.defaults, minScaleUpGain=0.5))
    plan = plan_of(*taker_counted(**annotations), cfg=cfg)
    assert [e.pod for e in plan.evictions] == [f"ns/rich-worker-{i}" for i in range(7, 7 - gives, -1)]
    assert all(e.kind == EvictionKind.FAIRNESS and e.for_gang == "ns/poor" for e in plan.evictions)
