"""Hypothesis properties of a planning cycle on ``CapacityModel`` (config ``shares: {plugin: capacity}``,
flat and hierarchical) over random small clusters (issue 21, "Tests"):

- no victim takes a queue other than the gang's below its guarantee (``checkGuaranteeConstraint``,
  Volcano v1.15.1 pkg/scheduler/plugins/capacity/capacity.go:1842);
- no eviction for a gang Volcano would place now: its needed pods fit on free capacity and its queue
  (and every ancestor) stays within real capability with them (``AddAllocatableFn``, capacity.go:717).
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elastic_controller.policy import capacity as cap
from elastic_controller.policy import capacity_ledger as ledger
from elastic_controller.policy.cycle import plan_cycle
from elastic_controller.policy.fit import fits_all
from elastic_controller.policy.settings import ElasticConfig, SharesConfig
from elastic_controller.policy.world import build_world
from tests.harness.builders import elastic_job, gang, node, queue, snapshot_of

GPU = "nvidia.com/gpu"
SETTINGS = settings(max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "80")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
QUEUES = ("qa", "qb", "qc")


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], ElasticConfig]:
    hierarchy = draw(st.booleans())
    n_nodes = draw(st.integers(1, 3))
    nodes = [f"n{i}" for i in range(n_nodes)]
    objs: list[dict[str, Any]] = [node(n) for n in nodes]
    if hierarchy:
        objs.append(queue("dept", capability=draw(st.sampled_from([None, {GPU: 8 * n_nodes - 4}]))))
    for name in QUEUES:
        spec: dict[str, Any] = {}
        deserved = draw(st.sampled_from([None, 2, 4, 8]))
        if deserved is not None:
            spec["deserved"] = {GPU: deserved}
        guarantee = draw(st.sampled_from([None, 2, 4]))
        if guarantee is not None:
            spec["guarantee"] = {GPU: guarantee}
        if draw(st.booleans()):
            spec["capability"] = {GPU: draw(st.sampled_from([4, 8, 16]))}
        objs.append(queue(name, parent="dept" if hierarchy else None, **spec))
    free = dict.fromkeys(nodes, 8)
    for j in range(draw(st.integers(2, 6))):
        n = draw(st.sampled_from(nodes))
        gpus = draw(st.sampled_from([1, 2]))
        room = free[n] // gpus
        if room < 1:
            continue
        running = draw(st.integers(max(1, room - 1), room))  # mostly full: gangs need victims
        free[n] -= running * gpus
        lo = draw(st.integers(1, running))
        objs += elastic_job("ns", f"j{j}", min_r=lo, max_r=running + draw(st.integers(0, 2)), running=running,
                            gpus=gpus, nodes=[n], queue=draw(st.sampled_from(QUEUES)))
    objs += gang("ns", "g", members=draw(st.integers(1, 4)), gpus=draw(st.sampled_from([1, 2, 4])),
                 queue=draw(st.sampled_from(QUEUES)))
    cfg = ElasticConfig(shares=SharesConfig(plugin="capacity", hierarchy=hierarchy))
    return objs, cfg


@SETTINGS
@given(clusters())
def test_no_victim_queue_below_its_guarantee(case: tuple[list[dict[str, Any]], ElasticConfig]) -> None:
    objs, cfg = case
    snap = snapshot_of(*objs, cfg=cfg)
    world = build_world(snap, cfg, snap_now())
    plan = plan_cycle(snap, cfg, snap_now())
    (g,) = world.waiting
    taken: dict[str, int] = {}
    pods = {p.key: p for p in snap.pods}
    for e in plan.evictions:
        taken[e.queue] = taken.get(e.queue, 0) + pods[e.pod].requests.get(GPU, 0)
    for q, gone in taken.items():
        if q == g.queue:
            continue  # its own queue's workers make room in its share: not a reclaim
        guarantee = {qv.name: qv for qv in snap.queues}[q].guarantee or {}
        assert world.model.allocated(q) - gone >= guarantee.get(GPU, 0), (q, gone, plan.evictions)


@SETTINGS
@given(clusters())
def test_no_eviction_for_a_gang_volcano_places_now(case: tuple[list[dict[str, Any]], ElasticConfig]) -> None:
    objs, cfg = case
    snap = snapshot_of(*objs, cfg=cfg)
    world = build_world(snap, cfg, snap_now())
    (g,) = world.waiting
    model = world.model
    assert isinstance(model, ledger.CapacityModel)
    request: dict[str, int] = {}
    for p in g.needed:
        for k, v in p.requests.items():
            request[k] = request.get(k, 0) + v
    places_now = fits_all(g.needed, world.free_now) and cap.allocatable(
        model.attrs, {q: dict(s.allocated) for q, s in world.shares.items() if model.attrs.is_leaf(q)},
        g.queue, request)
    if places_now:
        plan = plan_cycle(snap, cfg, snap_now())
        assert plan.evictions == (), plan


def snap_now() -> Any:
    from tests.harness.builders import NOW

    return NOW
