"""The agent publishes its decisions where ``kubectl describe`` shows them (execute/decisions.py): the
PodGroup's ``last-decision`` and one Event per job and change of kind (a hold's reason code, a gang's
outcome), with the annotation as the memory, at a bounded write rate."""

from __future__ import annotations

from datetime import timedelta

from elastic_controller.execute.decisions import REFRESH_SECONDS, kind_of, write_decisions
from elastic_controller.execute.executor import CycleReport
from elastic_controller.kube.resources import EVENTS, PODGROUPS, PODS
from elastic_controller.policy.contract import sentence_of
from elastic_controller.policy.decisions import CyclePlan, GangDecision, HoldNote, HoldReason
from tests.harness import builders as b
from tests.harness.executeworld import DECISION, EVICTED_FOR, a_job, executor, writes

COOL = HoldNote("job team-a/a stays at 4 of max 6 workers: in cooldown until 2026-01-01T12:05:00Z",
                "team-a/a", HoldReason.COOLDOWN, b.ago(-300))
GAIN = HoldNote("job team-a/a stays at 4 of max 6 workers: 5 fit now, but +25% is below minScaleUpGain 1",
                "team-a/a", HoldReason.BELOW_MIN_GAIN)


def stored(kube: object) -> str:
    return str(kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"].get(DECISION, ""))  # type: ignore[attr-defined]


def decision(kube: object) -> str:
    """The stored ``last-decision`` as a person reads it (``contract.sentence_of``)."""
    return sentence_of(stored(kube))


def events(kube: object, reason: str) -> list[dict[str, object]]:
    return [e for e in kube.of(EVENTS) if e["reason"] == reason]  # type: ignore[attr-defined]


def test_a_hold_is_annotated_and_announced_once() -> None:
    kube, ex = executor(a_job(running=4))
    plan = CyclePlan(notes=(COOL,))
    write_decisions(ex, b.decided(plan), CycleReport(plan), b.NOW)
    assert decision(kube) == f"{b.ts(b.NOW)} held (Cooldown): {COOL}"
    (event,) = events(kube, "ScaleUpHeld")
    assert event["message"] == str(COOL) and event["involvedObject"]["kind"] == "PyTorchJob"  # type: ignore[index]
    before = len(writes(kube))
    for s in range(5, 300, 5):  # the next cycles: nothing written, no second Event
        write_decisions(ex, b.decided(plan), CycleReport(plan), b.ago(-s))
    assert len(writes(kube)) == before and len(events(kube, "ScaleUpHeld")) == 1


def test_the_annotation_is_the_memory_across_a_restart() -> None:
    kube, ex = executor(a_job(running=4))
    plan = CyclePlan(notes=(COOL,))
    write_decisions(ex, b.decided(plan), CycleReport(plan), b.NOW)
    _, fresh = executor()  # a new leader: new recorder, same cluster
    fresh.api, fresh.store, fresh.recorder.__dict__["_api"] = ex.api, ex.store, ex.api
    write_decisions(fresh, b.decided(plan), CycleReport(plan), b.ago(-30))
    assert len(events(kube, "ScaleUpHeld")) == 1


def test_a_new_reason_is_a_new_event_new_words_are_rate_bounded() -> None:
    kube, ex = executor(a_job(running=4))
    write_decisions(ex, b.decided(CyclePlan(notes=(GAIN,))), CycleReport(CyclePlan()), b.NOW)
    assert kind_of(stored(kube)) == "held (BelowMinScaleUpGain)"
    reworded = HoldNote(str(GAIN).replace("5 fit", "6 fit").replace("+25%", "+50%"), "team-a/a",
                        HoldReason.BELOW_MIN_GAIN)
    before = len(writes(kube))
    write_decisions(ex, b.decided(CyclePlan(notes=(reworded,))), CycleReport(CyclePlan()), b.ago(-5))
    assert len(writes(kube)) == before  # same reason, new words, within REFRESH_SECONDS: not yet
    later = b.NOW + timedelta(seconds=REFRESH_SECONDS + 1)
    write_decisions(ex, b.decided(CyclePlan(notes=(reworded,))), CycleReport(CyclePlan()), later)
    assert "6 fit now" in decision(kube) and len(events(kube, "ScaleUpHeld")) == 1
    write_decisions(ex, b.decided(CyclePlan(notes=(COOL,))), CycleReport(CyclePlan()), later + timedelta(seconds=5))
    assert kind_of(stored(kube)) == "held (Cooldown)"
    assert sorted(str(e["message"]) for e in events(kube, "ScaleUpHeld")) == sorted([str(GAIN), str(COOL)])


def test_a_plan_in_flight_keeps_its_stamp_text() -> None:
    down = f"{b.ts(b.NOW)} down: 1 elastic worker(s) evicted to make room for team-b/b"
    kube, ex = executor(a_job(running=4))
    pg = kube.get(PODGROUPS, "a", "team-a")
    pg["metadata"]["annotations"][DECISION] = down
    kube.add(PODGROUPS, pg)
    victim = kube.get(PODS, "a-worker-3", "team-a")
    victim["metadata"]["annotations"][EVICTED_FOR] = "team-b/b"
    kube.add(PODS, victim)
    ex.store.put(PODGROUPS, pg)
    snap = b.snapshot_of(kube.of(PODS), kube.of(PODGROUPS))
    plan = CyclePlan(notes=(COOL,))
    write_decisions(ex, b.decided(plan), CycleReport(plan), b.NOW, snap)
    assert decision(kube) == down and not events(kube, "ScaleUpHeld")
    write_decisions(ex, b.decided(plan), CycleReport(plan), b.NOW, None)  # without the plan in flight: written
    assert kind_of(stored(kube)) == "held (Cooldown)"


def test_dry_run_publishes_nothing() -> None:
    kube, ex = executor(a_job(running=4), dry_run=True)
    plan = CyclePlan(notes=(COOL,))
    write_decisions(ex, b.decided(plan), CycleReport(plan), b.NOW)
    assert writes(kube) == [] and not kube.of(EVENTS)


def test_a_gang_gets_one_event_per_outcome() -> None:
    kube, ex = executor(a_job(), b.gang("team-b", "b", members=4, gpus=1))
    plan = CyclePlan(starving=(GangDecision("team-b/b", "default", "wait", "no room yet"),))
    for s in (0, 5, 10):
        write_decisions(ex, b.decided(plan), CycleReport(plan), b.ago(-s))
    assert [e["reason"] for e in kube.of(EVENTS)] == ["GangWaiting"]
    write_decisions(ex, b.decided(plan), CycleReport(plan, failed={"team-b/b": "pdb: refused"}), b.ago(-15))
    assert sorted((e["reason"], e["type"]) for e in kube.of(EVENTS)) == [("GangPlanNotExecuted", "Warning"),
                                                                         ("GangWaiting", "Normal")]


def test_a_long_decision_is_written_once() -> None:
    kube, ex = executor(a_job(), b.gang("team-b", "b", members=4, gpus=1))
    plan = CyclePlan(starving=(GangDecision("team-b/b", "default", "wait", "excluded: " + "x" * 900),))
    write_decisions(ex, b.decided(plan), CycleReport(plan), b.NOW)
    stored = kube.get(PODGROUPS, "b", "team-b")["metadata"]["annotations"][DECISION]
    assert len(stored) == 500
    before = len(writes(kube))
    for s in range(61, 400, 61):  # past REFRESH_SECONDS each time: the same (cut) text is not rewritten
        write_decisions(ex, b.decided(plan), CycleReport(plan), b.ago(-s))
    assert len(writes(kube)) == before
