"""Pods on a lost node (issue 28, item 4): a node whose kubelet stopped goes NotReady/Unknown, and its
pods stay phase Running until the node lifecycle controller evicts them (300 s by default). Those
ghosts count in no job's running workers and are never victims (``World.ghosts``)."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from elastic_controller.policy.cycle import plan_cycle
from elastic_controller.policy.eviction import Planner
from elastic_controller.policy.gates import blocking_gangs
from elastic_controller.policy.model import NodeView, Snapshot
from elastic_controller.policy.podindex import PodIndex
from elastic_controller.policy.resume import check_resumable
from elastic_controller.policy.settings import ElasticConfig, QueuePolicy
from elastic_controller.policy.world import PlanCache, build_world
from tests.harness.builders import (
    NOW,
    ago,
    elastic_job,
    job_pod,
    node,
    plan_fast_and_exhaustive,
    podgroup,
    queue,
    snapshot_of,
)
from tests.harness.strategies import SETTINGS, clusters, parse

# minWorkersToShrink 0: only the bounds decide who may give (the default, 4, would hide them).
CFG = ElasticConfig(defaults=QueuePolicy(minWorkersToShrink=0))
RESNET = "team/resnet"


def cluster(*, lost: str | None = "n3", missing: bool = False, gpt_queue: str = "a", bert_queue: str = "b",
            ) -> list[Any]:
    """resnet (queue a, 2..4 workers of 4 GPUs) runs workers 0 and 3 on n3, 1 and 2 on n0; gpt fills n1
    and n2; bert waits for one 4-GPU pod. ``lost``: the node that is not Ready (None: every node is);
    ``missing``: n3 is not in the snapshot at all (a deleted Node)."""
    nodes = [node(n, ready=n != lost) for n in ("n0", "n1", "n2", "n3") if not (missing and n == "n3")]
    since = ago(600)
    return [*nodes, queue("a"), queue("b"),
            *elastic_job("team", "resnet", min_r=2, max_r=4, gpus=4, nodes=["n3", "n0", "n0", "n3"], queue="a"),
            *elastic_job("team", "gpt", min_r=2, max_r=2, gpus=8, nodes=["n1", "n2"], queue=gpt_queue),
            podgroup("team", "bert", 1, bert_queue, created=since),
            job_pod("team", "bert", "worker", 0, nnodes="1", gpus=4, created=since, unschedulable_since=since)]


def test_ghosts_do_not_count_and_are_no_victims() -> None:
    snap = snapshot_of(cluster(), cfg=CFG)
    world = build_world(snap, CFG, NOW)
    assert world.jobs[RESNET].running_workers == 2  # 4 pods say Running; 2 of them on the lost n3
    assert world.ghosts == {f"team/resnet-worker-{i}": "on node n3 (not Ready)" for i in (0, 3)}
    plan = plan_cycle(snap, CFG, NOW)
    # Counting its ghosts, resnet would look 4 strong and give worker 2 (live): 1 live worker left.
    assert plan.evictions == ()
    [bert] = plan.starving
    assert bert.decision == "wait"
    assert "candidates excluded: 1 at min, 1 on node n3 (not Ready)" in bert.reason
    assert plan == plan_cycle(snap, CFG, NOW, search="exhaustive")


def test_the_same_cluster_with_every_node_ready_shrinks_resnet() -> None:
    # The contrast: with n3 Ready, all four workers are live; resnet gives one for bert (n3 is full too).
    snap = snapshot_of(cluster(lost=None), cfg=CFG)
    world = build_world(snap, CFG, NOW)
    assert world.jobs[RESNET].running_workers == 4 and world.ghosts == {}
    plan = plan_cycle(snap, CFG, NOW)
    assert [e.pod for e in plan.evictions] == ["team/resnet-worker-3"]


def test_a_node_missing_from_the_snapshot_is_lost_too() -> None:
    snap = snapshot_of(cluster(lost=None, missing=True), cfg=CFG)
    world = build_world(snap, CFG, NOW)
    assert world.jobs[RESNET].running_workers == 2
    assert set(world.ghosts.values()) == {"on node n3 (not in the snapshot)"}
    plan = plan_cycle(snap, CFG, NOW)
    assert plan.evictions == () and "1 on node n3 (not in the snapshot)" in plan.starving[0].reason


def test_a_ghost_is_never_a_victim_even_where_its_job_may_give() -> None:
    # resnet 1..4: its two live workers may give one. Worker 3 (a ghost, first in victim order) is
    # passed over: the live worker 2 goes, leaving 1 live worker (its min).
    objs = cluster()
    for obj in objs:
        if obj["kind"] == "PodGroup" and obj["metadata"]["name"] == "resnet":
            obj["spec"]["minMember"] = 1
        if obj["kind"] == "Pod" and obj["metadata"]["name"].startswith("resnet-"):
            env = obj["spec"]["containers"][0]["env"]
            for var in env:
                if var["name"] == "PET_NNODES":
                    var["value"] = "1:4"
    snap = snapshot_of(objs, cfg=CFG)
    world = build_world(snap, CFG, NOW)
    bounds = world.jobs[RESNET].bounds
    assert bounds is not None and bounds.min_replicas == 1
    plan = plan_cycle(snap, CFG, NOW)
    assert [e.pod for e in plan.evictions] == ["team/resnet-worker-2"]
    assert [p.key for p in Planner(world).ghosts] == ["team/resnet-worker-3"]


def test_blocking_gangs_count_nothing_freed_by_ghosts() -> None:
    # bert joins resnet's queue a, gpt is in b. With n3 lost the cluster has 24 GPUs: a deserves 12,
    # holds 16 and bert needs 4, 8 too many; its elastic workers free 4 (worker 2; worker 3 is a ghost):
    # not enough, bert holds back no growth. With n3 Ready, a deserves 16: 4 too many, freed 8.
    def blocking(**kw: Any) -> list[str]:
        world = build_world(snapshot_of(cluster(gpt_queue="b", bert_queue="a", **kw), cfg=CFG), CFG, NOW)
        return [g.key for g in blocking_gangs(world)]

    assert blocking() == []
    assert blocking(lost=None) == ["team/bert"]


def test_an_interrupted_plan_does_not_resume_on_a_ghost() -> None:
    snap = snapshot_of(cluster(), cfg=CFG)
    ghost = next(p for p in snap.pods if p.key == "team/resnet-worker-3")
    verdict = check_resumable(snap, CFG, NOW, "team/bert", [ghost])
    assert verdict.refused == {ghost.key: "on node n3 (not Ready)"}


def _flip(snap: Snapshot, lost: set[str]) -> Snapshot:
    """``snap`` with the nodes in ``lost`` not Ready and the others Ready: new node views, the very
    same pod views (as the agent's memo hands them in when only a node changed)."""
    nodes = tuple(n if n.ready == (n.name not in lost) else dataclasses.replace(n, ready=n.name not in lost)
                  for n in snap.nodes)
    return dataclasses.replace(snap, nodes=nodes)


def _summary(world: Any) -> tuple[dict[str, int], dict[str, str]]:
    return {k: j.running_workers for k, j in world.jobs.items()}, dict(world.ghosts)


def test_the_cache_counts_a_readiness_flip_at_once() -> None:
    """The pod index keeps running workers from one cycle to the next; readiness is no pod's: a node
    going NotReady, and back, must count in the very cycle it flips, as a cold build counts it."""
    snap = snapshot_of(cluster(lost=None), cfg=CFG)
    cache = PlanCache()
    seen = []
    for lost in (set(), set(), {"n3"}, {"n3"}, set(), {"n0", "n3"}, set()):
        cycle = _flip(snap, lost)
        warm = build_world(cycle, CFG, NOW, cache)
        assert _summary(warm) == _summary(build_world(cycle, CFG, NOW))
        assert plan_cycle(cycle, CFG, NOW, cache=cache) == plan_cycle(cycle, CFG, NOW)
        seen.append(warm.jobs[RESNET].running_workers)
    assert seen == [4, 4, 2, 2, 4, 0, 4]
    assert isinstance(cache.pods._state.get("index"), PodIndex)  # the warm cycles were built from the index


def _lose_nodes(objs: list[dict[str, Any]], rnd: random.Random) -> tuple[list[dict[str, Any]], set[str]]:
    """``objs`` with some nodes not Ready (Ready False or Unknown) and, sometimes, one left out."""
    names = [o["metadata"]["name"] for o in objs if o["kind"] == "Node"]
    lost = {n for n in names if rnd.random() < 0.4}
    gone = {n for n in lost if rnd.random() < 0.25}
    out = []
    for obj in objs:
        name = obj["metadata"]["name"]
        if obj["kind"] == "Node" and name in gone:
            continue
        if obj["kind"] == "Node" and name in lost:
            obj = {**obj, "status": {**obj["status"], "conditions": [
                {"type": "Ready", "status": rnd.choice(["False", "Unknown"])}]}}
        out.append(obj)
    return out, lost


@given(clusters(), st.randoms(use_true_random=False))
@SETTINGS
def test_never_below_min_counting_live_workers_only(cluster: tuple[list[dict[str, Any]], ElasticConfig],
                                                    rnd: random.Random) -> None:
    """With random nodes lost: no victim is a ghost; no job is left below its min or below its
    queue's minWorkersToShrink counting its live workers only; both searches agree; a cache carried
    over from the cycle before the loss plans as a cold cycle."""
    objs, cfg = cluster
    before = parse(objs, cfg)
    lossy, lost = _lose_nodes(objs, rnd)
    snap = parse(lossy, cfg)
    plan, slow = plan_fast_and_exhaustive(snap, cfg, NOW)
    assert plan == slow
    cache = PlanCache()
    plan_cycle(before, cfg, NOW, cache=cache)
    plan_cycle(before, cfg, NOW, cache=cache)
    # The very same pod views, the lost nodes' views changed (or gone): the agent's memo after a loss.
    assert plan_cycle(dataclasses.replace(before, nodes=snap.nodes), cfg, NOW, cache=cache) == plan
    pods = {p.key: p for p in snap.pods}
    pgs = {pg.key: pg for pg in snap.podgroups}
    taken: dict[str, int] = {}
    for e in plan.evictions:
        victim = pods[e.pod]
        assert victim.node_name not in lost, e.pod
        taken[victim.group_key] = taken.get(victim.group_key, 0) + 1

    def live_workers(group: str) -> int:
        return sum(1 for p in snap.pods
                   if p.group_key == group and p.replica_type == "worker" and p.running and p.node_name not in lost)

    for group, n in taken.items():
        members = [p for p in snap.pods if p.group_key == group]
        bounds = next(p.bounds for p in members if p.bounds is not None)
        live = live_workers(group)
        assert live - n >= bounds.min_replicas, (group, live, n)
        # minWorkersToShrink protects a small tenant, not a small job (issue 36, T14): a job below it
        # gives only when its namespace's small elastic jobs in the queue run at least that many,
        # every count made of live workers.
        queue, least = pgs[group].queue, cfg.queue_policy(pgs[group].queue).minWorkersToShrink
        if live < least:
            elastic = {p.group_key for p in snap.pods if p.bounds is not None}
            tenant = sum(live_workers(g) for g, pg in pgs.items()
                         if g in elastic and pg.namespace == pgs[group].namespace and pg.queue == queue
                         and live_workers(g) < least)
            assert tenant >= least, (group, live, tenant)


def test_readiness_is_parsed_from_the_ready_condition() -> None:
    # Unknown (a stopped kubelet) and False are both not Ready: the ghosts' premise.
    for status in ("False", "Unknown"):
        obj = node("n0")
        obj["status"]["conditions"] = [{"type": "Ready", "status": status}]
        [view] = snapshot_of([obj]).nodes
        assert isinstance(view, NodeView) and not view.ready


def test_status_counts_live_workers_and_shows_the_lost_ones() -> None:
    from elastic_controller.cli.status import build_rows, render
    from tests.harness.builders import items

    rows = {r["job"]: r for q in build_rows(items(cluster()), CFG, NOW).values() for r in q}
    resnet = rows[RESNET]
    assert (resnet["current"], resnet["lostPods"], resnet["fulfillment"]) == (2, 2, 0.0)
    assert rows["team/gpt"]["lostPods"] == 0
    text = render(build_rows(items(cluster()), CFG, NOW))
    assert "2 (+2 lost)" in text and "counted in no CUR" in text
    ready = {r["job"]: r for q in build_rows(items(cluster(lost=None)), CFG, NOW).values() for r in q}
    assert (ready[RESNET]["current"], ready[RESNET]["lostPods"]) == (4, 0)
    assert "lost" not in render(build_rows(items(cluster(lost=None)), CFG, NOW))


def test_the_taint_managers_eviction_is_not_our_scale_event() -> None:
    """When the node lifecycle controller evicts a lost node's pods it marks them DisruptionTarget with
    reason DeletionByTaintManager: not a preemption the agent stamps as a scale event (only Volcano's
    PreemptionByScheduler is), neither from the watch event nor from the snapshot."""
    from elastic_controller.execute.stamps import Preemptions, preemption_time

    objs = cluster()
    ghost = next(o for o in objs if o["kind"] == "Pod" and o["metadata"]["name"] == "resnet-worker-3")
    condition = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
                 "message": "Taint manager: deleting due to NoExecute taint",
                 "lastTransitionTime": "2026-01-01T12:59:00Z"}
    ghost["status"]["conditions"].append(condition)
    assert preemption_time(ghost) is None and Preemptions().note(ghost) is False
    snap = snapshot_of(objs, cfg=CFG)
    assert not any(p.preempted_by_scheduler for p in snap.pods)
    condition["reason"] = "PreemptionByScheduler"  # the contrast: Volcano's own preemption is one
    assert preemption_time(ghost) is not None and Preemptions().note(ghost) is True
    assert any(p.preempted_by_scheduler for p in snapshot_of(objs, cfg=CFG).pods)


def test_the_bundled_example_tells_the_story(capsys: Any) -> None:
    """examples/plan/lost-node-ghosts.json: the plan on the dump evicts nothing (counting its ghosts,
    resnet would give its live worker 2), says why, and the dump's gpu-3 is Unknown, not False."""
    import json
    from pathlib import Path

    from elastic_controller.cli import main

    example = Path(__file__).resolve().parents[2] / "examples" / "plan" / "lost-node-ghosts.json"
    dump = json.loads(example.read_text())
    [gpu3] = [o for o in dump["items"] if o["kind"] == "Node" and o["metadata"]["name"] == "gpu-3"]
    assert gpu3["status"]["conditions"][0]["status"] == "Unknown"
    assert main(["plan", "--from", str(example), "--now", "2026-01-01T13:00:00Z", "--output", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["evictions"] == [] and [s["decision"] for s in plan["starving"]] == ["wait"]
    # (resnet's live worker is at its min; team-vision runs 4 workers in the queue, so minWorkersToShrink,
    # which counts a tenant's workers since issue 36 T14, is not what keeps it)
    assert plan["starving"][0]["reason"].endswith(
        "candidates excluded: 1 at min, 1 on node gpu-3 (not Ready)")
