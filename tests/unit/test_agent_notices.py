"""The agent's cycle with eviction notices (queue ``noticeSeconds`` > 0) against the in-memory API."""

from __future__ import annotations

from datetime import timedelta

from elastic_controller.agent import Agent
from elastic_controller.config import parse_config
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore
from elastic_controller.kube.resources import EVENTS, NODES, PODGROUPS, PODS, PYTORCHJOBS
from elastic_controller.policy import keys
from tests.harness import builders as b
from tests.harness.fakecluster import Clock, fake_kube, load
from tests.harness.legacy import LEGACY, legacy_config
from tests.harness.noticeworld import CFG, NOTICE, VICTIMS, make, noticed


def ann(kube: FakeKube, name: str, ns: str = "team-a") -> dict[str, str]:
    return dict(kube.get(PODS, name, ns)["metadata"].get("annotations") or {})


def terminating(kube: FakeKube, name: str) -> bool:
    return bool(kube.get(PODS, name, "team-a")["metadata"].get("deletionTimestamp"))


def real_evictions(kube: FakeKube) -> list[str]:
    return [c[3] for c in kube.verbs("evict") if not c[4]]


def reasons(kube: FakeKube) -> list[tuple[str, str, str]]:
    return [(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"]) for e in kube.of(EVENTS)]


def test_a_notice_is_given_instead_of_an_eviction() -> None:
    kube, agent, _ = make()
    noticed(kube, agent)
    assert real_evictions(kube) == []
    for name in VICTIMS:
        a = ann(kube, name)
        assert a[keys.EVICTED_FOR] == "team-b/b"
        assert a[keys.EVICT_AFTER] == b.ts(b.NOW + timedelta(seconds=NOTICE))
        assert not terminating(kube, name)
    assert sorted(reasons(kube)) == [("Pod", "a-worker-4", "EvictionNotice"), ("Pod", "a-worker-5", "EvictionNotice"),
                                     ("PodGroup", "b", "GangEvictionNotice"), ("PyTorchJob", "a", "EvictionNotice")]
    pg = kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"]
    assert pg[keys.LAST_SCALE_TIME] == b.ts(b.NOW)  # the cooldown starts with the notice
    assert "eviction notice to 2 elastic worker(s)" in pg[keys.LAST_DECISION]
    gang = kube.get(PODGROUPS, "b", "team-b")["metadata"]["annotations"]
    assert "eviction notice given to 2" in gang[keys.LAST_DECISION]


def test_no_further_victims_while_the_notice_runs_and_the_gang_says_why() -> None:
    kube, agent, clock = make()
    noticed(kube, agent)
    before = len(kube.calls)
    clock.at(30)
    report = agent.run_cycle()
    assert report.evicted == [] and report.noticed == {} and report.plan.evictions == ()
    (d,) = report.plan.starving
    assert d.decision == "wait" and "under an eviction notice until 2026-01-01T13:02:00Z" in d.reason
    # the gang's last-decision says so, and is not rewritten each cycle while the notice runs
    decision = kube.get(PODGROUPS, "b", "team-b")["metadata"]["annotations"][keys.LAST_DECISION]
    assert "waiting: victim team-a/a-worker-4 is under an eviction notice" in decision
    writes = len(kube.verbs("patch-merge"))
    clock.at(40)
    agent.run_cycle()
    assert len(kube.verbs("patch-merge")) == writes
    assert not [c for c in kube.calls[before:] if c[0] == "evict"]
    # nothing else was stamped: the two victims are the only pods under notice
    under = [p["metadata"]["name"] for p in kube.of(PODS)
             if keys.EVICT_AFTER in (p["metadata"].get("annotations") or {})]
    assert sorted(under) == VICTIMS


def test_a_restarted_agent_does_not_resume_a_notice_as_an_interrupted_plan() -> None:
    kube, agent, clock = make()
    noticed(kube, agent)
    clock.at(10)
    fresh = Agent(kube, FakeStore(kube), CFG, EventRecorder(kube), clock=clock)
    report = fresh.run_cycle()
    assert report.resumed == [] and report.evicted == [] and real_evictions(kube) == []
    assert all(keys.EVICT_AFTER in ann(kube, n) for n in VICTIMS)


def test_victims_are_evicted_when_the_notice_ends() -> None:
    kube, agent, clock = make()
    noticed(kube, agent)
    clock.at(NOTICE - 1)
    assert agent.run_cycle().evicted == []
    clock.at(NOTICE)
    report = agent.run_cycle()
    assert sorted(report.evicted) == ["team-a/a-worker-4", "team-a/a-worker-5"]
    assert all(terminating(kube, n) for n in VICTIMS)
    assert sorted(real_evictions(kube)) == VICTIMS
    assert ("Pod", "a-worker-4", "EvictedForGang") in reasons(kube)
    assert ("PyTorchJob", "a", "ScaledDown") in reasons(kube)
    # in flight now: the next cycle picks no further victims for the gang
    clock.at(NOTICE + 1)
    assert agent.run_cycle().plan.evictions == ()


def test_a_newer_checkpoint_ends_the_notice_early() -> None:
    kube, agent, clock = make()
    noticed(kube, agent)
    clock.at(20)
    kube.patch(PYTORCHJOBS, "a", {"metadata": {"annotations": {keys.LAST_CHECKPOINT_TIME: b.ts(b.NOW + timedelta(
        seconds=15))}}}, "team-a")
    report = agent.run_cycle()
    assert sorted(report.evicted) == ["team-a/a-worker-4", "team-a/a-worker-5"]


def test_a_checkpoint_under_notice_wakes_the_loop_at_once() -> None:
    """The job is stalled from its notice checkpoint until the victims go (the kit holds the victim's
    rank): the stamp wakes the agent's loop instead of waiting out ``intervalSeconds`` (5 s default).
    Without notices out, a checkpoint wakes nothing."""
    kube, agent, _ = make()
    stamped = {"metadata": {"annotations": {keys.LAST_CHECKPOINT_TIME: b.ts(b.NOW)}}}
    agent.run_cycle()  # B has starved for 10 min: the first cycle gives A's victims their notice
    assert agent.last_report is not None and agent.last_report.noticed
    for res, name in ((PODS, "a-worker-0"), (PYTORCHJOBS, "a")):
        agent._wake.clear()
        agent.on_event(res, "MODIFIED", kube.patch(res, name, stamped, "team-a"))
        assert agent._wake.is_set(), res.plural
    quiet, agent2, _ = make(parse_config({"defaults": LEGACY}))  # no notices: A's workers are evicted at once
    agent2.run_cycle()
    assert agent2.last_report is not None and not agent2.last_report.noticed
    agent2.run_cycle()  # nothing pending either
    agent2._wake.clear()
    agent2.on_event(PODS, "MODIFIED", quiet.patch(PODS, "a-worker-0", stamped, "team-a"))
    assert not agent2._wake.is_set()


def test_an_older_checkpoint_or_a_pushed_back_deadline_never_shortens_nor_lengthens_it() -> None:
    kube, agent, clock = make()
    noticed(kube, agent)
    # a checkpoint from before the notice began does not end it
    kube.patch(PODS, "a-worker-0", {"metadata": {"annotations": {
        keys.LAST_CHECKPOINT_TIME: b.ts(b.NOW - timedelta(seconds=5))}}}, "team-a")
    # the job pushes its own deadline back: the agent keeps the one it gave
    later = b.ts(b.NOW + timedelta(seconds=10 * NOTICE))
    for name in VICTIMS:
        kube.patch(PODS, name, {"metadata": {"annotations": {keys.EVICT_AFTER: later}}}, "team-a")
    clock.at(NOTICE - 1)
    assert agent.run_cycle().evicted == []
    clock.at(NOTICE)
    assert sorted(agent.run_cycle().evicted) == ["team-a/a-worker-4", "team-a/a-worker-5"]


def test_the_notice_is_withdrawn_when_the_gang_is_placed_otherwise() -> None:
    kube, agent, clock = make()
    noticed(kube, agent)
    kube.add(NODES, b.node("n2"))
    for i in range(2):
        kube.patch(PODS, f"b-{i}", {"spec": {"nodeName": "n2"}, "status": {"phase": "Running"}}, "team-b")
    clock.at(30)
    report = agent.run_cycle()
    assert sorted(report.withdrawn) == ["team-a/a-worker-4", "team-a/a-worker-5"] and report.evicted == []
    for name in VICTIMS:
        a = ann(kube, name)
        assert keys.EVICT_AFTER not in a and keys.EVICTED_FOR not in a and not terminating(kube, name)
    assert ("Pod", "a-worker-4", "EvictionNoticeWithdrawn") in reasons(kube)
    assert ("PyTorchJob", "a", "EvictionNoticeWithdrawn") in reasons(kube)
    clock.at(NOTICE + 10)
    assert agent.run_cycle().evicted == [] and real_evictions(kube) == []


def test_the_notice_is_withdrawn_when_the_gang_is_deleted() -> None:
    kube, agent, clock = make()
    noticed(kube, agent)
    kube.delete(PODGROUPS, "b", "team-b")
    for i in range(2):
        kube.delete(PODS, f"b-{i}", "team-b")
    clock.at(30)
    report = agent.run_cycle()
    assert sorted(report.withdrawn) == ["team-a/a-worker-4", "team-a/a-worker-5"]
    assert all(keys.EVICT_AFTER not in ann(kube, n) for n in VICTIMS)


def test_a_notice_refused_by_a_pdb_takes_the_cooldown_stamp_back() -> None:
    kube, agent, _ = make()
    kube.pdb_blocked.add("team-a/a-worker-4")
    report = agent.run_cycle()
    assert report.noticed == {} and report.failed["team-b/b"].startswith("pdb")
    pg = kube.get(PODGROUPS, "a", "team-a")["metadata"].get("annotations") or {}
    assert keys.LAST_SCALE_TIME not in pg
    assert all(keys.EVICT_AFTER not in ann(kube, n) for n in VICTIMS)


def test_a_notice_refused_by_a_pdb_is_remembered_and_the_next_plan_takes_others() -> None:
    """As on the immediate path (agent.PDB_REFUSAL_SECONDS): the pod a PDB protects is no victim for
    a while, so the next cycle notices other workers instead of retrying the same ones."""
    kube, agent, clock = make()
    kube.pdb_blocked.add("team-a/a-worker-4")
    assert agent.run_cycle().failed["team-b/b"].startswith("pdb")
    assert agent.pdb_refused == {"team-a/a-worker-4": b.NOW}
    clock.at(1)
    report = agent.run_cycle()
    assert {g: sorted(p) for g, p in report.noticed.items()} == {
        "team-b/b": ["team-a/a-worker-3", "team-a/a-worker-5"]}


def test_a_due_eviction_a_pdb_refuses_is_remembered_like_the_immediate_path() -> None:
    kube, agent, clock = make()
    noticed(kube, agent)
    kube.pdb_blocked.add("team-a/a-worker-5")
    clock.at(NOTICE + 1)
    report = agent.run_cycle()
    assert report.evicted == ["team-a/a-worker-4"]  # the other due victim goes
    assert agent.pdb_refused == {"team-a/a-worker-5": clock()}
    assert keys.EVICT_AFTER in ann(kube, "a-worker-5")  # its notice stays: retried next cycle
    clock.at(NOTICE + 2)
    agent.run_cycle()
    assert agent.pdb_refused == {"team-a/a-worker-5": clock()}  # refused again: remembered from now
    kube.pdb_blocked.clear()
    clock.at(NOTICE + 3)
    assert agent.run_cycle().evicted == ["team-a/a-worker-5"]
    clock.at(NOTICE + 3 + 61)
    assert agent._pdb_refused(clock()) == frozenset()  # forgotten after PDB_REFUSAL_SECONDS


def test_dry_run_gives_no_notice() -> None:
    kube, agent, _ = make(dry_run=True)
    report = agent.run_cycle()
    assert report.noticed == {} and report.plan.evictions  # planned, not acted on
    assert not [c for c in kube.calls if c[0] in ("patch-merge", "patch-json", "evict")]


def test_queues_without_a_notice_evict_at_once() -> None:
    kube, agent, _ = make(legacy_config())
    report = agent.run_cycle()
    assert sorted(report.evicted) == ["team-a/a-worker-4", "team-a/a-worker-5"] and report.noticed == {}
    assert all(keys.EVICT_AFTER not in ann(kube, n) for n in VICTIMS)


def test_victims_under_notice_count_as_gone_for_their_job_min() -> None:
    """Job A (min 4) at 6 gives two under notice for B; a later gang C must not take A below 4 once
    the notices run out (no cooldown here: only the notice keeps the planner off A)."""
    kube = fake_kube(b.node("n1"), b.queue("default"),
                     b.pytorchjob("team-a", "a", workers=6, min_r=4, max_r=6),
                     b.elastic_job("team-a", "a", min_r=4, max_r=6, nodes=["n1"]),
                     b.gang("team-b", "b", members=2, gpus=2))
    clock = Clock()
    cfg = parse_config({"defaults": {"noticeSeconds": NOTICE, "cooldownSeconds": 0}})
    agent = Agent(kube, FakeStore(kube), cfg, EventRecorder(kube), clock=clock)
    noticed(kube, agent)
    load(kube, b.gang("team-c", "c", members=1, gpus=2))
    clock.at(30)
    report = agent.run_cycle()
    assert report.plan.evictions == () and report.noticed == {}
    assert {d.pod_group: d.decision for d in report.plan.starving} == {"team-b/b": "wait", "team-c/c": "wait"}
    assert all(ann(kube, n)[keys.EVICTED_FOR] == "team-b/b" for n in VICTIMS)
