"""The agent's write paths one at a time (elastic_controller.execute), each through its narrow
interface with one ``Executor`` against the in-memory API: no agent, no planner."""

from __future__ import annotations

import pytest

from elastic_controller.execute.decisions import write_decisions
from elastic_controller.execute.evictions import execute_evictions
from elastic_controller.execute.executor import CycleReport, InjectedFault, NotLeaderError, parse_faults
from elastic_controller.execute.gates import execute_releases
from elastic_controller.execute.plan import execute_decision
from elastic_controller.execute.resume import forget
from elastic_controller.execute.stamps import Preemptions
from elastic_controller.kube.resources import EVENTS, PODGROUPS, PODS, PYTORCHJOBS
from elastic_controller.policy.contract import Decision, Kind
from elastic_controller.policy.cycle import decide
from elastic_controller.policy.decisions import CyclePlan, GangDecision, GateRelease
from elastic_controller.policy.model import Snapshot
from tests.harness import builders as b
from tests.harness.executeworld import (
    DECISION,
    EVICTED_FOR,
    a_job,
    evict_action,
    executor,
    lifts,
    store_snapshot,
    victims,
    writes,
)

LAST = "volcano-elastic.io/last-scale-time"
DIRECTION = "volcano-elastic.io/last-scale-direction"
GATE = "volcano-elastic.io/scale-up"


def test_parse_faults_accepts_the_steps_and_refuses_the_rest() -> None:
    assert parse_faults("victims-stamped=exit, evicted-one=sleep:2") == {"victims-stamped": "exit",
                                                                          "evicted-one": "sleep:2"}
    assert parse_faults(None) == {}
    with pytest.raises(ValueError, match="bad entry 'nowhere=raise'"):
        parse_faults("nowhere=raise")
    with pytest.raises(ValueError, match="bad entry"):
        parse_faults("evicted-one=explode")


def test_a_replica_that_does_not_lead_writes_nothing_on_any_path() -> None:
    """Fencing: each write path stops at its first write (NotLeaderError) when the Lease is not held."""
    kube, ex = executor(a_job(running=2))
    ex.may_write = lambda: False
    paths = [
        lambda: execute_evictions(ex, evict_action(ex, victims("a-worker-1")), b.NOW, CycleReport(CyclePlan())),
        lambda: execute_releases(ex, lifts(GateRelease("team-a/a-worker-4", "team-a/a", "n1", "default", "room")),
                                 b.NOW, CycleReport(CyclePlan())),
        lambda: ex.stamp("team-a/a", {LAST: b.ts(b.NOW)}),
        lambda: ex.unstamp_pod("team-a/a-worker-1", "team-b/b"),
        lambda: ex.evict("team-a/a-worker-1", None),
    ]
    for path in paths:
        with pytest.raises(NotLeaderError):
            path()
    assert writes(kube) == []
    ex.evict("team-a/a-worker-1", None, dry_run=True)  # a dry-run writes nothing: not fenced
    assert kube.calls[-1][0] == "evict" and kube.calls[-1][4] is True


def test_evictions_stamp_first_then_evict_and_book_each() -> None:
    kube, ex = executor(a_job())
    report = CycleReport(CyclePlan())
    execute_evictions(ex, evict_action(ex, victims("a-worker-4", "a-worker-5")), b.NOW, report)
    assert report.evicted == ["team-a/a-worker-4", "team-a/a-worker-5"] and report.failed == {}
    order = [(c[0], c[1]) for c in writes(kube)]
    assert order.index(("patch-merge", "podgroups")) < order.index(("evict", "pods"))
    assert set(ex.ledger) == {"uid-team-a-a-worker-4", "uid-team-a-a-worker-5"}
    ann = kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"]
    assert ann[DIRECTION] == "down" and ann[DECISION].endswith("2 elastic worker(s) evicted to make room for team-b/b")
    assert kube.get(PYTORCHJOBS, "a", "team-a")["metadata"]["annotations"][LAST] == b.ts(b.NOW)


def test_an_eviction_path_crash_leaves_the_record_for_resume() -> None:
    """A crash after the victims are stamped (fault hook) leaves their evicted-for: what resume finds."""
    kube, ex = executor(a_job(), faults={"victims-stamped": "raise"})
    with pytest.raises(InjectedFault):
        execute_evictions(ex, evict_action(ex, victims("a-worker-5")), b.NOW, CycleReport(CyclePlan()))
    assert kube.get(PODS, "a-worker-5", "team-a")["metadata"]["annotations"][EVICTED_FOR] == "team-b/b"
    assert not any(c[0] == "evict" and not c[4] for c in kube.calls)


def test_gates_lift_only_ours_and_stamp_the_scale_up() -> None:
    kube, ex = executor(a_job(running=4))
    pod = kube.get(PODS, "a-worker-4", "team-a")
    pod["spec"]["schedulingGates"].append({"name": "someone-else/gate"})
    kube.add(PODS, pod)
    report = CycleReport(CyclePlan())
    execute_releases(ex, lifts(GateRelease("team-a/a-worker-4", "team-a/a", "n1", "default", "room on n1")),
                     b.NOW, report)
    assert report.released == ["team-a/a-worker-4"]
    assert kube.get(PODS, "a-worker-4", "team-a")["spec"]["schedulingGates"] == [{"name": "someone-else/gate"}]
    assert kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"][DIRECTION] == "up"
    assert [e["reason"] for e in kube.of(EVENTS)] == ["ScaledUp"]


def test_gates_in_dry_run_write_nothing() -> None:
    kube, ex = executor(a_job(running=4), dry_run=True)
    report = CycleReport(CyclePlan())
    plan = CyclePlan(gate_releases=(GateRelease("team-a/a-worker-4", "team-a/a", "n1", "default", "room"),))
    execute_decision(ex, decide(store_snapshot(ex), ex.cfg, b.NOW, planner=lambda *_: plan), b.NOW, report)
    assert report.released == [] and writes(kube) == []


def test_a_decision_is_written_only_when_its_text_changes() -> None:
    kube, ex = executor(a_job(), b.gang("team-b", "b", members=4, gpus=1))
    waiting = GangDecision("team-b/b", "default", "wait", "no room yet")
    plan = CyclePlan(starving=(waiting,))
    write_decisions(ex, b.decided(plan), CycleReport(plan), b.NOW)
    said = Decision.decode(kube.get(PODGROUPS, "b", "team-b")["metadata"]["annotations"][DECISION])
    assert said is not None and said.sentence == f"{b.ts(b.NOW)} waiting: no room yet"
    assert said.kind == Kind.WAITING and said.at == b.ts(b.NOW)
    before = len(writes(kube))
    write_decisions(ex, b.decided(plan), CycleReport(plan), b.ago(-5))  # same text, later: not written again
    assert len(writes(kube)) == before
    report = CycleReport(plan, failed={"team-b/b": "pdb: refused"})
    write_decisions(ex, b.decided(plan), report, b.NOW)
    assert "not executed (pdb: refused)" in kube.get(PODGROUPS, "b", "team-b")["metadata"]["annotations"][DECISION]


def test_forget_takes_back_only_a_stamp_that_is_still_ours() -> None:
    ours = {LAST: b.ts(b.NOW), DIRECTION: "down",
            DECISION: f"{b.ts(b.NOW)} down: 1 elastic worker(s) evicted to make room for team-b/b"}
    kube, ex = executor(a_job())
    pg = kube.get(PODGROUPS, "a", "team-a")
    pg["metadata"]["annotations"].update(ours)
    kube.add(PODGROUPS, pg)
    victim = kube.get(PODS, "a-worker-5", "team-a")
    victim["metadata"]["annotations"][EVICTED_FOR] = "team-b/b"
    kube.add(PODS, victim)
    snap = b.snapshot_of(kube.of(PODS), kube.of(PODGROUPS))
    view = next(p for p in snap.pods if p.key == "team-a/a-worker-5")
    forget(ex, "team-b/b", [view], ["team-a/a"], snap, b.NOW, "test")
    ann = kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"]
    assert DIRECTION not in ann and "dropped after an interruption: test" in ann[DECISION]
    assert EVICTED_FOR not in kube.get(PODS, "a-worker-5", "team-a")["metadata"]["annotations"]


def test_preemptions_noted_from_events_are_stamped_once() -> None:
    kube, ex = executor(a_job())
    pods = Preemptions()
    pod = kube.get(PODS, "a-worker-5", "team-a")
    assert pods.note(pod) is False  # no DisruptionTarget condition
    b.preempted_by_scheduler(pod, b.ago(3))
    assert pods.note(pod) is True
    empty = Snapshot()  # Volcano deleted the pod already: only the noted event tells
    assert pods.count(ex, empty, b.NOW) == ["team-a/a-worker-5"]
    assert kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"][LAST] == b.ts(b.ago(3))
    assert pods.count(ex, empty, b.NOW) == []  # counted once
    assert [e["reason"] for e in kube.of(EVENTS)] == ["PreemptedByScheduler"]
