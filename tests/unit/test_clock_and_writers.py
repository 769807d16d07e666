"""The API server's clock, a second active writer, honest partial scale-ups, the scheduler alarm
(issue 31, items 3 and 4 and the minor points), on the in-memory API and pure parts."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest

from elastic_controller.agent import SCHEDULER_IDLE_SECONDS, Agent
from elastic_controller.cli.status import alarms
from elastic_controller.execute.executor import RESTORE_KEYS, SCALE_KEYS, Executor, NoMetrics
from elastic_controller.kube.clock import SKEW_WARN_SECONDS, ServerClock
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore
from elastic_controller.kube.informer import Informer
from elastic_controller.kube.resources import EVENTS, PODGROUPS, PODS
from elastic_controller.notice import Notices
from elastic_controller.policy import keys
from elastic_controller.policy.parse import format_time, parse_time
from tests.harness import builders as b
from tests.harness.agentworld import evict_world, gate_world
from tests.harness.fakecluster import Clock, fake_kube, load
from tests.harness.legacy import legacy_config

SKEW = 300.0


class Metrics(NoMetrics):
    def __init__(self) -> None:
        self.alarms: dict[str, float] = {}

    def alarm(self, name: str, value: float) -> None:
        self.alarms[name] = value


def skewed_clock(server: datetime, skew: float = SKEW) -> ServerClock:
    """This process's clock ``skew`` seconds ahead of the server's; one answer seen (50 ms round trip)."""
    local = server.timestamp() + skew
    sc = ServerClock(lambda: local)
    sc.observe(format_datetime(server, usegmt=True), local - 0.05, local)
    return sc


# ---------------------------------------------------------------------- the clock
def test_the_offset_is_bounded_by_the_date_headers() -> None:
    server = b.NOW.timestamp()
    t = [server + SKEW]
    sc = ServerClock(lambda: t[0])
    assert sc.now().timestamp() == server + SKEW  # nothing seen: the local clock
    for i in range(10):  # answers at different fractions of the server's second narrow the bounds
        sent = server + SKEW + i * 0.37
        header = format_datetime(datetime.fromtimestamp(int(server + i * 0.37 + 0.01), UTC), usegmt=True)
        sc.observe(header, sent, sent + 0.02)
    t[0] = server + SKEW + 10
    assert abs(sc.skew() - SKEW) < 0.5
    assert sc.now().timestamp() <= server + 10  # never in the server's future
    assert sc.now().timestamp() > server + 10 - 1


def test_a_stepped_clock_resets_the_bounds() -> None:
    sc = ServerClock(lambda: 0.0)
    sc.observe(format_datetime(datetime.fromtimestamp(1000, UTC), usegmt=True), 1000.0, 1000.1)
    sc.observe(format_datetime(datetime.fromtimestamp(1000, UTC), usegmt=True), 700.0, 700.1)  # stepped back 300 s
    assert abs(sc.skew() + 300) < 1


def test_ages_are_judged_against_the_servers_clock() -> None:
    """Item 3: workers 30 s old (minRuntimeSeconds 120) are no victims, though this process's clock says
    330 s; the control run with the local clock evicts them (what the probe saw)."""
    def world() -> list[Any]:
        return b.items(b.node("n1"), b.queue("default"),
                       b.elastic_job("team-a", "a", min_r=2, max_r=6, nodes=["n1"], scheduled_at=b.ago(30)),
                       b.gang("team-b", "b", members=4, gpus=1))

    kube = fake_kube(world())
    metrics = Metrics()
    agent = Agent(kube, FakeStore(kube), legacy_config(), EventRecorder(kube), server_clock=skewed_clock(b.NOW),
                  metrics=metrics, self_ref={"kind": "Lease", "namespace": "kube-system", "name": "ve"})
    report = agent.run_cycle()
    assert report.evicted == [] and abs(report.clock_skew - SKEW) < 1.1
    assert metrics.alarms["clock_skew_seconds"] > SKEW_WARN_SECONDS
    reasons = [e["reason"] for e in kube.of(EVENTS)]
    assert reasons.count("ClockSkew") == 1 and "EvictedForGang" not in reasons, reasons  # (+ GangWaiting)
    control = fake_kube(world())
    local = b.NOW + timedelta(seconds=SKEW)
    assert Agent(control, FakeStore(control), legacy_config(), EventRecorder(control),
                 clock=lambda: local).run_cycle().evicted != []


def test_stamps_are_never_in_the_servers_future() -> None:
    kube = fake_kube(evict_world())
    agent = Agent(kube, FakeStore(kube), legacy_config(), EventRecorder(kube), server_clock=skewed_clock(b.NOW))
    assert agent.run_cycle().evicted
    stamp = parse_time(kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"][keys.LAST_SCALE_TIME])
    assert stamp is not None and b.NOW - timedelta(seconds=2) <= stamp <= b.NOW


# ---------------------------------------------------------------------- a second writer
def executor(kube: FakeKube, identity: str, metrics: Any = None) -> Executor:
    store = FakeStore(kube)
    cfg = legacy_config()
    rec = EventRecorder(kube)
    ex = Executor(kube, store, cfg, rec, metrics=metrics or NoMetrics(), notices=Notices(kube, store, cfg, rec),
                  dry_run=False, identity=identity)
    ex.started = b.NOW - timedelta(seconds=60)
    return ex


def stamp_of(ex: Executor, job: str, before: dict[str, str]) -> dict[str, str]:
    stamp = format_time(b.NOW)
    return {keys.LAST_SCALE_TIME: stamp, keys.LAST_SCALE_DIRECTION: "down",
            keys.LAST_DECISION: f"{stamp} down: 2 elastic worker(s) evicted to make room for team-b/b",
            keys.SCALE_RECORD: ex.new_record("evict", "team-b/b", {"team-a/a-worker-5": "u5"}, before, stamp)}


def test_an_undo_never_erases_a_stamp_it_did_not_write() -> None:
    """Item 4: two agents write the same stamp in the same second (same text); the loser's undo (its
    eviction failed) leaves the winner's stamp, and the second writer is said."""
    kube = fake_kube(evict_world())
    metrics = Metrics()
    loser, winner = executor(kube, "loser", metrics), executor(kube, "winner")
    before = loser.pg_annotations("team-a/a")
    mine = stamp_of(loser, "team-a/a", before)
    loser.stamp("team-a/a", mine)
    theirs = stamp_of(winner, "team-a/a", loser.pg_annotations("team-a/a"))
    winner.stamp("team-a/a", theirs)
    assert {k: mine[k] for k in SCALE_KEYS} == {k: theirs[k] for k in SCALE_KEYS}  # "a stamp like ours"
    assert not loser.restore_pg("team-a/a", mine, before)
    ann = kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"]
    assert {k: ann.get(k) for k in RESTORE_KEYS} == {k: theirs.get(k) for k in RESTORE_KEYS}
    assert [e["reason"] for e in kube.of(EVENTS)] == ["SecondWriter"]
    assert metrics.alarms["other_writers"] == 1.0


def test_an_undo_restores_its_own_stamp_over_an_earlier_writers() -> None:
    kube = fake_kube(evict_world())
    first, second = executor(kube, "first"), executor(kube, "second")
    theirs = stamp_of(first, "team-a/a", {})
    first.stamp("team-a/a", theirs)
    before = second.pg_annotations("team-a/a")
    mine = stamp_of(second, "team-a/a", before)
    second.stamp("team-a/a", mine)
    assert second.restore_pg("team-a/a", mine, before)
    assert kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"][keys.SCALE_RECORD] == \
        theirs[keys.SCALE_RECORD]


def test_a_restarted_leader_does_not_take_its_predecessor_for_a_second_writer() -> None:
    kube = fake_kube(evict_world())
    clock = Clock()
    Agent(kube, FakeStore(kube), legacy_config(), EventRecorder(kube), clock=clock, identity="old").run_cycle()
    clock.later(20)
    metrics = Metrics()
    Agent(kube, FakeStore(kube), legacy_config(), EventRecorder(kube), clock=clock, identity="new",
          metrics=metrics).run_cycle()
    assert "SecondWriter" not in [e["reason"] for e in kube.of(EVENTS)] and "other_writers" not in metrics.alarms


def test_a_second_active_writer_is_said() -> None:
    """Item 4: a stamp by another identity, newer than our first cycle: an Event, the metric."""
    world = evict_world()
    kube = fake_kube([o for o in world if (o["metadata"].get("namespace") != "team-b")])
    clock = Clock()
    metrics = Metrics()
    ours = Agent(kube, FakeStore(kube), legacy_config(), EventRecorder(kube), clock=clock, identity="ours",
                 metrics=metrics)
    assert ours.run_cycle().evicted == []  # nothing waits yet
    load(kube, [o for o in world if o["metadata"].get("namespace") == "team-b"])
    clock.later(1)
    other = Agent(kube, FakeStore(kube), legacy_config(), EventRecorder(kube), clock=clock, identity="other")
    assert other.run_cycle().evicted
    clock.later(1)
    ours.run_cycle()
    said = [e for e in kube.of(EVENTS) if e["reason"] == "SecondWriter"]
    assert len(said) == 1 and "(other)" in said[0]["message"] and said[0]["involvedObject"]["name"] == "a"
    assert metrics.alarms["other_writers"] == 1.0


# ---------------------------------------------------------------------- honest partial scale-ups
def test_a_scale_up_cut_by_a_lost_lease_says_what_it_lifted() -> None:
    """Minor: the Lease lost after 2 of 3 lifts: ScaledUp says 2 of 3; the next leader's last-decision too."""
    kube = fake_kube(gate_world())
    clock = Clock()
    fences = [0]

    def may_write() -> bool:
        fences[0] += 1
        return fences[0] <= 3  # the stamp (PodGroup; the job's copy goes out with the last-decision), two lifts
    old = Agent(kube, FakeStore(kube), legacy_config(), EventRecorder(kube), clock=clock, may_write=may_write)
    report = old.run_cycle()
    assert report.not_leader and len(report.released) == 2
    scaled = [e["message"] for e in kube.of(EVENTS) if e["reason"] == "ScaledUp"]
    assert len(scaled) == 1 and "2 of 3" in scaled[0]
    clock.later(10)
    Agent(kube, FakeStore(kube), legacy_config(), EventRecorder(kube), clock=clock).run_cycle()
    decision = kube.get(PODGROUPS, "j", "ns")["metadata"]["annotations"][keys.LAST_DECISION]
    # the next leader corrects the record, then (same cycle) publishes the job's cooldown hold over it:
    # either way the PodGroup never keeps the old leader's unfinished "lifting 3"
    assert " up: 2 of 3 gate(s) lifted (interrupted)" in decision or " held (Cooldown)" in decision, decision
    assert "lifting" not in decision, decision


def test_a_full_scale_up_says_how_many_it_lifted() -> None:
    kube = fake_kube(gate_world())
    Agent(kube, FakeStore(kube), legacy_config(), EventRecorder(kube), clock=Clock()).run_cycle()
    decision = kube.get(PODGROUPS, "j", "ns")["metadata"]["annotations"][keys.LAST_DECISION]
    assert " up: 3 gate(s) lifted; " in decision
    assert next(e["message"] for e in kube.of(EVENTS) if e["reason"] == "ScaledUp").startswith(
        "lifted the scale-up gate of 3 ")


# ---------------------------------------------------------------------- the scheduler alarm
def test_gangs_that_fit_while_nothing_is_placed_raise_the_scheduler_alarm() -> None:
    kube = fake_kube(b.items(b.node("n1"), b.queue("default"), b.gang("team-b", "b", members=2, gpus=1)))
    clock = Clock()
    metrics = Metrics()
    agent = Agent(kube, FakeStore(kube), legacy_config(), EventRecorder(kube), clock=clock, metrics=metrics)
    assert agent.run_cycle().scheduler_idle == 0.0
    clock.later(SCHEDULER_IDLE_SECONDS + 5)
    report = agent.run_cycle()
    assert report.scheduler_idle > SCHEDULER_IDLE_SECONDS
    assert metrics.alarms["scheduler_idle_seconds"] > SCHEDULER_IDLE_SECONDS
    assert [e["reason"] for e in kube.of(EVENTS) if e["type"] == "Warning"] == ["SchedulerIdle"]
    kube.patch(PODS, "b-0", {"spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}, "team-b")
    clock.later(5)
    assert agent.run_cycle().scheduler_idle == 0.0  # a pod was placed


# ---------------------------------------------------------------------- stale on a graceful shutdown
class EndingSource:
    """A watch source whose streams end at once (a graceful API-server shutdown) and whose lists
    fail after the first (the server is gone)."""

    def __init__(self) -> None:
        self.lists = 0

    def list(self, res: Any, namespace: str | None = None, *, label_selector: str | None = None,
             field_selector: str | None = None) -> tuple[list[dict[str, Any]], str]:
        from elastic_controller.kube.errors import UnavailableError

        self.lists += 1
        if self.lists > 1:
            raise UnavailableError("connection refused")
        return [], "1"

    def watch(self, res: Any, resource_version: str, namespace: str | None = None, *,
              timeout_seconds: int = 300, label_selector: str | None = None) -> Any:
        time.sleep(1.2)  # an established stream, closed long before its timeoutSeconds
        return iter(())


def test_a_stream_ended_early_marks_the_cache_stale_at_once() -> None:
    inf = Informer(EndingSource(), PODS, min_backoff=0.05, max_backoff=0.1)
    inf.start()
    try:
        assert inf.wait_synced(5)
        deadline = time.monotonic() + 4
        while not inf.stale and time.monotonic() < deadline:
            time.sleep(0.01)
        assert inf.stale
    finally:
        inf.stop(1)


# ---------------------------------------------------------------------- status
@pytest.mark.parametrize("age", [60, 3600])
def test_status_lists_recent_alarms_and_future_stamps(age: int) -> None:
    now = b.NOW
    events = [{"reason": "SecondWriter", "type": "Warning", "lastTimestamp": b.ts(now - timedelta(seconds=age)),
               "involvedObject": {"kind": "PodGroup", "namespace": "team-a", "name": "a"}, "message": "two"}]
    pg = b.podgroup("team-a", "a", 2)
    pg["metadata"].setdefault("annotations", {})[keys.LAST_SCALE_TIME] = b.ts(now + timedelta(seconds=297))
    lines = alarms(events, [pg], now, own_skew=0.0)
    assert any(line.startswith("FutureStamp (PodGroup team-a/a)") for line in lines)
    assert any(line.startswith("SecondWriter") for line in lines) == (age < 900)
    assert any("ClockSkew (this machine)" in line for line in alarms([], [], now, own_skew=SKEW))
