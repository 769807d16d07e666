"""The agent's cycle as one run of dependent writes (issue 36, item 3: the cycle's p99 at 1,000 nodes
was its scale-ups, each step waiting for the slowest write of every job): a job's gates go out once its
own stamp is answered, its final ``last-decision`` once its own gates are, and the records no action
changes (a held job's note) alongside them. What each write guarantees stays: a job's gates never
before its stamp, never without it; a lost Lease or a crash starts nothing more."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from elastic_controller.agent import Agent
from elastic_controller.execute.writers import WritePool
from elastic_controller.kube.errors import ConflictError
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore, raise_on
from elastic_controller.kube.resources import NODES, PODGROUPS, PODS, PYTORCHJOBS, QUEUES, Resource
from elastic_controller.policy import contract, keys
from elastic_controller.policy.settings import ElasticConfig
from tests.harness import builders as b
from tests.harness.fakecluster import Clock

# ----------------------------------------------------------------------------- the pool's `after`


def test_a_task_starts_once_what_it_waits_for_ended_not_once_every_task_did() -> None:
    started: dict[str, float] = {}
    ended: dict[str, float] = {}
    lock = threading.Lock()

    def task(name: str, seconds: float) -> Callable[[], str]:
        def run() -> str:
            with lock:
                started[name] = time.monotonic()
            time.sleep(seconds)
            with lock:
                ended[name] = time.monotonic()
            return name
        return run

    tasks = [("slow", task("slow", 0.4)), ("a", task("a", 0.02)), ("a-next", task("a-next", 0.02))]
    results = WritePool(4).run(tasks, after=[(), (), (1,)])
    assert [r.value for r in results] == ["slow", "a", "a-next"]
    assert started["a-next"] >= ended["a"]  # after what it waits for
    assert started["a-next"] < ended["slow"]  # and not after what it does not


def test_after_names_earlier_tasks_only() -> None:
    pool = WritePool(2)
    with pytest.raises(ValueError, match="earlier task"):
        pool.run([("a", lambda: 1), ("b", lambda: 2)], after=[(1,), ()])
    with pytest.raises(ValueError, match="for 2 tasks"):
        pool.run([("a", lambda: 1), ("b", lambda: 2)], after=[()])


def test_with_one_writer_after_runs_in_the_order_given() -> None:
    order: list[int] = []
    WritePool(1).run([(k, (lambda i=i: order.append(i))) for i, k in enumerate("abab")], after=[(), (), (1,), (0,)])
    assert order == [0, 1, 2, 3]


# ----------------------------------------------------------------------------- the scale-up


class Slow(FakeKube):
    """Each request answered after ``delay`` seconds (``slow``: longer for one object), with the time
    each was sent and answered."""

    def __init__(self, delay: float = 0.02) -> None:
        super().__init__()
        self.delay = delay
        self.slow: dict[str, float] = {}  # "plural ns/name" -> its requests' delay
        self.log: list[tuple[str, str, str, float, float]] = []  # (verb, plural, ns/name, sent, answered)
        self.leading = True

    def _call(self, verb: str, res: Resource, ns: str | None, name: str, dry_run: bool) -> None:
        sent = time.monotonic()
        try:
            time.sleep(self.slow.get(f"{res.plural} {ns}/{name}", self.delay))
            super()._call(verb, res, ns, name, dry_run)
        finally:
            with self._lock:
                self.log.append((verb, res.plural, f"{ns}/{name}", sent, time.monotonic()))

    def writes(self, plural: str, prefix: str) -> list[tuple[str, float, float]]:
        return sorted((v, s, a) for v, p, k, s, a in self.log if p == plural and k.startswith(prefix)
                      and v.startswith("patch"))


RES = {"Node": NODES, "Pod": PODS, "PodGroup": PODGROUPS, "Queue": QUEUES, "PyTorchJob": PYTORCHJOBS}


def world(jobs: int = 3, held: bool = False) -> list[Any]:
    """``jobs`` elastic jobs 2..5, 2 running and 3 gated, each on a node with room for all; ``held``:
    one more such job in its cooldown (scaled 5 s ago: its growth is held)."""
    out: list[Any] = [b.queue("default")]
    for j in range(jobs):
        out += [b.node(f"n{j}"), b.pytorchjob("ns", f"j{j}", workers=5, min_r=2, max_r=5),
                b.elastic_job("ns", f"j{j}", min_r=2, max_r=5, nodes=[f"n{j}"], running=2)]
    if held:
        out += [b.node("nh"), b.pytorchjob("ns", "held", workers=5, min_r=2, max_r=5),
                b.elastic_job("ns", "held", min_r=2, max_r=5, nodes=["nh"], running=2, last_scale=b.ago(5))]
    return b.items(*out)


def agent_on(kube: Slow, objs: list[Any]) -> Agent:
    for obj in objs:
        kube.add(RES[obj["kind"]], obj)
    return Agent(kube, FakeStore(kube), ElasticConfig(), EventRecorder(kube), clock=Clock(),
                 may_write=lambda: kube.leading)


def test_a_jobs_gates_go_out_once_its_own_stamp_is_answered_not_every_jobs() -> None:
    kube = Slow()
    kube.slow["podgroups ns/j0"] = 0.5  # one job's PodGroup answers slowly (a loaded API server's tail)
    report = agent_on(kube, world()).run_cycle()
    assert len(report.released) == 9
    stamp0 = kube.writes("podgroups", "ns/j0")[0]
    for j in (1, 2):
        stamp = kube.writes("podgroups", f"ns/j{j}")[0]
        gates = kube.writes("pods", f"ns/j{j}-worker-")
        assert len(gates) == 3
        assert min(s for _, s, _ in gates) >= stamp[2]  # after its own stamp was answered
        assert max(s for _, s, _ in gates) < stamp0[2]  # before the slow job's stamp was
    gates0 = kube.writes("pods", "ns/j0-worker-")
    assert min(s for _, s, _ in gates0) >= stamp0[2]  # the slow job's gates after its own stamp


def test_a_jobs_final_decision_goes_out_once_its_own_gates_are_answered() -> None:
    kube = Slow()
    kube.slow["pods ns/j0-worker-4"] = 0.5
    agent_on(kube, world()).run_cycle()
    slow_gate = kube.writes("pods", "ns/j0-worker-4")[0]
    for j in (1, 2):
        pg = kube.writes("podgroups", f"ns/j{j}")
        assert len(pg) == 2  # the stamp, then the final last-decision
        assert max(a for _, _, a in kube.writes("pods", f"ns/j{j}-worker-")) <= pg[1][1] < slow_gate[2]
        ann = kube.get(PODGROUPS, f"j{j}", "ns")["metadata"]["annotations"]
        said = contract.Decision.decode(ann[keys.LAST_DECISION])
        assert said is not None and (said.path, said.extra.get("lifted")) == ("lifted", 3)
    assert kube.writes("podgroups", "ns/j0")[1][1] >= slow_gate[2]  # j0's after all of j0's gates


def test_a_held_jobs_record_goes_out_alongside_the_scale_ups() -> None:
    kube = Slow()
    kube.slow["pods ns/j0-worker-4"] = 0.5
    report = agent_on(kube, world(held=True)).run_cycle()
    assert len(report.released) == 9 and any(h.job == "ns/held" for h in report.plan.notes)
    held = kube.writes("podgroups", "ns/held")
    assert len(held) == 1  # its held note
    ann = kube.get(PODGROUPS, "held", "ns")["metadata"]["annotations"]
    assert kind_of(ann[keys.LAST_DECISION]) == "held (Cooldown)"
    assert held[0][1] < kube.writes("pods", "ns/j0-worker-4")[0][2]  # not after the slowest gate


def kind_of(text: str) -> str:
    d = contract.Decision.decode(text)
    return d.sort if d is not None else ""


def test_a_job_whose_stamp_was_refused_is_not_scaled_and_the_others_are() -> None:
    kube = Slow()
    agent = agent_on(kube, world())
    kube.faults.append(raise_on("patch-merge", "podgroups", "j1", error=ConflictError("changed", 409), times=99))
    report = agent.run_cycle()
    assert sorted(report.released) == sorted(f"ns/j{j}-worker-{i}" for j in (0, 2) for i in (2, 3, 4))
    assert kube.writes("pods", "ns/j1-worker-") == []


def test_a_lease_lost_at_a_stamp_lifts_no_gate_of_that_job() -> None:
    kube = Slow()
    kube.slow["podgroups ns/j1"] = 0.2
    agent = agent_on(kube, world())
    real = kube._call

    def losing(verb: str, res: Resource, ns: str | None, name: str, dry_run: bool) -> None:
        if res.plural == "podgroups" and name == "j1":
            kube.leading = False  # lost while its stamp was in flight: the gates' fence refuses
        real(verb, res, ns, name, dry_run)

    kube._call = losing  # type: ignore[method-assign]
    report = agent.run_cycle()
    assert report.not_leader
    assert kube.writes("pods", "ns/j1-worker-") == []
    for pg in kube.of(PODGROUPS):  # no final last-decision claims lifts that a fence refused
        said = contract.Decision.decode((pg["metadata"].get("annotations") or {}).get(keys.LAST_DECISION))
        if said is not None and said.path == "lifted":
            name = pg["metadata"]["name"]
            assert said.extra.get("lifted") == sum(
                1 for p in kube.of(PODS) if p["metadata"]["name"].startswith(f"{name}-worker-")
                and not p["spec"].get("schedulingGates"))
