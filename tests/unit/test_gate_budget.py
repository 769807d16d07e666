"""``agent.maxGateReleasesPerCycle`` (issue 36, item 3): the gates one cycle lifts in all are bounded;
each job grows whole or not at all, the first job of a cycle always, the rest in the next cycles."""

from __future__ import annotations

import dataclasses
from typing import Any

from elastic_controller.policy.decisions import CyclePlan, HoldReason
from elastic_controller.policy.settings import AgentConfig, ElasticConfig, QueuePolicy
from tests.harness.builders import elastic_job, node, plan_of


def released(plan: CyclePlan) -> list[str]:
    return [g.pod.split("/", 1)[1] for g in plan.gate_releases]


def cfg(budget: int) -> ElasticConfig:
    return ElasticConfig(agent=AgentConfig(maxGateReleasesPerCycle=budget), defaults=QueuePolicy(maxScaleUpPerCycle=16))


def jobs() -> list[Any]:
    # four jobs of 1 running worker (min 1, max 4) on one roomy node: each would grow by 3 (12 gates)
    objs: list[Any] = [node("n0", gpus=32)]
    for name in ("a", "b", "c", "d"):
        objs += elastic_job("ns", name, min_r=1, max_r=4, nodes=["n0"], running=1)
    return objs


def test_the_default_is_large_enough_for_a_small_cycle() -> None:
    plan = plan_of(*jobs(), cfg=cfg(AgentConfig().maxGateReleasesPerCycle))
    assert len(plan.gate_releases) == 12


def test_jobs_grow_whole_within_the_budget_and_the_rest_are_noted() -> None:
    plan = plan_of(*jobs(), cfg=cfg(7))
    out = released(plan)
    assert len(out) == 6  # two jobs of 3: a third would pass 7
    by_job = {r.job for r in plan.gate_releases}
    assert len(by_job) == 2
    for j in by_job:  # each whole: 1 -> 4
        assert sum(1 for r in plan.gate_releases if r.job == j) == 3
    held = [n for n in plan.notes if getattr(n, "reason", "") == HoldReason.CYCLE_GATE_LIMIT]
    assert sorted(n.job for n in held) == sorted({"ns/a", "ns/b", "ns/c", "ns/d"} - by_job)
    assert all("agent.maxGateReleasesPerCycle 7" in n for n in held)


def test_the_first_job_of_a_cycle_always_grows() -> None:
    plan = plan_of(*jobs(), cfg=cfg(1))
    assert len(plan.gate_releases) == 3 and len({r.job for r in plan.gate_releases}) == 1


def test_the_next_cycle_grows_the_rest() -> None:
    objs = jobs()
    first = plan_of(*objs, cfg=cfg(7))
    grown = {r.pod for r in first.gate_releases}
    for o in objs:  # as if the scheduler placed the released pods
        if o.get("kind") == "Pod" and f"ns/{o['metadata']['name']}" in grown:
            o["spec"].pop("schedulingGates", None)
            o["spec"]["nodeName"] = "n0"
            o["status"] = dataclasses.asdict(_Running())
    second = plan_of(*objs, cfg=cfg(7))
    assert {r.job for r in second.gate_releases}.isdisjoint({r.job for r in first.gate_releases})
    assert len(second.gate_releases) == 6


@dataclasses.dataclass
class _Running:
    phase: str = "Running"


def test_a_job_held_only_by_the_budget_gets_no_record() -> None:
    from elastic_controller.policy.cycle import _holds
    from elastic_controller.policy.decisions import HoldNote

    notes = (HoldNote("job ns/a stays: budget", "ns/a", HoldReason.CYCLE_GATE_LIMIT),
             HoldNote("job ns/b stays: cooldown", "ns/b", HoldReason.COOLDOWN))
    assert [job for job, _ in _holds(notes)] == ["ns/b"]  # a grows next cycle: no write now and then
