"""Node-aware fit: resources (gpu, cpu, memory, extended), pod count, nodeSelector, unschedulable,
NotReady, taints and tolerations; best-fit placement of a set of pods."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_controller.policy.fit import Capacity, fits_all, node_accepts, place_all, pod_demand, size_key
from elastic_controller.policy.model import Taint, Toleration
from elastic_controller.policy.parse import parse_node, parse_pod
from tests.harness.builders import node, pod

NS = "t"


def P(name: str = "p", **kw: Any) -> Any:
    return parse_pod(pod(NS, name, **kw))


def N(name: str = "n", **kw: Any) -> Any:
    return parse_node(node(name, **kw))


def cap_of(*nodes: Any) -> Capacity:
    return Capacity.empty(nodes)


NO_SCHED = {"key": "gpu", "value": "a100", "effect": "NoSchedule"}
NO_EXEC = {"key": "maint", "value": "", "effect": "NoExecute"}
PREFER = {"key": "soft", "value": "x", "effect": "PreferNoSchedule"}


@pytest.mark.parametrize(
    ("n", "p", "ok"),
    [
        pytest.param(N(), P(), True, id="plain"),
        pytest.param(N(unschedulable=True), P(), False, id="unschedulable"),
        pytest.param(N(ready=False), P(), False, id="not-ready"),
        pytest.param(N(labels={"zone": "a"}), P(node_selector={"zone": "a"}), True, id="selector-match"),
        pytest.param(N(labels={"zone": "b"}), P(node_selector={"zone": "a"}), False, id="selector-mismatch"),
        pytest.param(N(labels={}), P(node_selector={"zone": "a"}), False, id="selector-missing-label"),
        pytest.param(N(taints=[NO_SCHED]), P(), False, id="noschedule-untolerated"),
        pytest.param(N(taints=[NO_EXEC]), P(), False, id="noexecute-untolerated"),
        pytest.param(N(taints=[PREFER]), P(), True, id="prefernoschedule-ignored"),
        pytest.param(N(taints=[NO_SCHED]), P(tolerations=[{"key": "gpu", "operator": "Equal", "value": "a100",
                                                            "effect": "NoSchedule"}]), True, id="tolerated-equal"),
        pytest.param(N(taints=[NO_SCHED]), P(tolerations=[{"key": "gpu", "value": "a100"}]), True,
                     id="tolerated-default-operator-any-effect"),
        pytest.param(N(taints=[NO_SCHED]), P(tolerations=[{"key": "gpu", "value": "h100"}]), False,
                     id="wrong-value"),
        pytest.param(N(taints=[NO_SCHED]), P(tolerations=[{"key": "gpu", "operator": "Exists"}]), True,
                     id="exists-any-value"),
        pytest.param(N(taints=[NO_SCHED]), P(tolerations=[{"operator": "Exists"}]), True, id="exists-everything"),
        pytest.param(N(taints=[NO_SCHED]), P(tolerations=[{"key": "gpu", "operator": "Exists",
                                                            "effect": "NoExecute"}]), False, id="wrong-effect"),
        pytest.param(N(taints=[NO_EXEC]), P(tolerations=[{"key": "maint", "operator": "Exists",
                                                           "effect": "NoExecute"}]), True, id="noexecute-tolerated"),
        pytest.param(N(taints=[NO_SCHED, NO_EXEC]), P(tolerations=[{"key": "gpu", "operator": "Exists"}]), False,
                     id="one-of-two-tolerated"),
        pytest.param(N(taints=[NO_SCHED, PREFER]), P(tolerations=[{"key": "gpu", "operator": "Exists"}]), True,
                     id="hard-tolerated-soft-ignored"),
    ],
)
def test_node_accepts(n: Any, p: Any, ok: bool) -> None:
    assert node_accepts(n, p) is ok


@pytest.mark.parametrize(
    ("tol", "taint", "ok"),
    [
        pytest.param(Toleration("", "Equal", "", ""), Taint("k", "v"), False, id="empty-key-equal-matches-nothing"),
        pytest.param(Toleration("k", "Equal", "v", "NoSchedule"), Taint("k", "v", "NoSchedule"), True, id="exact"),
        pytest.param(Toleration("k", "Equal", "", ""), Taint("k", "", "NoExecute"), True, id="empty-values"),
        pytest.param(Toleration("x", "Exists", "", ""), Taint("k", "v"), False, id="other-key"),
    ],
)
def test_toleration(tol: Toleration, taint: Taint, ok: bool) -> None:
    assert tol.tolerates(taint) is ok


@pytest.mark.parametrize(
    ("n", "pods", "ok"),
    [
        pytest.param(N(gpus=8), [P(gpus=8)], True, id="gpu-exact"),
        pytest.param(N(gpus=8), [P(gpus=9)], False, id="gpu-short"),
        pytest.param(N(gpus=0), [P(gpus=1)], False, id="no-gpu-node"),
        pytest.param(N(gpus=0), [P(gpus=0)], True, id="cpu-pod-on-cpu-node"),
        pytest.param(N(cpu="4"), [P(cpu="4")], True, id="cpu-exact"),
        pytest.param(N(cpu="4"), [P(cpu="4001m")], False, id="cpu-short"),
        pytest.param(N(memory="16Gi"), [P(memory="16Gi")], True, id="memory-exact"),
        pytest.param(N(memory="16Gi"), [P(memory="17Gi")], False, id="memory-short"),
        pytest.param(N(pods=2), [P("a"), P("b")], True, id="pod-count-exact"),
        pytest.param(N(pods=2), [P("a"), P("b"), P("c")], False, id="pod-count-short"),
        pytest.param(N(gpus=8), [P("a", gpus=4), P("b", gpus=4)], True, id="two-halves"),
        pytest.param(N(gpus=8), [P("a", gpus=4), P("b", gpus=5)], False, id="two-too-big"),
        pytest.param(N(unschedulable=True), [P()], False, id="unschedulable-node"),
    ],
)
def test_fits_one_node(n: Any, pods: list[Any], ok: bool) -> None:
    assert fits_all(pods, cap_of(n)) is ok


def test_extended_resource() -> None:
    n = N()
    n.allocatable["example.com/fpga"] = 1
    obj = pod(NS, "p")
    obj["spec"]["containers"][0]["resources"]["requests"]["example.com/fpga"] = "2"
    assert not fits_all([parse_pod(obj)], cap_of(n))
    n.allocatable["example.com/fpga"] = 2
    assert fits_all([parse_pod(obj)], cap_of(n))


def test_pods_default_110_when_node_does_not_say() -> None:
    n = N()
    del n.allocatable["pods"]
    assert Capacity.empty([n]).free["n"]["pods"] == 110


def test_pod_demand_counts_a_slot_and_drops_zero() -> None:
    assert pod_demand(P(gpus=0, cpu="1", memory="1Gi")) == {"cpu": 1000, "memory": 2**30, "pods": 1}


def test_fits_all_does_not_mutate() -> None:
    cap = cap_of(N(gpus=8))
    before = dict(cap.free["n"])
    assert fits_all([P(gpus=8)], cap)
    assert cap.free["n"] == before


@pytest.mark.parametrize(
    ("pod_kw", "copies", "ok"),
    [
        # Nodes a..e below: room for 4-GPU pods is 2 + 1 + 0 + 0 (tainted) + 0 (cpu-bound) = 3.
        pytest.param({"gpus": 4}, 3, True, id="gpu-room-3-of-3"),
        pytest.param({"gpus": 4}, 4, False, id="gpu-room-3-of-4"),
        pytest.param({"gpus": 4, "tolerations": [NO_SCHED]}, 4, True, id="toleration-opens-the-tainted-node"),
        # 1 GPU and 16 of 64 cpus: a 4 (cpu-bound) + b 4 + c 2 (GPU-bound) + d 0 + e 0 = 10.
        pytest.param({"gpus": 1, "cpu": "16"}, 10, True, id="cpu-bound-room-10"),
        pytest.param({"gpus": 1, "cpu": "16"}, 11, False, id="cpu-bound-room-10-of-11"),
        # No GPU, 60 cpus: one each on a, b, c.
        pytest.param({"gpus": 0, "cpu": "60"}, 3, True, id="cpu-only-one-per-node"),
        pytest.param({"gpus": 0, "cpu": "60"}, 4, False, id="cpu-only-four-of-three"),
    ],
)
def test_fits_all_counts_pods_alike(pod_kw: dict[str, Any], copies: int, ok: bool) -> None:
    cap = cap_of(N("a", gpus=8), N("b", gpus=6), N("c", gpus=2), N("d", gpus=8, taints=[NO_SCHED]),
                 N("e", gpus=8, cpu="3"))
    pods = [P(f"p{i}", **pod_kw) for i in range(copies)]
    assert fits_all(pods, cap) is ok
    assert (place_all(pods, cap.copy()) is not None) is ok  # the placing path agrees


@given(st.lists(st.tuples(st.integers(0, 8), st.integers(1, 64), st.sampled_from(["", "t"])), min_size=1, max_size=8),
       st.integers(0, 8), st.integers(1, 32), st.booleans(), st.integers(1, 12))
@settings(max_examples=300, deadline=None)
def test_fits_all_agrees_with_placing_pods_alike(nodes: list[tuple[int, int, str]], gpus: int, cpu: int,
                                                 tolerate: bool, copies: int) -> None:
    cap = cap_of(*(N(f"n{i}", gpus=g, cpu=str(c), taints=[NO_SCHED] if t else [])
                   for i, (g, c, t) in enumerate(nodes)))
    pods = [P(f"p{i}", gpus=gpus, cpu=str(cpu), tolerations=[NO_SCHED] if tolerate else [])
            for i in range(copies)]
    assert fits_all(pods, cap) == (place_all(pods, cap.copy()) is not None)


def _place_one_by_one(pods: list[Any], cap: Capacity) -> dict[str, str] | None:
    """place_all's definition: best fit for every pod, largest first."""
    placement = {}
    for p in sorted(pods, key=size_key):
        node = cap.choose_node(p)
        if node is None:
            return None
        cap.take(node, pod_demand(p))
        placement[p.key] = node
    return placement


@given(st.lists(st.tuples(st.integers(0, 8), st.integers(1, 64)), min_size=1, max_size=8),
       st.lists(st.tuples(st.integers(0, 8), st.integers(1, 32)), min_size=1, max_size=3), st.integers(1, 10))
@settings(max_examples=300, deadline=None)
def test_place_all_equals_placing_one_by_one(nodes: list[tuple[int, int]], kinds: list[tuple[int, int]],
                                             copies: int) -> None:
    # place_all puts a pod like the previous one on the same node while it fits (no search): the
    # placement, and the capacity left (also when it fails part way), are those of a search per pod.
    def cap() -> Capacity:
        return cap_of(*(N(f"n{i}", gpus=g, cpu=str(c)) for i, (g, c) in enumerate(nodes)))
    pods = [P(f"p{k}-{i}", gpus=g, cpu=str(c)) for k, (g, c) in enumerate(kinds) for i in range(copies)]
    fast, slow = cap(), cap()
    assert place_all(pods, fast) == _place_one_by_one(pods, slow)
    assert fast.free == slow.free


def test_place_all_largest_first_across_nodes() -> None:
    # Largest first, best fit: the 6-GPU pod goes to the 6-GPU node, the two 4s to the 8-GPU node.
    cap = cap_of(N("big", gpus=8), N("small", gpus=6))
    placement = place_all([P("a", gpus=4), P("b", gpus=6), P("c", gpus=4)], cap)
    assert placement == {"t/b": "small", "t/a": "big", "t/c": "big"}
    assert cap.free["big"]["nvidia.com/gpu"] == 0 and cap.free["small"]["nvidia.com/gpu"] == 0


def test_place_all_respects_selector_and_taints_across_nodes() -> None:
    cap = cap_of(N("tainted", taints=[NO_SCHED]), N("other", labels={"zone": "b"}), N("right", labels={"zone": "a"}))
    assert place_all([P(node_selector={"zone": "a"})], cap) == {"t/p": "right"}
    assert place_all([P("q", node_selector={"zone": "c"})], cap_of(N(labels={"zone": "a"}))) is None


def test_place_all_none_when_spread_impossible() -> None:
    # 12 GPUs free in total but no node has 6.
    cap = cap_of(*(N(f"n{i}", gpus=4) for i in range(3)))
    assert place_all([P("a", gpus=6), P("b", gpus=6)], cap.copy()) is None
    assert place_all([P("a", gpus=4), P("b", gpus=4), P("c", gpus=4)], cap.copy()) is not None


def test_capacity_take_give_roundtrip_and_unknown_node() -> None:
    cap = cap_of(N(gpus=8))
    cap.take("n", {"nvidia.com/gpu": 3, "pods": 1})
    assert cap.free["n"]["nvidia.com/gpu"] == 5
    cap.give("n", {"nvidia.com/gpu": 3, "pods": 1})
    assert cap.free["n"]["nvidia.com/gpu"] == 8
    cap.take("ghost", {"cpu": 1})  # a pod bound to a node not in the snapshot is ignored
    assert not cap.fits("ghost", {"cpu": 1})


def test_choose_node_best_fit_and_deterministic_tie() -> None:
    cap = cap_of(N("b", gpus=8), N("a", gpus=8), N("c", gpus=2))
    assert cap.choose_node(P(gpus=2)) == "c"
    assert cap.choose_node(P(gpus=3)) == "a"


@given(st.lists(st.tuples(st.integers(0, 8), st.integers(1, 64)), min_size=1, max_size=6),
       st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2), st.integers(0, 8)), max_size=10))
@settings(max_examples=200, deadline=None)
def test_capacity_over_a_shared_base_equals_empty_and_never_writes_it(
        nodes: list[tuple[int, int]], used: list[tuple[int, int, int]]) -> None:
    views = [N(f"n{i}", gpus=g, cpu=str(c)) for i, (g, c) in enumerate(nodes)]
    by_name = {n.name: n for n in views}
    base = {n.name: {**n.allocatable, "pods": n.allocatable.get("pods", 110)} for n in views}
    pristine = {k: dict(v) for k, v in base.items()}
    taken: dict[str, dict[str, int]] = {}
    for i, gpus, cpu in used:  # a node index past the end stands for a node the cluster lacks
        acc = taken.setdefault(f"n{i}", {})
        acc["nvidia.com/gpu"] = acc.get("nvidia.com/gpu", 0) + gpus
        acc["cpu"] = acc.get("cpu", 0) + 1000 * cpu
    cap = Capacity.over(by_name, base, taken)
    assert cap.free == Capacity.empty(views, taken).free
    for name in by_name:  # every kind of write: take, give, bulk give, through a copy too
        cap.take(name, {"cpu": 1, "pods": 1})
        cap.copy().give(name, {"nvidia.com/gpu": 1})
    cap.give_many({name: {"cpu": 5} for name in by_name})
    assert base == pristine
