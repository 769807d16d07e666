"""``policy.cycle.decide``: one cycle's whole decision as actions, every decided value inside (pure)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from elastic_controller.config import load_config_file, parse_config
from elastic_controller.policy import keys
from elastic_controller.policy.actions import (
    AnnounceSize,
    Evict,
    EvictDueNotice,
    GiveNotice,
    Hold,
    LiftGates,
    RecordGang,
    SpendRestart,
    WithdrawNotice,
)
from elastic_controller.policy.announce import announced
from elastic_controller.policy.cycle import PlanCache, decide, plan_cycle
from elastic_controller.policy.notices import in_flight, review_notices, with_notices
from tests.harness import builders as b
from tests.harness.examples import EXAMPLES, NOW, example_snapshot
from tests.harness.legacy import legacy_config

GANG = "team-nlp/bert"
VICTIM_JOB = "team-vision/resnet"


def test_a_gang_s_victims_are_one_evict_action_with_its_restart_and_the_size_told() -> None:
    snap = example_snapshot("scale-down-for-gang")
    d = decide(snap, legacy_config(), NOW)
    (evict,) = d.of(Evict)
    assert evict.gang == GANG and [v.pod for v in evict.victims] == [e.pod for e in d.plan.evictions]
    assert evict.restarts == (SpendRestart(VICTIM_JOB, 1),)
    assert d.of(GiveNotice) == () and d.of(EvictDueNotice) == () and d.of(WithdrawNotice) == ()
    (size,) = [a for a in d.of(AnnounceSize) if a.job == VICTIM_JOB]
    running = [p for p in snap.pods if p.job_id == VICTIM_JOB and p.running]
    assert size.size == len(running) - len(evict.victims) == len(size.pods)
    assert not set(size.pods) & {v.pod for v in evict.victims}
    assert [r.decision.pod_group for r in d.of(RecordGang)] == [GANG]
    # the order the writers follow: the shrink, the sizes, then the records
    kinds = [type(a).__name__ for a in d.actions]
    assert kinds.index("Evict") < kinds.index("AnnounceSize") < kinds.index("RecordGang")


def test_the_decision_is_the_plan_the_old_assembly_made() -> None:
    snap = example_snapshot("scale-down-for-gang")
    cfg = legacy_config()
    review = review_notices(snap, cfg, NOW)
    old = with_notices(plan_cycle(in_flight(snap, review), cfg, NOW), review, due=True)
    d = decide(snap, cfg, NOW)
    assert d.shown == old and d.shown.to_json() == old.to_json()
    assert decide(snap, cfg, NOW) == d  # pure: the same inputs, the same decision


def test_the_restart_count_goes_on_from_the_podgroup_never_the_job_copy() -> None:
    def counted(items: list[Any]) -> None:
        for o in items:
            if o["kind"] == "PodGroup" and o["metadata"]["name"] == "resnet":
                o["metadata"].setdefault("annotations", {})[keys.RESTARTS_USED] = "2"
        job = b.pytorchjob("team-vision", "resnet", workers=16, min_r=4, max_r=16, queue="vision")
        job["metadata"]["annotations"] = {keys.RESTARTS_USED: "7"}  # its owner's to write (issue 36, T3)
        job["spec"]["elasticPolicy"]["maxRestarts"] = 10
        items.append(job)

    d = decide(example_snapshot("scale-down-for-gang", counted), legacy_config(), NOW)
    (evict,) = d.of(Evict)
    assert evict.restarts == (SpendRestart(VICTIM_JOB, 3),)


def test_a_queue_with_a_notice_gives_notice_with_each_deadline() -> None:
    cfg = parse_config({"queues": {"vision": {"noticeSeconds": 90}}})
    now = NOW + timedelta(microseconds=300_000)
    d = decide(example_snapshot("scale-down-for-gang", cfg=cfg), cfg, now)
    assert d.of(Evict) == ()
    (notice,) = d.of(GiveNotice)
    assert notice.gang == GANG and not hasattr(notice, "restarts")  # a notice spends no restart (F2)
    assert d.of(SpendRestart) == ()
    # whole seconds, never before now + noticeSeconds
    assert {n.evict_after for n in notice.victims} == {NOW + timedelta(seconds=91)}
    assert [n.victim for n in notice.victims] == list(d.plan.evictions)


def _noticed(items: list[Any], *, evict_after: datetime, gang: str = GANG) -> None:
    for o in items:
        if o["kind"] == "Pod" and o["metadata"]["name"] == "resnet-worker-15":
            o["metadata"].setdefault("annotations", {}).update(
                {keys.EVICTED_FOR: gang, keys.EVICT_AFTER: b.ts(evict_after)})


def test_notices_come_first_and_only_once() -> None:
    cfg = parse_config({"queues": {"vision": {"noticeSeconds": 90}}})
    snap = example_snapshot("scale-down-for-gang", lambda i: _noticed(i, evict_after=NOW - timedelta(seconds=1)), cfg)
    whole = decide(snap, cfg, NOW)
    (due,) = whole.of(EvictDueNotice)
    assert due.notice.facts.pod == "team-vision/resnet-worker-15" and whole.actions[0] == due
    first = decide(snap, cfg, NOW, notices_only=True)
    assert first.actions == (due,) and first.plan.evictions == () and first.notices == whole.notices
    rest = decide(snap, cfg, NOW, reviewed=first.notices)
    assert rest.of(EvictDueNotice) == () and rest.plan == whole.plan
    assert [a for a in rest.actions] == [a for a in whole.actions if a != due]
    # plan and status list the due victim among the evictions; the agent's plan does not
    assert whole.shown.evictions[0].pod == due.notice.facts.pod
    assert due.notice.facts.pod not in {e.pod for e in whole.plan.evictions}


def test_a_notice_no_longer_needed_is_withdrawn() -> None:
    snap = example_snapshot("scale-down-for-gang", lambda i: _noticed(i, evict_after=NOW + timedelta(seconds=60),
                                                             gang="team-nlp/gone"))
    d = decide(snap, legacy_config(), NOW)
    (w,) = d.of(WithdrawNotice)
    assert w.withdrawal.facts.pod == "team-vision/resnet-worker-15"


def test_gates_and_holds_are_actions() -> None:
    snap = example_snapshot("scale-up-into-idle-gpus")
    d = decide(snap, legacy_config(), NOW)
    lifts = d.of(LiftGates)
    assert lifts and [r for lift in lifts for r in lift.releases] == list(d.plan.gate_releases)
    assert all(len({r.job for r in lift.releases}) == 1 and lift.releases[0].job == lift.job for lift in lifts)
    sizes = {a.job: a for a in d.of(AnnounceSize)}
    for lift in lifts:
        assert {r.pod for r in lift.releases} <= set(sizes[lift.job].pods)
    held = d.of(Hold)
    assert held and [h.note for h in held] == [n for n in d.plan.notes if n.job]
    assert all(h.note.job == h.job for h in held)


def test_the_announced_size_leaves_out_ghosts_victims_and_gated_pods() -> None:
    objs = b.items(b.node("n0"), b.node("n1", ready=False), b.queue("default"),
                   b.elastic_job("ns", "j", min_r=2, max_r=6, nodes=["n0", "n1"], running=4))
    snap = b.snapshot_of(objs)
    pods = sorted((p for p in snap.pods if p.job_id == "ns/j"), key=lambda p: p.order)
    gate = keys.DEFAULT_GATE
    ghosts = {p.key for p in pods if p.node_name == "n1" and p.running}
    assert ghosts, "the builder puts running workers on n1"
    gated = [p.key for p in pods if gate in p.scheduling_gates]
    told = announced(pods, gate, ghosts=ghosts, leaving={"ns/j-worker-0"}, lifted=gated[:1])
    assert not set(told) & ghosts and "ns/j-worker-0" not in told
    assert gated[0] in told and not set(gated[1:]) & set(told)


@pytest.mark.parametrize("name", sorted(p.name[:-len(".json")] for p in EXAMPLES.glob("*.json")
                                        if not p.name.endswith(".expected.json")))
def test_the_cycle_s_world_gives_the_same_actions_as_a_walk(name: str) -> None:
    """With a ``PlanCache`` the sizes come from the cycle's World (its ghosts, its pods by group);
    without, from a walk over the snapshot: the same actions either way."""
    config = EXAMPLES / f"{name}.config.yaml"
    cfg = load_config_file(config) if config.exists() else legacy_config()
    snap = example_snapshot(name, cfg=cfg)
    cold = decide(snap, cfg, NOW)
    warm = decide(snap, cfg, NOW, cache=PlanCache())
    assert warm.actions == cold.actions and warm.shown.to_json() == cold.shown.to_json()
