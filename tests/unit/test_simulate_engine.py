"""The simulator: hand-computed scenarios with exact JCTs, and invariants on generated traces."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elastic_controller.policy.settings import ElasticConfig
from elastic_controller.simulate.cluster import ClusterSpec, NodePool, QueueSpec
from elastic_controller.simulate.engine import SimResult, SimSettings, simulate
from elastic_controller.simulate.generate import GeneratorOptions, generate
from elastic_controller.simulate.restarts import fixed_cost
from elastic_controller.simulate.scaling import ScalingCurve
from elastic_controller.simulate.trace import JobSpec
from tests.harness.legacy import legacy_config, legacy_policy

# hand-computed trajectories: no checkpoint loss (tests of it set an interval)
LINEAR = SimSettings(curve=ScalingCurve(1.0), checkpoint_interval=0, restart_cost=fixed_cost(60))
ANY_SIZE = ElasticConfig(defaults=legacy_policy(minWorkersToShrink=0))  # jobs of any size may give


def cluster(nodes: int = 1, gpus: int = 8, queues: tuple[QueueSpec, ...] = (QueueSpec("default"),)) -> ClusterSpec:
    return ClusterSpec((NodePool("n", nodes, gpus, 96_000, 2**40),), queues)


def job(name: str, submit: float, lo: int, hi: int, gpus: int, work: float, **kw: object) -> JobSpec:
    return JobSpec(name, submit, lo, hi, gpus, work, **kw)  # type: ignore[arg-type]


def times(result: SimResult) -> dict[str, tuple[float, float]]:
    return {j.name: (j.start, j.finish) for j in result.jobs}


# --- hand-computed scenarios ---------------------------------------------------------------------

@pytest.mark.parametrize(("policy", "last_call", "finish", "restarts"), [
    # t=0: min (1 worker, 4 GPUs) starts; the agent lifts worker-1's gate in the same cycle, which
    # joins the job's first rendezvous (within its last call): no restart, 8 GPUs from the start.
    ("elastic", 30.0, 500.0, 0),
    # Without a last call the job restarts (60 s) and runs on 8 GPUs: 500 s after the restart.
    ("elastic", 0.0, 560.0, 1),
    ("static-max", 30.0, 500.0, 0),
    ("static-min", 30.0, 1000.0, 0),
], ids=["elastic-grows-in-first-rendezvous", "elastic-grows-at-once-restarts", "static-max", "static-min"])
def test_lone_job(policy: str, last_call: float, finish: float, restarts: int) -> None:
    settings = dataclasses.replace(LINEAR, rendezvous_last_call=last_call)
    r = simulate([job("a", 0, 1, 2, 4, 4000)], cluster(), legacy_config(), policy, settings)
    assert times(r) == {"a": (0.0, finish)}
    assert r.restarts == restarts
    assert r.cooldown_violations == 0
    # Busy GPU time: the 4000 GPU-s of work (linear scaling); elastic also held 8 GPUs through the
    # 60 s restart, which allocation counts and busy does not.
    assert r.gpu_seconds_busy == pytest.approx(4000.0)
    assert r.gpu_busy == pytest.approx(4000.0 / (8 * finish))


def test_eviction_waits_for_cooldown_and_grace() -> None:
    """A grows at 0 in its first rendezvous (no restart; cooldown until 300). B (rigid, 4 GPUs)
    arrives at 200 and starves at 230, but A's elastic worker is only evictable at 300; it holds its
    GPUs for the 30 s grace period, so B starts at 330 and ends at 1330. A: 0..300 at 8 GPU/s
    (2400), restart, 360..1330 at 4 (3880), regrows at 1330 (B's GPUs), restart, 1720 left at 8
    from 1390: done at 1605. (A runs 2 workers: minWorkersToShrink 0 lets it give; see below.)"""
    jobs = [job("a", 0, 1, 2, 4, 8000), job("b", 200, 1, 1, 4, 4000)]
    r = simulate(jobs, cluster(), ANY_SIZE, "elastic", LINEAR)
    assert times(r) == {"a": (0.0, 1605.0), "b": (330.0, 1330.0)}
    a = r.jobs[0]
    assert a.evictions == 1 and a.restarts == 2
    assert [d for _, d in a.scale_events] == ["up", "down", "up"]
    assert [t for t, _ in a.scale_events] == [0.0, 300.0, 1330.0]
    assert r.evictions == 1 and r.cooldown_violations == 0 and not r.rejected_decisions
    # Busy: 2400 + 3880 + 1720 (A) + 4000 (B); not the restarts (300-360, 1330-1390) nor the
    # evicted worker's grace period (300-330).
    assert r.gpu_seconds_busy == pytest.approx(12000.0)
    # Allocated: A's 8 GPUs 0-300, the victim's 4 through its grace 300-330, A's 4 300-1330, B's 4
    # 330-1330, A's 8 1330-1605.
    assert r.gpu_seconds_allocated == pytest.approx(8 * 300 + 4 * 30 + 4 * 1030 + 4 * 1000 + 8 * 275)
    # Until the last submission (200 s) A held all 8 GPUs.
    assert r.gpu_allocation_while_arriving == pytest.approx(1.0)


def test_a_small_job_keeps_its_workers() -> None:
    """The same trace with the default minWorkersToShrink (4): A runs 2 workers, fewer than 4, so it
    is never a victim: it runs 0..1000 on 8 GPUs without a restart and B starts when A ends."""
    jobs = [job("a", 0, 1, 2, 4, 8000), job("b", 200, 1, 1, 4, 4000)]
    r = simulate(jobs, cluster(), legacy_config(), "elastic", LINEAR)
    assert times(r) == {"a": (0.0, 1000.0), "b": (1000.0, 2000.0)}
    assert r.jobs[0].restarts == 0 and r.evictions == 0
    # with minWorkersToShrink 2 it gives again (2 workers >= 2)
    two = ElasticConfig(defaults=legacy_policy(minWorkersToShrink=2))
    assert times(simulate(jobs, cluster(), two, "elastic", LINEAR))["b"] == (330.0, 1330.0)


def test_static_max_gangs_run_one_after_another() -> None:
    jobs = [job("a", 0, 1, 2, 4, 8000), job("b", 10, 1, 2, 4, 800)]
    r = simulate(jobs, cluster(), legacy_config(), "static-max", LINEAR)
    assert times(r) == {"a": (0.0, 1000.0), "b": (1000.0, 1100.0)}
    assert [j.queueing for j in r.jobs] == [0.0, 990.0]
    # 8 GPUs busy from 0 to 1100 over a span of 1100 s.
    assert r.gpu_allocation == pytest.approx(1.0)


def test_priority_then_fifo_within_a_queue() -> None:
    blocker = job("a", 0, 1, 1, 8, 800)  # holds the node until 100
    jobs = [blocker, job("b", 1, 1, 1, 8, 800), job("c", 2, 1, 1, 8, 800, priority=5)]
    r = simulate(jobs, cluster(), legacy_config(), "static-max", LINEAR)
    assert times(r) == {"a": (0.0, 100.0), "c": (100.0, 200.0), "b": (200.0, 300.0)}


def test_smaller_gang_is_not_blocked_by_a_bigger_one() -> None:
    jobs = [job("a", 0, 1, 1, 4, 400), job("big", 1, 1, 1, 8, 800), job("small", 2, 1, 1, 4, 400)]
    r = simulate(jobs, cluster(), legacy_config(), "static-max", LINEAR)
    assert times(r) == {"a": (0.0, 100.0), "small": (2.0, 102.0), "big": (102.0, 202.0)}


def test_scaling_efficiency_slows_bigger_jobs() -> None:
    r = simulate([job("a", 0, 2, 2, 4, 8000)], cluster(), legacy_config(), "static-max",
                 SimSettings(curve=ScalingCurve(0.8), checkpoint_interval=0))
    assert times(r) == {"a": (0.0, pytest.approx(8000 / (8 * 0.8)))}


def test_queues_share_by_weight() -> None:
    """Two queues 3:1 on 8 one-GPU nodes, both flooded: the heavy queue gets 6 nodes, the other 2."""
    queues = (QueueSpec("heavy", 3), QueueSpec("light", 1))
    jobs = [job(f"h{i}", 0, 1, 1, 1, 100, queue="heavy") for i in range(8)]
    jobs += [job(f"l{i}", 0, 1, 1, 1, 100, queue="light") for i in range(8)]
    # allocate's shares alone (enqueue would admit 9.6 GPUs' worth of the 16 jobs, see test_enqueue_*)
    r = simulate(jobs, cluster(nodes=8, gpus=1, queues=queues), legacy_config(), "static-max",
                 dataclasses.replace(LINEAR, enqueue=False))
    first_wave = {j.name for j in r.jobs if j.start == 0.0}
    assert len(first_wave) == 8
    assert sum(1 for n in first_wave if n.startswith("h")) == 6


# --- invariants on generated traces --------------------------------------------------------------

SMALL = ClusterSpec((NodePool("gpu", 6, 8, 96_000, 2**40),), (QueueSpec("a", 2), QueueSpec("b", 1)))
FAST = ElasticConfig(defaults=legacy_policy(cooldownSeconds=120, minRuntimeSeconds=60, starvationSeconds=20))


def small_trace(seed: int, jobs: int = 40, load: float = 1.0) -> list[JobSpec]:
    return generate(SMALL, GeneratorOptions(jobs=jobs, seed=seed, load=load, min_hours=0.05, max_hours=1.0))


def check_invariants(r: SimResult, cfg: ElasticConfig) -> None:
    assert all(j.finished for j in r.jobs)
    # Conservation: the work done is the trace's, and allocated GPU-seconds are what jobs held.
    for j in r.jobs:
        assert j.work_done == pytest.approx(j.work, rel=1e-9)
    assert sum(j.held_gpu_seconds for j in r.jobs) == pytest.approx(r.gpu_seconds_allocated, rel=1e-9)
    # Busy GPU time is allocated time that did work: all of it when nothing ever restarted.
    assert r.gpu_seconds_busy <= r.gpu_seconds_allocated * (1 + 1e-9)
    if r.restarts == 0 and r.evictions == 0:
        assert r.gpu_seconds_busy == pytest.approx(r.gpu_seconds_allocated, rel=1e-9)
    # Bounds: never below min nor above max once started; nothing refused (no master/core victims).
    for j in r.jobs:
        assert j.min_workers <= j.min_seen <= j.max_seen <= j.max_workers
    assert r.bound_violations == 0
    assert r.rejected_decisions == ()
    # No scale event inside a cooldown.
    assert r.cooldown_violations == 0
    for j in r.jobs:
        cooldown = cfg.queue_policy(j.queue).cooldownSeconds
        for (t0, _), (t1, _) in zip(j.scale_events, j.scale_events[1:], strict=False):
            assert t1 - t0 >= cooldown


@pytest.mark.parametrize("policy", ["elastic", "static-max", "static-min"])
def test_invariants_hold(policy: str) -> None:
    r = simulate(small_trace(3), SMALL, FAST, policy)
    check_invariants(r, FAST)
    if policy == "elastic":
        assert r.evictions > 0 and r.restarts > 0  # the scenario exercises the agent
    else:
        assert r.evictions == 0 and r.restarts == 0


def test_busy_gpu_time_is_the_work_under_linear_scaling() -> None:
    trace = small_trace(3)
    r = simulate(trace, SMALL, FAST, "elastic", LINEAR)
    assert r.restarts > 0
    assert r.gpu_seconds_busy == pytest.approx(sum(j.work for j in trace), rel=1e-9)
    assert r.gpu_seconds_busy < r.gpu_seconds_allocated


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), load=st.sampled_from([0.6, 1.0, 1.5]))
def test_invariants_hold_for_any_seed(seed: int, load: float) -> None:
    check_invariants(simulate(small_trace(seed, 25, load), SMALL, FAST, "elastic"), FAST)


def test_deterministic_under_a_seed() -> None:
    a = simulate(small_trace(11), SMALL, FAST, "elastic")
    b = simulate(small_trace(11), SMALL, FAST, "elastic")
    assert dataclasses.replace(a, wall_seconds=0, plan_seconds=0) == dataclasses.replace(
        b, wall_seconds=0, plan_seconds=0)
    assert small_trace(11) != small_trace(12)


def test_skipping_idle_cycles_changes_nothing() -> None:
    """The engine only skips agent cycles in which plan_cycle provably cannot act."""
    trace = small_trace(5)
    fast = simulate(trace, SMALL, FAST, "elastic")
    every = simulate(trace, SMALL, FAST, "elastic", SimSettings(prefilter=False))
    assert fast.cycles_skipped > 0 and every.cycles_skipped == 0
    assert [(j.start, j.finish, j.scale_events) for j in fast.jobs] == [
        (j.start, j.finish, j.scale_events) for j in every.jobs]


# --- the engine guards what it applies -----------------------------------------------------------

# fake planners break the prefilter's premises
EVERY_CYCLE = SimSettings(curve=ScalingCurve(1.0), prefilter=False, checkpoint_interval=0)

def test_a_plan_evicting_a_master_or_core_pod_is_refused() -> None:
    from elastic_controller.policy.decisions import CyclePlan, Eviction

    def evict_everything(snapshot, cfg, now):  # type: ignore[no-untyped-def]
        running = [p for p in snapshot.pods if p.running]
        return CyclePlan(evictions=tuple(Eviction(p.key, p.node_name, p.group_key, "default", "x", "test")
                                         for p in running))

    r = simulate([job("a", 0, 2, 2, 4, 8000)], cluster(), legacy_config(), "elastic", EVERY_CYCLE,
                 planner=evict_everything)
    assert r.evictions == 0 and times(r) == {"a": (0.0, 1000.0)}
    assert any("role master is never evicted" in d for d in r.rejected_decisions)
    assert any("role core is never evicted" in d for d in r.rejected_decisions)


def test_cooldown_violations_are_counted() -> None:
    """A planner that ignores cooldowns: grow at once, shrink 5 s later (the next cycle)."""
    from elastic_controller.policy.decisions import CyclePlan, Eviction, GateRelease

    calls = []

    def flap(snapshot, cfg, now):  # type: ignore[no-untyped-def]
        calls.append(now)
        if len(calls) > 2:
            return CyclePlan()
        gated = [p for p in snapshot.pods if p.scheduling_gates]
        if gated:
            return CyclePlan(gate_releases=(GateRelease(gated[0].key, "ns/a", "n-00", "default", "t"),))
        elastic = [p for p in snapshot.pods if p.running and p.role.value == "elastic"]
        return CyclePlan(evictions=tuple(Eviction(p.key, p.node_name, "ns/a", "default", "x", "t")
                                         for p in elastic))

    r = simulate([job("a", 0, 1, 2, 4, 4000)], cluster(), legacy_config(), "elastic", EVERY_CYCLE,
                 planner=flap)
    assert r.cooldown_violations == 1
    assert r.jobs[0].scale_events == ((0.0, "up"), (5.0, "down"))
