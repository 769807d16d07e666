"""The planner and the gate releases on ``CapacityModel`` (config ``shares: {plugin: capacity}``): the
capacity plugin's rules decide evictions and gate lifts (Volcano v1.15.1
``pkg/scheduler/plugins/capacity/capacity.go``; the rules themselves are tested in test_policy_capacity.py).
Each story is also planned under ``proportion`` where the two plugins disagree, so that the test fails
if the model were not wired."""

from __future__ import annotations

from typing import Any

from elastic_controller.policy.settings import ElasticConfig, SharesConfig
from tests.harness.builders import elastic_job, gang, node, plan_of, podgroup, queue

GPU = "nvidia.com/gpu"
CAPACITY = ElasticConfig(shares=SharesConfig(plugin="capacity"))
HIERARCHY = ElasticConfig(shares=SharesConfig(plugin="capacity", hierarchy=True))
PROPORTION = ElasticConfig()


def victims_by_queue(plan: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in plan.evictions:
        out[e.queue] = out.get(e.queue, 0) + 1
    return out


def test_team_gang_reclaims_from_a_best_effort_sibling() -> None:
    # AddPreemptiveFn (capacity.go:648): team (deserved 4) stays within deserved with its 4-GPU gang;
    # scratch has no deserved, so every pod of it is an immediate victim (capacity.go:1855).
    objs = [node("n0"), queue("team", deserved={GPU: 4}), queue("scratch"),
            *elastic_job("ns", "s", min_r=1, max_r=8, nodes=["n0"], queue="scratch"),
            *gang("ns", "g", members=4, gpus=1, queue="team")]
    plan = plan_of(*objs, cfg=CAPACITY)
    assert victims_by_queue(plan) == {"scratch": 4}
    assert [d.decision for d in plan.starving] == ["evict"]


def test_best_effort_gang_never_reclaims() -> None:
    # A queue without deserved never reclaims (capacity.go:677); proportion (equal weights) would.
    objs = [node("n0"), queue("team", deserved={GPU: 4}), queue("scratch"),
            *elastic_job("ns", "t", min_r=1, max_r=8, nodes=["n0"], queue="team"),
            *gang("ns", "g", members=4, gpus=1, queue="scratch")]
    plan = plan_of(*objs, cfg=CAPACITY)
    assert plan.evictions == ()
    assert [d.decision for d in plan.starving] == ["wait"]
    assert victims_by_queue(plan_of(*objs, cfg=PROPORTION)) == {"team": 4}


def test_victim_queue_keeps_its_guarantee() -> None:
    # checkGuaranteeConstraint (capacity.go:1842): held's 6 running GPUs are its guarantee; team may
    # reclaim (deserved 4) but held gives nothing.
    objs = [node("n0", gpus=6), queue("team", deserved={GPU: 4}), queue("held", guarantee={GPU: 6}),
            *elastic_job("ns", "h", min_r=1, max_r=6, nodes=["n0"], queue="held"),
            *gang("ns", "g", members=2, gpus=1, queue="team")]
    plan = plan_of(*objs, cfg=CAPACITY)
    assert plan.evictions == ()
    assert [d.decision for d in plan.starving] == ["wait"]


def test_victim_queue_not_taken_below_deserved() -> None:
    # Ours, stricter than Volcano: other (deserved 6, holding 8) gives 2, not the 4 the gang needs.
    objs = [node("n0"), queue("team", deserved={GPU: 4}), queue("other", deserved={GPU: 6}),
            *elastic_job("ns", "o", min_r=1, max_r=8, nodes=["n0"], queue="other"),
            *gang("ns", "g", members=4, gpus=1, queue="team")]
    plan = plan_of(*objs, cfg=CAPACITY)
    assert plan.evictions == ()
    objs[-5:] = gang("ns", "g", members=2, gpus=1, queue="team")
    assert victims_by_queue(plan_of(*objs, cfg=CAPACITY)) == {"other": 2}


def test_gang_placed_beyond_deserved_gets_no_evictions() -> None:
    # AddAllocatableFn (capacity.go:717): deserved is not consulted; team's 8-GPU gang goes on the
    # idle node although team deserves 2. (Proportion reads no spec.deserved: the gang fits team's
    # weighted share there too.)
    objs = [node("n0"), node("n1"), queue("team", deserved={GPU: 2}), queue("scratch"),
            *elastic_job("ns", "t", min_r=1, max_r=2, nodes=["n0"], queue="team"),
            *elastic_job("ns", "s", min_r=1, max_r=6, nodes=["n0"], queue="scratch"),
            *gang("ns", "g", members=8, gpus=1, queue="team")]
    plan = plan_of(*objs, cfg=CAPACITY)
    assert plan.evictions == ()
    assert [d.reason for d in plan.starving] == ["its min set fits on free capacity now; waiting for the "
                                                 "scheduler to place it"]


def test_gates_lifted_only_within_real_capability() -> None:
    # team's capability 4: 2 running, 6 gated on an idle 8-GPU node -> 2 lifted (capacity.go:1629).
    objs = [node("n0"), queue("team", capability={GPU: 4}),
            *elastic_job("ns", "t", min_r=1, max_r=8, running=2, nodes=["n0"], queue="team")]
    plan = plan_of(*objs, cfg=CAPACITY)
    assert len(plan.gate_releases) == 2


def test_gates_lifted_beyond_deserved_under_capacity_only() -> None:
    # Under capacity a lifted pod is placed while within real capability, whatever deserved says
    # (team deserves 1 and holds 2, and still grows: the least fulfilled job takes the node's 4 idle
    # GPUs in one scale event, 2 -> 6); under proportion only within its weighted share (Volcano's
    # view, gated pods requested: 4 of the 8 GPUs each; spec.deserved is not read): team 2 -> 4, and
    # scratch gets its 2.
    objs = [node("n0"), queue("team", deserved={GPU: 1}), queue("scratch"),
            *elastic_job("ns", "t", min_r=1, max_r=8, running=2, nodes=["n0"], queue="team"),
            *elastic_job("ns", "s", min_r=1, max_r=4, running=2, nodes=["n0"], queue="scratch")]
    cap = plan_of(*objs, cfg=CAPACITY)
    assert [r.job for r in cap.gate_releases] == ["ns/t"] * 4
    prop = plan_of(*objs, cfg=PROPORTION)
    assert [r.job for r in prop.gate_releases] == ["ns/t", "ns/t", "ns/s", "ns/s"]


def test_hierarchy_gates_stop_at_the_department_capability() -> None:
    # checkQueueAllocatableHierarchically (capacity.go:1662): dept's capability 4 bounds its leaves
    # together: a holds 2, b holds 1, so one of b's gated pods may go, not the node's 5 idle GPUs.
    objs = [node("n0"), queue("root"), queue("dept", capability={GPU: 4}),
            queue("a", parent="dept"), queue("b", parent="dept"),
            *elastic_job("ns", "a", min_r=2, max_r=2, nodes=["n0"], queue="a"),
            *elastic_job("ns", "b", min_r=1, max_r=8, running=1, nodes=["n0"], queue="b")]
    plan = plan_of(*objs, cfg=HIERARCHY)
    assert [r.job for r in plan.gate_releases] == ["ns/b"]
    # Flat capacity reads no parent: b alone is unbounded and grows into the node's 5 idle GPUs in
    # one scale event (1 -> 6).
    assert [r.job for r in plan_of(*objs, cfg=CAPACITY).gate_releases] == ["ns/b"] * 5


def test_hierarchy_sibling_makes_room_in_the_department() -> None:
    # dept's capability 8 is filled by its best-effort leaf scratch; team's 4-GPU gang fits the idle
    # n1 but not the department (checkQueueAllocatableHierarchically, capacity.go:1662): scratch's
    # elastic workers are the ones that make room (CapacityModel.relieved_by), 4 of them.
    objs = [node("n0"), node("n1"), queue("root"), queue("dept", capability={GPU: 8}),
            queue("team", parent="dept", deserved={GPU: 8}), queue("scratch", parent="dept"),
            *elastic_job("ns", "s", min_r=1, max_r=8, nodes=["n0"], queue="scratch"),
            *gang("ns", "g", members=4, gpus=1, queue="team")]
    plan = plan_of(*objs, cfg=HIERARCHY)
    assert victims_by_queue(plan) == {"scratch": 4}
    assert "real capability" in plan.starving[0].reason
    # Flat, the department is no bound: the gang goes on n1 with no evictions.
    assert plan_of(*objs, cfg=CAPACITY).evictions == ()


def test_no_evictions_for_a_gang_enqueue_keeps_out() -> None:
    # jobEnqueueable (capacity.go:1680): minResources + allocated + inqueue - elastic <= real
    # capability. team (capability 4) has PodGroup x admitted (Inqueue, minResources 4, nothing placed
    # yet: it reserves 4), so g (Pending, minResources 2) is not enqueued whatever is evicted; the
    # planner waits instead of reclaiming scratch's workers. With x gone, g reclaims.
    reserved = podgroup("ns", "x", 4, "team")
    reserved["spec"]["minResources"] = {GPU: "4"}
    reserved["status"]["phase"] = "Inqueue"
    g = gang("ns", "g", members=2, gpus=1, queue="team")
    g[0]["spec"]["minResources"] = {GPU: "2"}
    g[0]["status"]["phase"] = "Pending"
    objs = [node("n0"), queue("team", deserved={GPU: 4}, capability={GPU: 4}), queue("scratch"),
            *elastic_job("ns", "s", min_r=1, max_r=8, nodes=["n0"], queue="scratch"), *g]
    plan = plan_of(*objs, reserved, cfg=CAPACITY)
    assert plan.evictions == ()
    (d,) = plan.starving
    assert d.decision == "wait" and "does not admit it (enqueue)" in d.reason
    assert victims_by_queue(plan_of(*objs, cfg=CAPACITY)) == {"scratch": 2}
