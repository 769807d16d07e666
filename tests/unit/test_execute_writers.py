"""The agent's concurrent writers (``execute/writers.py``; issue 36, item 3): one object's writes in
order, different objects' at once, every write fenced, one failed write losing no other, a crash
still a crash. The pool alone, then the scale-up writer against an in-memory API server that answers
each request after a delay and records the order in which requests were sent."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from elastic_controller.agent import Agent
from elastic_controller.execute.executor import NotLeaderError
from elastic_controller.execute.writers import WRITERS, WritePool
from elastic_controller.kube.errors import ConflictError, KubeError
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore, raise_on
from elastic_controller.kube.resources import EVENTS, PODGROUPS, PODS, Resource
from elastic_controller.policy import contract, keys
from elastic_controller.policy.settings import ElasticConfig
from tests.harness import builders as b
from tests.harness.fakecluster import Clock

# ----------------------------------------------------------------------------- the pool


class Trace:
    """What the tasks did, in the order they did it, and how many ran at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[str, int]] = []
        self.running = 0
        self.most = 0

    def task(self, key: str, i: int, seconds: float = 0.02, error: BaseException | None = None) -> Callable[[], int]:
        def run() -> int:
            with self.lock:
                self.running += 1
                self.most = max(self.most, self.running)
            time.sleep(seconds)
            with self.lock:
                self.running -= 1
                self.events.append((key, i))
            if error is not None:
                raise error
            return i
        return run


def test_one_keys_tasks_run_in_order_and_different_keys_at_once() -> None:
    trace = Trace()
    pool = WritePool(4)
    tasks = [(k, trace.task(k, i)) for i in range(3) for k in "abcd"]  # interleaved in the list
    results = pool.run(tasks)
    assert [r.value for r in results] == [i for i in range(3) for _ in "abcd"]  # in the tasks' order
    assert [r.key for r in results] == [k for _ in range(3) for k in "abcd"]
    for k in "abcd":
        assert [i for key, i in trace.events if key == k] == [0, 1, 2]
    assert trace.most > 1  # concurrent
    assert trace.most <= 4  # and bounded


def test_the_pool_never_runs_more_than_its_size() -> None:
    trace = Trace()
    WritePool(3).run([(f"k{i}", trace.task(f"k{i}", i, 0.01)) for i in range(20)])
    assert 1 < trace.most <= 3


def test_a_failed_task_loses_no_other() -> None:
    trace = Trace()
    tasks = [(f"k{i}", trace.task(f"k{i}", i, error=ConflictError("busy", 409) if i == 2 else None))
             for i in range(6)]
    tasks.append(("k2", trace.task("k2", 99)))  # the same object's next write still goes out
    results = WritePool(4).run(tasks)
    assert isinstance(results[2].error, ConflictError)
    assert [r.value for i, r in enumerate(results) if i != 2] == [0, 1, 3, 4, 5, 99]
    assert len(trace.events) == 7


def test_a_lost_lease_stops_every_task_not_started() -> None:
    trace = Trace()
    lost = NotLeaderError("patch pod")
    tasks = [("a", trace.task("a", 0)), ("a", trace.task("a", 1, error=lost)), ("a", trace.task("a", 2)),
             ("b", trace.task("b", 0, seconds=0.2))]
    results = WritePool(1, stops=(NotLeaderError,)).run(tasks)  # one at a time: "b" comes after the loss
    assert results[1].error is lost
    assert [(r.started, r.error is lost) for r in (results[2], results[3])] == [(False, True), (False, True)]
    assert trace.events == [("a", 0), ("a", 1)]


def test_a_lost_lease_stops_the_other_keys_too_when_concurrent() -> None:
    trace = Trace()
    lost = NotLeaderError("lift gate")
    tasks = [("a", trace.task("a", 0, seconds=0.0, error=lost))]
    tasks += [(f"k{i}", trace.task(f"k{i}", i, seconds=0.05)) for i in range(12)]
    results = WritePool(2, stops=(NotLeaderError,)).run(tasks)
    skipped = [r for r in results if not r.started]
    assert skipped and all(r.error is lost for r in skipped)
    assert len(trace.events) == 13 - len(skipped)


class Crash(BaseException):
    pass


def test_a_crash_is_raised_once_the_started_tasks_ended() -> None:
    trace = Trace()
    tasks = [("slow", trace.task("slow", 0, seconds=0.2)), ("boom", trace.task("boom", 0, seconds=0.01, error=Crash()))]
    tasks += [("later", trace.task("later", i)) for i in range(3)]
    with pytest.raises(Crash):
        WritePool(2).run(tasks)
    assert ("slow", 0) in trace.events  # it had started: it ended before the crash was raised
    assert trace.running == 0


def test_a_pool_needs_a_writer() -> None:
    with pytest.raises(ValueError, match="at least one"):
        WritePool(0)


# ----------------------------------------------------------------------------- the scale-up writer


class Recording(FakeKube):
    """Each request answered after ``delay`` seconds (other requests meanwhile), the order they were
    sent in, and the most in flight at once. ``lose_lease_after``: the Lease is lost once that many
    gates were lifted (``leading`` turns False)."""

    def __init__(self, delay: float = 0.02) -> None:
        super().__init__()
        self.delay = delay
        self.sent: list[tuple[str, str, str]] = []  # (verb, plural, ns/name), in the order sent
        self.in_flight = 0
        self.most = 0
        self.leading = True
        self.lose_lease_after: int | None = None
        self.sent_after_loss: list[tuple[str, str, str]] = []

    def _call(self, verb: str, res: Resource, ns: str | None, name: str, dry_run: bool) -> None:
        with self._lock:
            entry = (verb, res.plural, f"{ns}/{name}")
            if not self.leading and verb != "create":
                self.sent_after_loss.append(entry)
            self.sent.append(entry)
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        try:
            time.sleep(self.delay)
            super()._call(verb, res, ns, name, dry_run)
        finally:
            with self._lock:
                self.in_flight -= 1
                if self.lose_lease_after is not None and verb == "patch-strategic" and \
                        sum(1 for v, _, _ in self.sent if v == "patch-strategic") >= self.lose_lease_after:
                    self.leading = False


JOBS = 4  # elastic 2..5, 2 running and 3 gated each, on a node of their own with room for all


def world() -> list[Any]:
    out: list[Any] = [b.queue("default")]
    for j in range(JOBS):
        out += [b.node(f"n{j}"), b.pytorchjob("ns", f"j{j}", workers=5, min_r=2, max_r=5),
                b.elastic_job("ns", f"j{j}", min_r=2, max_r=5, nodes=[f"n{j}"], running=2)]
    return b.items(*out)


def agent_on(kube: Recording, writers: int = WRITERS) -> Agent:
    for obj in world():
        kube.add(kube_resource(obj), obj)
    return Agent(kube, FakeStore(kube), ElasticConfig(), EventRecorder(kube), clock=Clock(),
                 may_write=lambda: kube.leading, writers=writers)


def kube_resource(obj: dict[str, Any]) -> Resource:
    from elastic_controller.kube.resources import NODES, PYTORCHJOBS, QUEUES

    return {"Node": NODES, "Pod": PODS, "PodGroup": PODGROUPS, "Queue": QUEUES, "PyTorchJob": PYTORCHJOBS}[obj["kind"]]


def gated(kube: FakeKube) -> list[str]:
    gate = ElasticConfig().gating.gateName
    return sorted(p["metadata"]["name"] for p in kube.of(PODS)
                  if gate in [g["name"] for g in p["spec"].get("schedulingGates") or []])


def test_scale_up_writes_go_out_at_once_and_each_objects_in_order() -> None:
    kube = Recording()
    report = agent_on(kube).run_cycle()
    assert len(report.released) == 3 * JOBS and gated(kube) == []
    assert kube.most > 1  # concurrent (one after the other before issue 36, item 3)
    for j in range(JOBS):
        pg = [i for i, (v, p, k) in enumerate(kube.sent) if p == "podgroups" and k == f"ns/j{j}"]
        lifts = [i for i, (v, p, k) in enumerate(kube.sent) if v == "patch-strategic" and
                 k.startswith(f"ns/j{j}-worker-")]
        assert len(lifts) == 3 and len(pg) >= 2
        assert pg[0] < min(lifts)  # the stamp before any gate of its job
        assert pg[-1] > max(lifts)  # the final last-decision after all of them
        ann = kube.get(PODGROUPS, f"j{j}", "ns")["metadata"]["annotations"]
        said = contract.Decision.decode(ann[keys.LAST_DECISION])
        assert said is not None and (said.path, said.extra.get("lifted"), said.n) == ("lifted", 3, 3)


def test_the_report_keeps_the_plans_order_whatever_order_the_writes_ended_in() -> None:
    report = agent_on(Recording()).run_cycle()
    assert report.released == [g.pod for g in report.plan.gate_releases]


def test_one_failed_gate_loses_no_other_and_its_job_says_so() -> None:
    kube = Recording()
    agent = agent_on(kube)
    kube.faults.append(raise_on("patch-strategic", "pods", "j1-worker-3", error=KubeError("boom", 500)))
    report = agent.run_cycle()
    assert gated(kube) == ["j1-worker-3"]
    assert len(report.released) == 3 * JOBS - 1
    ann = kube.get(PODGROUPS, "j1", "ns")["metadata"]["annotations"]
    said = contract.Decision.decode(ann[keys.LAST_DECISION])
    assert said is not None and (said.path, said.extra.get("lifted"), said.n) == ("lifted", 2, 3), \
        ann[keys.LAST_DECISION]
    assert any(e["reason"] == "ScaleUpIncomplete" and e["involvedObject"]["name"] == "j1" for e in kube.of(EVENTS))


def test_no_write_after_the_lease_is_lost_beyond_those_already_past_the_fence() -> None:
    kube = Recording(delay=0.03)
    agent = agent_on(kube)
    kube.lose_lease_after = 2
    report = agent.run_cycle()
    assert report.not_leader
    # Writes already fenced when the Lease went may land (at most one per writer); nothing after.
    assert len(kube.sent_after_loss) < WRITERS
    assert 2 <= len(report.released) < 3 * JOBS
    assert len(gated(kube)) == 3 * JOBS - len(report.released)
    # No final last-decision claims the lifts: the next leader says what was lifted (check_records).
    for pg in kube.of(PODGROUPS):
        said = contract.Decision.decode((pg["metadata"].get("annotations") or {}).get(keys.LAST_DECISION))
        assert said is None or said.path != "lifted"


def test_one_writer_is_the_old_order_exactly() -> None:
    kube = Recording(delay=0.0)
    report = agent_on(kube, writers=1).run_cycle()
    assert kube.most == 1 and len(report.released) == 3 * JOBS


# ----------------------------------------------------------------------------- the restart count's CAS


class BehindStore(FakeStore):
    """The cache as it was when made (``freeze``): behind the API server from then on."""

    def __init__(self, kube: FakeKube) -> None:
        super().__init__(kube)
        self.frozen: dict[tuple[str, str, str | None], dict[str, Any]] = {}

    def freeze(self, res: Resource, name: str, namespace: str) -> None:
        self.frozen[(res.plural, name, namespace)] = kube_copy(self.kube.get_cached(res, name, namespace))

    def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        hit = self.frozen.get((res.plural, name, namespace))
        return hit if hit is not None else super().get(res, name, namespace)


def kube_copy(obj: dict[str, Any] | None) -> dict[str, Any]:
    import copy

    assert obj is not None
    return copy.deepcopy(obj)


def counted_world(record: str = "r1") -> tuple[FakeKube, BehindStore, Any]:
    from elastic_controller.execute.executor import Executor, ScaleRecord
    from elastic_controller.execute.metrics import NoMetrics
    from elastic_controller.notice import Notices

    kube = FakeKube()
    rec = ScaleRecord(record, "agent", "2026-01-01T00:00:00Z", "evict", "ns/g", {"ns/j-worker-3": "u"}, {}).encode()
    kube.add(PODGROUPS, {"metadata": {"name": "j", "namespace": "ns", "annotations": {
        keys.SCALE_RECORD: rec, keys.RESTARTS_USED: "1"}}, "spec": {"minMember": 2}})
    store = BehindStore(kube)
    cfg = ElasticConfig()
    recorder = EventRecorder(kube)
    ex = Executor(kube, store, cfg, recorder, metrics=NoMetrics(), notices=Notices(kube, store, cfg, recorder),
                  dry_run=False)
    return kube, store, ex


def test_the_restart_count_on_a_fresh_cache_reads_nothing() -> None:
    from elastic_controller.policy.actions import SpendRestart

    kube, _, ex = counted_world()
    assert ex.count_restart(SpendRestart("ns/j", 2, "r1"))
    assert [c[0] for c in kube.calls] == ["patch-merge"]  # no GET: one round less on the eviction path
    ann = kube.get(PODGROUPS, "j", "ns")["metadata"]["annotations"]
    assert (ann[keys.RESTARTS_USED], ann[keys.RESTART_COUNTED]) == ("2", "r1")


def test_a_cache_behind_is_caught_by_the_precondition_and_the_live_object_decides() -> None:
    from elastic_controller.policy.actions import SpendRestart

    kube, store, ex = counted_world()
    store.freeze(PODGROUPS, "j", "ns")
    kube.patch(PODGROUPS, "j", {"metadata": {"annotations": {"other": "write"}}}, "ns")  # the cache is behind
    assert ex.count_restart(SpendRestart("ns/j", 2, "r1"))
    assert [c[0] for c in kube.calls][-3:] == ["patch-merge", "get", "patch-merge"]  # 409, read, counted
    assert kube.get(PODGROUPS, "j", "ns")["metadata"]["annotations"][keys.RESTARTS_USED] == "2"


def test_a_count_changed_since_is_never_overwritten_whatever_the_cache_says() -> None:
    from elastic_controller.policy.actions import SpendRestart

    kube, store, ex = counted_world()
    store.freeze(PODGROUPS, "j", "ns")  # says restarts-used 1
    kube.patch(PODGROUPS, "j", {"metadata": {"annotations": {keys.RESTARTS_USED: "5"}}}, "ns")
    assert not ex.count_restart(SpendRestart("ns/j", 2, "r1"))
    assert kube.get(PODGROUPS, "j", "ns")["metadata"]["annotations"][keys.RESTARTS_USED] == "5"
    assert keys.RESTART_COUNTED not in kube.get(PODGROUPS, "j", "ns")["metadata"]["annotations"]
