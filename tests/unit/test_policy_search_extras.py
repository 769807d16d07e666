"""The indexed node search and the exhaustive scan pick the same victims when a job with allowed
counts (``volcano-elastic.io/worker-counts``) rounds a node's victim set up with extra victims from
another node: the extras may come first in victim order, so a node whose own candidates come later
can still hold the set that comes first (a random property hunt of
``test_policy_lost_nodes.py::test_never_below_min_counting_live_workers_only`` found it; this is that
case made small)."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_controller.policy.decisions import CyclePlan
from elastic_controller.policy.settings import ElasticConfig, QueuePolicy
from tests.harness.builders import NOW, constrained, elastic_job, gang, node, plan_fast_and_exhaustive, snapshot_of

# Every job may give (the hunt's configuration: no minWorkersToShrink, so job u's worker is a candidate).
CFG = ElasticConfig(defaults=QueuePolicy(minWorkersToShrink=0))


def cluster(top: str, other: str, counts: str | None = "2,4") -> list[Any]:
    """Node ``top`` (5 GPUs) holds workers 0-3 and 6 of job v (7 workers of 1 GPU, min 2, allowed
    counts 2,4); node ``other`` (4 GPUs) holds v's workers 4-5 and both of job u's (min 1). Both are
    full; gang g needs 2 GPUs on one node. v gives 3 workers (7 -> 4) whichever node: on ``top``
    {6, 3} and the extra 5 (on ``other``), on ``other`` {5, 4} and the extra 6 (on ``top``). Victim
    order takes a job's highest indexes first, so {6, 5, 4} comes first, although ``top``'s own
    candidates (worker 6) come before ``other``'s."""
    placement = [top, top, top, top, other, other, top]
    v = elastic_job("ns", "v", min_r=2, max_r=7, nodes=placement)
    return [node(top, gpus=5), node(other, gpus=4), *(constrained(v, counts=counts) if counts else v),
            *elastic_job("ns", "u", min_r=1, max_r=2, nodes=[other]),
            *gang("ns", "g", members=1, gpus=2)]


def plans(objs: list[Any]) -> tuple[CyclePlan, CyclePlan]:
    fast, slow = plan_fast_and_exhaustive(snapshot_of(*objs, cfg=CFG), CFG, NOW)
    return fast, slow


@pytest.mark.parametrize(("top", "other"), [("n0", "n1"), ("n1", "n0")])
def test_extras_from_another_node_that_come_first_win_in_both_searches(top: str, other: str) -> None:
    fast, slow = plans(cluster(top, other))
    for p in (fast, slow):
        assert [(e.pod, e.node) for e in p.evictions] == [
            ("ns/v-worker-6", top), ("ns/v-worker-5", other), ("ns/v-worker-4", other)]
        (d,) = p.starving
        assert d.decision == "evict"
        assert "job ns/v gives 3 workers (7 -> 4): allowed counts 2,4" in d.reason
    assert fast == slow


def test_without_the_extras_the_node_of_the_first_candidate_wins() -> None:
    """The control: without allowed counts v gives 2 workers on one node and no extra; the set on
    ``top`` ({6, 3}) comes before the one on ``other`` ({5, 4}), and both searches agree."""
    fast, slow = plans(cluster("n0", "n1", counts=None))
    assert [e.pod for e in fast.evictions] == ["ns/v-worker-6", "ns/v-worker-3"]
    assert fast == slow
