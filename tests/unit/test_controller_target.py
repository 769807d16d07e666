"""The controller announces an elastic job's size to come (``volcano-elastic.io/target-workers``)
on each of its pods that will run torchrun (issue 29): the job kit's rendezvous completes a round
once that many nodes joined. Against the in-memory API."""

from __future__ import annotations

import copy
from typing import Any

from elastic_controller.controller import Controller
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore
from elastic_controller.kube.resources import NODES, PODGROUPS, PODS, PYTORCHJOBS, QUEUES
from elastic_controller.policy import keys
from tests.harness import builders as b
from tests.harness.legacy import legacy_config

GATE = keys.DEFAULT_GATE


def make(*, min_r: int = 2, max_r: int = 4, running: int = 2) -> tuple[FakeKube, Controller]:
    kube = FakeKube()
    kube.add(QUEUES, b.queue("default"))
    kube.add(NODES, b.node("n0"))
    kube.add(PYTORCHJOBS, b.pytorchjob("ns", "j", workers=max_r, min_r=min_r, max_r=max_r))
    for obj in b.elastic_job("ns", "j", min_r=min_r, max_r=max_r, nodes=["n0"], running=running):
        kube.add(PODGROUPS if obj["kind"] == "PodGroup" else PODS, obj)
    ctl = Controller(kube, FakeStore(kube), legacy_config(), EventRecorder(kube))
    for p in kube.of(PODS):
        ctl.on_event(PODS, "ADDED", p)
    while ctl.queue.get(0) is not None:  # drained: only what the test does next is queued
        ctl.queue.done("ns/j")
    return kube, ctl


def targets(kube: FakeKube) -> dict[str, str | None]:
    return {p["metadata"]["name"]: (p["metadata"].get("annotations") or {}).get(keys.TARGET_WORKERS)
            for p in kube.of(PODS)}


def change(kube: FakeKube, ctl: Controller, name: str, edit: Any) -> bool:
    """Edit a pod as the API server would, deliver the event; True when the job was queued."""
    pod = copy.deepcopy(kube.get(PODS, name, "ns"))
    edit(pod)
    kube.add(PODS, pod)
    ctl.on_event(PODS, "MODIFIED", pod)
    queued = ctl.queue.get(0) == "ns/j"
    if queued:
        ctl.queue.done("ns/j")
    return queued


def pod_patches(kube: FakeKube) -> list[str]:
    return [c[3] for c in kube.calls if c[0] == "patch-merge" and c[1] == "pods"]


def test_the_running_pods_learn_the_size_and_follow_a_scale_up_and_a_scale_down() -> None:
    kube, ctl = make()
    ctl.reconcile("ns/j")
    assert targets(kube) == {"j-worker-0": "2", "j-worker-1": "2", "j-worker-2": None, "j-worker-3": None}

    # the agent lifts the gates of workers 2 and 3 (one scale-up): everyone hears 4
    assert change(kube, ctl, "j-worker-2", lambda p: p["spec"].pop("schedulingGates"))
    assert change(kube, ctl, "j-worker-3", lambda p: p["spec"].pop("schedulingGates"))
    ctl.reconcile("ns/j")
    assert set(targets(kube).values()) == {"4"}

    # worker 3 is evicted: the three that stay hear 3; the leaving pod is left alone
    kube.calls.clear()
    assert change(kube, ctl, "j-worker-3", lambda p: p["metadata"].update(deletionTimestamp=b.ts(b.NOW)))
    ctl.reconcile("ns/j")
    assert targets(kube) == {"j-worker-0": "3", "j-worker-1": "3", "j-worker-2": "3", "j-worker-3": "4"}
    assert sorted(pod_patches(kube)) == ["j-worker-0", "j-worker-1", "j-worker-2"]


def test_nothing_is_written_twice_and_status_updates_do_not_wake_the_job() -> None:
    kube, ctl = make()
    ctl.reconcile("ns/j")
    kube.calls.clear()
    ctl.reconcile("ns/j")
    assert pod_patches(kube) == []
    assert not change(kube, ctl, "j-worker-0", lambda p: p["status"].update(podIP="10.0.0.9"))
    assert not change(kube, ctl, "j-worker-3", lambda p: p["metadata"]["labels"].update(x="y"))  # still gated


def test_a_finished_pod_and_a_job_of_fixed_size_are_not_counted() -> None:
    kube, ctl = make(running=4)
    assert change(kube, ctl, "j-worker-3", lambda p: p["status"].update(phase="Failed"))
    ctl.reconcile("ns/j")
    assert targets(kube)["j-worker-0"] == "3" and targets(kube)["j-worker-3"] is None

    fixed, ctl2 = make(min_r=4, max_r=4, running=4)
    ctl2.reconcile("ns/j")
    assert set(targets(fixed).values()) == {None}


def test_a_lost_node_s_pods_and_claimed_victims_are_not_counted() -> None:
    """The policy's rule (``policy/announce.py``, as ``decide``'s ``AnnounceSize``): a pod still Running
    on a node that is not Ready is a ghost, a pod stamped ``evicted-for`` is leaving; neither is told
    nor counted. Before, the controller counted both."""
    kube, ctl = make(running=4)
    ctl.reconcile("ns/j")
    assert set(targets(kube).values()) == {"4"}
    assert change(kube, ctl, "j-worker-3", lambda p: p["metadata"].setdefault("annotations", {}).update(
        {keys.EVICTED_FOR: "ns/gang"}))  # claimed as a victim: the job's size changes
    ctl.reconcile("ns/j")
    assert {k: v for k, v in targets(kube).items() if k != "j-worker-3"} == \
        {"j-worker-0": "3", "j-worker-1": "3", "j-worker-2": "3"}
    node = kube.get(NODES, "n0")
    node["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    kube.add(NODES, node)
    kube.add(NODES, b.node("n1"))
    change(kube, ctl, "j-worker-2", lambda p: p["spec"].update({"nodeName": "n1"}))
    ctl.reconcile("ns/j")
    assert targets(kube)["j-worker-2"] == "1"  # the only pod that will run torchrun: on n1, Ready
