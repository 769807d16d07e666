"""Issue 20: the eviction planner only shrinks a job to an allowed Worker count
(``volcano-elastic.io/worker-counts`` / ``worker-step``), and counts the victims that rounding adds
when it looks for the fewest: tables (the issue's examples, literally) and properties (node search and
own-queue share victims)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_controller.policy.cycle import plan_cycle
from elastic_controller.policy.decisions import CyclePlan
from elastic_controller.policy.eviction import Planner
from elastic_controller.policy.settings import ElasticConfig, QueuePolicy
from elastic_controller.policy.world import build_world
from tests.harness.builders import (
    NOW,
    ago,
    constrained,
    elastic_job,
    gang,
    node,
    plan_fast_and_exhaustive,
    priority_class,
    queue,
    snapshot_of,
)
from tests.harness.oracles import fewest_share_victims

GPU = "nvidia.com/gpu"


def plan(*objs: Any) -> CyclePlan:
    """The plan, the same with the indexed search and the exhaustive scan."""
    cfg = ElasticConfig()
    fast, slow = plan_fast_and_exhaustive(snapshot_of(*objs, cfg=cfg), cfg, NOW)
    assert fast == slow
    return fast  # type: ignore[no-any-return]


def victims(p: CyclePlan) -> list[str]:
    return [e.pod.split("/", 1)[1] for e in p.evictions]


def the_decision(p: CyclePlan, pg: str = "ns/g") -> tuple[str, str]:
    (d,) = [d for d in p.starving if d.pod_group == pg]
    return d.decision, d.reason


# -- the examples -------------------------------------------------------------------------------
# A node full of job v: 8 workers of 1 GPU, min 2 (workers 0-1 core, 2-7 elastic).
def full_v(**annotations: str) -> list[Any]:
    return [node("n0"), *constrained(elastic_job("ns", "v", min_r=2, max_r=8, nodes=["n0"], running=8),
                                     **annotations)]


@pytest.mark.parametrize(("gpus", "want"), [
    (1, ["v-worker-7", "v-worker-6", "v-worker-5", "v-worker-4"]),  # 8 -> 4, not 8 -> 7
    (4, ["v-worker-7", "v-worker-6", "v-worker-5", "v-worker-4"]),
    (5, ["v-worker-7", "v-worker-6", "v-worker-5", "v-worker-4", "v-worker-3", "v-worker-2"]),  # 8 -> 2
    (7, []),  # 8 -> 1 is below min: none
])
def test_a_job_at_8_with_counts_2_4_8_gives_four_workers_or_none(gpus: int, want: list[str]) -> None:
    p = plan(*full_v(counts="2,4,8"), *gang("ns", "g", members=1, gpus=gpus))
    assert victims(p) == want
    decision, reason = the_decision(p)
    if want:
        n = len(want)
        assert decision == "evict"
        note = f"job ns/v gives {n} workers (8 -> {8 - n}): allowed counts 2,4,8"
        assert note in reason
        assert all(note in e.reason for e in p.evictions)
    else:
        assert decision == "wait"


def test_without_the_annotation_the_same_job_gives_one() -> None:
    assert victims(plan(*full_v(), *gang("ns", "g", members=1, gpus=1))) == ["v-worker-7"]


def test_another_jobs_single_worker_wins_over_four_of_this_one() -> None:
    """v is the preferred victim (lower priority) and gives one worker when it may; with counts 2,4,8 it
    would give four, so w's single worker wins: fewest victims, counted with the constraint."""
    def objs(**annotations: str) -> list[Any]:
        return [priority_class("mid", 10), priority_class("high", 1000), node("n0"), node("n1"),
                *constrained(elastic_job("ns", "v", min_r=2, max_r=8, nodes=["n0"], running=8), **annotations),
                *elastic_job("ns", "w", min_r=2, max_r=8, nodes=["n1"], running=8, priority_class="mid"),
                *gang("ns", "g", members=1, gpus=1, priority_class="high")]

    assert victims(plan(*objs())) == ["v-worker-7"]
    p = plan(*objs(counts="2,4,8"))
    assert victims(p) == ["w-worker-7"]
    assert "allowed counts" not in the_decision(p)[1]  # w has none: nothing was rounded


def test_four_of_this_one_win_when_they_are_all_there_is() -> None:
    objs = [priority_class("high", 1000), node("n0"), node("n1", gpus=4),
            *constrained(elastic_job("ns", "v", min_r=2, max_r=8, nodes=["n0"], running=8), counts="2,4,8"),
            *elastic_job("ns", "w", min_r=4, max_r=4, nodes=["n1"], running=4),  # at min: never a victim
            *gang("ns", "g", members=1, gpus=1, priority_class="high")]
    assert victims(plan(*objs)) == ["v-worker-7", "v-worker-6", "v-worker-5", "v-worker-4"]


@pytest.mark.parametrize(("running", "gpus", "want"), [
    (6, 1, ["v-worker-5", "v-worker-4"]),  # 6 -> 4: by two, not one
    (8, 1, ["v-worker-7", "v-worker-6"]),
    (8, 3, ["v-worker-7", "v-worker-6", "v-worker-5", "v-worker-4"]),  # 3 needed: 8 -> 4
    (7, 1, ["v-worker-6"]),  # at 7 (a worker failed; counts 2,4,6,8): 7 -> 6
])
def test_step_2_shrinks_by_two(running: int, gpus: int, want: list[str]) -> None:
    objs = [node("n0", gpus=running),
            *constrained(elastic_job("ns", "v", min_r=2, max_r=8, nodes=["n0"], running=running), step="2"),
            *gang("ns", "g", members=1, gpus=gpus)]
    p = plan(*objs)
    assert victims(p) == want
    assert f"job ns/v gives {len(want)} worker" in the_decision(p)[1]
    assert "allowed counts 2,4,6,8" in the_decision(p)[1]


def test_a_job_between_allowed_counts_goes_down_to_the_next() -> None:
    objs = [node("n0", gpus=7),
            *constrained(elastic_job("ns", "v", min_r=2, max_r=8, nodes=["n0"], running=7), counts="2,4,8"),
            *gang("ns", "g", members=1, gpus=1)]
    assert victims(plan(*objs)) == ["v-worker-6", "v-worker-5", "v-worker-4"]  # 7 -> 4


def test_the_extra_victims_free_room_that_later_pods_use() -> None:
    """v's 8 workers are spread over n0 and n1 (4 GPUs each, full). The gang's first 2-GPU pod takes two
    workers on one node; rounding v down to 4 takes two more (by victim order: on the other node),
    where the second pod then fits without a victim: 4 victims, not 6."""
    objs = [node("n0", gpus=4), node("n1", gpus=4),
            *constrained(elastic_job("ns", "v", min_r=2, max_r=8, nodes=["n0", "n1"], running=8), counts="2,4,8"),
            *gang("ns", "g", members=2, gpus=2)]
    p = plan(*objs)
    assert victims(p) == ["v-worker-7", "v-worker-6", "v-worker-5", "v-worker-4"]
    assert the_decision(p)[0] == "evict"


@pytest.mark.parametrize("annotations", [{"counts": "two"}, {"counts": "8"}, {"step": "0"}])
def test_a_job_with_no_smaller_allowed_count_is_never_shrunk(annotations: dict[str, str]) -> None:
    p = plan(*full_v(**annotations), *gang("ns", "g", members=1, gpus=1))
    assert victims(p) == []
    decision, reason = the_decision(p)
    assert decision == "wait" and "6 no smaller allowed count" in reason


def test_too_few_admissible_workers_to_reach_an_allowed_count() -> None:
    """v at 8 with counts 2,8 must give 6 but a PDB protects one: without it, it gives none (w, at min,
    none either), so the gang takes the six past the PDB (issue 36, T13)."""
    objs = [node("n0"), *constrained(elastic_job("ns", "v", min_r=2, max_r=8, nodes=["n0"], running=8),
                                     counts="2,8"),
            *gang("ns", "g", members=1, gpus=1)]
    cfg = ElasticConfig()
    snap = snapshot_of(*objs, cfg=cfg)
    assert len(plan_cycle(snap, cfg, NOW).evictions) == 6
    refused = frozenset({"ns/v-worker-3"})
    p = plan_cycle(snap, cfg, NOW, pdb_refused=refused)
    assert p == plan_cycle(snap, cfg, NOW, search="exhaustive", pdb_refused=refused)
    assert len(victims(p)) == 6 and the_decision(p)[0] == "evict"
    assert [e.pod for e in p.evictions if e.past_pdb] == ["ns/v-worker-3"]


def test_share_victims_round_too() -> None:
    """g fits on n1's free GPUs, but queue qa (weight 1 of 4; qb's b asks for 12 with its gated workers)
    would be above its deserved share: its own elastic job v (counts 2,4,8) gives back what brings it
    under (own-queue share victims), 4 workers not 1."""
    objs = [node("n0", gpus=16), node("n1", gpus=2), queue("qa"), queue("qb", weight=3),
            *constrained(elastic_job("ns", "v", min_r=2, max_r=8, nodes=["n0"], running=8, queue="qa"),
                         counts="2,4,8"),
            *elastic_job("ns", "b", min_r=1, max_r=12, nodes=["n0"], running=8, queue="qb"),
            *gang("ns", "g", members=1, gpus=1, queue="qa")]
    p = plan(*objs)
    decision, reason = the_decision(p)
    assert decision == "evict" and "within its deserved share" in reason, reason
    assert victims(p) == ["v-worker-7", "v-worker-6", "v-worker-5", "v-worker-4"]
    assert "gives 4 workers (8 -> 4): allowed counts 2,4,8" in reason


def test_a_rounding_the_queue_share_refuses_says_why() -> None:
    """B (queue qb) reclaims from qa, which may lose one 4-GPU worker and keep its deserved share, not
    the two that step 2 needs: B waits, and the reason names the job that shrinks only by whole steps."""
    objs = [*(node(f"n{i}") for i in range(4)), queue("qa"), queue("qb"),
            *constrained(elastic_job("ns", "a", min_r=2, max_r=8, gpus=4, nodes=["n0", "n1", "n2", "n3"],
                                     running=8, queue="qa"), step="2"),
            *gang("ns", "g", members=1, gpus=4, queue="qb")]
    p = plan(*objs)
    decision, reason = the_decision(p)
    assert decision == "wait" and victims(p) == []
    assert "jobs shrunk only to their allowed counts (each victim set rounded to them): ns/a (2,4,6,8)" in reason


@pytest.mark.parametrize("annotations", [{"counts": "two"}, {"counts": "2,4,8", "step": "2"}, {"counts": "8"}])
def test_a_never_shrunk_job_holds_back_no_scale_up(annotations: dict[str, str]) -> None:
    # v fills n0 and has no smaller allowed count (or an unusable contract): the eviction search never
    # takes its workers, so gang g (3 GPUs) can be placed by no eviction and must not stop c (1..2,
    # running 1, 1 GPU free on n1) from growing. The gates ask the same World.never_victim as the search.
    rest = [node("n0", gpus=8), node("n1", gpus=2), *elastic_job("ns", "c", min_r=1, max_r=2, nodes=["n1"], running=1),
            *gang("ns", "g", members=1, gpus=3)]
    p = plan(*rest, *constrained(elastic_job("ns", "v", min_r=2, max_r=8, nodes=["n0"], running=8), **annotations))
    assert p.evictions == () and "6 no smaller allowed count" in p.starving[0].reason, p.starving[0].reason
    assert p.scale_up_blocked_by == ()
    assert releases(p) == ["c-worker-1"]
    # Without the contract v may give: g blocks growth (and evicts v's workers).
    plain = plan(*rest, *elastic_job("ns", "v", min_r=2, max_r=8, nodes=["n0"], running=8))
    assert plain.evictions and plain.gate_releases == ()


# -- a job left at a count outside its allowed counts (part of a victim group evicted) --------------
def off_count_job(running: int, gpus: int, **kw: Any) -> list[Any]:
    return [node("n0", gpus=gpus),
            *constrained(elastic_job("ns", "v", min_r=2, max_r=8, nodes=["n0"], running=running, **kw),
                         counts="2,4,8")]


def releases(p: CyclePlan) -> list[str]:
    return [r.pod.split("/", 1)[1] for r in p.gate_releases]


def test_a_job_left_between_allowed_counts_grows_to_the_next_without_the_gain_test() -> None:
    # v (counts 2,4,8) was left at 5 or 7 (a PDB refused one of its noticed victims, then the notice
    # was withdrawn): 5 -> 8 (+60 %) and 7 -> 8 (+14 %) are below minScaleUpGain 1, yet it cannot use
    # its size and restarts at its next event anyway: it grows.
    for running, want in ((5, ["v-worker-5", "v-worker-6", "v-worker-7"]), (7, ["v-worker-7"])):
        p = plan(*off_count_job(running, gpus=16))
        assert releases(p) == want
        assert f"its {running} workers are not one of its allowed counts" in p.gate_releases[0].reason


def test_a_job_left_between_allowed_counts_grows_only_to_an_allowed_count_that_fits() -> None:
    # At 5 with room for 2 more (7): no allowed count above 5 fits (8 does not), so it stays.
    assert releases(plan(*off_count_job(5, gpus=7))) == []


def test_a_job_left_between_allowed_counts_keeps_its_cooldown() -> None:
    assert releases(plan(*off_count_job(5, gpus=16, last_scale=ago(10)))) == []


# -- properties -----------------------------------------------------------------------------------------
@given(st.lists(st.tuples(st.integers(1, 3), st.sampled_from([1, 2, 4]), st.integers(0, 2),
                          st.sampled_from(["", "step", "counts"]), st.integers(0, 7)),
                min_size=1, max_size=3),
       st.integers(1, 16))
@settings(max_examples=80, deadline=None)
def test_share_victims_are_the_fewest_at_allowed_counts(jobs: list[tuple[int, int, int, str, int]],
                                                        excess: int) -> None:
    """Own-queue share victims: the fewest (counted with the constraint) of every set that leaves each
    job at an allowed count and gives back ``excess``, first in order among them (as sets)."""
    objs: list[Any] = [node(f"n{i}", gpus=64) for i in range(4)]
    for j, (extra, gpus, min_r, kind, bits) in enumerate(jobs):
        lo, hi = min_r + 1, min_r + 1 + extra
        job = elastic_job("ns", f"j{j}", min_r=lo, max_r=hi, gpus=gpus, nodes=[f"n{j}"], queue="qa")
        if kind == "step":
            job = constrained(job, step=str(1 + bits % 3))
        elif kind == "counts":
            job = constrained(job, counts=",".join(str(c) for i, c in enumerate(range(lo, hi + 1))
                                                   if c == lo or bits >> i & 1))
        objs += job
    objs += gang("ns", "g", members=1, gpus=1, queue="qa")
    # minWorkersToShrink 0: every generated job is a candidate (the default 4 would silently drop every
    # job of fewer than 4 workers, most of them here, and the property would check little).
    cfg = ElasticConfig(defaults=QueuePolicy(minWorkersToShrink=0))
    world = build_world(snapshot_of(*objs, cfg=cfg), cfg, NOW)
    planner = Planner(world)
    assert not planner.too_small
    g = world.waiting[0]
    got = planner._share_victims(g, excess, [])
    cands = sorted((c for pods in planner.candidates_by_job.values() for c in pods), key=planner.preference)

    def at_allowed(subset: tuple[Any, ...]) -> bool:
        for jid, allowed in planner.counts.items():
            n = sum(1 for c in subset if c.job_id == jid)
            if n and world.jobs[jid].current_workers() - n not in allowed:
                return False
        return True

    best = fewest_share_victims(planner, g, cands, excess, at_allowed)
    assert (got is None) == (best is None)
    if got is not None and best is not None:
        assert sorted(p.key for p in got) == sorted(p.key for p in best)
