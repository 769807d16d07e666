"""The restart counter (issue 29, part 4; issue 36, F2): a scale-down counts one of torchrun's restarts
in ``volcano-elastic.io/restarts-used`` once its first victim is evicted (the PodGroup, then the
copy on the PyTorchJob), never when it is only stamped; a stamp taken back never counted; a
scale-up counts nothing; the count goes on from the PodGroup's, never from the job's copy (T3)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from elastic_controller.execute.evictions import execute_evictions
from elastic_controller.execute.executor import CycleReport, Executor, parse_record
from elastic_controller.execute.gates import execute_releases
from elastic_controller.execute.resume import forget
from elastic_controller.execute.stamps import Preemptions
from elastic_controller.kube.fake import FakeKube
from elastic_controller.kube.resources import PODGROUPS, PODS, PYTORCHJOBS
from elastic_controller.policy import keys
from elastic_controller.policy.actions import Evict, SpendRestart
from elastic_controller.policy.cycle import shrinks
from elastic_controller.policy.decisions import CyclePlan, GateRelease
from elastic_controller.policy.model import Snapshot
from tests.harness import builders as b
from tests.harness.agentworld import make
from tests.harness.executeworld import a_job, evict_action, executor, lifts, store_snapshot, victims
from tests.harness.fakecluster import kill_then_restart, real_writes

USED = keys.RESTARTS_USED


def spy(kube: FakeKube) -> list[tuple[str, str, Any]]:
    """Every patch body sent, as (resource, name, body)."""
    bodies: list[tuple[str, str, Any]] = []
    real = kube.patch

    def patch(res: Any, name: str, body: Any, namespace: str | None = None, **kw: Any) -> dict[str, Any]:
        bodies.append((res.plural, name, body))
        return real(res, name, body, namespace, **kw)

    kube.patch = patch  # type: ignore[method-assign]
    return bodies


def counts(kube: FakeKube) -> tuple[str | None, str | None]:
    """(the PodGroup's count, the PyTorchJob's count) of team-a/a."""
    pg = kube.get(PODGROUPS, "a", "team-a")["metadata"].get("annotations") or {}
    job = kube.get(PYTORCHJOBS, "a", "team-a")["metadata"].get("annotations") or {}
    return pg.get(USED), job.get(USED)


def set_counts(kube: FakeKube, pg: str | None, job: str | None) -> None:
    for res, value in ((PODGROUPS, pg), (PYTORCHJOBS, job)):
        obj = kube.get(res, "a", "team-a")
        ann = obj["metadata"].setdefault("annotations", {})
        ann.pop(USED, None)
        if value is not None:
            ann[USED] = value
        kube.add(res, obj)


def evict(ex: Executor, *pods: str) -> CycleReport:
    report = CycleReport(CyclePlan())
    execute_evictions(ex, evict_action(ex, victims(*pods)), b.NOW, report)
    assert report.failed == {}
    return report


def test_each_shrink_counts_one_restart_once_evicted() -> None:
    kube, ex = executor(a_job())
    bodies = spy(kube)
    evict(ex, "a-worker-4", "a-worker-5")  # two victims of one job: one restart of the job, not two
    assert counts(kube) == ("1", "1")
    written = [(res, body["metadata"]["annotations"]) for res, _, body in bodies
               if res in ("podgroups", "pytorchjobs")]
    # the stamp comes first and counts nothing; the count follows the evictions, marked with the record
    assert [res for res, _ in written] == ["podgroups", "pytorchjobs", "podgroups", "pytorchjobs"]
    assert all(USED not in a for _, a in written[:2]), written
    record = kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"][keys.SCALE_RECORD]
    assert written[2][1] == {USED: "1", keys.RESTART_COUNTED: json.loads(record)["id"]}
    evict(ex, "a-worker-3")
    assert counts(kube) == ("2", "2")


def test_the_count_goes_on_from_the_podgroup_never_the_job() -> None:
    kube, ex = executor(a_job())
    set_counts(kube, None, "99")  # the job's copy is its owner's to write (T3): not read
    evict(ex, "a-worker-5")
    assert counts(kube) == ("1", "1")
    set_counts(kube, "6", "4")
    evict(ex, "a-worker-4")
    assert counts(kube) == ("7", "7")


def test_a_scale_up_counts_nothing() -> None:
    kube, ex = executor(a_job(running=4))
    set_counts(kube, "2", "2")
    report = CycleReport(CyclePlan())
    execute_releases(ex, lifts(GateRelease("team-a/a-worker-4", "team-a/a", "n1", "default", "room")), b.NOW, report)
    assert report.released == ["team-a/a-worker-4"]
    assert kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"][keys.LAST_SCALE_DIRECTION] == "up"
    assert counts(kube) == ("2", "2")  # a regrow gives no restart back, and costs none


def test_undo_takes_the_count_back_only_while_it_is_ours() -> None:
    kube, ex = executor(a_job())
    set_counts(kube, "2", "2")
    before = {"team-a/a": ex.pg_annotations("team-a/a")}
    ours = {keys.LAST_SCALE_TIME: b.ts(b.NOW), keys.LAST_SCALE_DIRECTION: "down", keys.LAST_DECISION: "x",
            USED: ex.spent_restarts("team-a/a")}
    ex.stamp("team-a/a", ours)
    assert ours[USED] == "3" and counts(kube) == ("3", "3")
    ex.undo("team-b/b", before, {"team-a/a": ours}, [])
    assert counts(kube) == ("2", "2")
    # a first count taken back leaves no annotation at all
    set_counts(kube, None, None)
    ours = {keys.LAST_SCALE_TIME: b.ts(b.NOW), keys.LAST_SCALE_DIRECTION: "down", keys.LAST_DECISION: "y",
            USED: ex.spent_restarts("team-a/a")}
    ex.stamp("team-a/a", ours)
    ex.undo("team-b/b", {"team-a/a": {}}, {"team-a/a": ours}, [])
    assert counts(kube) == (None, None)
    # another writer counted meanwhile: its count stays
    ours = {keys.LAST_SCALE_TIME: b.ts(b.NOW), keys.LAST_SCALE_DIRECTION: "down", keys.LAST_DECISION: "z",
            USED: ex.spent_restarts("team-a/a")}
    ex.stamp("team-a/a", ours)
    set_counts(kube, "5", "5")
    ex.undo("team-b/b", {"team-a/a": {}}, {"team-a/a": ours}, [])
    assert counts(kube) == ("5", "5")


def test_the_writer_counts_no_restart_itself() -> None:
    """Whether a shrink spends a restart is the decision's (``SpendRestart``): a recordless scale-down
    stamp (Volcano's preemption) without its count is refused before any write, and so is a plan's
    stamp (one with a scale record) that carries one: a plan's restart is counted once it happened."""
    kube, ex = executor(a_job())
    with pytest.raises(ValueError, match="carries no "):
        ex.stamp("team-a/a", {keys.LAST_SCALE_TIME: b.ts(b.NOW), keys.LAST_SCALE_DIRECTION: "down"})
    with pytest.raises(ValueError, match="once it happened"):
        ex.stamp("team-a/a", {keys.LAST_SCALE_TIME: b.ts(b.NOW), keys.LAST_SCALE_DIRECTION: "down", USED: "1",
                              keys.SCALE_RECORD: ex.new_record("evict", "team-b/b", {}, {}, b.ts(b.NOW))})
    assert counts(kube) == (None, None)


def test_two_gangs_shrinking_one_job_in_a_cycle_count_two_restarts() -> None:
    kube, ex = executor(a_job())
    set_counts(kube, "1", "0")
    two = victims("a-worker-5", gang="team-b/b") + victims("a-worker-4", gang="team-c/c")
    actions = shrinks(store_snapshot(ex), ex.cfg, b.NOW, two)
    assert [(a.gang, a.restarts) for a in actions] == [("team-b/b", (SpendRestart("team-a/a", 2),)),
                                                       ("team-c/c", (SpendRestart("team-a/a", 3),))]
    for action in actions:  # each counted once its eviction happened, on its own record
        assert isinstance(action, Evict)
        report = CycleReport(CyclePlan())
        execute_evictions(ex, action, b.NOW, report)
        assert report.failed == {}
    assert counts(kube) == ("3", "3")


def test_a_count_that_changed_since_the_decision_is_not_written() -> None:
    # The writer applies the decided count only while its premise holds (the count it was decided on):
    # else it writes nothing and the next cycle's decision counts the record again.
    kube, ex = executor(a_job())
    action = evict_action(ex, victims("a-worker-5"))
    assert action.restarts == (SpendRestart("team-a/a", 1),)
    set_counts(kube, "4", "4")  # another writer counted meanwhile
    report = CycleReport(CyclePlan())
    execute_evictions(ex, action, b.NOW, report)
    assert report.evicted == ["team-a/a-worker-5"]
    assert counts(kube) == ("4", "4")
    ann = kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"]
    assert keys.RESTART_COUNTED not in ann


def test_forgetting_an_interrupted_plan_counts_nothing() -> None:
    # A plan's stamp counts no restart: dropped after an interruption, its job's budget is untouched.
    kube, ex = executor(a_job())
    set_counts(kube, "2", "2")
    ours = {keys.LAST_SCALE_TIME: b.ts(b.NOW), keys.LAST_SCALE_DIRECTION: "down",
            keys.LAST_DECISION: f"{b.ts(b.NOW)} down: 1 elastic worker(s) evicted to make room for team-b/b",
            keys.SCALE_RECORD: ex.new_record("evict", "team-b/b", {"team-a/a-worker-5": ""}, {}, b.ts(b.NOW))}
    ex.stamp("team-a/a", ours)
    assert counts(kube) == ("2", "2")
    victim = kube.get(PODS, "a-worker-5", "team-a")
    victim["metadata"]["annotations"][keys.EVICTED_FOR] = "team-b/b"
    kube.add(PODS, victim)
    snap = b.snapshot_of(kube.of(PODS), kube.of(PODGROUPS))
    view = next(p for p in snap.pods if p.key == "team-a/a-worker-5")
    forget(ex, "team-b/b", [view], ["team-a/a"], snap, b.NOW, "test")
    ann = kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"]
    assert keys.LAST_SCALE_DIRECTION not in ann  # the stamp was taken back
    assert counts(kube) == ("2", "2")


def test_an_undone_plan_counts_nothing() -> None:
    kube, ex = executor(a_job())
    before = {"team-a/a": ex.pg_annotations("team-a/a")}
    ours = {keys.LAST_SCALE_TIME: b.ts(b.NOW), keys.LAST_SCALE_DIRECTION: "down", keys.LAST_DECISION: "x",
            keys.SCALE_RECORD: ex.new_record("evict", "team-b/b", {"team-a/a-worker-5": ""}, {}, b.ts(b.NOW))}
    ex.stamp("team-a/a", ours)
    ex.undo("team-b/b", before, {"team-a/a": ours}, [])
    assert counts(kube) == (None, None)


def test_a_restart_is_counted_once_per_record() -> None:
    kube, ex = executor(a_job())
    evict(ex, "a-worker-5")
    rec = parse_record(ex.pg_annotations("team-a/a")[keys.SCALE_RECORD])
    assert rec is not None
    assert not ex.count_restart(SpendRestart("team-a/a", 2, rec.id))  # counted already
    assert counts(kube) == ("1", "1")


def test_a_volcano_preemption_counts_a_restart() -> None:
    # A worker Volcano preempted is a dead peer to torchrun like one we evict.
    kube, ex = executor(a_job())
    pod = b.preempted_by_scheduler(kube.get(PODS, "a-worker-5", "team-a"), b.ago(3))
    preemptions = Preemptions()
    assert preemptions.note(pod)
    assert preemptions.count(ex, Snapshot(), b.NOW) == ["team-a/a-worker-5"]
    assert counts(kube) == ("1", "1")


def tight_world() -> list[Any]:
    """test_agent.world() with maxRestarts 2: the plan's one shrink leaves the reserve only, so the
    count it writes makes the job spent for any later plan."""
    return b.items(b.node("n1"), b.queue("default"),
                   b.pytorchjob("team-a", "a", workers=6, min_r=2, max_r=6, max_restarts=2),
                   b.elastic_job("team-a", "a", min_r=2, max_r=6, nodes=["n1"]),
                   b.gang("team-b", "b", members=4, gpus=1))


def _one_plan() -> list[tuple[str, str]]:
    """The (verb, resource) of each write of the plan, in order."""
    kube, agent = make(tight_world())
    agent.run_cycle()
    return [(c[0], c[1]) for c in real_writes(kube)]


PLAN = _one_plan()


@pytest.mark.parametrize("kill_at", range(len(PLAN)))
def test_a_plan_killed_at_any_write_is_finished_and_counted_once(kill_at: int) -> None:
    # Wherever the agent dies, the plan is finished and its one restart counted exactly once (by
    # the plan itself after its evictions, or by the next agent's check of the scale record).
    kube, agent = make(tight_world())
    report, real = kill_then_restart(kube, agent, kill_at)
    assert real == ["a-worker-4", "a-worker-5"], report
    # Killed on the count's copy on the job: the PodGroup's count stands (the copy is for people).
    job_copy_lost = kill_at == max(i for i, w in enumerate(PLAN) if w == ("patch-merge", "pytorchjobs"))
    assert counts(kube) == ("1", None if job_copy_lost else "1")
