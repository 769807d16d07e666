"""Independent starving gangs' evictions go out together (issue 36, item 3: at 1,000 nodes a cycle
evicting for 20 gangs wrote for 20.7 s, each gang's ~6 rounds one gang after the other). The cycle's
consecutive ``Evict`` actions go in waves of gangs sharing no victim job, each wave's steps in
lockstep (``execute/evictions.py``). What is kept: two gangs shrinking one job stamp it one after
the other (the later compare-and-swap is over the earlier stamp, the later restart count on the
earlier count); one gang's failure undoes that gang alone; a lost Lease stops the whole plan.

Rounds are counted as the executor's write-pool runs (``WritePool.run``: each is one round of
concurrent requests, the step waiting for its slowest), not as wall time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from elastic_controller.agent import Agent, InjectedFault
from elastic_controller.execute import executor as xr
from elastic_controller.execute.evictions import waves
from elastic_controller.execute.plan import execute_decision
from elastic_controller.execute.resume import PLAN_GRACE_SECONDS
from elastic_controller.kube.errors import ConflictError
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore
from elastic_controller.kube.resources import PODGROUPS, PODS, Resource
from elastic_controller.policy import keys
from elastic_controller.policy.actions import CycleDecision, Evict
from elastic_controller.policy.cycle import shrinks
from elastic_controller.policy.decisions import CyclePlan, Eviction
from elastic_controller.policy.notices import NoticeReview
from tests.harness import builders as b
from tests.harness.executeworld import executor, store_snapshot
from tests.harness.fakecluster import Clock, Killed, fake_kube, kill_at, real_writes
from tests.harness.legacy import legacy_config

NS = "team-a"


def jobs(n: int) -> list[Any]:
    """Jobs j0..j{n-1} (elastic 2..6, all 6 running), each alone on its node."""
    objs: list[Any] = [b.queue("default")]
    for i in range(n):
        objs += [b.node(f"n{i}"), b.pytorchjob(NS, f"j{i}", workers=6, min_r=2, max_r=6),
                 *b.elastic_job(NS, f"j{i}", min_r=2, max_r=6, nodes=[f"n{i}"])]
    return b.items(*objs)


def victim(job: int, worker: int, gang: str) -> Eviction:
    pod = f"j{job}-worker-{worker}"
    return Eviction(f"{NS}/{pod}", f"n{job}", f"{NS}/j{job}", "default", gang, "test", f"uid-{NS}-{pod}")


def decide(ex: xr.Executor, evictions: Sequence[Eviction]) -> CycleDecision:
    """The decision the policy hands the executor for ``evictions`` (one ``Evict`` per gang, in plan
    order, each with the restart its jobs use: ``cycle.shrinks``)."""
    actions = shrinks(store_snapshot(ex), ex.cfg, b.NOW, list(evictions))
    assert all(isinstance(a, Evict) for a in actions)
    return CycleDecision(plan=CyclePlan(), shown=CyclePlan(), notices=NoticeReview(), actions=tuple(actions))


class Rounds:
    """Counts the executor's write-pool runs (rounds) that carry at least one request."""

    def __init__(self, ex: xr.Executor) -> None:
        self.count = 0
        run = ex.pool.run

        def counted(tasks: Sequence[tuple[str, Callable[[], Any]]], after: Any = None) -> Any:
            if tasks:
                self.count += 1
            return run(tasks, after)

        ex.pool.run = counted  # type: ignore[method-assign]


class InFlight:
    """Each pod PATCH takes ``seconds``; records which pods' PATCHes were in flight together."""

    def __init__(self, kube: FakeKube, seconds: float = 0.03) -> None:
        self.seconds = seconds
        self.lock = threading.Lock()
        self.now: set[str] = set()
        self.alongside: dict[str, set[str]] = {}
        kube.faults.append(self.on_call)

    def on_call(self, verb: str, res: Resource, ns: str, name: str, dry_run: bool) -> None:
        if not verb.startswith("patch") or res.plural != PODS.plural:
            return
        with self.lock:
            self.now.add(name)
            for other in self.now:
                self.alongside.setdefault(other, set()).update(self.now - {other})
        time.sleep(self.seconds)
        with self.lock:
            self.now.discard(name)


def real_evictions(kube: FakeKube) -> list[str]:
    return [c[3] for c in kube.calls if c[0] == "evict" and not c[4]]


def pg_annotations(kube: FakeKube, job: str) -> dict[str, str]:
    return dict(kube.get(PODGROUPS, job, NS)["metadata"].get("annotations") or {})


def claims(kube: FakeKube) -> dict[str, str]:
    """Pod name -> the gang its ``evicted-for`` names."""
    out = {}
    for p in kube.of(PODS):
        gang = (p["metadata"].get("annotations") or {}).get(keys.EVICTED_FOR)
        if gang:
            out[p["metadata"]["name"]] = gang
    return out


def run_gangs(n: int) -> tuple[FakeKube, Rounds, xr.CycleReport, InFlight]:
    """``n`` gangs, each evicting two workers of its own job, carried out as one cycle's decision."""
    kube, ex = executor(jobs(n))
    rounds, flight = Rounds(ex), InFlight(kube)
    report = xr.CycleReport(CyclePlan())
    evictions = [victim(i, w, f"team-b/g{i}") for i in range(n) for w in (4, 5)]
    execute_decision(ex, decide(ex, evictions), b.NOW, report)
    return kube, rounds, report, flight


def test_ten_independent_gangs_evict_in_the_rounds_of_one() -> None:
    _, one, alone, _ = run_gangs(1)
    assert sorted(alone.evicted) == [f"{NS}/j0-worker-4", f"{NS}/j0-worker-5"] and alone.failed == {}
    kube, ten, report, flight = run_gangs(10)
    # every gang's path, whole: claimed, stamped, evicted, its job's restart counted
    assert report.failed == {}
    assert sorted(report.evicted) == sorted(f"{NS}/j{i}-worker-{w}" for i in range(10) for w in (4, 5))
    for i in range(10):
        ann = pg_annotations(kube, f"j{i}")
        rec = xr.parse_record(ann.get(keys.SCALE_RECORD))
        assert rec is not None and rec.gang == f"team-b/g{i}" and rec.path == "evict"
        assert ann[keys.LAST_SCALE_DIRECTION] == keys.Direction.DOWN.value
        assert ann.get(keys.RESTARTS_USED) == "1" and ann.get(keys.RESTART_COUNTED) == rec.id
    assert claims(kube) == {f"j{i}-worker-{w}": f"team-b/g{i}" for i in range(10) for w in (4, 5)}
    # one gang's rounds, not ten times as many (one after the other: 10 x)
    assert one.count >= 4  # claims and dry-runs, stamps, evictions, restart counts
    assert ten.count == one.count
    # the claims of different gangs were in flight together
    assert any(other.startswith("j1-") for other in flight.alongside.get("j0-worker-4", set()))


def test_a_gang_sharing_a_victim_job_stamps_after_the_earlier_one() -> None:
    # g0 and g1 both shrink j0; g2 shrinks j1. Waves: [g0, g2], then [g1]. g1's stamp replaces g0's
    # (its record names g0's decision as the one it replaced) and counts on g0's restart count.
    kube, ex = executor(jobs(2))
    rounds = Rounds(ex)
    evictions = [victim(0, 5, "team-b/g0"), victim(0, 4, "team-b/g1"), victim(1, 5, "team-b/g2")]
    decision = decide(ex, evictions)
    assert [[a.gang for a in w] for w in waves(decision.of(Evict))] == \
        [["team-b/g0", "team-b/g2"], ["team-b/g1"]]
    report = xr.CycleReport(CyclePlan())
    execute_decision(ex, decision, b.NOW, report)
    assert report.failed == {}
    assert sorted(report.evicted) == [f"{NS}/j0-worker-4", f"{NS}/j0-worker-5", f"{NS}/j1-worker-5"]
    j0 = pg_annotations(kube, "j0")
    rec = xr.parse_record(j0.get(keys.SCALE_RECORD))
    assert rec is not None and rec.gang == "team-b/g1"
    assert "team-b/g0" in rec.before.get(keys.LAST_DECISION, "")  # the second CAS saw the first's stamp
    assert j0.get(keys.RESTARTS_USED) == "2"  # both gangs' restarts counted, in order
    assert pg_annotations(kube, "j1").get(keys.RESTARTS_USED) == "1"
    # g1's first write (its claim) went out after g0's stamp and count had been written
    patches = [(n, c[1], c[3]) for n, c in enumerate(kube.calls) if c[0].startswith("patch")]
    pg_patches = [n for n, kind, name in patches if kind == "podgroups" and name == "j0"]
    g1_claim = next(n for n, kind, name in patches if kind == "pods" and name == "j0-worker-4")
    assert len([n for n in pg_patches if n < g1_claim]) == 2  # g0's stamp and g0's restart count
    # two waves: twice the rounds of one (not three gangs' worth)
    _, alone_ex = executor(jobs(1))
    alone = Rounds(alone_ex)
    execute_decision(alone_ex, decide(alone_ex, [victim(0, 5, "team-b/g0")]), b.NOW, xr.CycleReport(CyclePlan()))
    assert rounds.count == 2 * alone.count


def test_one_gangs_failed_stamp_leaves_the_other_gangs_evicted() -> None:
    # g1's stamp on j1 meets a 409 every time (another writer keeps changing j1's PodGroup): g1 is
    # reported and undone; g0 and g2, in the same wave, are evicted and stamped as if alone.
    kube, ex = executor(jobs(3))

    def conflict(verb: str, res: Resource, ns: str, name: str, dry_run: bool) -> None:
        if verb.startswith("patch") and res.plural == PODGROUPS.plural and name == "j1":
            raise ConflictError("podgroup j1: the object has been modified", 409, "Conflict")

    kube.faults.append(conflict)
    report = xr.CycleReport(CyclePlan())
    evictions = [victim(i, w, f"team-b/g{i}") for i in range(3) for w in (4, 5)]
    execute_decision(ex, decide(ex, evictions), b.NOW, report)
    assert list(report.failed) == ["team-b/g1"] and report.failed["team-b/g1"].startswith("conflict")
    assert sorted(report.evicted) == sorted(f"{NS}/j{i}-worker-{w}" for i in (0, 2) for w in (4, 5))
    assert not any(p.startswith("j1-") for p in real_evictions(kube))
    assert claims(kube) == {f"j{i}-worker-{w}": f"team-b/g{i}" for i in (0, 2) for w in (4, 5)}  # g1's taken back
    assert keys.SCALE_RECORD not in pg_annotations(kube, "j1")
    for i in (0, 2):
        ann = pg_annotations(kube, f"j{i}")
        assert ann.get(keys.RESTARTS_USED) == "1" and keys.SCALE_RECORD in ann


def test_a_lost_lease_in_a_wave_stops_the_whole_plan() -> None:
    # The Lease is lost once the claims are written: no gang stamps or evicts anything, and the
    # loss is raised (the next leader resumes or drops the claimed plans: execute/resume.py).
    leading = [True]
    kube, ex = executor(jobs(3), leading=leading)

    def lose(verb: str, res: Resource, ns: str, name: str, dry_run: bool) -> None:
        if verb == "evict" and dry_run:
            leading[0] = False

    kube.faults.append(lose)
    report = xr.CycleReport(CyclePlan())
    evictions = [victim(i, w, f"team-b/g{i}") for i in range(3) for w in (4, 5)]
    with pytest.raises(xr.NotLeaderError):
        execute_decision(ex, decide(ex, evictions), b.NOW, report)
    assert real_evictions(kube) == [] and report.evicted == []
    assert all(keys.SCALE_RECORD not in pg_annotations(kube, f"j{i}") for i in range(3))


def test_waves_follow_the_shared_jobs_in_decision_order() -> None:
    def evict(gang: str, *jobs: int) -> Evict:
        return Evict(gang, tuple(victim(j, 5 - k, gang) for k, j in enumerate(jobs)), ())

    # g0-g1 share j1, g1-g2 share j2: a chain of three waves; g3 (j9) and g4 (j8) go in the first
    actions = [evict("g0", 0, 1), evict("g1", 1, 2), evict("g2", 2, 3), evict("g3", 9), evict("g4", 8),
               evict("g5", 0)]
    assert [[a.gang for a in w] for w in waves(actions)] == [["g0", "g3", "g4"], ["g1", "g5"], ["g2"]]
    assert waves([]) == []


# ---------------------------------------------------------------- a crash in a wave, then a new leader

def three_gangs() -> list[Any]:
    """Jobs a0..a2 (elastic 2..6, all running) each fill their node; gangs b0..b2 (4 x 1 GPU) starve:
    the plan evicts 4 workers of a_i for b_i, one wave of three independent gangs."""
    objs: list[Any] = [b.queue("default")]
    for i in range(3):
        objs += [b.node(f"n{i}", gpus=6), b.pytorchjob(NS, f"a{i}", workers=6, min_r=2, max_r=6),
                 *b.elastic_job(NS, f"a{i}", min_r=2, max_r=6, nodes=[f"n{i}"]),
                 *b.gang("team-b", f"b{i}", members=4, gpus=1)]
    return b.items(*objs)


def agent_on(kube: FakeKube, clock: Clock, identity: str) -> Agent:
    return Agent(kube, FakeStore(kube), legacy_config(), EventRecorder(kube), clock=clock, identity=identity)


def left_behind(kube: FakeKube) -> list[str]:
    """What a crash may not leave once a new leader has run a cycle: a job whose eviction stamp names
    pods none of which was evicted (a cooldown of evictions that did not happen), or a pod still
    claimed for a gang and not evicted (a plan neither finished nor dropped)."""
    pods = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in kube.of(PODS)}
    out = []
    for pg in kube.of(PODGROUPS):
        ann = pg["metadata"].get("annotations") or {}
        rec = xr.parse_record(ann.get(keys.SCALE_RECORD))
        if rec is None or rec.path != "evict" or rec.at != ann.get(keys.LAST_SCALE_TIME):
            continue
        if not any(key not in pods or pods[key]["metadata"].get("uid") != uid or
                   pods[key]["metadata"].get("deletionTimestamp") for key, uid in rec.pods.items()):
            out.append(f"cooldown without evictions: {pg['metadata']['name']}")
    for key, p in pods.items():
        meta = p["metadata"]
        if (meta.get("annotations") or {}).get(keys.EVICTED_FOR) and not meta.get("deletionTimestamp"):
            out.append(f"claimed, not evicted: {key}")
    return out


def crash_then_recover(crash: Callable[[FakeKube, Agent], type[BaseException]]) -> tuple[FakeKube, dict[str, str]]:
    """The first agent's cycle crashes (``crash`` arms it); a second agent runs a cycle, and another
    once the plan grace has passed. The world after, and the claims the crash left."""
    kube = fake_kube(three_gangs())
    clock = Clock()
    first = agent_on(kube, clock, "first")
    with pytest.raises(crash(kube, first)):
        first.run_cycle()
    crashed = {p["metadata"]["name"]: p["metadata"]["annotations"][keys.EVICTED_FOR] for p in kube.of(PODS)
               if keys.EVICTED_FOR in (p["metadata"].get("annotations") or {})}
    kube.faults.clear()
    clock.later(xr.RECORD_GRACE_SECONDS + 1)
    second = agent_on(kube, clock, "second")
    second.run_cycle()
    # a plan another writer began is finished at once when every victim still passes, else left to
    # its writer until PLAN_GRACE_SECONDS have passed, then dropped (execute/resume.py)
    clock.later(PLAN_GRACE_SECONDS)
    second.run_cycle()
    return kube, crashed


@pytest.mark.parametrize("step", ["victims-stamped", "jobs-stamped", "evicted-one"])
def test_a_crash_at_a_fault_point_of_a_wave_leaves_every_gangs_plan_finished_or_dropped(step: str) -> None:
    def at_step(kube: FakeKube, agent: Agent) -> type[BaseException]:
        agent.faults = {step: "raise"}
        return InjectedFault

    kube, crashed = crash_then_recover(at_step)
    # every gang of the wave had claimed its victims when the first gang's fault point was reached
    # (one after the other: only b0's four)
    assert sorted(set(crashed.values())) == ["team-b/b0", "team-b/b1", "team-b/b2"] and len(crashed) == 12
    assert left_behind(kube) == []


def writes_of_one_cycle() -> int:
    kube = fake_kube(three_gangs())
    agent_on(kube, Clock(), "first").run_cycle()
    return len(real_writes(kube))


@pytest.mark.parametrize("n", range(writes_of_one_cycle()))
def test_a_crash_at_any_write_of_a_wave_leaves_every_gangs_plan_finished_or_dropped(n: int) -> None:
    def at_write(kube: FakeKube, agent: Agent) -> type[BaseException]:
        kill_at(kube, n)
        return Killed

    kube, _ = crash_then_recover(at_write)
    assert left_behind(kube) == []


def test_a_race_on_one_gangs_first_eviction_stops_that_gang_alone() -> None:
    # g1's first victim was replaced since the dry-run (a 409 on the real eviction): none of g1's
    # other victims is evicted and its claims and stamp are taken back; g0 and g2, in the same run,
    # are evicted whole.
    kube, ex = executor(jobs(3))

    def replaced(verb: str, res: Resource, ns: str, name: str, dry_run: bool) -> None:
        if verb == "evict" and not dry_run and name == "j1-worker-5":
            raise ConflictError("pod j1-worker-5: uid precondition failed", 409, "Conflict")

    kube.faults.append(replaced)
    report = xr.CycleReport(CyclePlan())
    evictions = [victim(i, w, f"team-b/g{i}") for i in range(3) for w in (5, 4, 3)]
    execute_decision(ex, decide(ex, evictions), b.NOW, report)
    assert list(report.failed) == ["team-b/g1"] and report.failed["team-b/g1"].startswith("error after 0 eviction(s)")
    assert [p for p in real_evictions(kube) if p.startswith("j1-")] == ["j1-worker-5"]  # the rest never tried
    assert sorted(report.evicted) == sorted(f"{NS}/j{i}-worker-{w}" for i in (0, 2) for w in (5, 4, 3))
    assert claims(kube) == {f"j{i}-worker-{w}": f"team-b/g{i}" for i in (0, 2) for w in (5, 4, 3)}
    assert keys.SCALE_RECORD not in pg_annotations(kube, "j1") and keys.RESTARTS_USED not in pg_annotations(kube, "j1")


def test_a_pdb_on_one_gangs_victim_fails_that_gang_alone_and_is_remembered() -> None:
    kube, ex = executor(jobs(3))
    kube.pdb_blocked.add(f"{NS}/j2-worker-4")
    report = xr.CycleReport(CyclePlan())
    evictions = [victim(i, w, f"team-b/g{i}") for i in range(3) for w in (5, 4)]
    execute_decision(ex, decide(ex, evictions), b.NOW, report)
    assert list(report.failed) == ["team-b/g2"] and report.failed["team-b/g2"].startswith("pdb")
    assert ex.recent_pdb_refusals(b.NOW) == frozenset({f"{NS}/j2-worker-4"})
    assert sorted(report.evicted) == sorted(f"{NS}/j{i}-worker-{w}" for i in (0, 1) for w in (5, 4))
    assert not any(p.startswith("j2-") for p in real_evictions(kube))
    assert keys.SCALE_RECORD not in pg_annotations(kube, "j2")
    assert set(claims(kube).values()) == {"team-b/g0", "team-b/g1"}  # g2's taken back
