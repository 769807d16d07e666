"""The ordering rules (``policy/ordering.py``): a precedence table, the monotonicity contract the
node index prunes on, and indexed-versus-exhaustive search on clusters with negative, equal and many
distinct priorities (issue 16: reordering the victim key must not make the two searches disagree)."""

from __future__ import annotations

import math
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elastic_controller.policy import ordering
from elastic_controller.policy.model import ElasticBounds, PodView
from elastic_controller.policy.settings import ElasticConfig
from elastic_controller.policy.world import JobState
from tests.harness.builders import NOW, elastic_job, gang, node, plan_fast_and_exhaustive, priority_class, snapshot_of
from tests.harness.strategies import clusters, parse, worker_sizes

SETTINGS = settings(max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "60")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def priority_values() -> st.SearchStrategy[list[int]]:
    """PriorityClass values: all negative, all equal, or many distinct (negative ones included)."""
    return st.one_of(
        st.lists(st.integers(-2**31, -1), min_size=1, max_size=4),
        st.tuples(st.integers(-3, 3), st.integers(1, 4)).map(lambda vn: [vn[0]] * vn[1]),
        st.lists(st.integers(-1000, 1000), min_size=4, max_size=8, unique=True),
    )


# -- the precedence table ----------------------------------------------------------------------------
# Each row: two elastic jobs, a on node n1 and b on n0, each filling its node; a gang of priority 100
# needs one GPU, so exactly one worker is evicted. The row's criterion decides (the earlier criteria
# tie), and every later criterion, and the node name, points the other way.
# (criterion, a's (min, max, gpus per worker, priority), b's (same), the expected victim)
PRECEDENCE = [
    # a: 8 of max 8 (fulfillment 1.0), priority -1; b: 8 of max 10 (0.75), priority -5. (Negative
    # values: with priority first in the key but the index still ranking by fulfillment, the index
    # pruned b's node here and evicted from a while the exhaustive scan evicted from b.)
    ("fulfillment before priority", (2, 8, 1, -1), (2, 10, 1, -5), "a-worker-7"),
    # Both fulfilled; b has the lower priority although a's top index (7) is higher than b's (3).
    ("priority before index", (1, 8, 1, -3), (1, 4, 2, -7), "b-worker-3"),
    # Both fulfilled, equal priority: a's top index is 7, b's 3 (b's node n0 comes first by name).
    ("index before uid", (1, 8, 1, -2), (1, 4, 2, -2), "a-worker-7"),
    # Everything equal but the uid: uid-ns-a-worker-7 < uid-ns-b-worker-7 (b's node comes first by name).
    ("uid last", (1, 8, 1, -2), (1, 8, 1, -2), "a-worker-7"),
]


def _job(name: str, node_name: str, spec: tuple[int, int, int, int]) -> list[dict[str, Any]]:
    min_r, max_r, gpus, prio = spec
    return [priority_class(f"pc-{name}", prio),
            *elastic_job("ns", name, min_r=min_r, max_r=max_r, running=8 // gpus, gpus=gpus, nodes=[node_name],
                         priority_class=f"pc-{name}")]


@pytest.mark.parametrize(("criterion", "a", "b", "victim"), PRECEDENCE, ids=[row[0] for row in PRECEDENCE])
def test_precedence_table(criterion: str, a: tuple[int, int, int, int], b: tuple[int, int, int, int],
                          victim: str) -> None:
    cfg = ElasticConfig()
    snap = snapshot_of(node("n0"), node("n1"), priority_class("top", 100), *_job("a", "n1", a), *_job("b", "n0", b),
                       *gang("ns", "g", members=1, gpus=1, priority_class="top"), cfg=cfg)
    fast, slow = plan_fast_and_exhaustive(snap, cfg, NOW)
    assert fast == slow, criterion
    assert [e.pod for e in fast.evictions] == [f"ns/{victim}"], (criterion, fast.starving)


@pytest.mark.parametrize(("criterion", "a", "b", "victim"), PRECEDENCE, ids=[row[0] for row in PRECEDENCE])
def test_precedence_table_on_the_keys(criterion: str, a: tuple[int, int, int, int], b: tuple[int, int, int, int],
                                      victim: str) -> None:
    """The same table on ``victim_key`` itself (each job's top worker)."""
    keyed = {}
    for name, (min_r, max_r, gpus, prio) in (("a", a), ("b", b)):
        running = 8 // gpus
        job = JobState(f"ns/{name}", None, "default", prio, ElasticBounds(min_r, max_r), running_workers=running)
        top = PodView("ns", f"{name}-worker-{running - 1}", f"uid-ns-{name}-worker-{running - 1}",
                      replica_index=running - 1)
        keyed[top.name] = ordering.victim_key(ordering.job_rank(job), top)
    assert min(keyed, key=keyed.__getitem__) == victim, (criterion, keyed)


def test_victim_key_names_its_fields() -> None:
    job = JobState("ns/a", None, "q", -4, ElasticBounds(1, 5), running_workers=3)
    pod = PodView("ns", "a-worker-2", "u", replica_index=2)
    key = ordering.victim_key(ordering.job_rank(job), pod)
    assert key == ordering.VictimKey(neg_served=0.0, neg_fulfillment=-0.5, priority=-4, neg_checkpoint=math.inf,
                                     gpus_restarted=0, neg_replica_index=-2, uid="u")
    job.loss = (-1.7e9, 12)  # checkpointed at that POSIX time; 12 GPUs restart (set by the planner)
    key = ordering.victim_key(ordering.job_rank(job), pod)
    assert ordering.VictimKey(*key)[3:5] == (-1.7e9, 12)
    job.served, job.by_service = 7200.0, True  # its queue orders by attained service
    assert ordering.VictimKey(*ordering.victim_key(ordering.job_rank(job), pod)).neg_served == -7200.0
    job.by_service = False  # orderBy: fulfillment: criterion 0 ties
    assert ordering.VictimKey(*ordering.victim_key(ordering.job_rank(job), pod)).neg_served == 0.0


def _served_job(name: str, served: float, running: int, max_r: int) -> JobState:
    job = JobState(f"ns/{name}", None, "q", 0, ElasticBounds(1, max_r), running_workers=running)
    job.served, job.by_service = served, True
    return job


def test_attained_service_comes_before_fulfillment() -> None:
    """Issue 38: with orderBy attainedService the most served job gives first although it is the less
    fulfilled, and the least served grows first although it is the more fulfilled."""
    rich = _served_job("rich", 90_000.0, running=4, max_r=16)  # fulfillment 0.2
    poor = _served_job("poor", 1_000.0, running=4, max_r=4)  # fulfillment 1.0
    pod = PodView("ns", "x-worker-3", "u", replica_index=3)
    assert ordering.victim_key(ordering.job_rank(rich), pod) < ordering.victim_key(ordering.job_rank(poor), pod)
    assert ordering.scale_up_key(False, poor, pod, poor.key) < ordering.scale_up_key(False, rich, pod, rich.key)
    for job in (rich, poor):  # orderBy: fulfillment: the order of before
        job.by_service = False
    assert ordering.victim_key(ordering.job_rank(poor), pod) < ordering.victim_key(ordering.job_rank(rich), pod)
    assert ordering.scale_up_key(False, rich, pod, rich.key) < ordering.scale_up_key(False, poor, pod, poor.key)


# -- the monotonicity contract -----------------------------------------------------------------------
@given(min_r=st.integers(0, 6), extra=st.integers(0, 8), running=st.integers(0, 16),
       priority=st.one_of(st.integers(-2**31, 2**31 - 1), st.sampled_from([-1, 0, 1])),
       index=st.integers(0, 16), added=st.integers(0, 4),
       served=st.one_of(st.just(0.0), st.floats(0, 1e9)), by_service=st.booleans())
def test_a_job_rank_never_sorts_earlier_as_it_loses_workers(min_r: int, extra: int, running: int, priority: int,
                                                            index: int, added: int, served: float,
                                                            by_service: bool) -> None:
    """What the node index prunes on (see ``ordering``'s docstring): taking one more worker of a job
    never makes any of its pods' victim keys smaller (attained service included: fixed for the cycle)."""
    job = JobState("ns/j", None, "q", priority, ElasticBounds(min_r, min_r + extra), running_workers=running,
                   added=added, served=served, by_service=by_service)
    pod = PodView("ns", "j-worker", "uid", replica_index=index)
    keys = [ordering.victim_key(ordering.job_rank(job, taken), pod) for taken in range(running + 1)]
    assert keys == sorted(keys)
    assert job.taken == 0  # job_rank leaves the job as it found it


def _priority_classes(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[str]]:
    """PriorityClass objects with values from ``priority_values``, and their names."""
    values = draw(priority_values())
    return [priority_class(f"p{i}", v) for i, v in enumerate(values)], [f"p{i}" for i in range(len(values))]


def _gangs(draw: st.DrawFn, classes: list[str], *, members: int, gpus: int) -> list[dict[str, Any]]:
    """One or two gangs of 1..``members`` pods of 1..``gpus`` GPUs, with priorities from ``classes``."""
    out: list[dict[str, Any]] = []
    for g in range(draw(st.integers(1, 2))):
        out += gang("ns", f"g{g}", members=draw(st.integers(1, members)), gpus=draw(st.integers(1, gpus)),
                    priority_class=draw(st.sampled_from(classes)))
    return out


def assert_indexed_matches_exhaustive(cluster: tuple[list[dict[str, Any]], ElasticConfig]) -> None:
    objs, cfg = cluster
    fast, slow = plan_fast_and_exhaustive(snapshot_of(objs, cfg=cfg), cfg, NOW)
    assert fast == slow


@st.composite
def contests(draw: st.DrawFn) -> tuple[list[dict[str, Any]], ElasticConfig]:
    """Two to four nodes, each filled by one elastic job (random bounds, worker size and priority from
    ``priority_values``), and one or two gangs: victims from different jobs compete on every criterion."""
    objs, classes = _priority_classes(draw)
    for i in range(draw(st.integers(2, 4))):
        gpus = draw(st.sampled_from([1, 1, 2]))
        running = 8 // gpus
        min_r = draw(st.integers(1, running))
        max_r = running + draw(st.sampled_from([0, 0, 1, 2, 4]))
        job = elastic_job("ns", f"j{i}", min_r=min_r, max_r=max_r, running=running, gpus=gpus,
                          nodes=[f"n{i}"], priority_class=draw(st.sampled_from(classes)))
        job[0]["metadata"]["annotations"].update(draw(worker_sizes(min_r, max_r)))  # issue 20: some have counts
        objs += [node(f"n{i}"), *job]
    objs += _gangs(draw, classes, members=2, gpus=3)
    return objs, ElasticConfig()


@given(contests())
@SETTINGS
def test_indexed_search_matches_the_exhaustive_scan_on_contests(
        cluster: tuple[list[dict[str, Any]], ElasticConfig]) -> None:
    assert_indexed_matches_exhaustive(cluster)


@st.composite
def spread_contests(draw: st.DrawFn) -> tuple[list[dict[str, Any]], ElasticConfig]:
    """Two or four full nodes shared by as many elastic jobs of 1-GPU workers, each job on every node,
    some with allowed counts (issue 20): rounding a job down takes extra victims on other nodes, which
    the node index must bound (its smallest key) for the indexed search to equal the exhaustive scan."""
    objs, classes = _priority_classes(draw)
    k = draw(st.sampled_from([2, 4]))
    nodes = [f"n{i}" for i in range(k)]
    objs += [node(n) for n in nodes]
    for j in range(k):
        min_r = draw(st.integers(1, 6))
        job = elastic_job("ns", f"j{j}", min_r=min_r, max_r=8, running=8, nodes=nodes[j:] + nodes[:j],
                          priority_class=draw(st.sampled_from(classes)))
        job[0]["metadata"]["annotations"].update(draw(worker_sizes(min_r, 8)))
        objs += job
    objs += _gangs(draw, classes, members=3, gpus=4)
    return objs, ElasticConfig()


@given(spread_contests())
@SETTINGS
def test_indexed_search_matches_the_exhaustive_scan_with_allowed_counts_across_nodes(
        cluster: tuple[list[dict[str, Any]], ElasticConfig]) -> None:
    assert_indexed_matches_exhaustive(cluster)


# -- indexed search == exhaustive scan, on wide priorities ------------------------------------------------
@given(clusters(priorities=priority_values()))
@SETTINGS
def test_indexed_search_matches_the_exhaustive_scan_on_any_priorities(
        cluster: tuple[list[dict[str, Any]], ElasticConfig]) -> None:
    objs, cfg = cluster
    fast, slow = plan_fast_and_exhaustive(parse(objs, cfg), cfg, NOW)
    assert fast == slow


# -- restart cost (issue 19): criterion 3 after fairness, before the index -----------------------------
def _with_checkpoint(objs: list[dict[str, Any]], seconds_ago: int) -> list[dict[str, Any]]:
    from tests.harness.builders import ago, ts

    for o in objs:
        if o["kind"] == "PodGroup":
            ann = o["metadata"].setdefault("annotations", {})
            ann["volcano-elastic.io/last-checkpoint-time"] = ts(ago(seconds_ago))
    return objs


@pytest.mark.parametrize(
    ("criterion", "a", "b", "a_ckpt", "b_ckpt", "victim"),
    [
        # Equal fairness: b checkpointed a minute ago, a an hour ago; both offer index 7 and a's node
        # comes later: b gives (less work lost).
        ("checkpoint before index", (1, 8, 1, -2), (1, 8, 1, -2), 3600, 60, "b-worker-7"),
        # Unknown checkpoint counts as the oldest.
        ("unknown checkpoint is the oldest", (1, 8, 1, -2), (1, 8, 1, -2), None, 600, "b-worker-7"),
        # Fairness stays first: a is more fulfilled, b checkpointed more recently: a gives.
        ("fulfillment before checkpoint", (2, 8, 1, -2), (2, 10, 1, -2), 3600, 60, "a-worker-7"),
        # (fewer GPUs restarted among equals: test_policy_eviction.test_fewer_gpus_restarted_among_equals)
    ],
)
def test_restart_cost_precedence(criterion: str, a: tuple[int, int, int, int], b: tuple[int, int, int, int],
                                 a_ckpt: int | None, b_ckpt: int | None, victim: str) -> None:
    cfg = ElasticConfig()
    ja, jb = _job("a", "n1", a), _job("b", "n0", b)
    if a_ckpt is not None:
        _with_checkpoint(ja, a_ckpt)
    if b_ckpt is not None:
        _with_checkpoint(jb, b_ckpt)
    snap = snapshot_of(node("n0"), node("n1"), priority_class("top", 100), *ja, *jb,
                       *gang("ns", "g", members=1, gpus=1, priority_class="top"), cfg=cfg)
    fast, slow = plan_fast_and_exhaustive(snap, cfg, NOW)
    assert fast == slow, criterion
    assert [e.pod for e in fast.evictions] == [f"ns/{victim}"], (criterion, fast.starving)
