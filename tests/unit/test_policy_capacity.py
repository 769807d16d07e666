"""Volcano's capacity plugin rules (policy/capacity.py), one table per rule.

Each case cites the Volcano v1.15.1 code it follows: ``capacity.go`` is
``pkg/scheduler/plugins/capacity/capacity.go``, ``resource_info.go`` is
``pkg/scheduler/api/resource_info.go``; "Volcano test X" is a case of ``capacity_test.go`` whose
numbers the case reuses.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_controller.policy import capacity as cap
from elastic_controller.policy import capacity_ledger as ledger
from elastic_controller.policy.model import QueueView

GPU = "nvidia.com/gpu"
Gi = 2**30
G = 10**9


def q(name: str, deserved: dict[str, int] | None = None, guarantee: dict[str, int] | None = None,
      capability: dict[str, int] | None = None, parent: str = "root", reclaimable: bool = True,
      state: str = "Open") -> QueueView:
    return QueueView(name=name, deserved=deserved, guarantee=guarantee, capability=capability,
                     parent=parent if name != "root" else "", reclaimable=reclaimable, state=state)


def res(cpu: float = 0, mem: int = 0, gpu: int | None = None, **other: int) -> dict[str, int]:
    out: dict[str, int] = {}
    if cpu:
        out["cpu"] = int(cpu * 1000)
    if mem:
        out["memory"] = mem
    if gpu is not None:
        out[GPU] = gpu
    out.update(other)
    return out


def flat(*queues: QueueView, total: dict[str, int]) -> cap.CapacityShares:
    return cap.build(queues, total, hierarchy=False)


# -- Resource arithmetic (resource_info.go) ---------------------------------------------------------


@pytest.mark.parametrize(("used", "limit", "req", "expected"), [
    pytest.param({"cpu": 3000, "memory": 3}, {"cpu": 2000, "memory": 5}, {"memory": 1}, True,
                 id="only-requested-dims:479"),
    pytest.param({"cpu": 3000}, {"cpu": 2000}, {"cpu": 1}, False, id="cpu-over:494"),
    pytest.param({GPU: 1}, {}, {GPU: 1}, False, id="scalar-not-in-limit-is-0:514"),
    pytest.param({GPU: 1, "pods": 99}, {GPU: 1, "pods": 1}, {GPU: 1, "pods": 1}, True, id="pods-ignored:510"),
])
def test_less_equal_on(used: dict[str, int], limit: dict[str, int], req: dict[str, int], expected: bool) -> None:
    assert cap.less_equal_on(used, limit, req) is expected


@pytest.mark.parametrize(("allocated", "deserved", "req", "expected"), [
    # resource_info.go:827-845, the function's own documented examples
    pytest.param({GPU: 2}, {}, {GPU: 1}, False, id="rr-lacks-gpu:829"),
    pytest.param({"cpu": 4}, {"cpu": 0}, {"cpu": 2}, False, id="rr-zero-cpu:832"),
    pytest.param({GPU: 2}, {GPU: 0}, {GPU: 1}, True, id="rr-names-gpu-as-0:838"),
    pytest.param({"cpu": 4000, "memory": 8192, GPU: 2}, {"cpu": 2000, "memory": 8192, GPU: 1}, {GPU: 1}, True,
                 id="gpu-only:843"),
    pytest.param({"cpu": 4000, "memory": 8192, GPU: 2}, {"cpu": 2000, "memory": 8192, GPU: 1}, {"memory": 4096},
                 False, id="memory-not-over:845"),
])
def test_greater_partly_relevant(allocated: dict[str, int], deserved: dict[str, int], req: dict[str, int],
                                 expected: bool) -> None:
    assert cap.greater_partly_relevant(allocated, deserved, req) is expected


def test_exceeded_part_drops_scalars_not_above() -> None:
    """resource_info.go:1085 via Diff (:889): a scalar the right side covers is absent, not 0."""
    assert cap.exceeded_part({"cpu": 5, GPU: 2, "x": 3}, {"cpu": 7, GPU: 2, "x": 1}) == {"x": 2}


def test_min_dimension_infinity_default() -> None:
    """resource_info.go:949 with Infinity: a scalar the limit does not name is not limited."""
    assert cap.min_dimension({"cpu": 5, GPU: 8, "x": 3}, {"cpu": 2, GPU: 4}) == {"cpu": 2, GPU: 4, "x": 3}


# -- buildQueueAttrs: flat mode -----------------------------------------------------------------------


@pytest.mark.parametrize(("queues", "name", "deserved", "real"), [
    pytest.param([q("a", deserved=res(gpu=4))], "a", {GPU: 4}, {GPU: 16},
                 id="deserved-as-written:1060"),
    pytest.param([q("a", deserved=res(gpu=4), guarantee=res(gpu=6)), q("b", guarantee=res(gpu=2))], "a",
                 {GPU: 6}, {GPU: 14}, id="raised-to-guarantee:1141,real-less-others-guarantee:1081"),
    pytest.param([q("a", deserved=res(gpu=20))], "a", {GPU: 16}, {GPU: 16},
                 id="deserved-capped-by-real-capability:1138"),
    pytest.param([q("a", deserved=res(gpu=8), capability=res(gpu=6))], "a", {GPU: 6}, {GPU: 6},
                 id="capability-caps-real:1086"),
    pytest.param([q("a", capability=res(gpu=6)), q("b", guarantee=res(gpu=12))], "a", {}, {GPU: 4},
                 id="others-guarantee-below-capability:1081"),
    pytest.param([q("a"), q("b", deserved=res(gpu=10))], "a", {}, {GPU: 16},
                 id="no-deserved-no-weights:1060"),
])
def test_flat_attributes(queues: list[QueueView], name: str, deserved: dict[str, int], real: dict[str, int]) -> None:
    shares = flat(*queues, total=res(cpu=64, mem=256 * Gi, gpu=16))
    attr = shares.queues[name]
    assert {k: v for k, v in attr.deserved.items() if v} == deserved
    assert attr.real_capability[GPU] == real[GPU]


def test_flat_capability_without_cpu_is_unbounded_on_cpu() -> None:
    """capacity.go:1070: capability cpu/memory not set (<= 0) is MaxFloat64."""
    shares = flat(q("a", capability=res(gpu=2)), total=res(cpu=8, mem=8 * Gi, gpu=4))
    attr = shares.queues["a"]
    assert attr.capability["cpu"] == math.inf and attr.capability["memory"] == math.inf
    assert attr.real_capability["cpu"] == 8000 and attr.real_capability[GPU] == 2


def test_flat_best_effort_and_synthesized_queues() -> None:
    """capacity.go:1817: no deserved is best-effort; root/default exist (cache.go:513)."""
    shares = flat(q("a", deserved=res(gpu=1)), q("b"), total=res(gpu=4))
    assert not shares.queues["a"].best_effort
    assert shares.queues["b"].best_effort
    assert {"root", "default"} <= set(shares.queues)


# -- buildHierarchicalQueueAttrs -----------------------------------------------------------------------


def dept(**over: Any) -> list[QueueView]:
    """root -> dept (capability 8 GPUs) -> team-a (deserved 4, guarantee 2), team-b (deserved 2), scratch."""
    return [
        q("root"),
        q("dept", deserved=res(gpu=6), capability=over.get("dept_cap", res(gpu=8))),
        q("team-a", parent="dept", deserved=res(gpu=4), guarantee=res(gpu=2)),
        q("team-b", parent="dept", deserved=res(gpu=2), capability=over.get("b_cap")),
        q("scratch", parent="dept"),
        q("other", deserved=res(gpu=2)),
    ]


def test_hierarchy_attributes() -> None:
    shares = cap.build(dept(), res(cpu=64, mem=64 * Gi, gpu=16), hierarchy=True)
    assert shares.ready, shares.problem
    a, b, s, d, root = (shares.queues[n] for n in ("team-a", "team-b", "scratch", "dept", "root"))
    assert a.ancestors == ("root", "dept") and d.children == ("scratch", "team-a", "team-b")
    # capacity.go:1323: root unbounded (cpu, memory and the cluster's scalars)
    assert root.real_capability == {"cpu": math.inf, "memory": math.inf, GPU: math.inf}
    # capacity.go:1505: root's deserved and guarantee are its children's sums
    assert root.deserved[GPU] == 8 and root.guarantee.get(GPU, 0) == 0
    # capacity.go:1478/1486: capability inherited downward
    assert s.capability[GPU] == 8 and s.capability["cpu"] == math.inf
    # capacity.go:1511: the parent's real capability less the siblings' guarantees, plus its own
    assert d.real_capability[GPU] == 8
    assert a.real_capability[GPU] == 8  # 8 - 2 + 2
    assert b.real_capability[GPU] == 6  # 8 - 2 (team-a's guarantee)
    assert s.real_capability[GPU] == 6
    # capacity.go:1474: deserved raised to the guarantee, never capped by the real capability
    assert a.deserved[GPU] == 4


def test_hierarchy_capability_not_above_parent() -> None:
    """capacity.go:1516: a child's own capability also caps it; above its parent's, the parent caps."""
    shares = cap.build(dept(b_cap=res(gpu=3)), res(gpu=16), hierarchy=True)
    assert shares.queues["team-b"].real_capability[GPU] == 3
    shares = cap.build(dept(b_cap=res(gpu=30)), res(gpu=16), hierarchy=True)
    assert shares.queues["team-b"].real_capability[GPU] == 6


@pytest.mark.parametrize(("queues", "jobs", "problem"), [
    pytest.param([q("a", parent="nowhere")], (), "parent nowhere", id="missing-parent:1451"),
    pytest.param([q("a", parent="b"), q("b", parent="a")], (), "cycle", id="cycle:1441"),
    pytest.param([q("a"), q("a1", parent="a")], ("a",), "not a leaf", id="job-in-parent:1225"),
])
def test_hierarchy_not_ready(queues: list[QueueView], jobs: tuple[str, ...], problem: str) -> None:
    """capacity.go:462 etc.: readyToSchedule false and every hook refuses."""
    shares = cap.build(queues, res(gpu=4), hierarchy=True, job_queues=jobs)
    assert not shares.ready and problem in shares.problem
    assert not cap.allocatable(shares, {}, "default", res(gpu=1))
    assert not cap.may_reclaim(shares, {}, "default", res(gpu=1))
    assert not cap.enqueueable(shares, "default", res(gpu=1), {}, {}, {})


# -- AllocatableFn ---------------------------------------------------------------------------------------


def test_allocatable_within_real_capability_not_deserved() -> None:
    """capacity.go:717/1629: real capability decides; deserved is not consulted (a gang goes on idle
    GPUs beyond its deserved share)."""
    shares = flat(q("a", deserved=res(gpu=2)), q("b", guarantee=res(gpu=4)), total=res(gpu=16))
    assert cap.allocatable(shares, {"a": res(gpu=10)}, "a", res(gpu=2))  # 12 <= 16 - 4
    assert not cap.allocatable(shares, {"a": res(gpu=11)}, "a", res(gpu=2))  # 13 > 12
    assert "real capability on nvidia.com/gpu" in (cap.allocatable_reason(shares, {"a": res(gpu=11)}, "a",
                                                                          res(gpu=2)) or "")


def test_allocatable_only_requested_dimensions() -> None:
    """Volcano TestEnqueueAndAllocatable case0: memory above capability, a cpu-only pod still goes
    (resource_info.go:494-518)."""
    shares = flat(q("q1", deserved=res(cpu=2, mem=2 * G), capability=res(cpu=2, mem=2 * G)),
                  total=res(cpu=6, mem=6 * G))
    alloc = {"q1": res(cpu=1, mem=3 * G)}
    assert cap.allocatable(shares, alloc, "q1", res(cpu=1))
    assert not cap.allocatable(shares, alloc, "q1", res(cpu=1, mem=1 * G))


@pytest.mark.parametrize(("state", "expected"), [("Open", True), ("Closed", False)])
def test_allocatable_needs_open_queue(state: str, expected: bool) -> None:
    """capacity.go:718."""
    shares = flat(q("a", state=state), total=res(gpu=4))
    assert cap.allocatable(shares, {}, "a", res(gpu=1)) is expected


def test_allocatable_unknown_queue() -> None:
    shares = flat(q("a"), total=res(gpu=4))
    assert cap.allocatable_reason(shares, {}, "ghost", res(gpu=1)) == "queue ghost does not exist"


def test_allocatable_hierarchy_leaf_and_ancestors() -> None:
    """capacity.go:726 (leaf only) and :1662 (every ancestor's real capability, allocation rolled up)."""
    shares = cap.build(dept(), res(gpu=16), hierarchy=True)
    assert not cap.allocatable(shares, {}, "dept", res(gpu=1))
    assert "not a leaf" in (cap.allocatable_reason(shares, {}, "dept", res(gpu=1)) or "")
    # team-b alone may hold 6, but the dept holds 8 at most: team-a's 4 + scratch's 2 + 2 more = 8
    alloc = {"team-a": res(gpu=4), "scratch": res(gpu=2)}
    assert cap.allocatable(shares, alloc, "team-b", res(gpu=2))
    assert not cap.allocatable(shares, alloc, "team-b", res(gpu=3))
    assert "queue dept" in (cap.allocatable_reason(shares, alloc, "team-b", res(gpu=3)) or "")
    # another top-level queue is not limited by the dept
    assert cap.allocatable(shares, alloc, "other", res(gpu=8))


def test_capability_excess() -> None:
    shares = cap.build(dept(), res(gpu=16), hierarchy=True)
    alloc = {"team-a": res(gpu=4), "team-b": res(gpu=4)}
    assert cap.capability_excess(shares, alloc, "team-b", res(gpu=2)) == {"dept": {GPU: 2.0}}
    assert cap.capability_excess(shares, alloc, "scratch", res(gpu=1)) == {"dept": {GPU: 1.0}}
    assert cap.capability_excess(shares, {}, "team-b", res(gpu=1)) == {}


# -- JobEnqueueableFn --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("minimum", "expected"), [
    pytest.param(res(cpu=1), True, id="case0-cpu-only:1687"),
    pytest.param(res(mem=1 * G), False, id="case1-memory-over:1689"),
    pytest.param(res(cpu=1, mem=1 * G), False, id="case2-exceeds:1689"),
    pytest.param(None, True, id="no-minResources:769"),
])
def test_enqueue_volcano_cases(minimum: dict[str, int] | None, expected: bool) -> None:
    """Volcano TestEnqueueAndAllocatable, q1: deserved = capability = 2 cpu 2G, 1 cpu 3G allocated."""
    shares = flat(q("q1", deserved=res(cpu=2, mem=2 * G), capability=res(cpu=2, mem=2 * G)),
                  total=res(cpu=6, mem=6 * G))
    assert cap.enqueueable(shares, "q1", minimum, {"q1": res(cpu=1, mem=3 * G)}, {}, {}) is expected


def test_enqueue_counts_inqueue_and_elastic() -> None:
    """capacity.go:1687: minResources + allocated + inqueue - elastic <= real capability."""
    shares = flat(q("a", capability=res(gpu=8)), total=res(gpu=16))
    alloc = {"a": res(gpu=6)}
    assert not cap.enqueueable(shares, "a", res(gpu=4), alloc, {}, {})
    assert cap.enqueueable(shares, "a", res(gpu=4), alloc, {}, {"a": res(gpu=2)})  # 4 + 6 - 2
    assert not cap.enqueueable(shares, "a", res(gpu=4), alloc, {"a": res(gpu=1)}, {"a": res(gpu=2)})


def test_enqueue_hierarchy() -> None:
    """capacity.go:750 (leaf only), :1708 (every ancestor), Volcano hierarchy case6."""
    shares = cap.build(dept(), res(gpu=16), hierarchy=True)
    assert not cap.enqueueable(shares, "dept", res(gpu=1), {}, {}, {})
    assert cap.enqueueable(shares, "team-b", res(gpu=4), {"team-a": res(gpu=4)}, {}, {})
    assert not cap.enqueueable(shares, "team-b", res(gpu=4), {"team-a": res(gpu=4)}, {"scratch": res(gpu=1)}, {})


def test_job_inqueue_and_elastic() -> None:
    """capacity.go:1110-1131, util.go:97, job_info.go:654."""
    assert cap.job_inqueue(res(gpu=4), res(gpu=1), "Inqueue") == {GPU: 3}
    assert cap.job_inqueue(res(gpu=4), res(gpu=4), "Running", allocated_tasks=4, min_member=4) == {}
    assert cap.job_inqueue(res(gpu=4), res(gpu=3), "Running", allocated_tasks=3, min_member=4) == {}
    assert cap.job_inqueue(res(gpu=4), {}, "Pending") == {}
    # DeductSchGatedResources (api/job_info.go:631, capacity.go:1117): gated pods' requests come off
    assert cap.job_inqueue(res(gpu=4), res(gpu=1), "Inqueue", gated=res(gpu=2)) == {GPU: 1}
    assert cap.job_inqueue(res(gpu=4), {}, "Inqueue", gated=res(gpu=6)) == {}
    assert cap.job_elastic(res(gpu=6), res(gpu=4)) == {GPU: 2}


# -- PreemptiveFn: may the gang's queue reclaim ---------------------------------------------------------------


@pytest.mark.parametrize(("queues", "allocated", "req", "expected"), [
    pytest.param([q("a", deserved=res(gpu=4))], {"a": res(gpu=2)}, res(gpu=2), True, id="within-deserved:677"),
    pytest.param([q("a", deserved=res(gpu=4))], {"a": res(gpu=3)}, res(gpu=2), False, id="above-deserved:677"),
    pytest.param([q("a")], {}, res(gpu=1), False, id="best-effort-never:677"),
    pytest.param([q("a", deserved=res(cpu=8, mem=100 * Gi), capability=res(cpu=8, mem=100 * Gi))],
                 {"a": res(cpu=7, mem=90 * Gi)}, res(cpu=2, mem=5 * Gi), False,
                 id="volcano-case10-capability:670"),
    pytest.param([q("a", deserved=res(cpu=1, mem=2 * Gi))], {"a": res(cpu=1, mem=0)},
                 res(cpu=1, mem=1 * Gi), True, id="volcano-case5-one-dimension-enough:677"),
    pytest.param([q("a", deserved=res(cpu=4, gpu=1))], {"a": res(cpu=1, gpu=1)}, res(cpu=1, gpu=1), True,
                 id="partly:636"),
    pytest.param([q("a", deserved=res(gpu=4), state="Closed")], {}, res(gpu=1), False, id="closed:655"),
])
def test_may_reclaim(queues: list[QueueView], allocated: dict[str, dict[str, int]], req: dict[str, int],
                     expected: bool) -> None:
    shares = flat(*queues, total=res(cpu=16, mem=200 * Gi, gpu=16))
    assert cap.may_reclaim(shares, allocated, "a", req) is expected


def test_may_reclaim_level_0_compares_only_the_leaf() -> None:
    """capacity.go:685: ancestors are compared only with ancestorReclaimLevel > 0."""
    shares = cap.build(dept(), res(gpu=16), hierarchy=True)
    # the dept is above its deserved (6) with the gang; team-b alone is within its own (2)
    alloc = {"team-a": res(gpu=6), "team-b": res(gpu=0)}
    assert cap.may_reclaim(shares, alloc, "team-b", res(gpu=2))


# -- Reclaimable / UnifiedEvictable: may a pod of this queue be a victim --------------------------------------


@pytest.mark.parametrize(("queue", "allocated", "req", "strict", "expected"), [
    pytest.param(q("v", deserved=res(gpu=2)), res(gpu=4), res(gpu=1), True, None, id="above-deserved:1883"),
    pytest.param(q("v", deserved=res(gpu=2)), res(gpu=2), res(gpu=1), True,
                 "queue v is not above its deserved on a resource the pod asks for", id="at-deserved:1883"),
    pytest.param(q("v", deserved=res(gpu=2)), res(gpu=3), res(gpu=2), False, None,
                 id="volcano-lets-last-victim-go-below:1883"),
    pytest.param(q("v", deserved=res(gpu=2)), res(gpu=3), res(gpu=2), True,
                 "queue v would fall below its deserved on nvidia.com/gpu", id="ours-never-below-deserved"),
    pytest.param(q("v"), res(gpu=3), res(gpu=3), True, None, id="best-effort-immediate-victim:1855"),
    pytest.param(q("v", deserved=res(cpu=2, mem=2 * Gi)), res(cpu=1, gpu=1), res(gpu=1), True, None,
                 id="volcano-case8-no-intersection-immediate:1855"),
    pytest.param(q("v", deserved=res(gpu=1)), res(cpu=4, mem=4 * Gi, gpu=1), res(cpu=4, mem=4 * Gi, gpu=1), False,
                 "queue v is not above its deserved on a resource the pod asks for",
                 id="volcano-case9-gpu-within:1883"),
    pytest.param(q("v", guarantee=res(gpu=2)), res(gpu=3), res(gpu=2), False,
                 "queue v would fall below its guarantee", id="guarantee:1842"),
    pytest.param(q("v", guarantee=res(gpu=2)), res(gpu=4), res(gpu=2), False, None, id="guarantee-kept:1842"),
    pytest.param(q("v", reclaimable=False), res(gpu=4), res(gpu=1), True, "queue v is not reclaimable",
                 id="not-reclaimable:gangreclaim.go-selectDomainBundles"),
])
def test_victim(queue: QueueView, allocated: dict[str, int], req: dict[str, int], strict: bool,
                expected: str | None) -> None:
    shares = flat(queue, total=res(cpu=16, mem=16 * Gi, gpu=16))
    assert cap.victim_reason(shares, allocated, "v", req, strict=strict) == expected


def test_victim_must_share_a_resource_with_the_gang() -> None:
    """capacity.go:1831 shouldSkipReclaimee."""
    shares = flat(q("v"), total=res(cpu=16, gpu=16))
    assert cap.victim_reason(shares, res(cpu=2), "v", res(cpu=1), gang_request=res(gpu=1)) == \
        "it shares no resource with the gang"
    assert cap.victim_allowed(shares, res(cpu=2, gpu=1), "v", res(cpu=1, gpu=1), gang_request=res(gpu=1))


def test_filter_victims_lowers_the_allocation_as_it_goes() -> None:
    """capacity.go:634/640: each accepted victim leaves its queue's allocation for the next one."""
    shares = flat(q("v", deserved=res(gpu=2), guarantee=res(gpu=1)), q("w"), total=res(gpu=16))
    cands = [("v", res(gpu=1)), ("w", res(gpu=1)), ("v", res(gpu=2)), ("v", res(gpu=1)), ("v", res(gpu=1))]
    # strict: 4 -> 3, then 2 more would leave 1 < deserved 2, then 3 -> 2, then 2 is not above deserved
    assert cap.filter_victims(shares, {"v": res(gpu=4), "w": res(gpu=1)}, cands, strict=True) == [0, 1, 3]
    # Volcano: 4 -> 3 -> 1 (3 was above deserved), then 1 is neither above deserved nor above the guarantee
    assert cap.filter_victims(shares, {"v": res(gpu=4), "w": res(gpu=1)}, cands, strict=False) == [0, 1, 2]


# -- Queue order ------------------------------------------------------------------------------------------------


def test_share_and_order() -> None:
    """capacity.go:1800 (best-effort share 1) and :1544 (deserved before best-effort at equal shares)."""
    shares = flat(q("a", deserved=res(cpu=4, gpu=4)), q("b"), total=res(cpu=16, gpu=16))
    a, b = shares.queues["a"], shares.queues["b"]
    assert cap.share(a, res(cpu=1, gpu=2)) == 0.5
    assert cap.share(b, res(gpu=9)) == 1.0
    assert cap.queue_order_key(a, res(cpu=4, gpu=4)) < cap.queue_order_key(b, {})



def test_compare_queues_flat() -> None:
    """capacity.go:1183 (flat QueueOrderFn): lower share first; at equal shares deserved first; the
    victim order is its reverse (session_plugins.go:814, no VictimQueueOrderFn in flat mode)."""
    shares = flat(q("a", deserved=res(gpu=4)), q("b", deserved=res(gpu=8)), q("be"), total=res(gpu=16))
    rolled = {"a": res(gpu=2), "b": res(gpu=2), "be": res(gpu=1)}
    assert cap.compare_queues(shares, rolled, "b", "a") < 0  # 0.25 before 0.5
    assert cap.compare_queues(shares, {"a": res(gpu=4)}, "a", "be") < 0  # both at 1: deserved first
    assert cap.compare_queues(shares, rolled, "a", "a") == 0
    assert cap.compare_victim_queues(shares, rolled, "a", "b", reclaimer="be") < 0


def test_compare_queues_hierarchical() -> None:
    """capacity.go:1348: two leaves are compared by their ancestors just below the deepest one they
    share (getQueueLevel, :1916); :1383: victims first from the queue sharing a deeper ancestor with
    the reclaimer."""
    shares = cap.build([q("d1", deserved=res(gpu=8)), q("d2", deserved=res(gpu=8)),
                        q("t1", deserved=res(gpu=4), parent="d1"), q("t2", deserved=res(gpu=4), parent="d1"),
                        q("u1", deserved=res(gpu=4), parent="d2")], res(gpu=16), hierarchy=True,
                       job_queues=["t1", "t2", "u1"])
    alloc = {"t1": res(gpu=1), "t2": res(gpu=3), "u1": res(gpu=4)}
    rolled = shares.rolled_up(alloc)
    # t2 and u1 are compared as their departments d1 (4/8) and d2 (4/8): equal
    assert cap.compare_queues(shares, rolled, "t2", "u1") == 0
    assert cap.compare_queues(shares, rolled, "t1", "t2") < 0  # siblings: 0.25 before 0.75
    assert cap.compare_queues(shares, rolled, "t1", "d1") < 0  # a leaf before a queue with children
    # reclaimer t1: its sibling t2 (common ancestor d1) before u1 (common ancestor root)
    assert cap.compare_victim_queues(shares, rolled, "t2", "u1", reclaimer="t1") < 0
    assert cap.compare_victim_queues(shares, rolled, "u1", "t2", reclaimer="t1") > 0


# -- Properties ---------------------------------------------------------------------------------------------------

_amount = st.integers(min_value=0, max_value=8)


_Scenario = tuple[cap.CapacityShares, dict[str, dict[str, int]], list[tuple[str, dict[str, int]]]]


@st.composite
def _scenario(draw: st.DrawFn) -> _Scenario:
    names = ["q0", "q1", "q2"]
    queues = []
    for n in names:
        des = draw(st.one_of(st.none(), st.builds(lambda g, c: {GPU: g, "cpu": c * 1000}, _amount, _amount)))
        gua = draw(st.one_of(st.none(), st.builds(lambda g: {GPU: g}, _amount)))
        queues.append(q(n, deserved=des, guarantee=gua, reclaimable=draw(st.booleans())))
    shares = flat(*queues, total={GPU: 32, "cpu": 64_000})
    allocated = {n: {GPU: draw(st.integers(0, 12)), "cpu": draw(st.integers(0, 12)) * 1000} for n in names}
    cands = draw(st.lists(st.tuples(st.sampled_from(names),
                                    st.builds(lambda g, c: {GPU: g, "cpu": c * 1000}, st.integers(0, 3),
                                              st.integers(0, 3))), max_size=12))
    # a queue cannot give more than it holds
    held = {n: dict(a) for n, a in allocated.items()}
    kept = []
    for name, r in cands:
        if all(held[name].get(k, 0) >= v for k, v in r.items()):
            kept.append((name, r))
            held[name] = {k: held[name].get(k, 0) - r.get(k, 0) for k in held[name]}
    return shares, allocated, kept


@settings(max_examples=300, deadline=None)
@given(_scenario(), st.booleans())
def test_no_victim_takes_a_queue_below_its_guarantee(scn: _Scenario, strict: bool) -> None:
    shares, allocated, cands = scn
    chosen = cap.filter_victims(shares, allocated, cands, strict=strict)
    after = {n: dict(a) for n, a in allocated.items()}
    for i in chosen:
        name, r = cands[i]
        assert shares.queues[name].reclaimable
        after[name] = {k: after[name].get(k, 0) - r.get(k, 0) for k in set(after[name]) | set(r)}
    for name, a in after.items():
        guarantee = shares.queues[name].guarantee
        before = allocated[name]
        for k, g in guarantee.items():
            if any(cands[i][0] == name for i in chosen):
                assert a.get(k, 0) >= g, (name, k)
            else:
                assert a.get(k, 0) == before.get(k, 0)


@settings(max_examples=300, deadline=None)
@given(_scenario())
def test_strict_never_takes_a_queue_below_deserved(scn: _Scenario) -> None:
    """Ours: on every dimension a victim asks for that deserved names, its queue stays at or above
    deserved (and every strict victim is a Volcano victim)."""
    shares, allocated, cands = scn
    strict = cap.filter_victims(shares, allocated, cands, strict=True)
    left = {n: dict(a) for n, a in allocated.items()}
    for i in strict:
        name, r = cands[i]
        assert cap.victim_allowed(shares, left[name], name, r, strict=False)
        left[name] = {k: left[name].get(k, 0) - r.get(k, 0) for k in set(left[name]) | set(r)}
        for k in cap.relevant_dimensions(shares.queues[name].deserved, r):
            assert left[name].get(k, 0) >= shares.queues[name].deserved[k]


@settings(max_examples=300, deadline=None)
@given(_scenario(), st.randoms(use_true_random=False))
def test_a_set_of_victims_passes_in_any_order_or_not_at_all(scn: _Scenario, rnd: Any) -> None:
    """victims_reason (the set at once) agrees with filter_victims (one by one) in every order."""
    shares, allocated, cands = scn
    for name in ("q0", "q1", "q2"):
        mine = [r for n, r in cands if n == name]
        together = cap.victims_reason(shares, allocated[name], name, mine) is None
        for _ in range(3):
            rnd.shuffle(mine)
            one_by_one = cap.filter_victims(shares, allocated, [(name, r) for r in mine], strict=True)
            assert (len(one_by_one) == len(mine)) is together


def test_usage_of_groups() -> None:
    """capacity.go:1093-1131: allocated (bound, not terminating), inqueue, elastic per queue."""
    from elastic_controller.policy.model import PodGroupView, PodView

    def pods(group: str, placed: int, pending: int = 0, deleting: int = 0) -> list[PodView]:
        out = [PodView("ns", f"{group}-{i}", f"u-{group}-{i}", phase="Running", node_name="n0", requests={GPU: 2},
                       group=group) for i in range(placed)]
        out += [PodView("ns", f"{group}-p{i}", f"u-{group}-p{i}", requests={GPU: 2}, group=group)
                for i in range(pending)]
        out += [PodView("ns", f"{group}-d{i}", f"u-{group}-d{i}", phase="Running", node_name="n0", requests={GPU: 2},
                        group=group, deleting=True) for i in range(deleting)]
        return out

    a = PodGroupView("ns", "a", 2, "qa", min_resources={GPU: 4}, phase="Running")
    b = PodGroupView("ns", "b", 2, "qb", min_resources={GPU: 4}, phase="Inqueue")
    usage = ledger.usage_of_groups([(a, pods("a", 3, deleting=1)), (b, pods("b", 1, pending=1))])
    assert usage.allocated["qa"] == {GPU: 6} and usage.elastic["qa"] == {GPU: 2} and "qa" not in usage.inqueue
    assert usage.allocated["qb"] == {GPU: 2} and usage.inqueue["qb"] == {GPU: 2} and "qb" not in usage.elastic
    # b's pending pod gated (an elastic worker): its 2 GPUs come off b's reservation (capacity.go:1117)
    gated = [*pods("b", 1), PodView("ns", "b-g", "u-b-g", requests={GPU: 2}, group="b", scheduling_gates=("g",))]
    assert "qb" not in ledger.usage_of_groups([(b, gated)]).inqueue
    # Gated only by Volcano's own queue-allocation gate: counted in inqueue, not deducted (Volcano
    # v1.15.1 job_info.go:612-620, helpers.go:143); with another gate as well, deducted.
    volcano = "scheduling.volcano.sh/queue-allocation-gate"
    own = [*pods("b", 1), PodView("ns", "b-g", "u-b-g", requests={GPU: 2}, group="b", scheduling_gates=(volcano,))]
    assert ledger.usage_of_groups([(b, own)]).inqueue["qb"] == {GPU: 2}
    both = [*pods("b", 1), PodView("ns", "b-g", "u-b-g", requests={GPU: 2}, group="b",
                                   scheduling_gates=(volcano, "g"))]
    assert "qb" not in ledger.usage_of_groups([(b, both)]).inqueue


def test_ledger_follows_the_plan() -> None:
    shares = cap.build(dept(), res(gpu=16), hierarchy=True)
    led = ledger.CapacityLedger(shares, {"team-a": res(gpu=4), "scratch": res(gpu=4)})
    assert led.excess("team-b", res(gpu=2)) == {"dept": {GPU: 2.0}}
    led.give("scratch", res(gpu=2))
    assert led.allocatable("team-b", res(gpu=2)) and led.in_subtree("scratch", "dept")
    led.take("team-b", res(gpu=2))
    assert not led.allocatable("team-b", res(gpu=1))
    assert led.victims_reason("scratch", [res(gpu=2)], res(gpu=2)) is None  # best-effort: immediate victim
    assert led.may_reclaim_reason("scratch", res(gpu=1)) is not None  # best-effort never reclaims


def test_ledger_without_leaves_the_original_alone() -> None:
    shares = cap.build(dept(), res(gpu=16), hierarchy=True)
    led = ledger.CapacityLedger(shares, {"team-a": res(gpu=4), "scratch": res(gpu=4)})
    trial = led.without([("scratch", res(gpu=2)), ("scratch", res(gpu=2))])
    assert trial.excess("team-b", res(gpu=4)) == {} and led.excess("team-b", res(gpu=4)) == {"dept": {GPU: 4.0}}


# -- CapacityModel: the share-model hooks --------------------------------------------------------------


def model(queues: list[QueueView], allocated: dict[str, dict[str, int]], hierarchy: bool = False,
          total: dict[str, int] | None = None) -> ledger.CapacityModel:
    from elastic_controller.policy.shares import Usage

    return ledger.CapacityModel.of(queues, [], {}, Usage(allocated, {}, {}), total or res(cpu=64, gpu=32), GPU,
                                hierarchy=hierarchy)


def test_model_hooks_flat() -> None:
    m = model([q("team", deserved=res(gpu=8)), q("scratch"), q("held", guarantee=res(gpu=8))],
              {"team": res(gpu=8), "scratch": res(gpu=16), "held": res(gpu=12)})
    assert (m.deserved("team"), m.deserved("scratch"), m.deserved("held")) == (8, 0, 8)
    # admission is the real capability (32 less held's guarantee), not deserved: room beyond deserved
    assert m.admission_deserved("team") == 24 and m.room("team") == 16 and m.enqueue_excess("team", 8) == 0
    assert m.enqueue_excess("team", 20) == 4
    # reclaim: within deserved with the gang; best-effort never; unknown never
    assert m.below_share("team", 0, need={GPU: 8}) and not m.below_share("team", 4, need={GPU: 8})
    assert not m.below_share("scratch", 0, need={GPU: 1}) and not m.below_share("ghost", 0, need={GPU: 1})
    # victims: best-effort gives everything; held keeps its guarantee (deserved raised to it)
    assert m.keeps_share("scratch", 0) and m.overused("scratch", 1)
    assert m.keeps_share("held", 8) and not m.keeps_share("held", 7) and m.overused("held", 9)
    assert m.shares["held"].deserved == {GPU: 8} and m.shares["scratch"].allocated == {GPU: 16}


def test_model_hooks_hierarchy() -> None:
    m = model(dept(), {"team-a": res(gpu=4), "scratch": res(gpu=4)}, hierarchy=True)
    # team-b: its own real capability 6, the dept's 8 less the 8 its siblings hold: 0 left
    assert m.admission_deserved("team-b") == 0 and m.enqueue_excess("team-b", 2) == 2
    assert m.relieved_by("team-b", "scratch") and m.relieved_by("team-b", "team-a")
    assert not m.relieved_by("team-b", "other") and m.relieved_by("team-b", "team-b")
    assert m.admission_deserved("other") > 1000  # root is unbounded
    assert not m.relieved_by("other", "scratch")
    assert m.why_not_placed("dept") == "queue dept is not a leaf queue" and m.admission_deserved("dept") == 0
    assert m.shares["dept"].allocated == {GPU: 8}  # rolled up


def test_model_enqueue_reason() -> None:
    from elastic_controller.policy.model import PodGroupView
    from elastic_controller.policy.shares import Usage

    queues = [q("team", capability=res(gpu=8))]
    pending = PodGroupView("ns", "g", 2, "team", min_resources={GPU: 8}, phase="Pending")
    running = PodGroupView("ns", "r", 1, "team", min_resources={GPU: 2}, phase="Running")
    from elastic_controller.policy.model import PodView

    held = [PodView("ns", f"r-{i}", f"u{i}", phase="Running", node_name="n", requests={GPU: 2}, group="r")
            for i in range(2)]
    m = ledger.CapacityModel.of(queues, [], {"ns/g": pending, "ns/r": running}, Usage({"team": {GPU: 4}}, {}, {}),
                             res(gpu=32), GPU, held)
    # 8 + 4 held - 2 elastic = 10 > 8: not admitted, whatever is evicted
    assert m.enqueue_reason(pending) is not None and m.enqueue_reason(running) is None
    small = PodGroupView("ns", "s", 1, "team", min_resources={GPU: 6}, phase="Pending")
    assert m.enqueue_reason(small) is None  # 6 + 4 - 2 = 8
