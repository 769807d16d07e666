"""The restart budget (issue 29, part 4): each shrink of ours uses one of torchrun's --max-restarts on
every surviving agent, so a job whose budget is spent (one restart kept in reserve) is never a victim,
the waiting gang's reason says so, and the rendezvous store host is never a candidate at all."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_controller.policy import keys
from elastic_controller.policy.budget import (
    BUDGET_SPENT,
    RESTART_RESERVE,
    RestartBudget,
    budget_of,
    next_count,
    parse_used,
    previous_count,
    restarts_used,
)
from elastic_controller.policy.decisions import CyclePlan
from elastic_controller.policy.keys import Role
from elastic_controller.policy.model import ElasticBounds, JobView, PodGroupView
from elastic_controller.policy.parse import parse_pod
from elastic_controller.policy.roles import plan_role
from elastic_controller.policy.settings import ElasticConfig, QueuePolicy
from tests.harness.builders import NOW, elastic_job, gang, items, job_pod, node, plan_of, pytorchjob, queue

# minWorkersToShrink 0: every job above its min may give (the budget is the rule under test).
CFG = ElasticConfig(defaults=QueuePolicy(minWorkersToShrink=0))


def names(plan: CyclePlan) -> list[str]:
    return sorted(e.pod.split("/", 1)[1] for e in plan.evictions)


def reason(plan: CyclePlan, pg: str = "ns/g") -> tuple[str, str]:
    (d,) = [d for d in plan.starving if d.pod_group == pg]
    return d.decision, d.reason


def job(name: str, *, max_restarts: int | None, used: str | None = None, pg_used: str | None = None,
        running: int = 4, node_name: str = "n0") -> list[dict[str, Any]]:
    """A 1..4 job running ``running`` workers on ``node_name``, with its PyTorchJob (maxRestarts),
    ``used`` as the agent writes it (the PodGroup and the job's copy) and ``pg_used`` on the PodGroup
    only."""
    objs = elastic_job("ns", name, min_r=1, max_r=4, running=running, nodes=[node_name])
    pj = pytorchjob("ns", name, workers=4, min_r=1, max_r=4, max_restarts=max_restarts)
    if used is not None:
        pj["metadata"]["annotations"] = {keys.RESTARTS_USED: used}
        objs[0]["metadata"].setdefault("annotations", {})[keys.RESTARTS_USED] = used
    if pg_used is not None:
        objs[0]["metadata"].setdefault("annotations", {})[keys.RESTARTS_USED] = pg_used
    return [*objs, pj]


# -- the budget itself ------------------------------------------------------------------------------
@pytest.mark.parametrize(("used", "max_restarts", "spent"), [
    (0, 0, True),  # maxRestarts unset or 0: one eviction ends the job
    (0, 1, True),  # the only restart is the reserve
    (0, 2, False),  # one shrink leaves one in reserve
    (1, 2, True),
    (1, 3, False),
    (2, 3, True),
    (3, 3, True),
    (5, 3, True),  # more used than given (a hand-lowered maxRestarts)
    (None, 10, True),  # unreadable count: spent until fixed
])
def test_spent_keeps_one_restart_in_reserve(used: int | None, max_restarts: int, spent: bool) -> None:
    assert RESTART_RESERVE == 1
    b = RestartBudget(used, max_restarts)
    assert b.spent is spent
    assert b.reason().startswith(BUDGET_SPENT)


def test_reasons_name_the_numbers() -> None:
    assert RestartBudget(2, 3).reason() == "restart budget spent (2 of 3 used, 1 kept in reserve)"
    assert "maxRestarts 0" in RestartBudget(0, 0).reason()
    assert "unreadable" in RestartBudget(None, 3).reason()


@pytest.mark.parametrize(("raw", "n"), [(None, 0), ("0", 0), ("3", 3), (" 7 ", 7), ("", None), ("-1", None),
                                        ("two", None), ("1.5", None)])
def test_parse_used(raw: str | None, n: int | None) -> None:
    assert parse_used(raw) == n


def _pg(used: str | None) -> PodGroupView:
    return PodGroupView("ns", "a", 2, annotations={keys.RESTARTS_USED: used} if used is not None else {})


def _job(used: str | None, max_restarts: int | None = 3) -> JobView:
    return JobView("ns", "a", max_restarts=max_restarts,
                   annotations={keys.RESTARTS_USED: used} if used is not None else {})


def test_the_podgroups_count_counts_never_the_jobs_copy() -> None:
    # The job's copy is its owner's to write (issue 36, T3): 99 or garbage there changes nothing.
    assert restarts_used(_pg("1"), _job("2")) == 1
    assert restarts_used(_pg(None), _job("99")) == 0
    assert restarts_used(_pg("3"), _job("x")) == 3
    assert restarts_used(_pg("x"), _job("2")) is None
    assert restarts_used(None, _job("99")) == 0
    assert restarts_used(None, None) == 0


def test_budget_unknown_without_the_pytorchjob() -> None:
    assert budget_of(_pg("1"), None) is None
    assert budget_of(_pg("1"), _job(None, None)) == RestartBudget(1, 0)  # unset is torchrun's 0
    assert budget_of(_pg("1"), _job(None, -2)) == RestartBudget(1, 0)
    assert budget_of(_pg("1"), _job("2", 5)) == RestartBudget(1, 5)  # the job's copy is not read


def test_next_and_previous_count() -> None:
    assert next_count({}, None) == "1"
    assert next_count({keys.RESTARTS_USED: "2"}, {keys.RESTARTS_USED: "4"}) == "3"  # the PodGroup's
    assert next_count({keys.RESTARTS_USED: "junk"}, {}) == "1"
    assert previous_count("5") == "4"
    assert previous_count("1") is None  # back to no annotation


# -- the policy rule --------------------------------------------------------------------------------
def test_a_job_with_budget_left_gives() -> None:
    objs = [node("n0", gpus=4), *job("a", max_restarts=3, used="1"), *gang("ns", "g", members=1, gpus=1)]
    plan = plan_of(*objs, cfg=CFG)
    assert names(plan) == ["a-worker-3"]


@pytest.mark.parametrize(("max_restarts", "used", "pg_used", "why"), [
    (3, "2", None, "restart budget spent (2 of 3 used, 1 kept in reserve)"),
    (3, None, "2", "restart budget spent (2 of 3 used, 1 kept in reserve)"),  # the PodGroup's count
    (3, "3", None, "restart budget spent (3 of 3 used, 1 kept in reserve)"),
    (None, None, None, "restart budget spent (maxRestarts 0: one eviction ends the job)"),
    (1, None, None, "restart budget spent (0 of 1 used, 1 kept in reserve)"),
    (10, "lots", None, f"restart budget spent ({keys.RESTARTS_USED} unreadable)"),
])
def test_a_spent_job_is_no_victim_and_the_gang_says_why(max_restarts: int | None, used: str | None,
                                                        pg_used: str | None, why: str) -> None:
    objs = [node("n0", gpus=4), *job("a", max_restarts=max_restarts, used=used, pg_used=pg_used),
            *gang("ns", "g", members=1, gpus=1)]
    plan = plan_of(*objs, cfg=CFG)
    assert names(plan) == []
    decision, text = reason(plan)
    assert decision == "wait" and f"3 {why}" in text, text  # its three elastic workers excluded


@pytest.mark.parametrize("tenant_wrote", ["99", "lots", "-1", "3"])
def test_a_count_the_tenant_wrote_on_its_job_changes_nothing(tenant_wrote: str) -> None:
    # Issue 36, T3: the tenant annotates its own PyTorchJob; the PodGroup (403 to it) says 0.
    objs = [node("n0", gpus=4), *job("a", max_restarts=3), *gang("ns", "g", members=1, gpus=1)]
    pj = next(o for o in objs if o["kind"] == "PyTorchJob")
    pj["metadata"]["annotations"] = {keys.RESTARTS_USED: tenant_wrote}
    assert names(plan_of(*objs, cfg=CFG)) == ["a-worker-3"]


def test_the_spent_job_is_passed_over_for_one_with_budget() -> None:
    # a (running 4 on n0) would be the first victim by order; its budget is spent, so b on n1 gives.
    objs = [node("n0", gpus=4), node("n1", gpus=3), *job("a", max_restarts=2, used="1"),
            *job("b", max_restarts=5, used="3", running=3, node_name="n1"), *gang("ns", "g", members=1, gpus=1)]
    assert names(plan_of(*objs, cfg=CFG)) == ["b-worker-2"]
    with_budget = [node("n0", gpus=4), node("n1", gpus=3), *job("a", max_restarts=5),
                   *job("b", max_restarts=5, used="3", running=3, node_name="n1"),
                   *gang("ns", "g", members=1, gpus=1)]
    assert names(plan_of(*with_budget, cfg=CFG)) == ["a-worker-3"]


def test_spent_jobs_hold_back_no_scale_up() -> None:
    # n0 is full with a (spent); the 2-GPU gang g could only be placed by evicting a's workers, which
    # the budget forbids: g is no blocking gang, and c grows into n1's free GPUs.
    def objs(a_restarts: int) -> list[dict[str, Any]]:
        return [node("n0", gpus=4), node("n1", gpus=2), *job("a", max_restarts=a_restarts),
                *job("c", max_restarts=5, running=1, node_name="n1"), *gang("ns", "g", members=1, gpus=2)]

    plan = plan_of(*objs(0), cfg=CFG)
    assert names(plan) == []
    assert [r.pod.split("/", 1)[1] for r in plan.gate_releases] == ["c-worker-1"]
    assert "ns/g" not in plan.scale_up_blocked_by
    # with budget left, a may give: g blocks growth while it waits for its eviction
    held = plan_of(*objs(5), cfg=ElasticConfig(defaults=QueuePolicy(minWorkersToShrink=0, maxEvictionsPerCycle=0)))
    assert held.gate_releases == ()


def test_without_pytorchjobs_the_rule_does_not_apply() -> None:
    # A dump of pods and PodGroups only says nothing about maxRestarts: decisions as before the rule.
    objs = [node("n0", gpus=4), *elastic_job("ns", "a", min_r=1, max_r=4, running=4, nodes=["n0"]),
            *gang("ns", "g", members=1, gpus=1)]
    assert names(plan_of(*objs, cfg=CFG)) == ["a-worker-3"]


# -- the rendezvous store host ----------------------------------------------------------------------
@pytest.mark.parametrize("master", [False, True])
@pytest.mark.parametrize(("lo", "hi"), [(1, 2), (1, 8), (2, 4), (3, 3), (4, 16)])
def test_the_rendezvous_store_host_is_never_a_candidate(master: bool, lo: int, hi: int) -> None:
    # The operator's default rdzv endpoint is <job>-master-0 with a Master replica, else <job>-worker-0
    # (labelled job-role=master). The webhook's and the agent's role rule makes it master: never
    # elastic, never preemptable, never a victim.
    host = job_pod("ns", "j", "master" if master else "worker", 0, nnodes=f"{lo}:{hi}", master_replica=master)
    view = parse_pod(host)
    assert view.name == ("j-master-0" if master else "j-worker-0")
    assert view.role is Role.MASTER
    # worker-0 is inside the min set even without the job-role label (an older operator): core.
    labels = {keys.REPLICA_TYPE_LABEL: "worker", keys.REPLICA_INDEX_LABEL: "0"}
    assert plan_role(labels, ElasticBounds(lo, hi)).role is Role.CORE


def test_the_store_host_is_never_evicted_even_when_it_alone_would_make_room() -> None:
    # a (1..2) runs worker-0 (the store host) on n0 and worker-1 on n1; g needs n0's GPU: only
    # worker-0 could free it, and it is no candidate.
    objs = [node("n0", gpus=1), node("n1", gpus=1),
            *elastic_job("ns", "a", min_r=1, max_r=2, running=2, nodes=["n0", "n1"]),
            pytorchjob("ns", "a", workers=2, min_r=1, max_r=2, max_restarts=10),
            *gang("ns", "g", members=2, gpus=1)]
    plan = plan_of(*objs, cfg=CFG)
    assert names(plan) == []
    assert reason(plan)[0] == "wait"


# -- status -----------------------------------------------------------------------------------------
def test_status_shows_the_budget_and_why_the_gang_waits() -> None:
    from elastic_controller.cli.status import build_rows, render

    objs = items(node("n0", gpus=4), node("n1", gpus=4), queue("default"), *job("a", max_restarts=3, used="2"),
                 *job("b", max_restarts=10, used="1", node_name="n1"),
                 *elastic_job("ns", "c", min_r=1, max_r=2, running=2, nodes=["n1"]),
                 *gang("ns", "g", members=1, gpus=5))
    for o in objs:  # status lists the PodGroups the controller made (and waiting gangs)
        if o["kind"] == "PodGroup" and o["metadata"]["name"] != "g":
            o["metadata"].setdefault("labels", {})[keys.MANAGED_BY_LABEL] = keys.MANAGED_BY
    rows = {r["job"]: r for r in build_rows(objs, CFG, NOW)["default"]}
    assert rows["ns/a"]["restarts"] == {"used": 2, "max": 3, "spent": True}
    assert rows["ns/b"]["restarts"] == {"used": 1, "max": 10, "spent": False}
    assert rows["ns/c"]["restarts"] is None  # no PyTorchJob listed: unknown
    assert "restart budget spent (2 of 3 used, 1 kept in reserve)" in rows["ns/g"]["lastDecision"]
    text = render({"default": list(rows.values())}, width=400)
    header, *lines = [line for line in text.splitlines() if line.startswith("  ")]
    assert "RESTARTS" in header.split()
    line_a = next(line for line in lines if line.split()[0] == "ns/a")
    assert "2/3 spent" in line_a
    assert "1/10" in next(line for line in lines if line.split()[0] == "ns/b")



@pytest.mark.parametrize("seed", range(6))
def test_indexed_and_exhaustive_search_agree_with_spent_jobs(seed: int) -> None:
    # The node index leaves spent jobs' workers out of its node profiles; the exhaustive scan asks
    # every pod: the plans are the same.
    import random

    from tests.harness.builders import plan_fast_and_exhaustive, snapshot_of

    rng = random.Random(seed)
    objs: list[Any] = [queue("default")]
    spent = [rng.random() < 0.5 for _ in range(4)]
    for i, is_spent in enumerate(spent):  # four full 4-GPU nodes, one job each
        objs += [node(f"n{i}", gpus=4), *job(f"j{i}", max_restarts=3, used="2" if is_spent else "0",
                                             node_name=f"n{i}")]
    objs += gang("ns", "g", members=rng.randint(1, 3), gpus=2)
    fast, slow = plan_fast_and_exhaustive(snapshot_of(*objs, cfg=CFG), CFG)
    assert fast == slow
    victims = {e.job.split("/", 1)[1] for e in fast.evictions}
    assert not any(spent[int(v[1:])] for v in victims), (spent, victims)  # (seeds 1, 2, 5 evict)
