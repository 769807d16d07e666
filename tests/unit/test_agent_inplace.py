"""Issue 39: the agent's cycle for a job resized in place (``volcano-elastic.io/resize: in-place``),
against the in-memory API: the writers of ``ShrinkInPlace`` and of an ``AnnounceSize`` with a
generation (``execute/inplace.py``), the leaving victims evicted once they say ``left`` or their wait
ran out, no restart counted, the records and Events saying "in place"."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_controller.agent import Agent
from elastic_controller.config import parse_config
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore
from elastic_controller.kube.resources import EVENTS, PODGROUPS, PODS, Resource
from elastic_controller.policy import contract, keys
from elastic_controller.policy.settings import ElasticConfig
from tests.harness import builders as b
from tests.harness.fakecluster import Clock, fake_kube
from tests.harness.legacy import legacy_config

VICTIMS = ["a-worker-4", "a-worker-5"]
STAYING = ["a-worker-1", "a-worker-2", "a-worker-3"]


def world(*, in_place: bool = True) -> list[Any]:
    """Job A (elastic 2..6, all 6 running, maxRestarts 3) fills n1; gang B needs 2 GPUs, starved."""
    job = b.pytorchjob("team-a", "a", workers=6, min_r=2, max_r=6)
    job["spec"]["elasticPolicy"]["maxRestarts"] = 3
    if in_place:
        job["metadata"].setdefault("annotations", {})[keys.RESIZE] = keys.RESIZE_IN_PLACE
    return b.items(b.node("n1"), b.queue("default"), job,
                   b.elastic_job("team-a", "a", min_r=2, max_r=6, nodes=["n1"]),
                   b.gang("team-b", "b", members=2, gpus=2))


def make(cfg: ElasticConfig | None = None, *, in_place: bool = True
         ) -> tuple[FakeKube, Agent, Clock, list[tuple[str, dict[str, Any]]]]:
    kube = fake_kube(world(in_place=in_place))
    patches: list[tuple[str, dict[str, Any]]] = []
    patch = kube.patch

    def recording(res: Resource, name: str, body: dict[str, Any], ns: str | None = None, **kw: Any) -> Any:
        if res is PODS:
            patches.append((name, dict((body.get("metadata") or {}).get("annotations") or {})))
        return patch(res, name, body, ns, **kw)

    kube.patch = recording  # type: ignore[method-assign]
    clock = Clock()
    agent = Agent(kube, FakeStore(kube), cfg or legacy_config(), EventRecorder(kube), clock=clock)
    return kube, agent, clock, patches


def ann(kube: FakeKube, name: str, ns: str = "team-a") -> dict[str, str]:
    return dict(kube.get(PODS, name, ns)["metadata"].get("annotations") or {})


def pg_ann(kube: FakeKube, name: str, ns: str) -> dict[str, str]:
    return dict(kube.get(PODGROUPS, name, ns)["metadata"].get("annotations") or {})


def real_evictions(kube: FakeKube) -> list[str]:
    return [c[3] for c in kube.verbs("evict") if not c[4]]


def reasons(kube: FakeKube) -> list[str]:
    return [e["reason"] for e in kube.of(EVENTS)]


def left(kube: FakeKube, name: str, generation: int) -> None:
    """What the kit does once the pod's rank has left the group."""
    kube.patch(PODS, name, {"metadata": {"annotations": {keys.LEFT: str(generation)}}}, "team-a")


def announced(kube: FakeKube, agent: Agent, patches: list[tuple[str, dict[str, Any]]]) -> None:
    report = agent.run_cycle()
    assert report.evicted == [] and real_evictions(kube) == []
    assert report.in_place == {"team-b/b"} and report.resized == {"team-a/a": 1}
    for name in VICTIMS:
        a = ann(kube, name)
        assert a[keys.EVICTED_FOR] == "team-b/b" and keys.EVICT_AFTER in a
        assert (a[keys.LEAVING], a[keys.RESIZE_GENERATION], a[keys.TARGET_WORKERS]) == ("1", "1", "4")
        # leaving, the generation and the size in one patch: the kit never sees G without leaving
        assert {keys.LEAVING: "1", keys.RESIZE_GENERATION: "1", keys.TARGET_WORKERS: "4"}.items() <= next(
            p for n, p in patches if n == name and keys.RESIZE_GENERATION in p).items()
    for name in STAYING:
        a = ann(kube, name)
        assert (a[keys.RESIZE_GENERATION], a[keys.TARGET_WORKERS]) == ("1", "4") and keys.LEAVING not in a


def test_a_shrink_in_place_announces_the_event_and_evicts_only_once_the_victims_left() -> None:
    kube, agent, clock, patches = make()
    announced(kube, agent, patches)
    pg = pg_ann(kube, "a", "team-a")
    said = contract.Decision.decode(pg[keys.LAST_DECISION])
    assert said is not None and said.path == "in-place" and said.extra.get("inPlace") is True
    assert "in place" in said.text and keys.LAST_SCALE_TIME in pg
    record = contract.ScaleRecord.decode(pg[keys.SCALE_RECORD])
    assert record is not None and record.path == "in-place"
    gang = contract.Decision.decode(pg_ann(kube, "b", "team-b")[keys.LAST_DECISION])
    assert gang is not None and gang.extra.get("inPlace") is True and "in place" in gang.text
    assert {"ResizingInPlace", "ScalingDownInPlace", "LeavingInPlace"} <= set(reasons(kube))

    clock.later(5)
    agent.run_cycle()
    assert real_evictions(kube) == []  # nobody said it left yet
    left(kube, VICTIMS[0], 1)
    clock.later(5)
    agent.run_cycle()
    assert real_evictions(kube) == [VICTIMS[0]]
    left(kube, VICTIMS[1], 1)
    clock.later(5)
    agent.run_cycle()
    assert sorted(real_evictions(kube)) == sorted(VICTIMS)
    clock.later(5)
    agent.run_cycle()
    assert keys.RESTARTS_USED not in pg_ann(kube, "a", "team-a")  # an in-place shrink restarts nothing


def test_a_victim_that_never_says_it_left_is_evicted_after_its_wait() -> None:
    cfg = parse_config({"defaults": {"inPlaceLeaveSeconds": 30}})
    kube, agent, clock, patches = make(cfg)
    announced(kube, agent, patches)
    clock.later(29)
    agent.run_cycle()
    assert real_evictions(kube) == []
    clock.later(2)
    agent.run_cycle()
    assert sorted(real_evictions(kube)) == sorted(VICTIMS)


def test_a_job_not_in_place_is_evicted_at_once_and_told_no_generation() -> None:
    kube, agent, _, patches = make(in_place=False)
    report = agent.run_cycle()
    assert sorted(real_evictions(kube)) == sorted(VICTIMS) and report.in_place == set()
    assert not any(keys.RESIZE_GENERATION in p or keys.LEAVING in p for _, p in patches)


@pytest.mark.parametrize("pod", VICTIMS)
def test_a_left_stamp_wakes_the_agent(pod: str) -> None:
    kube, agent, _, patches = make()
    announced(kube, agent, patches)
    obj = kube.get(PODS, pod, "team-a")
    assert not agent._left_group(obj)
    left(kube, pod, 1)
    assert agent._left_group(kube.get(PODS, pod, "team-a"))


def test_a_grow_in_place_tells_every_pod_the_next_generation() -> None:
    job = b.pytorchjob("team-a", "a", workers=6, min_r=2, max_r=6)
    job["metadata"].setdefault("annotations", {})[keys.RESIZE] = keys.RESIZE_IN_PLACE
    kube = fake_kube(b.items(b.node("n1"), b.node("n2"), b.queue("default"), job,
                             b.elastic_job("team-a", "a", min_r=2, max_r=6, nodes=["n1"], running=3)))
    for p in kube.of(PODS):  # a job already resized once
        kube.patch(PODS, p["metadata"]["name"], {"metadata": {"annotations": {keys.RESIZE_GENERATION: "2"}}},
                   "team-a")
    agent = Agent(kube, FakeStore(kube), parse_config({"defaults": {"minScaleUpGain": 0}}), EventRecorder(kube),
                  clock=Clock())
    report = agent.run_cycle()
    assert report.released and report.resized == {"team-a/a": 3}
    for name in (*report.released, "team-a/a-worker-1"):
        a = ann(kube, name.rpartition("/")[2])
        assert a[keys.RESIZE_GENERATION] == "3" and a[keys.TARGET_WORKERS] == str(3 + len(report.released))
    said = contract.Decision.decode(pg_ann(kube, "a", "team-a")[keys.LAST_DECISION])
    assert said is not None and said.kind == contract.Kind.UP and said.extra.get("inPlace") is True
    assert "ResizingInPlace" in reasons(kube)
