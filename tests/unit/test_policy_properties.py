"""Hypothesis properties of one planning cycle over random small clusters (issue 2, "Tests")."""

from __future__ import annotations

import dataclasses
import gc
import random
from datetime import timedelta
from itertools import combinations
from typing import Any, NamedTuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elastic_controller.policy.cooldowns import in_cooldown
from elastic_controller.policy.cycle import CyclePlan, plan_cycle
from elastic_controller.policy.fit import Capacity, fits_all, node_accepts, place_all, pod_demand
from elastic_controller.policy.keys import Role
from elastic_controller.policy.model import PodView, Snapshot
from elastic_controller.policy.parse import parse_objects
from elastic_controller.policy.settings import ElasticConfig
from elastic_controller.policy.shares import plan_shares, usage_of
from elastic_controller.policy.world import PlanCache, build_world, node_base
from elastic_controller.policy.worldsizes import AllowedCounts
from tests.harness.builders import NOW, node, plan_fast_and_exhaustive
from tests.harness.strategies import GATE, GPU, SETTINGS, clusters, parse


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


class Planned(NamedTuple):
    """One generated cluster parsed and planned, with its pods and PodGroups by key."""

    snap: Snapshot
    cfg: ElasticConfig
    plan: CyclePlan
    pods: dict[str, PodView]
    pgs: dict[str, Any]


def planned(cluster: tuple[list[dict[str, Any]], ElasticConfig]) -> Planned:
    objs, cfg = cluster
    snap = parse(objs, cfg)
    return Planned(snap, cfg, plan_cycle(snap, cfg, NOW), {p.key: p for p in snap.pods},
                   {pg.key: pg for pg in snap.podgroups})


def _elastic_running(snap: Any) -> dict[str, int]:
    """Running workers of each elastic job (its pods carry bounds), by PodGroup key."""
    elastic = {p.group_key for p in snap.pods if p.bounds is not None}
    out: dict[str, int] = {}
    for p in snap.pods:
        if p.group_key in elastic and p.replica_type == "worker" and p.running:
            out[p.group_key] = out.get(p.group_key, 0) + 1
    return out


@given(clusters())
@SETTINGS
def test_victims_are_admissible(cluster: tuple[list[dict[str, Any]], ElasticConfig]) -> None:
    snap, cfg, plan, pods, pgs = planned(cluster)
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
        # None from a job running fewer workers than its queue's minWorkersToShrink, unless its tenant
        # (issue 36, T14: its namespace's elastic jobs in that queue each below the limit, and it)
        # runs at least that many together.
        least = cfg.queue_policy(pgs[jkey].queue).minWorkersToShrink
        if running < least:
            tenant = running + sum(n for k, n in _elastic_running(snap).items()
                                   if k != jkey and pgs[k].namespace == pgs[jkey].namespace
                                   and pgs[k].queue == pgs[jkey].queue and n < least)
            assert tenant >= least, (jkey, running, tenant)
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
    snap, _cfg, plan, pods, pgs = planned(cluster)
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
        # a starving gang's victims say the counts, each gang's plan what the job gives to it (a job may
        # give to several gangs in one cycle, each plan from the count the one before left); the
        # fairness scale-down (issue 38) gives its own reason, and the count it leaves is held above
        for_gang: dict[str, list[str]] = {}
        for e in plan.evictions:
            if pods[e.pod].group_key == group and not e.reason.startswith("fairness:"):
                for_gang.setdefault(e.for_gang, []).append(e.reason)
        for why in for_gang.values():
            k = len(why)
            assert all(f"job {group} gives {k} worker" in r and f"allowed counts {allowed.describe()}" in r
                       for r in why), why


@given(clusters())
@SETTINGS
def test_gate_releases_are_admissible(cluster: tuple[list[dict[str, Any]], ElasticConfig]) -> None:
    snap, cfg, plan, pods, pgs = planned(cluster)
    if plan.scale_up_blocked_by:
        assert plan.gate_releases == ()
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
def test_a_pdb_refused_pod_is_a_victim_only_past_its_pdb(cluster: tuple[list[dict[str, Any]], ElasticConfig]) -> None:
    """The victims of a plan, refused by a PDB, are victims of the next plan (either search) only as
    ``PastPdbEviction`` (issue 36, T13: the last resort of a gang that would wait for them), never of
    the fairness scale-down; and the indexed search still matches the exhaustive scan."""
    objs, cfg = cluster
    snap = parse(objs, cfg)
    refused = frozenset(e.pod for e in plan_cycle(snap, cfg, NOW).evictions)
    fast = plan_cycle(snap, cfg, NOW, pdb_refused=refused)
    assert fast == plan_cycle(snap, cfg, NOW, search="exhaustive", pdb_refused=refused)
    assert all((e.pod in refused) == e.past_pdb for e in fast.evictions)
    gangs = {d.pod_group for d in fast.starving}
    assert all(e.for_gang in gangs for e in fast.evictions if e.past_pdb)


_NAME = st.text(st.characters(blacklist_characters="\0", codec="utf-8"), max_size=6)


@given(st.lists(st.tuples(_NAME, _NAME, _NAME), max_size=12))
def test_pod_order_string_sorts_like_the_tuple(ids: list[tuple[str, str, str]]) -> None:
    pods = [PodView(namespace=ns, name=name, uid=uid) for ns, name, uid in ids]
    by_tuple = sorted(pods, key=lambda p: (p.namespace, p.name, p.uid))
    assert [(p.namespace, p.name, p.uid) for p in sorted(pods, key=lambda p: p.order)] == \
        [(p.namespace, p.name, p.uid) for p in by_tuple]
