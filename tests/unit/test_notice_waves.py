"""Independent gangs' eviction notices go out together, and so do the due notices' evictions (issue
36, item 3: at 1,000 nodes one cycle gave 10 gangs' notices in 6.6-6.8 s, one gang after the other,
and another evicted its due victims one by one in 5.6 s).

A cycle's consecutive ``GiveNotice`` actions go in the waves of the eviction path (gangs sharing no
victim job), each wave one write-pool run with every gang's writes in their order
(``execute/notices.py``); the due evictions and withdrawals go in one pool run. What is kept: the
writes (annotations, stamps, Events) are those of the one-after-the-other path; two gangs shrinking
one job stamp it one after the other; one gang's failure is that gang's alone.

Each API call but an Event's takes ``LATENCY`` seconds here (``Latency``): a write round is that
long, so the cycle's time in rounds is its wall time over ``LATENCY``."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import pytest

from elastic_controller.agent import Agent
from elastic_controller.config import parse_config
from elastic_controller.execute import executor as xr
from elastic_controller.execute.metrics import NoMetrics
from elastic_controller.execute.notices import act_on_notices, give_notice
from elastic_controller.execute.plan import execute_decision
from elastic_controller.execute.waves import waves
from elastic_controller.kube.errors import ConflictError, KubeError
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore
from elastic_controller.kube.resources import EVENTS, PODGROUPS, PODS, PYTORCHJOBS, Resource
from elastic_controller.notice import Notices
from elastic_controller.policy import keys
from elastic_controller.policy.actions import CycleDecision, GiveNotice
from elastic_controller.policy.cycle import decide, shrinks
from elastic_controller.policy.decisions import CyclePlan, Eviction
from elastic_controller.policy.notices import NoticeReview
from tests.harness import builders as b
from tests.harness.executeworld import store_snapshot
from tests.harness.fakecluster import Clock, Killed, fake_kube, kill_at, real_writes
from tests.harness.legacy import legacy_defaults

NS = "team-a"
NOTICE = 120
CFG = parse_config({"defaults": legacy_defaults({"noticeSeconds": NOTICE})})
LATENCY = 0.05
WORKERS = (4, 5)  # the two victims of each gang (of its own job)


def jobs(n: int) -> list[Any]:
    """Jobs j0..j{n-1} (elastic 2..6, all 6 running), each filling its node; gangs team-b/g0..g{n-1}
    (2 x 1 GPU) wait."""
    objs: list[Any] = [b.queue("default")]
    for i in range(n):
        objs += [b.node(f"n{i}", gpus=6), b.pytorchjob(NS, f"j{i}", workers=6, min_r=2, max_r=6),
                 *b.elastic_job(NS, f"j{i}", min_r=2, max_r=6, nodes=[f"n{i}"]),
                 *b.gang("team-b", f"g{i}", members=2, gpus=1)]
    return b.items(*objs)


def executor(n: int, *, leading: list[bool] | None = None) -> tuple[FakeKube, xr.Executor]:
    kube = fake_kube(jobs(n))
    store, recorder = FakeStore(kube), EventRecorder(kube)
    lease = leading if leading is not None else [True]
    ex = xr.Executor(kube, store, CFG, recorder, metrics=NoMetrics(),
                     notices=Notices(kube, store, CFG, recorder, clock=lambda: b.NOW), dry_run=False,
                     may_write=lambda: lease[0], faults={}, identity="agent-under-test")
    ex.notices.fault = ex.fault
    return kube, ex


def victim(job: int, worker: int, gang: str) -> Eviction:
    pod = f"j{job}-worker-{worker}"
    return Eviction(f"{NS}/{pod}", f"n{job}", f"{NS}/j{job}", "default", gang, "test", f"uid-{NS}-{pod}")


def gangs(n: int) -> list[Eviction]:
    """Gang g{i} takes two workers of job j{i}: ``n`` independent gangs."""
    return [victim(i, w, f"team-b/g{i}") for i in range(n) for w in WORKERS]


def decision(ex: xr.Executor, evictions: Sequence[Eviction]) -> CycleDecision:
    """The decision the policy hands the executor: one ``GiveNotice`` per gang, in plan order."""
    actions = shrinks(store_snapshot(ex), ex.cfg, b.NOW, list(evictions))
    assert actions and all(isinstance(a, GiveNotice) for a in actions)
    return CycleDecision(plan=CyclePlan(), shown=CyclePlan(), notices=NoticeReview(), actions=tuple(actions))


class Latency:
    """Each API call but an Event's takes ``seconds`` (outside the fake's lock, as a real server's
    answer); records, per job, the other jobs whose calls were in flight with one of its own."""

    def __init__(self, kube: FakeKube, seconds: float = LATENCY) -> None:
        self.seconds = seconds
        self.lock = threading.Lock()
        self.now: list[str] = []
        self.alongside: dict[str, set[str]] = {}
        self.most = 0
        kube.faults.append(self.on_call)

    def on_call(self, verb: str, res: Resource, ns: str, name: str, dry_run: bool) -> None:
        if res.plural == EVENTS.plural:
            return
        job = name.split("-")[0]  # j3-worker-4 -> j3, j3 -> j3
        with self.lock:
            self.now.append(job)
            self.most = max(self.most, len(self.now))
            for other in self.now:
                self.alongside.setdefault(other, set()).update(set(self.now) - {other})
        time.sleep(self.seconds)
        with self.lock:
            self.now.remove(job)


def timed(fn: Callable[[], object]) -> float:
    start = time.monotonic()
    fn()
    return time.monotonic() - start


def annotations(kube: FakeKube, res: Resource, name: str) -> dict[str, str]:
    return dict(kube.get(res, name, NS)["metadata"].get("annotations") or {})


def written(kube: FakeKube) -> dict[str, Any]:
    """What the writes left, comparable between two runs: every pod's, PodGroup's and PyTorchJob's
    annotations (scale record ids, random per write, blanked) and the Events (a multiset)."""
    def blank(ann: dict[str, str]) -> dict[str, str]:
        return {k: re.sub(r'"id": ?"[0-9a-f]{16}"|\b[0-9a-f]{16}\b', "ID", v) for k, v in ann.items()}

    objects = {(res.plural, o["metadata"]["name"]): blank(o["metadata"].get("annotations") or {})
               for res in (PODS, PODGROUPS, PYTORCHJOBS) for o in kube.of(res)}
    events = sorted((e["involvedObject"]["name"], e["reason"], e["message"]) for e in kube.of(EVENTS))
    return {"objects": objects, "events": events,
            "deleting": sorted(p["metadata"]["name"] for p in kube.of(PODS) if p["metadata"].get("deletionTimestamp"))}


def one_after_the_other(ex: xr.Executor, d: CycleDecision, report: xr.CycleReport) -> None:
    """The path before the waves: each ``GiveNotice`` alone, in decision order."""
    for a in d.of(GiveNotice):
        give_notice(ex, a, b.NOW, report)


# ---------------------------------------------------------------- giving notices

def test_eight_independent_gangs_give_notice_in_the_time_of_one() -> None:
    def run(n: int) -> tuple[FakeKube, xr.Executor, xr.CycleReport, Latency, float]:
        kube, ex = executor(n)
        latency = Latency(kube)
        report = xr.CycleReport(CyclePlan())
        d = decision(ex, gangs(n))
        return kube, ex, report, latency, timed(lambda: execute_decision(ex, d, b.NOW, report))

    _, _, alone, _, one = run(1)
    assert alone.noticed == {"team-b/g0": [f"{NS}/j0-worker-4", f"{NS}/j0-worker-5"]} and alone.failed == {}
    kube, ex, report, latency, eight = run(xr.WRITERS)
    # every gang's notice, whole: its job stamped (cooldown from the notice), its victims claimed
    assert report.failed == {}
    assert report.noticed == {f"team-b/g{i}": [f"{NS}/j{i}-worker-{w}" for w in WORKERS] for i in range(8)}
    for i in range(8):
        rec = xr.parse_record(annotations(kube, PODGROUPS, f"j{i}").get(keys.SCALE_RECORD))
        assert rec is not None and rec.gang == f"team-b/g{i}" and rec.path == "notice"
        for w in WORKERS:
            ann = annotations(kube, PODS, f"j{i}-worker-{w}")
            assert ann[keys.EVICTED_FOR] == f"team-b/g{i}" and ann[keys.EVICT_AFTER]
    assert len(ex.notices.given) == 16
    # one gang's rounds (its stamp, its job's copy, two dry-runs, two claims: ~6; 7 here with two
    # CPU hogs on the 2-core machine), not eight gangs' (one after the other: ~48): the gangs' writes
    # were in flight together
    rounds_one, rounds_eight = one / LATENCY, eight / LATENCY
    assert rounds_one >= 5
    assert rounds_eight < 2 * rounds_one, (rounds_one, rounds_eight)
    assert latency.most == 8 and latency.alongside["j0"] >= {f"j{i}" for i in range(1, 8)}


def test_gangs_beyond_the_pools_width_take_its_share_of_rounds() -> None:
    # 24 gangs at 8 writers: three gangs' time (~18 rounds; 20 with two CPU hogs), not twenty-four (~147)
    kube, ex = executor(24)
    Latency(kube)
    report = xr.CycleReport(CyclePlan())
    d = decision(ex, gangs(24))
    rounds = timed(lambda: execute_decision(ex, d, b.NOW, report)) / LATENCY
    assert report.failed == {} and len(report.noticed) == 24
    assert rounds < 30, rounds


def test_a_gang_sharing_a_victim_job_gives_notice_after_the_earlier_one() -> None:
    # g0 and g1 both take workers of j0; g2 takes j1's: waves [g0, g2], then [g1]. g1's stamp is
    # written over g0's (its record names g0's decision as the one it replaced).
    kube, ex = executor(2)
    evictions = [victim(0, 5, "team-b/g0"), victim(0, 4, "team-b/g1"), victim(1, 5, "team-b/g2")]
    d = decision(ex, evictions)
    assert [[a.gang for a in w] for w in waves(d.of(GiveNotice))] == [["team-b/g0", "team-b/g2"], ["team-b/g1"]]
    report = xr.CycleReport(CyclePlan())
    execute_decision(ex, d, b.NOW, report)
    assert report.failed == {} and list(report.noticed) == ["team-b/g0", "team-b/g2", "team-b/g1"]
    rec = xr.parse_record(annotations(kube, PODGROUPS, "j0").get(keys.SCALE_RECORD))
    assert rec is not None and rec.gang == "team-b/g1"
    assert "team-b/g0" in rec.before.get(keys.LAST_DECISION, "")  # the second CAS saw the first's stamp
    # g1's first write (its stamp of j0) went out after every write of g0
    writes = [(c[1], c[3]) for c in real_writes(kube)]
    stamps = [n for n, w in enumerate(writes) if w == ("podgroups", "j0")]
    assert len(stamps) == 2 and writes.index(("pods", "j0-worker-5")) < stamps[1]  # g0's claim, then g1's stamp


def conflict_on(name: str, res: Resource = PODGROUPS, verb: str = "patch") -> Callable[..., None]:
    def fault(v: str, r: Resource, ns: str, n: str, dry_run: bool) -> None:
        if v.startswith(verb) and r.plural == res.plural and n == name and not dry_run:
            raise ConflictError(f"{r.plural} {n}: the object has been modified", 409, "Conflict")
    return fault


@pytest.mark.parametrize("how", ["stamp", "claim", "pdb"])
def test_one_gangs_failure_leaves_the_other_gangs_noticed(how: str) -> None:
    # g1 fails (its job's stamp keeps meeting a 409 / the claim of its second victim fails / a PDB
    # refuses its first victim's dry-run): g1 is reported and undone; g0 and g2, in the same wave,
    # are noticed as if alone.
    kube, ex = executor(3)
    Latency(kube, 0.01)
    if how == "stamp":
        kube.faults.append(conflict_on("j1"))
    elif how == "claim":
        kube.faults.append(conflict_on("j1-worker-5", PODS))
    else:
        kube.pdb_blocked.add(f"{NS}/j1-worker-4")
    report = xr.CycleReport(CyclePlan())
    execute_decision(ex, decision(ex, gangs(3)), b.NOW, report)
    assert list(report.failed) == ["team-b/g1"]
    assert report.failed["team-b/g1"].startswith({"stamp": "error", "claim": "error", "pdb": "pdb"}[how])
    assert list(report.noticed) == ["team-b/g0", "team-b/g2"]
    for i in (0, 2):
        assert xr.parse_record(annotations(kube, PODGROUPS, f"j{i}").get(keys.SCALE_RECORD)) is not None
        assert all(annotations(kube, PODS, f"j{i}-worker-{w}").get(keys.EVICTED_FOR) == f"team-b/g{i}"
                   for w in WORKERS)
    # g1's writes taken back: no claim, no stamp of its notice
    assert keys.SCALE_RECORD not in annotations(kube, PODGROUPS, "j1")
    assert not any(keys.EVICTED_FOR in annotations(kube, PODS, f"j1-worker-{w}") for w in WORKERS)
    assert ex.recent_pdb_refusals(b.NOW) == (frozenset({f"{NS}/j1-worker-4"}) if how == "pdb" else frozenset())


@pytest.mark.parametrize("fault", ["none", "stamp", "claim", "pdb"])
def test_the_waves_write_what_one_after_the_other_writes(fault: str) -> None:
    # Same world, same decision (three independent gangs, then a fourth sharing j0 with the first):
    # the annotations, stamps, Events, report and remembered deadlines are those of the old path.
    def run(path: Callable[[xr.Executor, CycleDecision, xr.CycleReport], None]) -> tuple[Any, ...]:
        kube, ex = executor(3)
        if fault == "stamp":
            kube.faults.append(conflict_on("j1"))
        elif fault == "claim":
            kube.faults.append(conflict_on("j2-worker-5", PODS))
        elif fault == "pdb":
            kube.pdb_blocked.add(f"{NS}/j1-worker-4")
        d = decision(ex, [*gangs(3), victim(0, 3, "team-b/g3")])
        report = xr.CycleReport(CyclePlan())
        path(ex, d, report)
        return (written(kube), list(report.failed.items()), list(report.noticed.items()),
                dict(ex.notices.given), sorted(ex.recent_pdb_refusals(b.NOW)))

    waved = run(lambda ex, d, report: execute_decision(ex, d, b.NOW, report))
    serial = run(one_after_the_other)
    assert waved == serial
    assert len(waved[2]) == {"none": 4, "stamp": 3, "claim": 3, "pdb": 3}[fault]


def test_a_lost_lease_stops_the_gangs_not_started_and_is_raised() -> None:
    leading = [False]
    kube, ex = executor(3, leading=leading)
    report = xr.CycleReport(CyclePlan())
    with pytest.raises(xr.NotLeaderError):
        execute_decision(ex, decision(ex, gangs(3)), b.NOW, report)
    assert real_writes(kube) == [] and report.noticed == {}


# ---------------------------------------------------------------- the due notices

def noticed(n: int) -> tuple[FakeKube, xr.Executor]:
    """``n`` gangs' notices given (two victims each), the clock past their deadlines."""
    kube, ex = executor(n)
    report = xr.CycleReport(CyclePlan())
    execute_decision(ex, decision(ex, gangs(n)), b.NOW, report)
    assert len(report.noticed) == n
    return kube, ex


def due_decision(ex: xr.Executor) -> CycleDecision:
    return decide(store_snapshot(ex), ex.cfg, b.NOW + timedelta(seconds=NOTICE + 1), given=ex.notices.given,
                  notices_only=True)


def act(ex: xr.Executor) -> xr.CycleReport:
    report = xr.CycleReport(CyclePlan())
    act_on_notices(ex, store_snapshot(ex), due_decision(ex), b.NOW, report)
    return report


def test_due_victims_are_evicted_in_the_time_of_one() -> None:
    kube, ex = noticed(8)
    assert len(due_decision(ex).notices.due) == 16
    latency = Latency(kube)
    seconds = timed(lambda: act(ex))
    evicted = sorted(c[3] for c in kube.verbs("evict", dry_run=False))
    assert evicted == sorted(f"j{i}-worker-{w}" for i in range(8) for w in WORKERS)
    assert len(ex.ledger) == 16 and ex.notices.given == {}
    # 16 evictions at 8 writers: two rounds (3.5 with two CPU hogs; one after the other: 16)
    assert seconds / LATENCY < 8, seconds / LATENCY
    assert latency.most == 8


def test_a_failed_due_eviction_is_reported_and_stops_no_other() -> None:
    kube, ex = noticed(3)
    kube.pdb_blocked.add(f"{NS}/j1-worker-4")
    kube.faults.append(lambda v, r, ns, n, dry: (_ for _ in ()).throw(KubeError("etcd slow", 500))
                       if v == "evict" and n == "j2-worker-5" else None)
    report = act(ex)
    assert sorted(report.evicted) == sorted(f"{NS}/j{i}-worker-{w}" for i in (0, 1, 2) for w in WORKERS
                                            if (i, w) not in ((1, 4), (2, 5)))
    assert ex.recent_pdb_refusals(b.NOW) == frozenset({f"{NS}/j1-worker-4"})
    # the notices of the two not evicted stay, for the next cycle to try again
    for pod in ("j1-worker-4", "j2-worker-5"):
        assert annotations(kube, PODS, pod)[keys.EVICT_AFTER]
        assert not kube.get(PODS, pod, NS)["metadata"].get("deletionTimestamp")
    assert {u for u in ex.notices.given} == {f"uid-{NS}-j1-worker-4", f"uid-{NS}-j2-worker-5"}


def test_the_due_evictions_write_what_one_after_the_other_writes() -> None:
    def run(pooled: bool) -> tuple[Any, ...]:
        kube, ex = noticed(4)
        kube.pdb_blocked.add(f"{NS}/j3-worker-5")
        review = due_decision(ex).notices
        ex.notices.forget_gone(store_snapshot(ex))
        if pooled:
            act_on_notices(ex, store_snapshot(ex), due_decision(ex), b.NOW, xr.CycleReport(CyclePlan()))
            done = None
        else:
            done = ex.notices.act(review)
        return written(kube), dict(ex.notices.given), done

    waved, serial = run(True), run(False)
    assert waved[:2] == serial[:2]
    assert serial[2] is not None and len(serial[2].evicted) == 7


# ---------------------------------------------------------------- a crash in a wave, then a new leader

def agent_on(kube: FakeKube, clock: Clock, identity: str) -> Agent:
    return Agent(kube, FakeStore(kube), CFG, EventRecorder(kube), clock=clock, identity=identity)


def phantoms(kube: FakeKube) -> list[str]:
    """Jobs stamped with a notice none of whose victims is under it (or gone): a cooldown of a notice
    that was never given."""
    pods = {f"{NS}/{p['metadata']['name']}": p["metadata"] for p in kube.of(PODS)}

    def acted(gang: str, pod: str) -> bool:
        meta = pods.get(pod)
        return meta is None or bool(meta.get("deletionTimestamp")) or \
            (meta.get("annotations") or {}).get(keys.EVICTED_FOR) == gang

    stamps = [(pg["metadata"]["name"], pg["metadata"].get("annotations") or {}) for pg in kube.of(PODGROUPS)]
    records = [(name, xr.parse_record(ann.get(keys.SCALE_RECORD)), ann.get(keys.LAST_SCALE_TIME))
               for name, ann in stamps]
    return [name for name, rec, at in records if rec is not None and rec.path == "notice" and rec.at == at
            and not any(acted(rec.gang, pod) for pod in rec.pods)]


def writes_of_one_cycle() -> int:
    kube = fake_kube(jobs(3))
    report = agent_on(kube, Clock(), "first").run_cycle()
    assert len(report.noticed) == 3
    # the plan puts two workers of j0 under notice for g0, two more for g1, two of j1 for g2: two
    # waves ([g0, g2], then [g1])
    claims = {p["metadata"]["name"]: p["metadata"]["annotations"][keys.EVICTED_FOR] for p in kube.of(PODS)
              if keys.EVICTED_FOR in (p["metadata"].get("annotations") or {})}
    assert sorted(claims.items()) == [("j0-worker-2", "team-b/g1"), ("j0-worker-3", "team-b/g1"),
                                      ("j0-worker-4", "team-b/g0"), ("j0-worker-5", "team-b/g0"),
                                      ("j1-worker-4", "team-b/g2"), ("j1-worker-5", "team-b/g2")]
    return len(real_writes(kube))


@pytest.mark.parametrize("n", range(writes_of_one_cycle()))
def test_a_crash_at_any_write_of_a_notice_wave_leaves_no_cooldown_without_its_notice(n: int) -> None:
    kube = fake_kube(jobs(3))
    clock = Clock()
    kill_at(kube, n)
    with pytest.raises(Killed):
        agent_on(kube, clock, "first").run_cycle()
    kube.faults.clear()
    clock.later(xr.RECORD_GRACE_SECONDS + 1)
    second = agent_on(kube, clock, "second")
    second.run_cycle()
    assert phantoms(kube) == []
    # no claim without its deadline (an immediate plan the notice path never writes)
    assert all(keys.EVICT_AFTER in (p["metadata"].get("annotations") or {}) for p in kube.of(PODS)
               if keys.EVICTED_FOR in (p["metadata"].get("annotations") or {}))
