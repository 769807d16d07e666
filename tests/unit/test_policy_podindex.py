"""The pod index kept across cycles (``policy/podindex.py``) gives the World a cold build gives."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elastic_controller.policy import podindex
from elastic_controller.policy.cycle import plan_cycle
from elastic_controller.policy.model import ElasticBounds, NodeView, PodGroupView, PodView, Snapshot
from elastic_controller.policy.settings import ElasticConfig
from elastic_controller.policy.world import PlanCache, World, build_world
from tests.harness.builders import NOW, ago
from tests.harness.strategies import SETTINGS, clusters, parse


def facts(w: World) -> dict[str, Any]:
    """Everything the planners read of a World, in the order they read it."""
    return {
        "pods_by_group": [(k, [p.key for p in pods]) for k, pods in w.pods_by_group.items()],
        "releasing": [(n, [p.key for p in pods]) for n, pods in w.releasing.items()],
        "jobs": [(j.key, j.pg, j.queue, j.priority, j.bounds, j.running_workers, j.cooling)
                 for j in w.jobs.values()],
        "elastic_holding": [p.key for p in w.elastic_holding],
        "usage": w.usage,
        "free": w.free_now.free,
        "gpu_index": w.free_now.gpu_index(),
        "waiting": [(g.key, g.priority, g.placed, [p.key for p in g.pending], [p.key for p in g.needed], g.since,
                     [p.key for p in g.releasing_for]) for g in w.waiting],
        "shares": w.shares,
        "volcano": {q: w.model.admission_deserved(q) for q in w.shares},
        "gated": {k: ([p.key for p in pods], placed) for k, (pods, placed) in w.gated_elastic().items()},
    }


def change(pods: list[PodView], rnd: random.Random, pool: list[PodView]) -> list[PodView]:
    """The next cycle's pods: some gone, some back, some replaced by a new view (same or changed)."""
    out: list[PodView] = []
    for p in pods:
        r = rnd.random()  # few changes a cycle (as between two agent cycles): the index is updated
        if r < 0.04:
            pool.append(p)  # gone (may come back later)
        elif r < 0.08:
            out.append(dataclasses.replace(p))  # a new view of an unchanged pod
        elif r < 0.12 and p.node_name:
            out.append(dataclasses.replace(p, deleting=not p.deleting))  # evicted, or its eviction undone
        elif r < 0.15 and p.node_name:
            out.append(dataclasses.replace(p, node_name="", phase="Pending", unschedulable_since=ago(900)))
        elif r < 0.18 and p.scheduling_gates:
            out.append(dataclasses.replace(p, scheduling_gates=()))  # gate lifted
        elif r < 0.19:
            out.append(dataclasses.replace(p, phase="Succeeded"))
        else:
            out.append(p)
    rnd.shuffle(pool)
    while pool and rnd.random() < 0.3:
        out.append(pool.pop())
    rnd.shuffle(out)
    return out


@given(clusters(), st.randoms(use_true_random=False), st.integers(2, 8))
@SETTINGS
def test_updated_index_gives_the_cold_world(cluster: tuple[list[dict[str, Any]], ElasticConfig],
                                            rnd: random.Random, steps: int) -> None:
    objs, cfg = cluster
    snap = parse(objs, cfg)
    cache = PlanCache()
    pods = list(snap.pods)
    pool: list[PodView] = []
    for step in range(steps):
        groups = snap.podgroups
        if step and rnd.random() < 0.3:  # a PodGroup's view replaced (a new last-scale-time, say)
            i = rnd.randrange(len(groups))
            groups = (*groups[:i], dataclasses.replace(groups[i]), *groups[i + 1:])
        cycle = dataclasses.replace(snap, pods=tuple(pods), podgroups=groups)
        warm = build_world(cycle, cfg, NOW, cache)
        cold = build_world(cycle, cfg, NOW)
        assert facts(warm) == facts(cold), f"step {step}"
        pods = change(pods, rnd, pool)


def test_the_index_is_used_once_a_cycle_shares_most_pods(monkeypatch: Any) -> None:
    # Fails if the index is never built (every cycle cold) or never updated.
    snap = parse(_two_jobs(), ElasticConfig())
    cache = PlanCache()
    used: list[bool] = []
    real = cache.pods._update

    def spy(current: dict[int, PodView]) -> podindex.PodIndex | None:
        index = real(current)
        used.append(index is not None)
        return index

    monkeypatch.setattr(cache.pods, "_update", spy)
    cfg = ElasticConfig()
    first = plan_cycle(snap, cfg, NOW, cache=cache)
    second = plan_cycle(snap, cfg, NOW, cache=cache)
    fewer = dataclasses.replace(snap, pods=snap.pods[: len(snap.pods) // 3])  # most pods gone: cold again
    plan_cycle(fewer, cfg, NOW, cache=cache)
    assert used == [False, True, False]
    assert first == second
    fresh = Snapshot(nodes=snap.nodes, pods=tuple(dataclasses.replace(p) for p in snap.pods),
                     podgroups=snap.podgroups, queues=snap.queues, priority_classes=snap.priority_classes)
    assert plan_cycle(fresh, cfg, NOW, cache=cache) == first


def _two_jobs() -> list[dict[str, Any]]:
    from tests.harness.builders import job_pod, node, podgroup, queue

    objs: list[dict[str, Any]] = [node("n0", gpus=8), node("n1", gpus=8), queue("q1"), queue("q2")]
    for name, q in (("a", "q1"), ("b", "q2")):
        objs.append(podgroup("ns", name, 2, q, "", None, created=ago(7200)))
        for i in range(4):
            kw: dict[str, Any] = {"gpus": 2, "created": ago(7200)}
            if i < 3:
                kw.update(node_name=f"n{i % 2}", scheduled_at=ago(3600))
            else:
                kw["gates"] = ["volcano-elastic.io/scale-up"]
            objs.append(job_pod("ns", name, "worker", i, nnodes="2:4", **kw))
    return objs


def _views_of_one_pod(max_replicas: int) -> PodView:
    return PodView("ns", "w-0", "u0", group="j", job_name="j", replica_type="worker", phase="Running",
                   node_name="n0", requests={"nvidia.com/gpu": 1}, bounds=ElasticBounds(1, max_replicas))


@pytest.mark.parametrize("first", [3, 5])
def test_two_views_of_one_pod_give_the_cold_world(first: int) -> None:
    # A cold build keeps two views of one (namespace, name, uid) in the snapshot's order, which their
    # identities do not tell: the job's bounds come from the first one listed, warm or cold.
    cfg = ElasticConfig()
    pair = [_views_of_one_pod(first), _views_of_one_pod(8 - first)]
    others = [PodView("ns", f"o{i}", f"uo{i}") for i in range(6)]
    snap = Snapshot(nodes=(NodeView("n0", {"nvidia.com/gpu": 8, "cpu": 8000}),), pods=(*pair, *others),
                    podgroups=(PodGroupView("ns", "j", 1),))
    cache = PlanCache()
    for _ in range(3):
        warm = build_world(snap, cfg, NOW, cache)
        assert warm.jobs["ns/j"].bounds == ElasticBounds(1, first)
        assert facts(warm) == facts(build_world(snap, cfg, NOW))


def test_a_world_shares_no_list_with_the_index() -> None:
    # Planners may sort or extend what a World hands them: the next cycle must not see it.
    cfg = ElasticConfig()
    snap = parse(_two_jobs(), cfg)
    cache = PlanCache()
    build_world(snap, cfg, NOW, cache)
    first = build_world(snap, cfg, NOW, cache)
    for pods in first.pods_by_group.values():
        pods.reverse()
        pods.append(pods[0])
    first.elastic_holding.clear()
    for gang in first.waiting:
        gang.pending.clear()
    again = build_world(snap, cfg, NOW, cache)
    assert facts(again) == facts(build_world(snap, cfg, NOW))


def test_groups_are_reordered_when_their_first_pod_goes() -> None:
    # Groups come in the order of their first pod; pods of two groups may interleave by name
    # (p-1 and p-3 in x, p-2 in y): once p-1 goes, y comes first, warm or cold.
    cfg = ElasticConfig()

    def member(name: str, group: str) -> PodView:
        return PodView("ns", name, f"u-{name}", group=group, job_name=group, phase="Pending", requests={"cpu": 100})

    x1, y2, x3 = member("p-1", "x"), member("p-2", "y"), member("p-3", "x")
    rest = tuple(member(f"q-{i}", "z") for i in range(8))  # unchanged: the next cycle is warm
    base = Snapshot(nodes=(NodeView("n0", {"cpu": 8000}),), pods=(x1, y2, x3, *rest),
                    podgroups=(PodGroupView("ns", "x", 2), PodGroupView("ns", "y", 1), PodGroupView("ns", "z", 8)))
    cache = PlanCache()
    build_world(base, cfg, NOW, cache)
    assert list(build_world(base, cfg, NOW, cache).pods_by_group) == ["ns/x", "ns/y", "ns/z"]
    later = dataclasses.replace(base, pods=(y2, x3, *rest))
    warm = build_world(later, cfg, NOW, cache)
    assert list(warm.pods_by_group) == ["ns/y", "ns/x", "ns/z"]
    assert facts(warm) == facts(build_world(later, cfg, NOW))
