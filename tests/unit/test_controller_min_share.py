"""The controller applies ``elasticMinShare`` (issue 38; ``controller_holds.py``, ``policy/minshare.py``):
a new elastic job whose min set would take its queue's elastic min sets past the key's fraction of the
queue's deserved GPUs gets no PodGroup (an Event and an annotation say why) until they leave room;
rigid jobs and jobs admitted whole are never held; at the default (1) nothing changes."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from elastic_controller.kube.resources import NODES as NODE_OBJECTS
from elastic_controller.kube.resources import PODGROUPS, PODS, PYTORCHJOBS
from elastic_controller.policy import keys
from elastic_controller.policy.minshare import rooms
from elastic_controller.policy.parse import parse_node, parse_queue
from elastic_controller.policy.settings import ElasticConfig, QueuePolicy
from tests.harness import builders as b
from tests.harness.controllerworld import make
from tests.harness.statuscli import _a_kubeconfig, serve, status  # noqa: F401 - the autouse fixture

NODES = [b.node(f"n{i}", gpus=8) for i in range(4)]  # 32 GPUs


def cfg(share: float = 0.5, whole: int = 0) -> ElasticConfig:
    return ElasticConfig(queues={"q": replace(QueuePolicy(), elasticMinShare=share, wholeGangUpTo=whole)})


def jobs() -> list[dict[str, object]]:
    # A: min set 4 x 4 = 16 GPUs, half of q's deserved 32 (the whole cluster: q's request is more);
    # B: min set 2 x 4 = 8 more; C: rigid, 2 x 4.
    return [b.pytorchjob("ns", "a", workers=8, min_r=4, max_r=8, gpus=4, queue="q"),
            b.pytorchjob("ns", "b", workers=4, min_r=2, max_r=4, gpus=4, queue="q"),
            b.pytorchjob("ns", "c", workers=2, gpus=4, queue="q", elastic=False)]


def held_events(rec: object) -> list[dict[str, object]]:
    return [e for e in rec.emitted if e["reason"] == "HeldByMinShare"]  # type: ignore[attr-defined]


def test_a_job_past_the_share_is_held_with_its_reason_and_let_in_once_room_is_left() -> None:
    kube, ctl, rec = make(b.queue("q"), NODES, jobs(), cfg=cfg(0.5))
    assert ctl.reconcile("ns/a").action == "created"  # 16 <= 0.5 x 32
    out = ctl.reconcile("ns/b")
    assert out.action == "held"
    assert kube.get_cached(PODGROUPS, "b", "ns") is None
    want = ("held by elasticMinShare 0.5 of queue q: the min sets of its elastic jobs hold 16 of its 32 deserved "
            "GPUs, and this job's (8 GPUs) would take them past 16")
    assert out.detail.startswith(want), out.detail
    [event] = held_events(rec)
    assert event["type"] == "Normal" and str(event["message"]).startswith(want)
    assert kube.get(PYTORCHJOBS, "b", "ns")["metadata"]["annotations"][keys.HELD] == out.detail
    assert ctl.holds.held() == ["ns/b"]
    # the rigid job of the same queue is never held
    assert ctl.reconcile("ns/c").action == "created"
    # held again (the same reason): no second Event, no second write
    writes = len(kube.calls)
    assert ctl.reconcile("ns/b").action == "held"
    assert len(held_events(rec)) == 1 and len(kube.calls) == writes
    # a PodGroup change wakes the held jobs
    while ctl.queue.get(0) is not None:
        pass
    ctl.on_event(PODGROUPS, "MODIFIED", kube.get(PODGROUPS, "c", "ns"))
    woken = {ctl.queue.get(0), ctl.queue.get(0)}
    assert "ns/b" in woken
    # A ends: B fits (8 <= 16), its PodGroup is created and the annotation removed
    kube.delete(PYTORCHJOBS, "a", "ns")
    assert ctl.reconcile("ns/b").action == "created"
    assert kube.get(PODGROUPS, "b", "ns")["spec"]["minMember"] == 2
    assert keys.HELD not in (kube.get(PYTORCHJOBS, "b", "ns")["metadata"].get("annotations") or {})
    assert ctl.holds.held() == []


def test_a_job_under_the_share_and_a_job_admitted_whole_are_let_in() -> None:
    kube, ctl, rec = make(b.queue("q"), NODES, jobs(), cfg=cfg(0.75))  # 16 + 8 <= 24
    assert [ctl.reconcile(k).action for k in ("ns/a", "ns/b", "ns/c")] == ["created"] * 3
    kube, ctl, rec = make(b.queue("q"), NODES, jobs(), cfg=cfg(0.5, whole=4))  # B (max 4) admitted whole
    assert [ctl.reconcile(k).action for k in ("ns/a", "ns/b", "ns/c")] == ["created"] * 3
    assert kube.get(PODGROUPS, "b", "ns")["spec"]["minMember"] == 4
    assert not held_events(rec)


def test_at_the_default_nothing_is_held_and_the_calls_are_the_same() -> None:
    for share in (1.0, None):
        config = cfg(share) if share is not None else ElasticConfig()
        kube, ctl, rec = make(b.queue("q"), NODES, jobs(), cfg=config)
        assert [ctl.reconcile(k).action for k in ("ns/a", "ns/b", "ns/c")] == ["created"] * 3
        assert [c[0] for c in kube.calls] == ["create"] * 3
        assert not held_events(rec) and ctl.holds.held() == []


def test_deserved_is_the_water_filled_share_of_every_job_asked_for() -> None:
    queues = [parse_queue(b.queue("q")), parse_queue(b.queue("r", weight=3))]
    nodes = [parse_node(n) for n in NODES]
    gpu = keys.GPU
    # both ask for more than the cluster: by weight, 8 and 24
    assert rooms(ElasticConfig(), queues, nodes, {"q": {gpu: 40}, "r": {gpu: 40}}) == {"q": 8.0, "r": 24.0}
    # q asks for 4 only: r gets the rest; a queue asking nothing deserves nothing
    assert rooms(ElasticConfig(), queues, nodes, {"q": {gpu: 4}, "r": {gpu: 40}}) == {"q": 4.0, "r": 28.0}
    # no nodes known: no room, nothing held
    assert rooms(ElasticConfig(), queues, [], {"q": {gpu: 4}}) == {}


def test_two_queues_each_judged_by_its_own_share() -> None:
    # q and r share the cluster: q deserves 16 (its request is more), so its elastic min sets may hold 8
    other = b.pytorchjob("ns", "r1", workers=8, gpus=4, queue="r", elastic=False)
    small = b.pytorchjob("ns", "d", workers=2, min_r=1, max_r=2, gpus=4, queue="q")
    _, ctl, _ = make(b.queue("q"), b.queue("r"), NODES, jobs(), other, small, cfg=cfg(0.5))
    assert ctl.reconcile("ns/b").action == "created"  # 8 <= 8
    out = ctl.reconcile("ns/a")
    assert out.action == "held" and "hold 8 of its 16 deserved GPUs, and this job's (16 GPUs)" in out.detail
    assert ctl.reconcile("ns/d").action == "held"  # 8 + 4 > 8


def test_a_job_is_let_in_when_nothing_of_its_queue_could_leave_room() -> None:
    # A alone in q (4..5 workers of 4 GPUs): q deserves what it asks for, 20, and A's min set (16) is
    # past 0.5 x 20; nothing of q's could leave room, so A is let in (held, it would wait for other jobs
    # to come). With B q asks for 36 and deserves the cluster's 32: B is held (16 + 8 > 16).
    lone = b.pytorchjob("ns", "a", workers=5, min_r=4, max_r=5, gpus=4, queue="q")
    kube, ctl, _ = make(b.queue("q"), NODES, lone, cfg=cfg(0.5))
    assert ctl.reconcile("ns/a").action == "created"
    kube.add(PYTORCHJOBS, b.pytorchjob("ns", "b", workers=4, min_r=2, max_r=4, gpus=4, queue="q"))
    out = ctl.reconcile("ns/b")
    assert out.action == "held" and "hold 16 of its 32 deserved GPUs" in out.detail, out.detail


def test_status_lists_a_held_job_with_its_reason(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    kube, ctl, _ = make(b.queue("q"), NODES, jobs(), cfg=cfg(0.5))
    ctl.reconcile("ns/a")
    reason = ctl.reconcile("ns/b").detail
    items = [o for res in (PYTORCHJOBS, PODGROUPS) for o in kube.of(res)] + [b.queue("q"), *NODES]
    serve(monkeypatch, *items)
    code, out, err = status(capsys, "-o", "json")
    assert code == 0, err
    assert json.loads(out)["heldJobs"] == [{"job": "ns/b", "reason": "HeldByMinShare",
                                                          "message": reason}]
    code, out, _ = status(capsys, "-o", "wide")
    assert code == 0 and "HELD JOBS (1: " in out and f"ns/b  {reason}" in out, out


def test_a_check_parses_each_node_and_pod_once_per_resource_version(monkeypatch: pytest.MonkeyPatch) -> None:
    # At 1,000 nodes a check that parsed every node again cost ~50 ms (bench/minshare_check.py).
    from elastic_controller import controller_holds
    counts = {"node": 0, "pod": 0}

    def counting(name: str, parse: Any) -> Any:
        def wrapped(*args: Any) -> Any:
            counts[name] += 1
            return parse(*args)
        return wrapped

    monkeypatch.setattr(controller_holds, "parse_node", counting("node", controller_holds.parse_node))
    monkeypatch.setattr(controller_holds, "parse_pod", counting("pod", controller_holds.parse_pod))
    kube, ctl, _ = make(b.queue("q"), NODES, jobs(), cfg=cfg(0.5))
    for i in range(4):  # A's min set placed
        kube.add(PODS, b.pod("ns", f"a-worker-{i}", node_name="n0", gpus=4, phase="Running",
                             labels={keys.JOB_NAME_LABEL: "a"}))
    assert ctl.reconcile("ns/a").action == "created"
    assert ctl.reconcile("ns/b").action == "held"
    first = dict(counts)
    assert first["node"] == len(NODES) and first["pod"] == 4
    assert ctl.reconcile("ns/b").action == "held"
    assert counts == first  # nothing changed: nothing parsed again
    node = kube.get(NODE_OBJECTS, "n1")
    node["metadata"]["labels"] = {"changed": "yes"}
    kube.add(NODE_OBJECTS, node)  # a new resourceVersion
    assert ctl.reconcile("ns/b").action == "held"
    assert counts["node"] == first["node"] + 1  # only the changed node
