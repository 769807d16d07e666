"""A job's scale stamp is a compare-and-swap (issue 36, F3's gap): a second writer's stamp written
between this agent's read of the PodGroup and its own stamp is never overwritten, and never undone
back to the older value. A write of the PodGroup that leaves its stamp alone (a status update)
only costs a second try.

The second writer is simulated inside the API server: just before this agent's first merge patch of
job a's PodGroup reaches it, another write lands (another agent's stamp, or an unrelated change)."""

from __future__ import annotations

from typing import Any

from elastic_controller.agent import Agent
from elastic_controller.execute.executor import CycleReport
from elastic_controller.kube.errors import KubeError
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore
from elastic_controller.kube.resources import PODGROUPS, PODS, Resource
from elastic_controller.policy import keys
from elastic_controller.policy.contract import ScaleRecord
from tests.harness import builders as b
from tests.harness.fakecluster import fake_kube
from tests.harness.legacy import legacy_config

GANG = "team-b/b"
STAMP_KEYS = (keys.LAST_SCALE_TIME, keys.LAST_SCALE_DIRECTION, keys.LAST_DECISION, keys.SCALE_RECORD)


def world() -> list[Any]:
    """Job a (elastic 2..6, all 6 running) fills n1; gang b needs 4 GPUs and has starved 10 min."""
    return b.items(b.node("n1"), b.queue("default"),
                   b.pytorchjob("team-a", "a", workers=6, min_r=2, max_r=6),
                   b.elastic_job("team-a", "a", min_r=2, max_r=6, nodes=["n1"]),
                   b.gang("team-b", "b", members=4, gpus=1))


def others_stamp() -> dict[str, str]:
    at = b.NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    rec = ScaleRecord("0123456789abcdef", "second-writer", at, "evict", GANG,
                      {"team-a/a-worker-5": ""}, {})
    return {keys.LAST_SCALE_TIME: at, keys.LAST_SCALE_DIRECTION: keys.Direction.DOWN.value,
            keys.LAST_DECISION: "written by the second writer", keys.SCALE_RECORD: rec.encode()}


def before_first_stamp(kube: FakeKube, write: dict[str, Any]) -> list[bool]:
    """Land ``write`` (a merge patch, as another client) on a's PodGroup just before our first merge
    patch of it reaches the server. Returns a flag list: [True] once it landed."""
    landed: list[bool] = []

    def fault(verb: str, res: Resource, ns: str, name: str, dry_run: bool) -> None:
        if landed or verb != "patch-merge" or res is not PODGROUPS or name != "a" or dry_run:
            return
        landed.append(True)  # (before the nested call: it passes through here too)
        kube.patch(PODGROUPS, "a", write, "team-a")

    kube.faults.append(fault)
    return landed


def stamp(kube: FakeKube) -> dict[str, str]:
    ann = kube.get(PODGROUPS, "a", "team-a")["metadata"].get("annotations") or {}
    return {k: ann[k] for k in STAMP_KEYS if k in ann}


def claimed(kube: FakeKube) -> list[str]:
    return sorted(p["metadata"]["name"] for p in kube.of(PODS)
                  if (p["metadata"].get("annotations") or {}).get(keys.EVICTED_FOR) == GANG)


def run(kube: FakeKube) -> CycleReport:
    return Agent(kube, FakeStore(kube), legacy_config(), EventRecorder(kube), clock=lambda: b.NOW,
                 identity="first-writer").run_cycle()


def real_evictions(kube: FakeKube) -> list[str]:
    return [c[3] for c in kube.calls if c[0] == "evict" and not c[4]]


def test_a_stamp_written_in_between_is_not_overwritten() -> None:
    kube = fake_kube(world())
    theirs = others_stamp()
    landed = before_first_stamp(kube, {"metadata": {"annotations": theirs}})
    report = run(kube)
    assert landed == [True]
    # old code: a plain patch, the first writer's stamp replaced the second's and its plan went on
    assert stamp(kube) == theirs
    assert report.evicted == [] and real_evictions(kube) == [], report
    assert report.failed.get(GANG, "").startswith("conflict"), report.failed
    assert claimed(kube) == []  # the plan's own claims are taken back, nothing else


def test_a_stamp_written_in_between_is_not_undone_when_the_plan_fails() -> None:
    # The plan fails after its stamp (every real eviction refused): its undo must not put back the
    # stamp it read (old code: the second writer's stamp, overwritten, was then "restored" to none).
    kube = fake_kube(world())
    theirs = others_stamp()
    before_first_stamp(kube, {"metadata": {"annotations": theirs}})

    def refuse(verb: str, res: Resource, ns: str, name: str, dry_run: bool) -> None:
        if verb == "evict" and not dry_run:
            raise KubeError(f"injected failure on evict {name}", 500)

    kube.faults.append(refuse)
    report = run(kube)
    assert stamp(kube) == theirs
    assert report.evicted == [] and GANG in report.failed


def test_a_write_that_leaves_the_stamp_alone_costs_a_retry_only() -> None:
    # A status update (or any other annotation) between the read and the write moves the
    # resourceVersion: the 409 is met by reading again, the stamp is unchanged, ours is written.
    kube = fake_kube(world())
    landed = before_first_stamp(kube, {"metadata": {"annotations": {"example.com/other": "x"}}})
    report = run(kube)
    assert landed == [True]
    rec = ScaleRecord.decode(stamp(kube).get(keys.SCALE_RECORD))
    assert rec is not None and rec.by == "first-writer" and rec.gang == GANG
    assert sorted(report.evicted) == ["team-a/a-worker-4", "team-a/a-worker-5"], report
    assert ("get", "podgroups", "team-a", "a", False) in kube.calls  # the live object, read after the 409
