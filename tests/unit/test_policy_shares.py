"""Deserved shares per queue (weights, capability, guarantee; spec.deserved and parent queues ignored) and
what counts as a queue's request (gated pods do not; see the shares.py docstring)."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_controller.policy.shares import cluster_capacity, dominant_resource, plan_shares, queue_usage
from tests.harness.builders import node, pod, podgroup, queue, snapshot_of

GPU = "nvidia.com/gpu"
GATE = "volcano-elastic.io/scale-up"


def usage(q: str, running: int = 0, pending: int = 0, gated: int = 0, deleting: int = 0) -> list[dict[str, Any]]:
    """A PodGroup in queue ``q`` with 1-GPU pods: running, pending (ungated), gated, terminating."""
    name = f"pg-{q}"
    objs: list[dict[str, Any]] = [podgroup("ns", name, 1, q)]
    i = 0
    for kind, count in (("run", running), ("pend", pending), ("gate", gated), ("del", deleting)):
        for _ in range(count):
            kw: dict[str, Any] = {}
            if kind in ("run", "del"):
                kw["node_name"] = "n0"
            if kind == "gate":
                kw["gates"] = [GATE]
            if kind == "del":
                kw["deleting"] = True
            objs.append(pod("ns", f"{name}-{i}", group=name, gpus=1, cpu="1", memory="1Gi", **kw))
            i += 1
    return objs


NODES = [node("n0", gpus=8, cpu="1000", memory="10000Gi", pods=1000),
         node("n1", gpus=8, cpu="1000", memory="10000Gi", pods=1000)]


def deserved_gpus(*groups: Any, volcano_view: bool = False) -> dict[str, int]:
    snap = snapshot_of(*NODES, *groups)
    pgs = {pg.key: pg for pg in snap.podgroups}
    shares = plan_shares(snap.queues, snap.nodes, snap.pods, pgs, volcano_view=volcano_view)
    return {name: s.deserved.get(GPU, 0) for name, s in sorted(shares.items())}


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        pytest.param([queue("a", 1), queue("b", 3), usage("a", 16), usage("b", 16)], {"a": 4, "b": 12},
                     id="weights-1-3"),
        pytest.param([queue("a", 1), queue("b", 1), usage("a", 2), usage("b", 16)], {"a": 2, "b": 14},
                     id="small-request-leaves-rest"),
        pytest.param([queue("a", 1), queue("b", 1), usage("a", 0), usage("b", 16)], {"a": 0, "b": 16},
                     id="no-request-no-share"),
        pytest.param([queue("a", 3, capability={GPU: 4}), queue("b", 1), usage("a", 16), usage("b", 16)],
                     {"a": 4, "b": 12}, id="capability-caps"),
        # proportion.go (v1.15.1) never reads spec.deserved: deserved starts empty (:113) and only the
        # weighted loop (:215-258) raises it; spec.deserved is the capacity plugin's
        pytest.param([queue("a", 1, deserved={GPU: 10}), queue("b", 1), usage("a", 16), usage("b", 16)],
                     {"a": 8, "b": 8}, id="spec-deserved-ignored-as-volcano-proportion"),
        pytest.param([queue("a", 1, guarantee={GPU: 10}), queue("b", 1), usage("a", 16), usage("b", 16)],
                     {"a": 10, "b": 6}, id="guarantee-above-weighted-share"),
        pytest.param([queue("a", 1, guarantee={GPU: 6}), queue("b", 1), usage("a", 16), usage("b", 16)],
                     {"a": 8, "b": 8}, id="guarantee-is-a-floor-not-a-bonus"),
        pytest.param([queue("a", 1, guarantee={GPU: 6}), queue("b", 1), usage("a", 2), usage("b", 16)],
                     {"a": 6, "b": 10}, id="guarantee-held-even-without-request"),
        pytest.param([queue("p", 1), queue("c1", 1, parent="p"), queue("c2", 3, parent="p"), queue("d", 1),
                      usage("c1", 16), usage("c2", 16), usage("d", 16)],
                     {"c1": 3, "c2": 10, "d": 3, "p": 0}, id="parent-ignored-flat-as-volcano-proportion"),
        # proportion.go OnSessionOpen: one water-filling over every queue, spec.parent never read; a
        # "parent" queue with no pods of its own requests nothing and deserves nothing.
        pytest.param([queue("p", 1), queue("c1", 1, parent="p"), queue("d", 1), usage("c1", 3), usage("d", 16)],
                     {"c1": 3, "d": 13, "p": 0}, id="parent-gets-no-subtree-request"),
        pytest.param([queue("a", 1), queue("b", 1), usage("a", 2, gated=14), usage("b", 16)], {"a": 2, "b": 14},
                     id="gated-pods-not-in-request"),
        pytest.param([queue("a", 1), queue("b", 1), usage("a", 2, pending=6), usage("b", 16)], {"a": 8, "b": 8},
                     id="pending-ungated-in-request"),
        pytest.param([queue("a", 1), queue("b", 1), usage("a", 2, pending=1), usage("b", 16)], {"a": 3, "b": 13},
                     id="pending-ungated-small"),
        pytest.param([queue("a", 1), queue("b", 1), usage("a", 2, deleting=6), usage("b", 16)], {"a": 2, "b": 14},
                     id="terminating-not-in-request"),
        pytest.param([queue("b", 1), usage("a", 16), usage("b", 16)], {"a": 8, "b": 8},
                     id="unlisted-queue-weight-1"),
    ],
)
def test_deserved(groups: list[Any], expected: dict[str, int]) -> None:
    got = deserved_gpus(*groups)
    assert {k: got.get(k, 0) for k in expected} == expected
    assert sum(v for k, v in got.items() if k in ("a", "b", "d") or (k == "p")) <= 16


@pytest.mark.parametrize(
    ("groups", "ours", "volcano"),
    [
        pytest.param([queue("a", 1), queue("b", 1), usage("a", 2, gated=14), usage("b", 16)],
                     {"a": 2, "b": 14}, {"a": 8, "b": 8}, id="gated-pods-requested-by-volcano"),
        pytest.param([queue("a", 1), queue("b", 1), queue("c", 1), usage("a", 16), usage("b", 16), usage("c", 16)],
                     {"a": 5, "b": 5, "c": 5}, {"a": 5, "b": 5, "c": 5}, id="thirds-round-down"),
        pytest.param([queue("a", 2), queue("b", 1), usage("a", 16), usage("b", 16)],
                     {"a": 11, "b": 5}, {"a": 10, "b": 5}, id="two-thirds-rounded-down-not-to-nearest"),
    ],
)
def test_volcano_view(groups: list[Any], ours: dict[str, int], volcano: dict[str, int]) -> None:
    """What proportion admits work against: gated pods requested, deserved rounded down."""
    assert deserved_gpus(*groups) == ours
    assert deserved_gpus(*groups, volcano_view=True) == volcano


def test_deserved_never_exceeds_cluster_sum() -> None:
    got = deserved_gpus(queue("a", 2, guarantee={GPU: 4}), queue("b", 1, deserved={GPU: 3}), queue("c", 5),
                        usage("a", 10), usage("b", 10), usage("c", 10))
    assert sum(got.values()) <= 16
    # weights 2:1:5 over 16 (b's spec.deserved is not read): level 2, a at its guarantee 4
    assert got == {"a": 4, "b": 2, "c": 10}


def test_allocated_and_request() -> None:
    snap = snapshot_of(*NODES, queue("a"), usage("a", running=3, pending=2, gated=4, deleting=1))
    pgs = {pg.key: pg for pg in snap.podgroups}
    alloc, req = queue_usage(snap.pods, pgs)
    assert alloc["a"][GPU] == 3 and req["a"][GPU] == 5
    share = plan_shares(snap.queues, snap.nodes, snap.pods, pgs)["a"]
    assert share.allocated[GPU] == 3 and share.request[GPU] == 5 and share.reclaimable


def test_not_reclaimable_flag() -> None:
    snap = snapshot_of(*NODES, queue("a", reclaimable=False), usage("a", 1))
    pgs = {pg.key: pg for pg in snap.podgroups}
    assert not plan_shares(snap.queues, snap.nodes, snap.pods, pgs)["a"].reclaimable


def test_cluster_capacity_skips_unschedulable_and_not_ready() -> None:
    snap = snapshot_of(node("a", gpus=8), node("b", gpus=8, unschedulable=True), node("c", gpus=8, ready=False))
    assert cluster_capacity(snap.nodes)[GPU] == 8


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [pytest.param([node("a", gpus=8)], GPU, id="gpu-cluster"),
     pytest.param([node("a", gpus=0)], "cpu", id="cpu-cluster"),
     pytest.param([node("a", gpus=0), node("b", gpus=1)], GPU, id="mixed")],
)
def test_dominant_resource(nodes: list[Any], expected: str) -> None:
    assert dominant_resource(snapshot_of(*nodes).nodes) == expected


def test_pods_without_podgroup_are_not_charged() -> None:
    snap = snapshot_of(*NODES, queue("a"), pod("ns", "loose", node_name="n0"))
    alloc, req = queue_usage(snap.pods, {})
    assert alloc == {} and req == {}
