"""The fairness scale-down (``policy/fairness.py``) never takes a ghost (a worker ``Running`` on a lost
node, ``World.ghosts``; docs/failure-model.md, "A lost node"): evicting it frees nothing the taker can
use. A random hunt of ``test_policy_lost_nodes.py::test_never_below_min_counting_live_workers_only``
found the giver's ghosts taken first (its highest indexes); this is that case made small."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from elastic_controller.policy.decisions import EvictionKind
from elastic_controller.policy.settings import ElasticConfig
from tests.harness.builders import ago, elastic_job, node, plan_of

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
