"""One job split into several small ones (issue 36, T14): ``minWorkersToShrink`` protects a small
tenant (its namespace's elastic workers in the queue), not a small job, so splitting gains nothing
and another department's gang does not wait for it. Tested through ``decide()``."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_controller.policy.actions import Evict
from elastic_controller.policy.cycle import decide
from elastic_controller.policy.settings import ElasticConfig
from elastic_controller.policy.world import TOO_SMALL, build_world
from tests.harness import builders as b
from tests.harness.legacy import legacy_config, legacy_policy


def split(namespaces: list[str], running: int = 2) -> list[Any]:
    """Node n0 (6 GPUs) full with three elastic jobs (1..4, ``running`` each) in ``namespaces``;
    gang g (1 GPU) of another department waits."""
    objs: list[Any] = [b.node("n0", gpus=3 * running), b.queue("default")]
    for i, ns in enumerate(namespaces):
        objs += [b.pytorchjob(ns, f"part{i}", workers=running, min_r=1, max_r=4),
                 *b.elastic_job(ns, f"part{i}", min_r=1, max_r=4, running=running, nodes=["n0"])]
    return b.items(*objs, b.gang("other", "g", members=1, gpus=1))


def victims(objs: list[Any], cfg: ElasticConfig | None = None) -> list[str]:
    out = decide(b.snapshot_of(objs), cfg or legacy_config(), b.NOW)
    return [e.pod for a in out.of(Evict) for e in a.victims]


def gang_reason(objs: list[Any]) -> str:
    out = decide(b.snapshot_of(objs), legacy_config(), b.NOW)
    return next(d.reason for d in out.plan.starving if d.pod_group == "other/g")


def test_a_job_split_in_three_in_one_namespace_still_gives() -> None:
    # the tenant's three 2-worker jobs: 6 elastic workers in the queue (>= 4): as shrinkable as one
    # job of 6 was (old rule: each below 4, "3 below minWorkersToShrink", g waits)
    got = victims(split(["tenant", "tenant", "tenant"]))
    assert len(got) == 1 and got[0].startswith("tenant/part"), got


def test_three_small_tenants_keep_their_workers() -> None:
    # what the rule is for: three departments with one small job each; none is shrunk, g waits
    objs = split(["t1", "t2", "t3"])
    assert victims(objs) == []
    assert f"3 {TOO_SMALL}" in gang_reason(objs)


def test_split_across_queues_is_counted_per_queue() -> None:
    # the tenant's workers are counted in the victim's queue: two jobs in queue q (4 workers) give,
    # a third alone in queue r (2 workers) keeps its workers
    objs = split(["tenant", "tenant", "tenant"])
    for o in objs:
        if o["kind"] == "PodGroup" and o["metadata"]["name"] == "part2":
            o["spec"]["queue"] = "r"
    world = build_world(b.snapshot_of(objs), legacy_config(), b.NOW)
    assert world.tenant_workers("tenant/part0") == 4 and world.tenant_workers("tenant/part2") == 2
    assert not world.too_small_to_shrink("tenant/part0") and world.too_small_to_shrink("tenant/part2")


@pytest.mark.parametrize(("limit", "given"), [(4, 1), (7, 0), (2, 1), (0, 1)])
def test_the_tenant_count_against_the_limit(limit: int, given: int) -> None:
    # 6 workers in the tenant: given from minWorkersToShrink <= 6, kept above
    cfg = ElasticConfig(defaults=legacy_policy(minWorkersToShrink=limit))
    assert len(victims(split(["tenant", "tenant", "tenant"]), cfg)) == given


def test_growth_counts_the_tenant_at_its_new_size() -> None:
    # the gates ask the size a growth would give (never_victim(job, workers)): one of the tenant's
    # jobs grown from 1 to 3 makes the tenant 5 >= 4, a victim
    objs = split(["tenant", "solo"], running=1)
    world = build_world(b.snapshot_of(objs), legacy_config(), b.NOW)
    assert world.tenant_workers("tenant/part0") == 1
    assert world.tenant_workers("tenant/part0", 3) == 3
    assert world.never_victim("tenant/part0") == TOO_SMALL and world.never_victim("tenant/part0", 4) is None


def test_a_big_job_does_not_strip_a_small_neighbours_protection() -> None:
    # review S2: team-a/big (8 workers) and team-a/small (2 workers, min 1) share a namespace (a team
    # namespace, different researchers): big is shrinkable anyway; only the tenant's jobs that are
    # themselves below minWorkersToShrink (the pieces of a split) are counted together
    objs = b.items(b.node("n0", gpus=10), b.queue("default"),
                   b.pytorchjob("team-a", "big", workers=8, min_r=2, max_r=8),
                   *b.elastic_job("team-a", "big", min_r=2, max_r=8, nodes=["n0"]),
                   b.pytorchjob("team-a", "small", workers=2, min_r=1, max_r=4),
                   *b.elastic_job("team-a", "small", min_r=1, max_r=4, running=2, nodes=["n0"]),
                   b.gang("other", "g", members=1, gpus=1))
    world = build_world(b.snapshot_of(objs), legacy_config(), b.NOW)
    assert world.never_victim("team-a/small") == TOO_SMALL  # old code: None (tenant 10)
    assert world.tenant_workers("team-a/small") == 2
    assert world.never_victim("team-a/big") is None
    got = victims(objs)
    assert got and all(v.startswith("team-a/big-") for v in got), got
