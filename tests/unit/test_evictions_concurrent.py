"""A gang's evictions: the first victim alone, then the others at once (issue 36, item 3: at 1,000
nodes a cycle evicting 7 pods spent 7 rounds on a loaded API server, one per victim). What is kept:
a failure on the first stops the plan before anything else is evicted; a failure among the others
keeps (and books) what was evicted, and takes back the claims of the pods not evicted and the stamp
of every job none of whose victims was."""

from __future__ import annotations

import threading
import time
from typing import Any

from elastic_controller.execute.evictions import execute_evictions
from elastic_controller.execute.executor import CycleReport
from elastic_controller.kube.errors import ConflictError
from elastic_controller.kube.fake import FakeKube
from elastic_controller.kube.resources import PODGROUPS, PODS, PYTORCHJOBS, Resource
from elastic_controller.policy import keys
from elastic_controller.policy.decisions import CyclePlan, Eviction
from tests.harness import builders as b
from tests.harness.executeworld import evict_action, executor, victims

GANG = "team-b/b"


def two_jobs() -> list[Any]:
    """Jobs a and c (elastic 2..6, all 6 running) on n1 and n2."""
    return b.items(b.node("n1"), b.node("n2"), b.queue("default"),
                   b.pytorchjob("team-a", "a", workers=6, min_r=2, max_r=6),
                   b.elastic_job("team-a", "a", min_r=2, max_r=6, nodes=["n1"]),
                   b.pytorchjob("team-a", "c", workers=6, min_r=2, max_r=6),
                   b.elastic_job("team-a", "c", min_r=2, max_r=6, nodes=["n2"]))


class Evictions:
    """Each real eviction reaching the in-memory server takes ``seconds``; records what overlapped,
    and fails the ones named in ``fail``."""

    def __init__(self, kube: FakeKube, seconds: float = 0.15, fail: tuple[str, ...] = ()) -> None:
        self.seconds, self.fail = seconds, fail
        self.lock = threading.Lock()
        self.in_flight: set[str] = set()
        self.alongside: dict[str, set[str]] = {}  # pod -> the other evictions in flight meanwhile
        self.most = 0
        kube.faults.append(self.on_call)

    def on_call(self, verb: str, res: Resource, ns: str, name: str, dry_run: bool) -> None:
        if verb != "evict" or dry_run:
            return
        with self.lock:
            self.in_flight.add(name)
            self.most = max(self.most, len(self.in_flight))
            for other in self.in_flight:
                self.alongside.setdefault(other, set()).update(self.in_flight - {other})
        time.sleep(self.seconds)
        with self.lock:
            self.in_flight.discard(name)
        if name in self.fail:
            raise ConflictError(f"pod {name}: replaced since the dry-run", 409, "Conflict")


def real_evictions(kube: FakeKube) -> list[str]:
    return [c[3] for c in kube.calls if c[0] == "evict" and not c[4]]


def claimed(kube: FakeKube) -> list[str]:
    return sorted(p["metadata"]["name"] for p in kube.of(PODS)
                  if (p["metadata"].get("annotations") or {}).get(keys.EVICTED_FOR) == GANG)


def stamped(kube: FakeKube, job: str) -> bool:
    ann = kube.get(PODGROUPS, job, "team-a")["metadata"].get("annotations") or {}
    return ann.get(keys.LAST_SCALE_DIRECTION) == keys.Direction.DOWN.value and keys.SCALE_RECORD in ann


def test_after_the_first_eviction_the_others_go_out_at_once() -> None:
    kube, ex = executor(b.items(b.node("n1"), b.queue("default"),
                                b.pytorchjob("team-a", "a", workers=6, min_r=2, max_r=6),
                                b.elastic_job("team-a", "a", min_r=2, max_r=6, nodes=["n1"])))
    names = ("a-worker-2", "a-worker-3", "a-worker-4", "a-worker-5")
    calls = Evictions(kube)
    report = CycleReport(CyclePlan())
    started = time.monotonic()
    execute_evictions(ex, evict_action(ex, victims(*names)), b.NOW, report)
    took = time.monotonic() - started
    assert sorted(report.evicted) == [f"team-a/{n}" for n in names] and report.failed == {}
    first = real_evictions(kube)[0]
    assert first == "a-worker-2" and not calls.alongside.get(first)  # alone
    assert calls.most == 3  # the three others together (old code: 1, one after the other)
    assert took < 4 * calls.seconds  # two rounds of evictions, not four


def test_a_failure_on_the_first_stops_the_rest() -> None:
    kube, ex = executor(b.items(b.node("n1"), b.queue("default"),
                                b.pytorchjob("team-a", "a", workers=6, min_r=2, max_r=6),
                                b.elastic_job("team-a", "a", min_r=2, max_r=6, nodes=["n1"])))
    Evictions(kube, seconds=0.0, fail=("a-worker-3",))
    report = CycleReport(CyclePlan())
    execute_evictions(ex, evict_action(ex, victims("a-worker-3", "a-worker-4", "a-worker-5")), b.NOW, report)
    assert real_evictions(kube) == ["a-worker-3"]  # nothing else evicted
    assert report.evicted == [] and report.failed[GANG].startswith("error after 0 eviction(s)")
    assert claimed(kube) == [] and not stamped(kube, "a")  # all undone
    job = kube.get(PYTORCHJOBS, "a", "team-a")["metadata"].get("annotations") or {}
    assert keys.LAST_SCALE_TIME not in job and keys.SCALE_RECORD not in job  # the copy (sent with the first) too


def test_a_failure_among_the_others_keeps_what_was_evicted_and_undoes_exactly_the_rest() -> None:
    # Victims of two jobs; the first (a's) is evicted, c's only victim fails: a keeps its cooldown (one
    # of its workers left), c's stamp is taken back, and only c's pod loses its claim.
    kube, ex = executor(two_jobs())
    evictions = [Eviction(f"team-a/{job}-worker-{i}", node, f"team-a/{job}", "default", GANG, "test",
                          f"uid-team-a-{job}-worker-{i}")
                 for job, node, i in (("a", "n1", 4), ("a", "n1", 5), ("c", "n2", 5))]
    calls = Evictions(kube, seconds=0.1, fail=("c-worker-5",))
    report = CycleReport(CyclePlan())
    execute_evictions(ex, evict_action(ex, evictions), b.NOW, report)
    assert sorted(report.evicted) == ["team-a/a-worker-4", "team-a/a-worker-5"]
    assert report.failed[GANG].startswith("error after 2 eviction(s)")
    assert calls.alongside.get("a-worker-5") == {"c-worker-5"}  # the others went out together
    assert stamped(kube, "a") and not stamped(kube, "c")
    assert claimed(kube) == ["a-worker-4", "a-worker-5"]  # the evicted keep theirs (the record of what happened)
