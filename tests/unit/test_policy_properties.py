"""Hypothesis properties of one planning cycle over random small clusters (issue 2, "Tests")."""

from __future__ import annotations

import dataclasses
import gc
import os
import random
from datetime import timedelta
from itertools import combinations
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elastic_controller.policy.cooldowns import in_cooldown
from elastic_controller.policy.cycle import plan_cycle
from elastic_controller.policy.fit import Capacity, fits_all, node_accepts, place_all, pod_demand
from elastic_controller.policy.keys import WORKER_COUNTS, WORKER_STEP, Role
from elastic_controller.policy.model import PodView, Snapshot
from elastic_controller.policy.parse import parse_objects
from elastic_controller.policy.settings import ElasticConfig, QueuePolicy
from elastic_controller.policy.shares import plan_shares, usage_of
from elastic_controller.policy.world import PlanCache, build_world, node_base
from elastic_controller.policy.worldsizes import AllowedCounts
from tests.builders import NOW, ago, job_pod, node, plan_fast_and_exhaustive, pod, podgroup, priority_class, queue

GPU = "nvidia.com/gpu"
GATE = "volcano-elastic.io/scale-up"
TOLERATE = [{"key": "dedicated", "operator": "Exists"}]
# PROPERTY_EXAMPLES=2000 for a deeper hunt; the default keeps the file well under a minute.
SETTINGS = settings(max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "60")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def worker_sizes(draw: st.DrawFn, min_r: int, max_r: int) -> dict[str, str]:
    """The job contract's allowed counts for a job with Worker bounds [min_r, max_r]: none (most jobs),
    a step, or a list of counts holding min (sometimes not max, sometimes a typo the planner must
    treat as "never resized")."""
    kind = draw(st.sampled_from(["", "", "", "step", "counts", "counts", "bad"]))
    if kind == "step":
        return {WORKER_STEP: str(draw(st.integers(1, 4)))}
    if kind == "counts":
        rest = draw(st.lists(st.integers(min_r + 1, max_r), max_size=3)) if max_r > min_r else []
        return {WORKER_COUNTS: ",".join(map(str, sorted({min_r, *rest})))}
    if kind == "bad":
        return {WORKER_COUNTS: draw(st.sampled_from(["two", "0", ""]))}
    return {}


@st.composite
def clusters(draw: st.DrawFn, priorities: st.SearchStrategy[list[int]] | None = None,
             ) -> tuple[list[dict[str, Any]], ElasticConfig]:
    """A random small cluster. ``priorities``: PriorityClass values to draw from (each becomes a class
    jobs and gangs pick from), instead of the fixed "low" (10) and "high" (1000)."""
    if priorities is None:
        objs: list[dict[str, Any]] = [priority_class("low", 10), priority_class("high", 1000)]
        job_classes, gang_classes = ["", "", "low", "high"], ["", "low", "high", "high"]
        filler_classes = ["", "low"]
    else:
        values = draw(priorities)
        objs = [priority_class(f"p{i}", v) for i, v in enumerate(values)]
        job_classes = gang_classes = ["", *(f"p{i}" for i in range(len(values)))]
        filler_classes = ["", "p0"]
    free: dict[str, int] = {}
    for i in range(draw(st.integers(1, 4))):
        gpus = draw(st.sampled_from([4, 8, 8]))
        taints = []
        if draw(st.integers(0, 5)) == 0:
            taints = [{"key": "dedicated", "value": "x",
                       "effect": draw(st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"]))}]
        objs.append(node(f"n{i}", gpus=gpus, labels={"zone": draw(st.sampled_from("ab"))}, taints=taints,
                         unschedulable=draw(st.integers(0, 11)) == 0))
        free[f"n{i}"] = gpus
    for q in ("q1", "q2"):
        deserved = {GPU: draw(st.integers(0, 12))} if draw(st.booleans()) and draw(st.booleans()) else None
        objs.append(queue(q, weight=draw(st.integers(1, 3)), reclaimable=draw(st.integers(0, 3)) > 0,
                          deserved=deserved))
    gang_names = [f"g{i}" for i in range(draw(st.integers(1, 3)))]

    for j in range(draw(st.integers(1, 5))):
        name = f"j{j}"
        min_r = draw(st.integers(1, 3))
        max_r = min_r + draw(st.sampled_from([0, 1, 2, 3, 4, 6, 6]))
        gpus = draw(st.integers(1, 2))
        master = draw(st.booleans())
        running = draw(st.one_of(st.just(max_r), st.integers(min_r, max_r)))
        q = draw(st.sampled_from(["q1", "q2"]))
        pc = draw(st.sampled_from(job_classes))
        last = draw(st.sampled_from([None, None, None, 60, 1000]))
        objs.append(podgroup("ns", name, min_r + int(master), q, pc, ago(last) if last is not None else None,
                             created=ago(7200), annotations=draw(worker_sizes(min_r, max_r))))
        nn = f"{min_r}:{max_r}"
        members = ([("master", 0)] if master else []) + [("worker", i) for i in range(max_r)]
        for rtype, idx in members:
            kw: dict[str, Any] = {"gpus": gpus, "created": ago(7200), "tolerations": TOLERATE}
            want_running = rtype == "master" or idx < running
            fits = sorted(n for n, f in free.items() if f >= gpus)
            if want_running and fits:
                n = draw(st.sampled_from(fits))
                free[n] -= gpus
                kw.update(node_name=n, scheduled_at=ago(draw(st.sampled_from([30, 3600, 3600, 3600]))))
                if rtype == "worker" and idx >= min_r and draw(st.integers(0, 5)) == 0:
                    kw["deleting"] = True
                    kw["annotations"] = {"volcano-elastic.io/evicted-for": f"ns/{draw(st.sampled_from(gang_names))}"}
            elif rtype == "worker" and idx >= min_r and max_r > min_r:
                kw["gates"] = [GATE]
            else:
                kw["unschedulable_since"] = ago(draw(st.sampled_from([5, 600])))
            objs.append(job_pod("ns", name, rtype, idx, nnodes=nn, master_replica=master, **kw))

    if draw(st.integers(0, 3)) > 0:  # a filler job: elastic 1-GPU workers soak up every free GPU
        left = sorted(n for n, f in free.items() for _ in range(f))
        if left:
            q = draw(st.sampled_from(["q1", "q2"]))
            objs.append(podgroup("ns", "fill", 1, q, draw(st.sampled_from(filler_classes)), created=ago(7200)))
            nn = f"1:{len(left) + 2}"
            for idx, n in enumerate(left):
                objs.append(job_pod("ns", "fill", "worker", idx, nnodes=nn, gpus=1, node_name=n,
                                    scheduled_at=ago(3600), created=ago(7200), tolerations=TOLERATE))
            for idx in (len(left), len(left) + 1):
                objs.append(job_pod("ns", "fill", "worker", idx, nnodes=nn, gpus=1, gates=[GATE],
                                    created=ago(7200)))
            free = dict.fromkeys(free, 0)

    for name in gang_names:
        members = draw(st.integers(1, 3))
        gpus = draw(st.sampled_from([1, 2, 2, 3, 4, 4, 6, 8]))
        since = ago(draw(st.sampled_from([5, 600, 900, 1200])))
        objs.append(podgroup("ns", name, members, draw(st.sampled_from(["q1", "q2"])),
                             draw(st.sampled_from(gang_classes)), created=since))
        selector = {"zone": draw(st.sampled_from("ab"))} if draw(st.integers(0, 3)) == 0 else None
        tol = TOLERATE if draw(st.booleans()) else []
        for i in range(members):
            objs.append(pod("ns", f"{name}-{i}", group=name, gpus=gpus, created=since, unschedulable_since=since,
                            node_selector=selector, tolerations=tol))

    defaults = QueuePolicy(
        cooldownSeconds=300,
        minRuntimeSeconds=draw(st.sampled_from([0, 120])),
        starvationSeconds=30,
        maxEvictionsPerCycle=draw(st.sampled_from([0, 1, 2, 4, 8, 16, 16])),
        maxScaleUpPerCycle=draw(st.integers(0, 4)),
        preemptDuringCooldown=draw(st.integers(0, 3)) == 0,
        minScaleUpGain=draw(st.sampled_from([0.0, 0.5, 1.0])),
        minWorkersToShrink=draw(st.sampled_from([0, 0, 3, 4])),  # mostly 0: small jobs give too
        fairnessWhileGangsWait=draw(st.booleans()),  # issue 38: gangs decided "wait" do not stop it
    )
    return objs, ElasticConfig(defaults=defaults)


def parse(objs: list[dict[str, Any]], cfg: ElasticConfig) -> Snapshot:
    snap, warnings = parse_objects(objs, cfg)
    assert not warnings, warnings
    return snap


def future_capacity(snap: Snapshot) -> Capacity:
    """Allocatable minus every pod that holds resources and is not terminating."""
    cap = Capacity.empty(snap.nodes)
    for p in snap.pods:
        if p.node_name and not p.terminal and not p.deleting:
            cap.take(p.node_name, pod_demand(p))
    return cap


def free_now(snap: Snapshot) -> Capacity:
    cap = Capacity.empty(snap.nodes)
    for p in snap.pods:
        if p.node_name and not p.terminal:
            cap.take(p.node_name, pod_demand(p))
    return cap


@given(clusters())
@SETTINGS
def test_victims_are_admissible(cluster: tuple[list[dict[str, Any]], ElasticConfig]) -> None:
    objs, cfg = cluster
    snap = parse(objs, cfg)
    plan = plan_cycle(snap, cfg, NOW)
    pods = {p.key: p for p in snap.pods}
    pgs = {pg.key: pg for pg in snap.podgroups}
    decisions = {d.pod_group: d for d in plan.starving}
    prio = snap.priority_classes
    victims = [pods[e.pod] for e in plan.evictions]
    assert len({v.key for v in victims}) == len(victims), "a pod is evicted once"
    lost: dict[str, int] = {}
    for e, v in zip(plan.evictions, victims, strict=True):
        # A subset of running, non-terminating elastic workers; never the master.
        assert v.role is Role.ELASTIC and v.running and not v.deleting and v.replica_type == "worker", v.key
        assert not v.job_role_master
        vpg, gpg = pgs[v.group_key], pgs[e.for_gang]
        if e.reason.startswith("fairness:"):  # the fairness scale-down (issue 38): for a job of its queue
            assert e.for_gang not in decisions and vpg.queue == gpg.queue, e
        else:
            gang = decisions[e.for_gang]
            assert gang.decision == "evict" and v.key in gang.victims
        policy = cfg.queue_policy(vpg.queue)
        # No victim from a cooling job (unless preemptDuringCooldown), none younger than minRuntimeSeconds.
        assert policy.preemptDuringCooldown or not in_cooldown(vpg, policy, NOW), v.key
        assert v.scheduled_at is not None
        assert NOW - v.scheduled_at >= timedelta(seconds=policy.minRuntimeSeconds)
        # Never from a job of higher priority than the gang.
        assert prio.get(vpg.priority_class_name, 0) <= prio.get(gpg.priority_class_name, 0)
        if vpg.queue != gpg.queue:
            assert next(q for q in snap.queues if q.name == vpg.queue).reclaimable
        lost[v.group_key] = lost.get(v.group_key, 0) + 1
    # No job goes below min.
    for jkey, n in lost.items():
        members = [p for p in snap.pods if p.group_key == jkey]
        bounds = next(p.bounds for p in members if p.bounds is not None)
        running = sum(1 for p in members if p.replica_type == "worker" and p.running)
        assert running - n >= bounds.min_replicas, jkey
        # None from a job running fewer workers than its queue's minWorkersToShrink.
        assert running >= cfg.queue_policy(pgs[jkey].queue).minWorkersToShrink, jkey
    # The per-queue cap.
    per_queue: dict[str, int] = {}
    for d in plan.starving:
        per_queue[d.queue] = per_queue.get(d.queue, 0) + len(d.victims)
        assert d.reason
        assert (d.decision == "evict") == bool(d.victims)
    for q, n in per_queue.items():
        assert n <= cfg.queue_policy(q).maxEvictionsPerCycle


@given(clusters())
@SETTINGS
def test_every_plan_fits_and_is_minimal(cluster: tuple[list[dict[str, Any]], ElasticConfig]) -> None:
    """Every plan makes its gang fit on the nodes *and* within its queue's deserved share as
    Volcano's proportion plugin computes it (allocated + needed <= deserved, GPUs); it evicts only
    when the gang did not already satisfy both; dropping any victim breaks one of them."""
    objs, cfg = cluster
    snap = parse(objs, cfg)
    plan = plan_cycle(snap, cfg, NOW)
    pods = {p.key: p for p in snap.pods}
    pgs = {pg.key: pg for pg in snap.podgroups}
    deserved = {q: s.deserved.get(GPU, 0)
                for q, s in plan_shares(snap.queues, snap.nodes, snap.pods, pgs, volcano_view=True).items()}
    alloc: dict[str, int] = {}
    for p in snap.pods:
        if p.group_key in pgs and p.node_name and not p.deleting and not p.terminal:
            q = pgs[p.group_key].queue
            alloc[q] = alloc.get(q, 0) + p.requests.get(GPU, 0)
    cap = future_capacity(snap)  # promises to earlier gangs are taken from it in decision order
    lost_before: dict[str, int] = {}  # victims of each job in earlier decisions

    def queue_of(p: PodView) -> str:
        return pgs[p.group_key].queue

    for d in plan.starving:
        needed = [pods[k] for k in d.needed]
        assert all(p.pending and not p.scheduling_gates and p.group_key == d.pod_group for p in needed)
        need = sum(p.requests.get(GPU, 0) for p in needed)
        excess = max(0, alloc.get(d.queue, 0) + need - deserved.get(d.queue, 0))
        if d.decision == "wait":
            trial = cap.copy()
            if place_all(needed, trial) is not None and not excess:
                cap = trial  # it fits without victims: the room is promised to it
            continue
        victims = [pods[k] for k in d.victims]

        def ok(chosen: list[PodView], base: Capacity, queue: str, excess: int, needed: list[PodView]) -> bool:
            trial = base.copy()
            for v in chosen:
                trial.give(v.node_name, pod_demand(v))
            own = sum(v.requests.get(GPU, 0) for v in chosen if queue_of(v) == queue)
            return own >= excess and place_all(needed, trial) is not None

        gang = (cap, d.queue, excess, needed)
        assert ok(victims, *gang), f"{d.pod_group}: victims do not make it fit (on the nodes and in its share)"
        assert not ok([], *gang), f"{d.pod_group}: evicts although it fits"
        stepped: set[str] = set()
        for drop in victims:
            allowed = allowed_of(snap, pgs[drop.group_key])
            if allowed is None:
                assert not ok([v for v in victims if v is not drop], *gang), f"{d.pod_group}: {drop.key} is not needed"
                continue
            if drop.group_key in stepped:
                continue
            stepped.add(drop.group_key)
            # A job with allowed counts gives back a whole step at once: leaving it at the next allowed
            # count above the one the plan takes it to (or untouched, when there is none up to where it
            # ran) breaks the plan, whichever of its victims it keeps.
            mine = [v for v in victims if v.group_key == drop.group_key]
            others = [v for v in victims if v.group_key != drop.group_key]
            before = running_workers(snap, drop.group_key) - lost_before.get(drop.group_key, 0)
            up = [c for c in allowed.grow_targets(before - len(mine)) if c <= before]
            keep = before - up[0] if up else 0
            assert keep < len(mine)
            for kept in combinations(mine, keep):
                assert not ok([*others, *kept], *gang), \
                    f"{d.pod_group}: {drop.group_key} gives {len(mine)} where {keep} (one step fewer) would do"
        for v in victims:
            lost_before[v.group_key] = lost_before.get(v.group_key, 0) + 1
        for v in victims:
            cap.give(v.node_name, pod_demand(v))
            alloc[queue_of(v)] = alloc.get(queue_of(v), 0) - v.requests.get(GPU, 0)
        assert place_all(needed, cap) is not None
        alloc[d.queue] = alloc.get(d.queue, 0) + need


def allowed_of(snap: Snapshot, pg: Any) -> AllowedCounts | None:
    """The allowed Worker counts of the job of PodGroup ``pg`` (None: any count in [min, max])."""
    bounds = next(p.bounds for p in snap.pods if p.group_key == pg.key and p.bounds is not None)
    allowed = pg.worker_sizes.allowed(bounds.min_replicas, bounds.max_replicas)
    return None if allowed.every else allowed


def running_workers(snap: Snapshot, group: str) -> int:
    return sum(1 for p in snap.pods if p.group_key == group and p.replica_type == "worker" and p.running)


@given(clusters())
@SETTINGS
def test_allowed_counts_are_never_violated(cluster: tuple[list[dict[str, Any]], ElasticConfig]) -> None:
    """Issue 20: after any plan (node search, own-queue share victims, both searches alike), every job
    with worker-counts or worker-step is untouched or at one of its allowed counts; an unusable contract
    is never resized."""
    objs, cfg = cluster
    snap = parse(objs, cfg)
    plan, slow = plan_fast_and_exhaustive(snap, cfg, NOW)
    assert plan == slow
    pgs = {pg.key: pg for pg in snap.podgroups}
    pods = {p.key: p for p in snap.pods}
    lost: dict[str, int] = {}
    for e in plan.evictions:
        group = pods[e.pod].group_key
        lost[group] = lost.get(group, 0) + 1
    for group, n in lost.items():
        allowed = allowed_of(snap, pgs[group])
        if allowed is None:
            continue
        running = running_workers(snap, group)
        assert running - n in allowed, (group, running, n, allowed.describe())
        assert allowed.counts, "an unusable contract is never resized"
        why = [e.reason for e in plan.evictions if pods[e.pod].group_key == group]
        assert all(f"job {group} gives {n} worker" in r and f"allowed counts {allowed.describe()}" in r
                   for r in why), why


@given(clusters())
@SETTINGS
def test_gate_releases_are_admissible(cluster: tuple[list[dict[str, Any]], ElasticConfig]) -> None:
    objs, cfg = cluster
    snap = parse(objs, cfg)
    plan = plan_cycle(snap, cfg, NOW)
    if plan.scale_up_blocked_by:
        assert plan.gate_releases == ()
    pods = {p.key: p for p in snap.pods}
    pgs = {pg.key: pg for pg in snap.podgroups}
    cap = free_now(snap)
    if plan.gate_releases:
        # Growth goes on only around gangs that fit on free capacity now: an eviction beside it only
        # makes room in the gang's own queue share (its victims are of its own queue).
        for d in plan.starving:
            if d.decision == "evict":
                assert place_all([pods[k] for k in d.needed], cap.copy()) is not None, d
                assert all(pgs[pods[v].group_key].queue == d.queue for v in d.victims), d
    per_queue: dict[str, int] = {}
    added: dict[str, int] = {}
    for r in plan.gate_releases:
        p = pods[r.pod]
        pg = pgs[p.group_key]
        policy = cfg.queue_policy(pg.queue)
        assert p.role is Role.ELASTIC and p.pending and GATE in p.scheduling_gates
        assert not in_cooldown(pg, policy, NOW)
        members = [m for m in snap.pods if m.group_key == pg.key]
        assert sum(1 for m in members if m.placed) >= pg.min_member, "job is running"
        node_view = cap.nodes[r.node]
        assert node_accepts(node_view, p) and cap.fits(r.node, pod_demand(p)), r
        cap.take(r.node, pod_demand(p))
        per_queue[pg.queue] = per_queue.get(pg.queue, 0) + 1
        added[pg.key] = added.get(pg.key, 0) + 1
        assert p.bounds is not None
        running = sum(1 for m in members if m.replica_type == "worker" and m.running)
        assert running + added[pg.key] <= p.bounds.max_replicas
    # maxScaleUpPerCycle counts the jobs grown (one scale event each) per queue; each grows by at
    # least minScaleUpGain unless it is in its first rendezvous (never scaled, placed 30 s ago).
    jobs_per_queue: dict[str, set[str]] = {}
    for r in plan.gate_releases:
        jobs_per_queue.setdefault(r.queue, set()).add(r.job)
    for q, grown_jobs in jobs_per_queue.items():
        assert len(grown_jobs) <= cfg.queue_policy(q).maxScaleUpPerCycle
    for key, n in added.items():
        members = [m for m in snap.pods if m.group_key == key]
        running = sum(1 for m in members if m.replica_type == "worker" and m.running)
        placed_at = [m.scheduled_at for m in members if m.placed and m.scheduled_at]
        policy = cfg.queue_policy(pgs[key].queue)
        first = pgs[key].last_scale is None and bool(placed_at) and (
            (NOW - min(placed_at)).total_seconds() <= policy.firstRendezvousSeconds)
        # a job left at a count outside its allowed counts (part of a victim group evicted) restarts
        # at its next event anyway: the gain test does not apply to it (policy/gates.py, off_count)
        bounds = next(m.bounds for m in members if m.bounds is not None)
        allowed = pgs[key].worker_sizes.allowed(bounds.min_replicas, bounds.max_replicas)
        off_count = allowed is not None and not allowed.every and bool(allowed.counts) and running not in allowed
        assert first or off_count or n / max(1, running) >= policy.minScaleUpGain, (key, n, running)
    # A queue grows only within the share Volcano's proportion plugin admits.
    volcano = plan_shares(snap.queues, snap.nodes, snap.pods, pgs, volcano_view=True)
    grown: dict[str, int] = {}
    for r in plan.gate_releases:
        grown[r.queue] = grown.get(r.queue, 0) + pods[r.pod].requests.get(GPU, 0)
    for q, g in grown.items():
        assert volcano[q].allocated.get(GPU, 0) + g <= volcano[q].deserved.get(GPU, 0), q
    for d in plan.starving if plan.gate_releases else ():  # ... never into the room of a gang about to be placed
        if d.decision == "evict" or d.reason.startswith("its min set fits on free capacity now"):
            assert place_all([pods[k] for k in d.needed], cap.copy()) is not None, d
    # Within a job, gates are lifted lowest index first.
    by_job: dict[str, list[int]] = {}
    for r in plan.gate_releases:
        by_job.setdefault(r.job, []).append(pods[r.pod].replica_index)
    assert all(idx == sorted(idx) for idx in by_job.values())


@given(clusters(), st.randoms(use_true_random=False))
@SETTINGS
def test_input_order_does_not_change_the_plan(cluster: tuple[list[dict[str, Any]], ElasticConfig],
                                              rnd: random.Random) -> None:
    objs, cfg = cluster
    shuffled = list(objs)
    rnd.shuffle(shuffled)
    assert plan_cycle(parse(objs, cfg), cfg, NOW) == plan_cycle(parse(shuffled, cfg), cfg, NOW)


@given(clusters())
@SETTINGS
def test_plan_is_pure(cluster: tuple[list[dict[str, Any]], ElasticConfig]) -> None:
    objs, cfg = cluster
    snap = parse(objs, cfg)
    assert plan_cycle(snap, cfg, NOW) == plan_cycle(snap, cfg, NOW)




def test_plan_cycle_restores_the_garbage_collector_state() -> None:
    snap, _ = parse_objects([node("n1")], ElasticConfig())
    assert gc.isenabled()
    plan_cycle(snap, ElasticConfig(), NOW)
    assert gc.isenabled()
    gc.disable()
    try:
        plan_cycle(snap, ElasticConfig(), NOW)
        assert not gc.isenabled()  # a caller that paused it keeps it paused
    finally:
        gc.enable()
    with pytest.raises(AttributeError):
        plan_cycle(None, ElasticConfig(), NOW)  # type: ignore[arg-type]
    assert gc.isenabled()  # re-enabled when planning fails


@given(clusters(), st.randoms(use_true_random=False))
@SETTINGS
def test_node_memo_across_cycles_does_not_change_the_plan(cluster: tuple[list[dict[str, Any]], ElasticConfig],
                                                          rnd: random.Random) -> None:
    # Consecutive cycles on the very same node views reuse what was derived from them (node_base);
    # a later cycle with other pods must plan exactly as on node views it has never seen.
    objs, cfg = cluster
    snap = parse(objs, cfg)
    later = dataclasses.replace(snap, pods=tuple(p for p in snap.pods if rnd.random() < 0.7))
    cache = PlanCache()
    plan_cycle(snap, cfg, NOW, cache=cache)  # fills the memo
    reused = plan_cycle(later, cfg, NOW, cache=cache)
    assert cache.nodes is not None and cache.nodes.nodes is snap.nodes
    fresh_nodes = tuple(dataclasses.replace(n) for n in snap.nodes)
    assert node_base(fresh_nodes, cache) is not node_base(snap.nodes)
    assert reused == plan_cycle(dataclasses.replace(later, nodes=fresh_nodes), cfg, NOW)


@given(clusters())
@SETTINGS
def test_world_indexes_agree_with_their_definitions(cluster: tuple[list[dict[str, Any]], ElasticConfig]) -> None:
    # build_world fills its indexes in one pass over the pods: each must equal what its own
    # definition computes on its own.
    objs, cfg = cluster
    snap = parse(objs, cfg)
    world = build_world(snap, cfg, NOW)
    assert world.usage == usage_of(snap.pods, world.podgroups)
    assert world.free_now.free == free_now(snap).free
    assert sorted(p.key for p in world.elastic_holding) == sorted(
        p.key for p in snap.pods if p.role is Role.ELASTIC and p.group and p.node_name and not p.terminal
        and not p.deleting)


@given(clusters(), st.integers(1, 24))
@SETTINGS
def test_counting_pods_alike_agrees_with_placing_them(cluster: tuple[list[dict[str, Any]], ElasticConfig],
                                                      copies: int) -> None:
    # fits_all counts the room for pods alike instead of placing them one by one: same verdict.
    objs, cfg = cluster
    snap = parse(objs, cfg)
    cap = free_now(snap)
    for unplaced in snap.pods:
        if unplaced.node_name:
            continue
        pods = [unplaced] * copies
        assert fits_all(pods, cap) == (place_all(pods, cap.copy()) is not None), (unplaced.key, copies)
    for gang in build_world(snap, cfg, NOW).waiting:
        assert fits_all(gang.needed, cap) == (place_all(gang.needed, cap.copy()) is not None), gang.key


@given(clusters())
@SETTINGS
def test_indexed_node_search_matches_the_exhaustive_scan(cluster: tuple[list[dict[str, Any]], ElasticConfig]) -> None:
    objs, cfg = cluster
    fast, slow = plan_fast_and_exhaustive(parse(objs, cfg), cfg, NOW)
    assert fast == slow


@given(clusters())
@SETTINGS
def test_a_pdb_refused_pod_is_never_a_victim(cluster: tuple[list[dict[str, Any]], ElasticConfig]) -> None:
    """The victims of a plan, refused by a PDB, are no victims of the next plan (either search), and
    the indexed search still matches the exhaustive scan."""
    objs, cfg = cluster
    snap = parse(objs, cfg)
    refused = frozenset(e.pod for e in plan_cycle(snap, cfg, NOW).evictions)
    fast = plan_cycle(snap, cfg, NOW, pdb_refused=refused)
    assert fast == plan_cycle(snap, cfg, NOW, search="exhaustive", pdb_refused=refused)
    assert not refused & {e.pod for e in fast.evictions}
    assert not any(refused & set(d.victims) for d in fast.starving)


_NAME = st.text(st.characters(blacklist_characters="\0", codec="utf-8"), max_size=6)


@given(st.lists(st.tuples(_NAME, _NAME, _NAME), max_size=12))
def test_pod_order_string_sorts_like_the_tuple(ids: list[tuple[str, str, str]]) -> None:
    pods = [PodView(namespace=ns, name=name, uid=uid) for ns, name, uid in ids]
    by_tuple = sorted(pods, key=lambda p: (p.namespace, p.name, p.uid))
    assert [(p.namespace, p.name, p.uid) for p in sorted(pods, key=lambda p: p.order)] == \
        [(p.namespace, p.name, p.uid) for p in by_tuple]
