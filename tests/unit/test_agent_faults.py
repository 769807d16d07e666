"""Faults and hostile input against the agent (issue 23, items 1, 2, 6, 7), on the in-memory API.

A "kill" is an exception nothing catches, raised by the fake API server as a write arrives: the
process dies with whatever it wrote so far, and a new agent (empty memory) takes over.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from elastic_controller.agent import Agent
from elastic_controller.execute.executor import RECORD_GRACE_SECONDS
from elastic_controller.kube.errors import KubeError, TooManyRequestsError
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore
from elastic_controller.kube.leader import LeaderElector, LeaseSettings
from elastic_controller.kube.resources import EVENTS, PODGROUPS, PODS, PYTORCHJOBS, Resource
from tests.harness import builders as b
from tests.harness.agentworld import EVICTED_FOR, LAST, make, pod, world
from tests.harness.fakecluster import Killed, kill_at, kill_then_restart, real_writes, restarted
from tests.harness.legacy import legacy_config

DIRECTION = "volcano-elastic.io/last-scale-direction"
DECISION = "volcano-elastic.io/last-decision"


def events(kube: FakeKube, reason: str) -> list[dict[str, Any]]:
    return [e for e in kube.of(EVENTS) if e["reason"] == reason]


def writes_of_one_plan() -> int:
    kube, agent = make(world())
    agent.run_cycle()
    return len(real_writes(kube))


@pytest.mark.parametrize("kill_at", range(writes_of_one_plan()))
def test_a_plan_killed_at_any_write_is_finished_by_the_next_agent_with_its_events(kill_at: int) -> None:
    """Items 1 and 2: wherever the agent dies in its plan, the next one evicts exactly the plan's
    victims in its first cycle (no cooldown of its own blocks the gang), every eviction gets its
    EvictedForGang Event and the job its ScaledDown, and last-decision claims what happened."""
    kube, agent = make(world())
    report, real = kill_then_restart(kube, agent, kill_at)
    assert real == ["a-worker-4", "a-worker-5"], report
    for name in real:
        assert pod(kube, name)["metadata"].get("deletionTimestamp"), name
    evicted_for = {e["involvedObject"]["name"] for e in events(kube, "EvictedForGang")}
    assert evicted_for == {"a-worker-4", "a-worker-5"}
    assert events(kube, "ScaledDown")
    ann = kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"]
    assert ann[LAST] == b.ts(b.NOW) and ann[DIRECTION] == "down" and "room for team-b/b" in ann[DECISION]


def test_resumed_evictions_are_counted_with_their_own_reason() -> None:
    kube, agent = make(world())
    agent.faults = {"jobs-stamped": "raise"}
    with pytest.raises(BaseException, match="jobs-stamped"):
        agent.run_cycle()
    report = restarted(kube, faults={}).run_cycle()
    assert sorted(report.resumed) == ["team-a/a-worker-4", "team-a/a-worker-5"] and report.evicted == []
    assert all("interrupted plan" in e["message"] for e in events(kube, "EvictedForGang"))


def test_a_forged_evicted_for_on_a_master_is_refused_with_an_event() -> None:
    """Item 6: the annotation is a claim, not an order: the master is not evicted, the annotation
    is removed and the pod gets a Warning Event saying why."""
    kube, agent = make(world())
    master = pod(kube, "a-worker-0")
    master["metadata"]["annotations"][EVICTED_FOR] = "team-b/b"
    kube.add(PODS, master)
    report = agent.run_cycle()
    assert ("evict", "pods", "team-a", "a-worker-0", False) not in kube.calls
    assert "team-a/a-worker-0" in report.refused and "master" in report.refused["team-a/a-worker-0"]
    assert EVICTED_FOR not in pod(kube, "a-worker-0")["metadata"]["annotations"]
    refused = events(kube, "EvictionRefused")
    assert [e["involvedObject"]["name"] for e in refused] == ["a-worker-0"] and refused[0]["type"] == "Warning"
    assert sorted(report.evicted) == ["team-a/a-worker-4", "team-a/a-worker-5"]  # the real plan goes on


@pytest.mark.parametrize("case", ["fresh-worker", "below-min", "gang-not-starving", "job-cooling"])
def test_forged_evicted_for_on_a_worker_fails_the_fresh_plan_checks(case: str) -> None:
    objs = world()
    kube, agent = make(objs)
    victims = ["a-worker-4", "a-worker-5"]
    if case == "fresh-worker":
        p = pod(kube, "a-worker-5")
        for c in p["status"]["conditions"]:
            if c["type"] == "PodScheduled":
                c["lastTransitionTime"] = b.ts(b.ago(5))
        kube.add(PODS, p)
        victims = ["a-worker-5"]
    elif case == "below-min":  # the user raised minReplicas 2 -> 5; the running pods still say 2:6
        job = kube.get(PYTORCHJOBS, "a", "team-a")
        job["spec"]["elasticPolicy"]["minReplicas"] = 5
        kube.add(PYTORCHJOBS, job)
    elif case == "gang-not-starving":
        for i in range(4):
            p = kube.get(PODS, f"b-{i}", "team-b")
            p["metadata"]["creationTimestamp"] = b.ts(b.ago(2))
            for c in p["status"].get("conditions") or []:
                c["lastTransitionTime"] = b.ts(b.ago(2))
            kube.add(PODS, p)
    elif case == "job-cooling":
        pg = kube.get(PODGROUPS, "a", "team-a")
        pg["metadata"].setdefault("annotations", {}).update({LAST: b.ts(b.ago(10)), DIRECTION: "up"})
        kube.add(PODGROUPS, pg)
    for name in victims:
        p = pod(kube, name)
        p["metadata"]["annotations"][EVICTED_FOR] = "team-b/b"
        kube.add(PODS, p)
    report = agent.run_cycle()
    assert report.resumed == [] and set(report.refused) == {f"team-a/{v}" for v in victims}, report.refused
    for name in victims:
        assert EVICTED_FOR not in pod(kube, name)["metadata"]["annotations"]
    assert {e["involvedObject"]["name"] for e in events(kube, "EvictionRefused")} == set(victims)


def test_gates_lifted_by_an_agent_killed_mid_loop_are_announced() -> None:
    """Item 2 (issue 23), told honestly (issue 31): a kill between two lifts leaves no lifted gate
    unannounced: the next agent counts them from the pods (ScaledUp, last-decision "1 of 2")."""
    objs = b.items(b.node("n1"), b.queue("default"),
                   b.elastic_job("ns", "j", min_r=2, max_r=4, nodes=["n1"], running=2))
    kube, agent = make(objs)
    kill_at(kube, 1, lambda verb, res, dry_run: verb == "patch-strategic")  # the second lift
    with pytest.raises(Killed):
        agent.run_cycle()
    assert [g for p in kube.of(PODS) for g in p["spec"].get("schedulingGates") or []] != []  # one still gated
    assert events(kube, "ScaledUp") == []  # killed before counting
    kube.faults.clear()
    later = b.NOW + timedelta(seconds=RECORD_GRACE_SECONDS + 1)
    Agent(kube, FakeStore(kube), legacy_config(), EventRecorder(kube), clock=lambda: later).run_cycle()
    scaled_up = events(kube, "ScaledUp")
    assert len(scaled_up) == 1 and "1 of 2 elastic pod(s)" in scaled_up[0]["message"]
    decision = kube.get(PODGROUPS, "j", "ns")["metadata"]["annotations"][DECISION]
    # corrected from the pods, then (same cycle) the job's cooldown hold is published over it
    assert "up: 1 of 2 gate(s) lifted (interrupted)" in decision or " held (Cooldown)" in decision, decision
    assert "lifting" not in decision, decision


def test_a_deposed_leader_stops_before_its_next_write() -> None:
    """Item 7: leadership is checked before every write, not only at the next renewal."""
    kube, _ = make(world())
    leading = [True]
    agent = restarted(kube, may_write=lambda: leading[0])

    def depose(verb: str, res: Resource, ns: str, name: str, dry_run: bool) -> None:
        if verb == "patch-merge" and res.plural == "pods":
            leading[0] = False  # the Lease is lost while the first victim is being stamped

    kube.faults.append(depose)
    report = agent.run_cycle()
    assert report.not_leader and report.evicted == []
    assert len(real_writes(kube)) == 1  # the write in flight when the Lease was lost; nothing after it
    assert not kube.verbs("evict", dry_run=False)
    assert LAST not in (kube.get(PODGROUPS, "a", "team-a")["metadata"].get("annotations") or {})


def test_a_failed_plan_never_overwrites_a_newer_stamp_or_record() -> None:
    """Item 7: taking a plan back only removes what is still ours. Here another leader stamps A's
    PodGroup and re-targets a victim while our dry-run fails on a PDB."""
    kube, agent = make(world())

    def meanwhile(verb: str, res: Resource, ns: str, name: str, dry_run: bool) -> None:
        if verb == "evict" and dry_run and name == "a-worker-4":
            pg = kube.get(PODGROUPS, "a", "team-a")
            pg["metadata"].setdefault("annotations", {}).update(
                {LAST: b.ts(b.ago(1)), DIRECTION: "down", DECISION: "another leader's"})
            kube.add(PODGROUPS, pg)
            p = pod(kube, "a-worker-5")
            p["metadata"]["annotations"][EVICTED_FOR] = "team-c/c"
            kube.add(PODS, p)
            raise TooManyRequestsError("pdb", 429)

    kube.faults.append(meanwhile)
    report = agent.run_cycle()
    assert "team-b/b" in report.failed
    ann = kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"]
    assert ann[LAST] == b.ts(b.ago(1)) and ann[DECISION] == "another leader's"
    assert pod(kube, "a-worker-5")["metadata"]["annotations"][EVICTED_FOR] == "team-c/c"
    assert EVICTED_FOR not in pod(kube, "a-worker-4")["metadata"]["annotations"]


def test_restoring_a_cooldown_stamp_is_conditional() -> None:
    kube, agent = make(world())
    ours = {LAST: b.ts(b.NOW), DIRECTION: "down", DECISION: "ours"}
    pg = kube.get(PODGROUPS, "a", "team-a")
    pg["metadata"].setdefault("annotations", {}).update(ours)
    kube.add(PODGROUPS, pg)
    agent._restore_pg("team-a/a", ours, {})
    assert LAST not in kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"]
    newer = {LAST: b.ts(b.NOW), DIRECTION: "up", DECISION: "newer"}
    pg = kube.get(PODGROUPS, "a", "team-a")
    pg["metadata"]["annotations"].update(newer)
    kube.add(PODGROUPS, pg)
    agent._restore_pg("team-a/a", ours, {})
    assert kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"][DECISION] == "newer"


def test_leader_may_write_only_within_its_renew_deadline() -> None:
    now = [100.0]
    kube = FakeKube()
    elector = LeaderElector(kube, "me", LeaseSettings("l", "ns", 15, 10, 2), clock=lambda: now[0])
    assert elector.try_acquire_or_renew()
    elector._leading.set()
    assert elector.leading_now()
    now[0] += 9.5
    assert elector.leading_now()
    now[0] += 10  # paused (SIGSTOP) past the renew deadline: no write until renewed
    assert not elector.leading_now()
    assert elector.try_acquire_or_renew()
    assert elector.leading_now()


def test_api_errors_while_resuming_leave_the_record_for_the_next_cycle() -> None:
    kube, agent = make(world())
    agent.faults = {"victims-stamped": "raise"}
    with pytest.raises(BaseException, match="victims-stamped"):
        agent.run_cycle()
    fresh = restarted(kube, faults={})
    kube.faults.append(lambda v, r, ns, n, dr: (_ for _ in ()).throw(KubeError("down", 503))
                       if v == "patch-merge" and r.plural == "podgroups" else None)
    fresh.run_cycle()  # the cooldown cannot be stamped: nothing may be evicted
    assert not kube.verbs("evict", dry_run=False)
    assert LAST not in (kube.get(PODGROUPS, "a", "team-a")["metadata"].get("annotations") or {})
    kube.faults.clear()
    report = fresh.run_cycle()
    assert sorted(report.resumed + report.evicted) == ["team-a/a-worker-4", "team-a/a-worker-5"]


def test_the_controller_writes_nothing_while_not_leading() -> None:
    """Item 7 for the controller's workers: their API refuses writes locally while not leading."""
    from elastic_controller.controller import Controller
    from elastic_controller.kube.fence import FencedAPI, NotLeadingError

    kube = FakeKube()
    kube.add(PYTORCHJOBS, b.pytorchjob("ns", "j", workers=4, min_r=2, max_r=4))
    leading = [False]
    fenced = FencedAPI(kube, lambda: leading[0])
    ctl = Controller(fenced, FakeStore(kube), legacy_config(), EventRecorder(kube))
    with pytest.raises(NotLeadingError):
        ctl.reconcile("ns/j")
    assert kube.of(PODGROUPS) == [] and not [c for c in kube.calls if c[0] != "get" and c[1] != "events"]
    assert fenced.list(PODGROUPS)[0] == []  # reads pass
    leading[0] = True
    ctl.reconcile("ns/j")
    assert [pg["metadata"]["name"] for pg in kube.of(PODGROUPS)] == ["j"]
