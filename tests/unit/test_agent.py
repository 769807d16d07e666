"""The preemption agent's execution against the in-memory API (no cluster)."""

from __future__ import annotations

import dataclasses
import logging
from datetime import timedelta
from typing import Any

import pytest

from elastic_controller.agent import PDB_REFUSAL_SECONDS, Agent
from elastic_controller.kube.errors import KubeError, TooManyRequestsError
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore, raise_on
from elastic_controller.kube.resources import EVENTS, PODGROUPS, PODS, Resource
from elastic_controller.policy.settings import AgentConfig, ElasticConfig
from tests.harness import builders as b
from tests.harness.agentworld import EVICTED_FOR, LAST, MUTATING, make, pod, world
from tests.harness.fakecluster import KINDS, Killed, fake_kube, kill_at
from tests.harness.legacy import legacy_config

GATE = "volcano-elastic.io/scale-up"


def test_evicts_after_stamping_and_dry_running_everything() -> None:
    kube, agent = make(world())
    report = agent.run_cycle()
    assert sorted(report.evicted) == ["team-a/a-worker-4", "team-a/a-worker-5"]
    verbs = [(c[0], c[1], c[3], c[4]) for c in kube.calls if c[0] != "get" and c[1] != "events"]
    first_evict = next(i for i, v in enumerate(verbs) if v[0] == "evict")
    first_real = next(i for i, v in enumerate(verbs) if v[0] == "evict" and not v[3])
    # The plan's record (evicted-for on both victims) comes first, then the dry-runs, then the
    # cooldown stamp on A's PodGroup, and only then any eviction.
    assert {v[2] for v in verbs[:first_evict] if v[1] == "pods"} == {"a-worker-4", "a-worker-5"}
    assert ("patch-merge", "podgroups", "a", False) in verbs[first_evict:first_real]
    evicts = [v for v in verbs if v[0] == "evict"]
    assert [v[3] for v in evicts] == [True, True, False, False]  # all dry-runs, then the real ones
    pg = kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"]
    assert pg[LAST] == b.ts(b.NOW) and pg["volcano-elastic.io/last-scale-direction"] == "down"
    assert pod(kube, "a-worker-5")["metadata"]["annotations"][EVICTED_FOR] == "team-b/b"
    assert pod(kube, "a-worker-5")["metadata"].get("deletionTimestamp")
    events = {(e["involvedObject"]["kind"], e["reason"]): e["message"] for e in kube.of(EVENTS)}
    assert "team-b/b" in events[("Pod", "EvictedForGang")]
    assert "team-b/b" in events[("PyTorchJob", "ScaledDown")]
    # the job heard of it before its pods went (issue 40: the victim's side)
    said = events[("PyTorchJob", "ScalingDown")]
    assert "a-worker-4, a-worker-5" in said and "team-b/b" in said
    scaling = {e["metadata"]["name"] for e in kube.of(EVENTS) if e["reason"] == "ScalingDown"}
    told = next(i for i, c in enumerate(kube.calls) if c[:2] == ("create", "events") and c[3] in scaling)
    gone = next(i for i, c in enumerate(kube.calls) if c[0] == "evict" and not c[4])
    assert told < gone


def test_a_pdb_on_one_victim_stops_the_whole_plan() -> None:
    kube, agent = make(world())
    kube.pdb_blocked.add("team-a/a-worker-4")
    report = agent.run_cycle()
    assert report.evicted == [] and "pdb" in report.failed["team-b/b"]
    assert not kube.verbs("evict", dry_run=False)
    # Undone: no cooldown for A, no ledger mark on the victims.
    assert LAST not in (kube.get(PODGROUPS, "a", "team-a")["metadata"].get("annotations") or {})
    for name in ("a-worker-4", "a-worker-5"):
        assert EVICTED_FOR not in pod(kube, name)["metadata"]["annotations"]
    assert agent.pdb_refused == {"team-a/a-worker-4": b.NOW}


def test_a_pod_a_pdb_protects_is_no_victim_next_cycle() -> None:
    """Issue 18 (e): the refused plan is not made again; the next cycle takes another worker and
    the gang's plan completes, the PDB's pod untouched."""
    kube, agent = make(world())
    kube.pdb_blocked.add("team-a/a-worker-4")
    first = agent.run_cycle()
    assert "team-a/a-worker-4" in first.plan.starving[0].victims and "pdb" in first.failed["team-b/b"]
    second = agent.run_cycle()
    assert second.failed == {}
    assert sorted(second.evicted) == ["team-a/a-worker-3", "team-a/a-worker-5"]
    assert "team-a/a-worker-4" not in second.plan.starving[0].victims
    assert not pod(kube, "a-worker-4")["metadata"].get("deletionTimestamp")
    assert [c[3] for c in kube.verbs("evict", dry_run=False)] == ["a-worker-5", "a-worker-3"]


def test_a_pdb_refusal_is_forgotten_after_a_while() -> None:
    now = [b.NOW]
    kube = fake_kube(world())
    agent = Agent(kube, FakeStore(kube), legacy_config(), EventRecorder(kube), clock=lambda: now[0])
    kube.pdb_blocked.add("team-a/a-worker-4")
    agent.run_cycle()
    assert agent._pdb_refused(now[0]) == {"team-a/a-worker-4"}
    now[0] = b.NOW + timedelta(seconds=PDB_REFUSAL_SECONDS - 1)
    assert agent._pdb_refused(now[0]) == {"team-a/a-worker-4"}
    now[0] = b.NOW + timedelta(seconds=PDB_REFUSAL_SECONDS)
    assert agent._pdb_refused(now[0]) == frozenset() and agent.pdb_refused == {}


def test_terminating_victims_get_no_successors() -> None:
    kube, agent = make(world())
    agent.run_cycle()
    again = agent.run_cycle()
    assert again.evicted == []
    assert again.plan.starving[0].decision == "wait"
    assert len(kube.verbs("evict", dry_run=False)) == 2


class LaggingStore(FakeStore):
    """A cache that has not seen anything since it was frozen."""

    def __init__(self, kube: FakeKube) -> None:
        super().__init__(kube)
        self.frozen = {(r.plural): kube.of(r) for r in KINDS.values()}

    def items(self, res: Resource) -> list[dict[str, Any]]:
        return [dict(o) for o in self.frozen.get(res.plural, [])]

    def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        for o in self.frozen.get(res.plural, []):
            if o["metadata"]["name"] == name and o["metadata"].get("namespace", None) in (namespace, None):
                return o
        return None


def test_ledger_covers_a_lagging_cache() -> None:
    kube = fake_kube(world())
    agent = Agent(kube, LaggingStore(kube), legacy_config(), EventRecorder(kube), clock=lambda: b.NOW)
    agent.run_cycle()
    assert agent.run_cycle().evicted == []  # the cache still shows the victims running
    assert len(kube.verbs("evict", dry_run=False)) == 2


def test_gates_are_lifted_keeping_other_gates() -> None:
    objs = b.items(b.node("n1"), b.queue("default"),
                   b.elastic_job("ns", "j", min_r=2, max_r=4, nodes=["n1"], running=2))
    kube, agent = make(objs)
    p = kube.get(PODS, "j-worker-2", "ns")
    p["spec"]["schedulingGates"].append({"name": "example.com/other"})
    kube.add(PODS, p)
    report = agent.run_cycle()
    assert sorted(report.released) == ["ns/j-worker-2", "ns/j-worker-3"]
    assert kube.get(PODS, "j-worker-2", "ns")["spec"]["schedulingGates"] == [{"name": "example.com/other"}]
    assert "schedulingGates" not in kube.get(PODS, "j-worker-3", "ns")["spec"]
    ann = kube.get(PODGROUPS, "j", "ns")["metadata"]["annotations"]
    assert ann["volcano-elastic.io/last-scale-direction"] == "up" and ann[LAST] == b.ts(b.NOW)
    # one scale event for the job, however many gates: the stamp, then last-decision with the count lifted
    assert len(kube.verbs("patch-merge")) == 2


def test_dry_run_changes_nothing() -> None:
    cfg = ElasticConfig(agent=AgentConfig(dryRun=True))
    kube, agent = make(world(), cfg=cfg)
    report = agent.run_cycle()
    assert [e.pod for e in report.plan.evictions]
    assert report.evicted == []
    assert not [c for c in kube.calls if c[0] in MUTATING or c[0] == "evict"]


@pytest.mark.parametrize("after_real_evictions", [0, 1], ids=["killed-before-evicting", "killed-mid-plan"])
def test_restarted_agent_neither_evicts_twice_nor_forgets_cooldowns(after_real_evictions: int) -> None:
    kube, agent = make(world())
    kill_at(kube, after_real_evictions, lambda verb, res, dry_run: verb == "evict" and not dry_run)
    with pytest.raises(Killed):
        agent.run_cycle()
    kube.faults.clear()
    restarted = Agent(kube, FakeStore(kube), legacy_config(), EventRecorder(kube), clock=lambda: b.NOW)
    restarted.run_cycle()
    restarted.run_cycle()
    real = [c[3] for c in kube.verbs("evict", dry_run=False) if c[3] != "" and c[0] == "evict"]
    assert sorted(set(real)) == ["a-worker-4", "a-worker-5"]
    assert len([c for c in real]) <= 3  # the killed call may have been sent once; never a new victim
    assert kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"][LAST] == b.ts(b.NOW)


def test_interrupted_plan_for_a_gang_that_no_longer_waits_is_unstamped() -> None:
    objs = world()
    kube, agent = make(objs)
    for name in ("a-worker-4", "a-worker-5"):
        p = pod(kube, name)
        p["metadata"]["annotations"][EVICTED_FOR] = "team-b/b"
        kube.add(PODS, p)
    kube.delete(PODGROUPS, "b", "team-b")
    agent.run_cycle()
    assert not kube.verbs("evict", dry_run=False)
    assert EVICTED_FOR not in pod(kube, "a-worker-4")["metadata"]["annotations"]


def test_volcano_preemptions_count_as_scale_events() -> None:
    objs = b.items(b.node("n1"), b.queue("default"),
                   b.pytorchjob("ns", "j", workers=4, min_r=2, max_r=4),
                   b.elastic_job("ns", "j", min_r=2, max_r=4, nodes=["n1"]))
    kube, agent = make(objs)
    at = b.ago(30)
    kube.add(PODS, b.preempted_by_scheduler(kube.get(PODS, "j-worker-3", "ns"), at))
    report = agent.run_cycle()
    assert report.preemptions == ["ns/j-worker-3"]
    ann = kube.get(PODGROUPS, "j", "ns")["metadata"]["annotations"]
    assert ann[LAST] == b.ts(at) and ann["volcano-elastic.io/last-scale-direction"] == "down"
    agent.run_cycle()
    assert len([c for c in kube.verbs("patch-merge") if c[1] == "podgroups"]) == 1


def test_waiting_gang_gets_its_last_decision_once() -> None:
    objs = b.items(b.node("n1", gpus=2), b.queue("default"),
                   b.gang("team-b", "b", members=4, gpus=1))
    kube, agent = make(objs)
    agent.run_cycle()
    agent.run_cycle()
    ann = kube.get(PODGROUPS, "b", "team-b")["metadata"]["annotations"]
    assert "waiting" in ann["volcano-elastic.io/last-decision"]
    assert len(kube.verbs("patch-merge")) == 1


def test_api_errors_on_stamping_abort_the_plan_cleanly() -> None:
    kube, agent = make(world())
    kube.faults.append(raise_on("patch-merge", "pods", "a-worker-5", error=KubeError("boom", 500)))
    report = agent.run_cycle()
    assert report.evicted == [] and "team-b/b" in report.failed
    assert LAST not in kube.get(PODGROUPS, "a", "team-a")["metadata"].get("annotations", {})


def test_snapshot_reuses_parsed_views() -> None:
    _kube, agent = make(world())
    first = agent.snapshot()
    second = agent.snapshot()
    assert all(x is y for x, y in zip(first.pods, second.pods, strict=True))
    assert dataclasses.asdict(first.nodes[0]) == dataclasses.asdict(second.nodes[0])


def test_pdb_error_type_is_ours() -> None:
    kube, _ = make(world())
    kube.pdb_blocked.add("team-a/a-worker-4")
    with pytest.raises(TooManyRequestsError):
        kube.evict("team-a", "a-worker-4", dry_run=True)


def test_a_preempted_pod_already_gone_still_counts() -> None:
    objs = b.items(b.node("n1"), b.queue("default"),
                   b.elastic_job("ns", "j", min_r=2, max_r=4, nodes=["n1"]))
    kube, agent = make(objs)
    at = b.ago(10)
    p = b.preempted_by_scheduler(kube.get(PODS, "j-worker-3", "ns"), at)
    kube.delete(PODS, "j-worker-3", "ns")
    kube.finish_terminations()
    agent.on_event(PODS, "DELETED", p)  # the watch saw it on its way out
    assert agent.run_cycle().preemptions == ["ns/j-worker-3"]
    assert kube.get(PODGROUPS, "j", "ns")["metadata"]["annotations"][LAST] == b.ts(at)


class _RacingStore(FakeStore):
    """An informer that has already seen each evicted pod go (or the operator's replacement come)."""

    def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        obj = super().get(res, name, namespace)
        if res is PODS and obj is not None and obj["metadata"].get("deletionTimestamp"):
            return None
        return obj


def test_each_victim_gets_its_event_even_when_the_informer_already_dropped_it() -> None:
    """The Event names the evicted pod by the uid the plan chose, not by a cache lookup after the
    eviction (under load the watch delivers the deletion first, and the Event was lost)."""
    kube = fake_kube(world())
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.of(PODS)}
    agent = Agent(kube, _RacingStore(kube), legacy_config(), EventRecorder(kube), clock=lambda: b.NOW)
    report = agent.run_cycle()
    assert sorted(report.evicted) == ["team-a/a-worker-4", "team-a/a-worker-5"]
    got = sorted((e["involvedObject"]["name"], e["involvedObject"]["uid"]) for e in kube.of(EVENTS)
                 if e["reason"] == "EvictedForGang")
    assert got == [("a-worker-4", uids["a-worker-4"]), ("a-worker-5", uids["a-worker-5"])]


def held_back_notes(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    """The agent's ``scale-up held back`` log lines since the last call: (level, note)."""
    out = [(r.levelno, r.note) for r in caplog.records  # type: ignore[attr-defined]
           if r.getMessage() == "scale-up held back"]
    caplog.clear()
    return out


def test_plan_notes_are_logged_at_info_when_new(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 19 review: the notes of a plan (growth held back, and why) reach the operator's log: at
    INFO the cycle a note appears, at DEBUG while it repeats (a held job keeps its note for many cycles)."""
    _, agent = make(b.node("n1"), b.queue("default"), b.pytorchjob("team-a", "a", workers=6, min_r=2, max_r=6),
                       b.elastic_job("team-a", "a", min_r=2, max_r=6, nodes=["n1"], running=4))
    caplog.set_level(logging.DEBUG, logger="elastic_controller.agent")

    report = agent.run_cycle()
    (note,) = report.plan.notes
    assert note.startswith("job team-a/a stays at 4 of max 6 workers: 6 fit now, but +50% is below minScaleUpGain")
    assert held_back_notes(caplog) == [(logging.INFO, note)]
    assert report.released == [] and agent.run_cycle().released == []  # a note lifts no gate
    assert held_back_notes(caplog) == [(logging.DEBUG, note)]


def test_a_checkpoint_note_is_not_logged_anew_every_cycle(caplog: pytest.LogCaptureFixture) -> None:
    """Review: the note of a job waiting for its next checkpoint named the checkpoint's age, so its
    text changed every cycle and it was logged at INFO every 5 s for up to a checkpoint interval. It
    names the checkpoint's time: INFO once, then DEBUG, as the clock advances."""
    groups = [b.node("n1"), b.queue("default"), b.pytorchjob("team-a", "a", workers=6, min_r=2, max_r=6),
              b.elastic_job("team-a", "a", min_r=2, max_r=6, nodes=["n1"], running=2)]
    objs = b.items(*groups)
    for obj in objs:
        if obj["kind"] == "PodGroup":
            obj["metadata"].setdefault("annotations", {})["volcano-elastic.io/last-checkpoint-time"] = \
                b.ts(b.ago(3600))
    kube = fake_kube(objs)
    now = [b.NOW]
    agent = Agent(kube, FakeStore(kube), legacy_config(), EventRecorder(kube), clock=lambda: now[0])
    caplog.set_level(logging.DEBUG, logger="elastic_controller.agent")

    report = agent.run_cycle()
    (note,) = report.plan.notes
    assert "its last checkpoint, at " in note and "older than scaleUpAfterCheckpointSeconds 600" in note
    assert held_back_notes(caplog) == [(logging.INFO, note)] and report.released == []
    now[0] = b.NOW + timedelta(seconds=5)
    assert agent.run_cycle().plan.notes == (note,)
    assert held_back_notes(caplog) == [(logging.DEBUG, note)]


def test_the_cycle_log_line_says_where_the_time_before_the_decision_went(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 36: the box's longest cycle spent 9.3 s before its decision with nothing to tell which
    step took it. The cycle's line splits ``before_decide_seconds`` into the repairs, the notices and
    the records checked, and the parts add up to it."""
    _, agent = make(b.node("n1"), b.queue("default"), b.pytorchjob("team-a", "a", workers=6, min_r=2, max_r=6),
                    b.elastic_job("team-a", "a", min_r=2, max_r=6, nodes=["n1"], running=4))
    caplog.set_level(logging.INFO, logger="elastic_controller.agent")
    agent.run_cycle()
    (line,) = [r for r in caplog.records if r.getMessage() == "agent cycle"]
    parts = [getattr(line, f"{k}_seconds") for k in ("repair", "notices", "records")]
    assert all(isinstance(v, float) and v >= 0 for v in parts)
    assert sum(parts) == pytest.approx(line.before_decide_seconds, abs=0.003)  # type: ignore[attr-defined]
