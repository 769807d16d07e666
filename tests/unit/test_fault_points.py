"""Every write path, killed between each pair of its writes (issue 31, items 1 and 2; in-memory API).

The fault points are ``executor.FAULT_STEPS``: each is exercised here by the scenario of its path
(``SCENARIOS`` must name every one), every ``fault("...")`` call in the sources names one of them,
and independently each path is killed at its n-th write for every n (a write added without a fault
point is still killed before and after). After the kill a new agent (empty memory) runs; the
invariant: no job is left behind a cooldown of evictions (or a scale-up) that did not happen.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.agent import Agent, InjectedFault
from elastic_controller.config import parse_config
from elastic_controller.execute.executor import FAULT_STEPS, RECORD_GRACE_SECONDS, parse_record
from elastic_controller.kube.errors import ConflictError
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore, raise_on
from elastic_controller.kube.resources import EVENTS, PODGROUPS, PODS, PYTORCHJOBS
from elastic_controller.policy import keys
from elastic_controller.policy.parse import parse_time
from elastic_controller.policy.settings import ElasticConfig
from tests.harness import builders as b
from tests.harness.agentworld import evict_world, gate_world
from tests.harness.fakecluster import Clock, Killed, fake_kube, kill_at, real_writes
from tests.harness.legacy import legacy_config

NOTICE_CFG = parse_config({"defaults": {"noticeSeconds": 120}})
ROOT = Path(__file__).resolve().parents[2]


class Run:
    """One scenario: a world, its config, and what happens before the cycle that is killed."""

    def __init__(self, world: Callable[[], list[Any]], cfg: ElasticConfig,
                 before: Callable[[FakeKube, Agent, Clock], None] | None = None,
                 extra: Callable[[FakeKube], None] | None = None) -> None:
        self.world, self.cfg, self.before, self.extra = world, cfg, before, extra

    def start(self) -> tuple[FakeKube, Agent, Clock]:
        kube = fake_kube(self.world())
        clock = Clock()
        agent = self.agent(kube, clock, "first")
        if self.before is not None:
            self.before(kube, agent, clock)
        if self.extra is not None:
            self.extra(kube)
        return kube, agent, clock

    def agent(self, kube: FakeKube, clock: Clock, identity: str) -> Agent:
        return Agent(kube, FakeStore(kube), self.cfg, EventRecorder(kube), clock=clock, identity=identity)


def notice_given(kube: FakeKube, agent: Agent, clock: Clock) -> None:
    assert agent.run_cycle().noticed
    clock.later(10)


def gang_deleted(kube: FakeKube, agent: Agent, clock: Clock) -> None:
    notice_given(kube, agent, clock)
    kube.delete(PODGROUPS, "b", "team-b")
    for i in range(4):
        kube.delete(PODS, f"b-{i}", "team-b")


def notice_due(kube: FakeKube, agent: Agent, clock: Clock) -> None:
    notice_given(kube, agent, clock)
    clock.later(200)


def race_on_first_eviction(kube: FakeKube) -> None:
    kube.faults.append(raise_on("evict", "pods", dry_run=False, error=ConflictError("race", 409)))


IMMEDIATE = Run(evict_world, legacy_config())
RACE = Run(evict_world, legacy_config(), extra=race_on_first_eviction)
NOTICE = Run(evict_world, NOTICE_CFG)
WITHDRAW = Run(evict_world, NOTICE_CFG, gang_deleted)
DUE = Run(evict_world, NOTICE_CFG, notice_due)
GATES = Run(gate_world, legacy_config())

SCENARIOS: dict[str, Run] = {
    "victims-stamped": IMMEDIATE, "jobs-stamped": IMMEDIATE, "evicted-one": IMMEDIATE,
    "podgroup-stamped": NOTICE, "notice-jobs-stamped": NOTICE, "noticed-one": NOTICE,
    "withdrawn-one": WITHDRAW, "due-evicted-one": DUE,
    "gates-stamped": GATES, "gate-lifted-one": GATES,
    "unstamped-one": RACE, "restored-one": RACE,
}
PATHS = {"immediate": IMMEDIATE, "race": RACE, "notice": NOTICE, "withdraw": WITHDRAW, "due": DUE, "gates": GATES}


def phantom_cooldowns(kube: FakeKube, cfg: ElasticConfig) -> list[str]:
    """Jobs whose stamp is a cooldown of actions none of which happened (the invariant's breaches)."""
    pods = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in kube.of(PODS)}
    out = []
    for pg in kube.of(PODGROUPS):
        ann = pg["metadata"].get("annotations") or {}
        rec = parse_record(ann.get(keys.SCALE_RECORD))
        if rec is None or rec.at != ann.get(keys.LAST_SCALE_TIME):
            continue
        acted = 0
        for key, uid in rec.pods.items():
            p = pods.get(key)
            meta = (p or {}).get("metadata") or {}
            gates = [g["name"] for g in (p or {}).get("spec", {}).get("schedulingGates") or []]
            if p is None or meta.get("uid") != uid or meta.get("deletionTimestamp") or \
                    (meta.get("annotations") or {}).get(keys.EVICTED_FOR) == rec.gang or \
                    (rec.path == "up" and cfg.gating.gateName not in gates):
                acted += 1
        if not acted:
            out.append(f"{pg['metadata']['name']}: {ann.get(keys.LAST_DECISION)}")
        elif rec.path == "up" and " up: lifting " in ann.get(keys.LAST_DECISION, ""):
            out.append(f"{pg['metadata']['name']} claims a plan, not what was lifted: {ann[keys.LAST_DECISION]}")
    return out


def recover(run: Run, kube: FakeKube, clock: Clock) -> Agent:
    """A new process takes over a little later (past the record grace, well within any cooldown)."""
    kube.faults.clear()
    clock.later(RECORD_GRACE_SECONDS + 1)
    agent = run.agent(kube, clock, "second")
    agent.run_cycle()
    return agent


def test_every_fault_point_has_a_scenario_and_every_call_names_one() -> None:
    assert set(SCENARIOS) == set(FAULT_STEPS)
    called: set[str] = set()
    for path in [*sorted((ROOT / "elastic_controller/execute").glob("*.py")), ROOT / "elastic_controller/notice.py"]:
        called |= set(re.findall(r"\bfault\(\"([a-z-]+)\"\)", path.read_text()))
    assert called == set(FAULT_STEPS), called ^ set(FAULT_STEPS)


@pytest.mark.parametrize("step", FAULT_STEPS)
def test_a_crash_at_any_fault_point_leaves_no_phantom_cooldown(step: str) -> None:
    run = SCENARIOS[step]
    kube, agent, clock = run.start()
    agent.faults = {step: "raise"}
    with pytest.raises(InjectedFault):
        agent.run_cycle()
    recover(run, kube, clock)
    assert phantom_cooldowns(kube, run.cfg) == []


def writes_of(run: Run) -> int:
    kube, agent, _ = run.start()
    n = len(real_writes(kube))
    agent.run_cycle()
    return len(real_writes(kube)) - n


@pytest.mark.parametrize(("path", "n"), [(name, n) for name, run in PATHS.items()
                                                for n in range(writes_of(run))])
def test_a_crash_at_any_write_of_any_path_leaves_no_phantom_cooldown(path: str, n: int) -> None:
    run = PATHS[path]
    kube, agent, clock = run.start()
    kill_at(kube, n)
    with pytest.raises(Killed):
        agent.run_cycle()
    recover(run, kube, clock)
    assert phantom_cooldowns(kube, run.cfg) == []


def test_item1_a_crash_after_the_notice_stamp_does_not_block_the_gang() -> None:
    """Issue 31 item 1: killed after the PodGroup's stamp, before any notice: the next leader takes the
    stamp back and gives the notice in its first cycle (not a whole cooldown later)."""
    kube, agent, clock = NOTICE.start()
    agent.faults = {"notice-jobs-stamped": "raise"}
    with pytest.raises(InjectedFault):
        agent.run_cycle()
    assert parse_time(kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"][keys.LAST_SCALE_TIME])
    kube.faults.clear()
    clock.later(RECORD_GRACE_SECONDS + 1)
    report = NOTICE.agent(kube, clock, "second").run_cycle()
    assert report.taken_back == ["team-a/a"]
    assert sorted(report.noticed.get("team-b/b", [])) == ["team-a/a-worker-4", "team-a/a-worker-5"]
    ann = kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"]
    assert ann[keys.LAST_SCALE_TIME] == b.ts(clock.now)  # the new notice's stamp, not the orphan's


def test_item2_a_gang_deleted_under_notice_leaves_no_cooldown() -> None:
    """Issue 31 item 2: the notices are withdrawn and the "down: eviction notice" stamp is taken back in
    the same cycle (it was empty before: the job has no cooldown at all afterwards)."""
    kube, agent, _clock = WITHDRAW.start()
    report = agent.run_cycle()
    assert len(report.withdrawn) == 2 and report.taken_back == ["team-a/a"]
    ann = kube.get(PODGROUPS, "a", "team-a")["metadata"].get("annotations") or {}
    assert keys.LAST_SCALE_TIME not in ann and keys.SCALE_RECORD not in ann
    assert "taken back" in ann[keys.LAST_DECISION]
    job = kube.get(PYTORCHJOBS, "a", "team-a")["metadata"].get("annotations") or {}
    assert keys.LAST_SCALE_TIME not in job  # the job's copy too
    assert any(e["reason"] == "CooldownTakenBack" for e in kube.of(EVENTS))


def test_a_notice_that_ran_its_course_keeps_its_cooldown() -> None:
    kube, agent, clock = DUE.start()
    assert len(agent.run_cycle().evicted) == 2
    clock.later(RECORD_GRACE_SECONDS + 1)
    report = agent.run_cycle()
    assert report.taken_back == []
    assert kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"][keys.LAST_SCALE_DIRECTION] == "down"


def test_a_stamp_younger_than_the_grace_is_not_judged() -> None:
    kube, agent, clock = NOTICE.start()
    agent.faults = {"notice-jobs-stamped": "raise"}
    with pytest.raises(InjectedFault):
        agent.run_cycle()
    clock.later(1)  # another writer's notices may not be in our caches yet
    report = NOTICE.agent(kube, clock, "second").run_cycle()
    assert report.taken_back == [] and report.noticed == {}
