"""The job contract v2 in the simulator: allowed Worker counts in traces (``workerCounts``) and the
eviction notice (a victim's GPUs held for the queue's ``noticeSeconds``; its job checkpoints, so the
restart loses nothing), through the agent's own notice review and planner."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elastic_controller.cli import main
from elastic_controller.policy import keys
from elastic_controller.policy.decisions import CyclePlan
from elastic_controller.policy.model import Snapshot
from elastic_controller.policy.settings import ElasticConfig
from elastic_controller.simulate.cluster import ClusterSpec, NodePool, QueueSpec
from elastic_controller.simulate.engine import SimResult, SimSettings, Simulator, default_planner, simulate
from elastic_controller.simulate.generate import GeneratorOptions, generate, powers_of_two, with_worker_counts
from elastic_controller.simulate.restarts import fixed_cost
from elastic_controller.simulate.scaling import ScalingCurve
from elastic_controller.simulate.trace import JobSpec, TraceError, dump_csv, load_trace, parse_own_csv
from tests.harness.legacy import legacy_config, legacy_policy

LINEAR = SimSettings(curve=ScalingCurve(1.0), checkpoint_interval=0, restart_cost=fixed_cost(60))
HEAD = "name,submit,min,max,gpus,work,workerCounts\n"


def one_node(gpus: int = 8) -> ClusterSpec:
    return ClusterSpec((NodePool("n", 1, gpus, 96_000, 2**40),), (QueueSpec("default"),))


def with_notice(seconds: int) -> ElasticConfig:
    # minWorkersToShrink 0: the scenarios' A runs 2 workers, fewer than the default 4, and must give
    return ElasticConfig(defaults=dataclasses.replace(legacy_policy(), noticeSeconds=seconds, minWorkersToShrink=0))


def times(result: SimResult) -> dict[str, tuple[float, float]]:
    return {j.name: (j.start, j.finish) for j in result.jobs}


# --- the trace column ----------------------------------------------------------------------------

def test_worker_counts_column_in_csv_and_yaml(tmp_path: Path) -> None:
    jobs = parse_own_csv(HEAD + "a,0,2,8,8,100,2|4|8\nb,0,1,4,8,100,\nc,0,2,6,8,100,6 | 2\n", "t.csv")
    assert [j.worker_counts for j in jobs] == [(2, 4, 8), (), (2, 6)]
    assert jobs[0].counts_annotation == {keys.WORKER_COUNTS: "2,4,8"}
    assert jobs[1].counts_annotation == {}
    path = tmp_path / "t.yaml"
    path.write_text("jobs:\n  - {name: a, submit: 0, min: 2, max: 8, gpus: 8, work: 100, workerCounts: [2, 4, 8]}\n"
                    "  - {name: b, submit: 0, min: 2, max: 8, gpus: 8, work: 100, workerCounts: '2|8'}\n"
                    "  - {name: c, submit: 0, min: 2, max: 2, gpus: 8, work: 100, workerCounts: 2}\n",
                    encoding="utf-8")
    assert [j.worker_counts for j in load_trace(str(path))] == [(2, 4, 8), (2, 8), (2,)]
    # The written trace carries the column and reads back the same; without counts it has no column.
    assert parse_own_csv(dump_csv(jobs), "again.csv") == jobs
    assert "workerCounts" not in dump_csv([dataclasses.replace(j, worker_counts=()) for j in jobs])


@pytest.mark.parametrize(("row", "message"), [
    ("a,0,2,8,8,100,2|x|8", "count 'x' is not a whole number"),
    ("a,0,2,8,8,100,2,4", "expected 7 columns, got 8"),
    ("a,0,2,8,8,100,\"2,4,8\"", "separates counts with '|'"),
    ("a,0,2,8,8,100,2||8", "has an empty count"),
    ("a,0,2,8,8,100,2|4|16", "lists 16, outside elasticPolicy [minReplicas=2, maxReplicas=8]"),
    ("a,0,2,8,8,100,4|8", "does not include minReplicas (2)"),
    ("a,0,2,8,8,100,0|2", "must be at least 1"),
], ids=["not-a-number", "commas-unquoted", "commas-quoted", "empty-count", "outside-bounds", "no-min", "zero"])
def test_bad_worker_counts_name_file_line_and_rule(row: str, message: str) -> None:
    with pytest.raises(TraceError) as err:
        parse_own_csv(HEAD + "ok,0,1,2,8,100,1|2\n" + row + "\n", "t.csv")
    assert err.value.line == 3
    assert str(err.value).startswith("t.csv:3: ")
    assert message in str(err.value)


def test_worker_counts_that_never_reach_max_pass_as_the_webhook_admits_them() -> None:
    (job,) = parse_own_csv(HEAD + "a,0,2,8,8,100,2|4\n", "t.csv")
    assert job.worker_counts == (2, 4)


def test_powers_of_two_and_the_fraction_draw() -> None:
    assert powers_of_two(2, 8) == (2, 4, 8)
    assert powers_of_two(3, 10) == (3, 4, 8)
    assert powers_of_two(1, 1) == (1,)
    spec = ClusterSpec((NodePool("n", 64, 8, 96_000, 2**40),), (QueueSpec("default"),))
    jobs = generate(spec, GeneratorOptions(jobs=200, seed=2))
    assert with_worker_counts(jobs, 0.0, 2) is jobs  # default: the trace is unchanged
    some = with_worker_counts(jobs, 0.5, 2)
    assert [dataclasses.replace(j, worker_counts=()) for j in some] == jobs  # nothing else moves
    drawn = [j for j in some if j.worker_counts]
    elastic = [j for j in jobs if j.max_workers > j.min_workers]
    assert 0.3 * len(elastic) < len(drawn) < 0.7 * len(elastic)
    assert all(j.max_workers > j.min_workers and j.worker_counts[0] == j.min_workers for j in drawn)
    # The draw depends on the job's name, not on the row order.
    assert {j.name: j.worker_counts for j in with_worker_counts(list(reversed(jobs)), 0.5, 2)} == \
        {j.name: j.worker_counts for j in some}
    # Every drawn contract passes the trace's (the webhook's) validation.
    assert parse_own_csv(dump_csv(some), "t.csv") == some


# --- allowed counts reach the planner ------------------------------------------------------------

def test_podgroup_carries_the_worker_counts_annotation() -> None:
    seen: list[dict[str, str]] = []
    plan = default_planner()

    def spy(snapshot: Snapshot, cfg: ElasticConfig, now: datetime) -> CyclePlan:
        seen.extend(pg.annotations for pg in snapshot.podgroups if pg.name == "x")
        return plan(snapshot, cfg, now)

    jobs = [JobSpec("x", 0, 1, 3, 2, 600, worker_counts=(1, 3))]
    simulate(jobs, one_node(), legacy_config(), "elastic", LINEAR, planner=spy)
    assert seen and all(a.get(keys.WORKER_COUNTS) == "1,3" for a in seen)


@pytest.mark.parametrize(("counts", "max_seen"), [((), 2), ((1, 3), 1)], ids=["any-count", "counts-1-3"])
def test_growth_only_to_an_allowed_count(counts: tuple[int, ...], max_seen: int) -> None:
    """A rigid job holds 4 of 8 GPUs; x (1..3 workers of 2 GPUs) has room for one more worker: it
    grows to 2 when any count is allowed, and stays at 1 with counts 1|3 (3 does not fit)."""
    jobs = [JobSpec("big", 0, 1, 1, 4, 4 * 5000), JobSpec("x", 0, 1, 3, 2, 2 * 2000, worker_counts=counts)]
    r = simulate(jobs, one_node(), legacy_config(), "elastic", LINEAR)
    x = r.jobs[1]
    assert x.max_seen == max_seen
    assert r.count_violations == 0


def test_rigid_peers_ignore_the_counts_and_count_what_they_break() -> None:
    """static-max runs the job at max even when its counts never reach max; static-min at min."""
    jobs = [JobSpec("x", 0, 2, 3, 2, 1200, worker_counts=(2,))]
    assert simulate(jobs, one_node(), legacy_config(), "static-max", LINEAR).count_violations == 1
    assert simulate(jobs, one_node(), legacy_config(), "static-min", LINEAR).count_violations == 0


# --- the eviction notice -------------------------------------------------------------------------

# A grows at 0 in its first rendezvous (8 GPUs; cooldown until 300). B (rigid, 4 GPUs) arrives at
# 200 and starves at 230; A's elastic worker is a victim at 300 (test_simulate_engine's scenario).
AB = [JobSpec("a", 0, 1, 2, 4, 8000), JobSpec("b", 200, 1, 1, 4, 4000)]


def test_no_notice_evicts_at_once_and_loses_the_work_since_the_checkpoint() -> None:
    r = simulate(AB, one_node(), with_notice(0), "elastic", dataclasses.replace(LINEAR, checkpoint_interval=1000))
    assert times(r)["b"] == (330.0, 1330.0)  # evicted at 300, its grace period 30 s
    assert r.jobs[0].lost_work == pytest.approx(8 * 300)  # 300 s at 8 GPUs since the start
    assert (r.notices, r.notice_gpu_seconds) == (0, 0.0)


def test_a_victim_holds_its_gpus_for_the_notice_and_its_job_loses_nothing() -> None:
    """Notice at 300 until 360: A keeps its 8 GPUs working, the victim leaves at 360 (B at 390), and A
    restarts from the checkpoint it wrote as its notice ended: nothing lost."""
    r = simulate(AB, one_node(), with_notice(60), "elastic", dataclasses.replace(LINEAR, checkpoint_interval=1000))
    a = r.jobs[0]
    assert times(r)["b"] == (390.0, 1390.0)
    assert a.evictions == 1 and r.evictions == 1
    assert a.lost_work == 0.0
    assert [t for t, d in a.scale_events if d == "down"] == [300.0]  # the cooldown starts with the notice
    assert (r.notices, r.notices_ended_by_checkpoint, r.notices_withdrawn) == (1, 0, 0)
    assert r.notice_gpu_seconds == pytest.approx(4 * 60)
    assert r.cooldown_violations == 0 and not r.rejected_decisions
    # Allocation: A's 8 GPUs until 360 (the victim's 4 held under notice), its grace 360-390.
    assert r.gpu_seconds_allocated == pytest.approx(
        sum(j.held_gpu_seconds for j in r.jobs))


def test_a_checkpoint_during_the_notice_ends_it() -> None:
    """Checkpoints every 170 s of progress: A's falls at 340, within its notice (300-360). The job
    publishes it (last-checkpoint-time), the agent's review finds it due: evicted at 340."""
    r = simulate(AB, one_node(), with_notice(60), "elastic", dataclasses.replace(LINEAR, checkpoint_interval=170))
    assert times(r)["b"] == (370.0, 1370.0)
    assert (r.notices, r.notices_ended_by_checkpoint) == (1, 1)
    assert r.notice_gpu_seconds == pytest.approx(4 * 40)


def test_checkpoint_on_notice_ends_it_at_the_next_cycle() -> None:
    s = dataclasses.replace(LINEAR, checkpoint_interval=1000, notice_checkpoint=20)
    r = simulate(AB, one_node(), with_notice(60), "elastic", s)
    assert times(r)["b"] == (350.0, 1350.0)  # checkpoint at 320, evicted at 320, grace 30
    assert r.jobs[0].lost_work == 0.0
    assert (r.notices_ended_by_checkpoint, r.notice_gpu_seconds) == (1, pytest.approx(4 * 20))
    # A checkpoint the planner never sees (not published) does not end the notice.
    hidden = simulate(AB, one_node(), with_notice(60), "elastic", dataclasses.replace(s, publish_checkpoints=False))
    assert times(hidden)["b"] == (390.0, 1390.0)
    assert hidden.notices_ended_by_checkpoint == 0


def test_a_notice_is_withdrawn_when_the_gang_is_placed_otherwise() -> None:
    """x (2 GPUs) grows to 2 workers, c (rigid, 4 GPUs) fills the node and ends at 330. b (2 GPUs)
    arrives at 200: x's elastic worker gets a notice at 300; c ends at 330, b is placed on its GPUs,
    and the agent's cycle then withdraws the notice: x keeps its worker, nothing is evicted."""
    jobs = [JobSpec("x", 0, 1, 2, 2, 8000), JobSpec("c", 0, 1, 1, 4, 4 * 330), JobSpec("b", 200, 1, 1, 2, 2000)]
    r = simulate(jobs, one_node(), with_notice(60), "elastic", LINEAR)
    assert times(r)["b"] == (330.0, 1330.0)
    assert (r.notices, r.notices_withdrawn, r.evictions) == (1, 1, 0)
    assert r.jobs[0].restarts == 0
    # 300 until the agent's cycle at 330, which runs after Volcano placed b
    assert r.notice_gpu_seconds == pytest.approx(2 * 30)


def _restarts_used(jobs: list[JobSpec], cfg: ElasticConfig, s: SimSettings) -> dict[str, int]:
    """Each job's ``restarts-used`` as the simulated agent counted it (spec name -> count)."""
    sim = Simulator(jobs, one_node(), cfg, "elastic", s)
    sim.run()
    return {sim.jobs[i].spec.name: n for i, n in sim.restarts_used.items()}


def test_a_notice_counts_its_restart_once_its_victim_leaves() -> None:
    """Issue 36 F2 in the simulator: the restart is counted when the noticed victim is evicted (at
    360), once, not when the notice is given; an immediate eviction counts at once."""
    s = dataclasses.replace(LINEAR, checkpoint_interval=1000)
    assert _restarts_used(AB, with_notice(60), s) == {"a": 1}
    assert _restarts_used(AB, with_notice(0), s) == {"a": 1}


def test_a_withdrawn_notice_counts_no_restart() -> None:
    jobs = [JobSpec("x", 0, 1, 2, 2, 8000), JobSpec("c", 0, 1, 1, 4, 4 * 330), JobSpec("b", 200, 1, 1, 2, 2000)]
    assert _restarts_used(jobs, with_notice(60), LINEAR) == {}


def test_the_planner_sees_the_victim_under_notice() -> None:
    """What the agent's planner is given: the victim in flight for its gang (as a terminating pod),
    carrying evicted-for and evict-after (the notice's end, as the agent writes it)."""
    seen: list[tuple[bool, dict[str, str]]] = []
    plan = default_planner()

    def spy(snapshot: Snapshot, cfg: ElasticConfig, now: datetime) -> CyclePlan:
        seen.extend((p.deleting, p.annotations) for p in snapshot.pods if keys.EVICT_AFTER in p.annotations)
        return plan(snapshot, cfg, now)

    r = simulate(AB, one_node(), with_notice(60), "elastic", LINEAR, planner=spy)
    assert seen, "the planner never saw the victim under notice"
    assert all(deleting for deleting, _ in seen)
    assert {(a[keys.EVICTED_FOR], a[keys.EVICT_AFTER]) for _, a in seen} == {("sim-b/b", "2026-01-01T00:06:00Z")}
    assert r.evictions == 1 and r.notices == 1


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(1, 500), notice=st.sampled_from([30, 120, 600]))
def test_notices_keep_every_invariant_and_lose_no_work_at_an_eviction(seed: int, notice: int) -> None:
    """On generated traces with a notice: every job finishes, nothing is rejected, no cooldown is
    broken, every eviction ends a notice, and no victim is held longer than its notice."""
    spec = ClusterSpec((NodePool("n", 4, 8, 96_000, 2**40),), (QueueSpec("a"), QueueSpec("b", weight=2)))
    jobs = generate(spec, GeneratorOptions(jobs=25, seed=seed, load=1.5, max_hours=2.0))
    s = SimSettings(checkpoint_interval=600)
    r = simulate(jobs, spec, with_notice(notice), "elastic", s)
    assert all(j.finished for j in r.jobs)
    assert not r.rejected_decisions and r.cooldown_violations == 0 and r.bound_violations == 0
    # every eviction ended a notice; a notice also ends withdrawn or with its victim's job
    assert r.notices >= r.evictions + r.notices_withdrawn
    assert r.notices_ended_by_checkpoint <= r.evictions
    assert r.notice_gpu_seconds <= notice * sum(j.gpus for j in jobs) * r.notices + 1e-6


def test_summary_and_printout_report_the_notices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cluster.yaml").write_text("nodes:\n  - {name: gpu, count: 1, gpus: 8}\n", encoding="utf-8")
    (tmp_path / "trace.csv").write_text("name,submit,min,max,gpus,work,workerCounts\na,0,1,2,4,8000,1|2\n"
                                        "b,200,1,1,4,4000,\n", encoding="utf-8")
    # a (1..2 workers) elastic from its min, so that it gives a worker to b: wholeGangUpTo 0
    (tmp_path / "elastic.yaml").write_text("defaults:\n  noticeSeconds: 60\n  minWorkersToShrink: 0\n"
                                           "  wholeGangUpTo: 0\n", encoding="utf-8")
    assert main(["simulate", "--no-progress", "--no-plots", "--trace", str(tmp_path / "trace.csv"),
                 "--cluster", str(tmp_path / "cluster.yaml"), "--config", str(tmp_path / "elastic.yaml"),
                 "--policy", "elastic", "--checkpoint-interval", "1000", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())["elastic"]
    assert (summary["notices"], summary["noticesEndedByCheckpoint"], summary["noticesWithdrawn"]) == (1, 0, 0)
    assert summary["noticeGpuHours"] == round(240 / 3600, 1)
    assert summary["lostWorkGpuHours"] == 0.0
    assert summary["workerCountViolations"] == 0
    assert "eviction notices (elastic): defaults 60s" in out
    assert "1 eviction notices (0 ended early by a checkpoint, 0 withdrawn)" in out


def test_skipping_idle_cycles_changes_nothing_with_notices() -> None:
    """Cycles are never skipped while a notice runs: the prefilter leaves the results as they are."""
    spec = ClusterSpec((NodePool("n", 4, 8, 96_000, 2**40),), (QueueSpec("a"), QueueSpec("b", weight=2)))
    jobs = generate(spec, GeneratorOptions(jobs=20, seed=1, load=1.5, max_hours=2.0))
    cfg = with_notice(120)
    fast = simulate(jobs, spec, cfg, "elastic", SimSettings(checkpoint_interval=600))
    every = simulate(jobs, spec, cfg, "elastic", SimSettings(checkpoint_interval=600, prefilter=False))
    assert fast.notices > 0 and fast.cycles_skipped > 0
    assert [(j.start, j.finish, j.scale_events, j.lost_work) for j in fast.jobs] == [
        (j.start, j.finish, j.scale_events, j.lost_work) for j in every.jobs]
    assert (fast.notices, fast.notice_gpu_seconds) == (every.notices, every.notice_gpu_seconds)


def test_cli_worker_counts_fraction_and_checkpoint_on_notice_note(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("nodes:\n  - {name: gpu, count: 4, gpus: 8}\n", encoding="utf-8")
    base = ["simulate", "--no-progress", "--no-plots", "--cluster", str(cluster), "--generate", "30",
            "--policy", "static-min", "--out", str(tmp_path / "out")]
    assert main([*base, "--worker-counts-fraction", "1.5"]) == 2
    assert "--worker-counts-fraction must be in [0, 1]" in capsys.readouterr().err
    # A negative time was accepted and silently meant "as the notice ends": refused with what to write.
    assert main([*base, "--checkpoint-on-notice", "-5"]) == 2
    assert "--checkpoint-on-notice -5: write the seconds" in capsys.readouterr().err
    written = tmp_path / "t.csv"
    no_notice = tmp_path / "no-notice.yaml"
    no_notice.write_text("defaults: {noticeSeconds: 0}\n", encoding="utf-8")
    assert main([*base, "--config", str(no_notice), "--checkpoint-on-notice", "10"]) == 0
    assert "--checkpoint-on-notice does nothing" in capsys.readouterr().err
    # the default notice (60 s) is one it acts on
    assert main([*base, "--worker-counts-fraction", "1", "--write-trace", str(written),
                 "--checkpoint-on-notice", "10"]) == 0
    assert "--checkpoint-on-notice does nothing" not in capsys.readouterr().err
    jobs = parse_own_csv(written.read_text(encoding="utf-8"), str(written))
    assert all(bool(j.worker_counts) == (j.max_workers > j.min_workers) for j in jobs)
    assert any(j.worker_counts for j in jobs)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(1, 500))
def test_elastic_grows_only_to_allowed_counts_on_generated_traces(seed: int) -> None:
    """Every elastic job restricted to powers of two: the largest count it ever ran at is one of
    them (growth lifts gates only to an allowed count; the first start is at min, always allowed)."""
    spec = ClusterSpec((NodePool("n", 4, 8, 96_000, 2**40),), (QueueSpec("a"), QueueSpec("b", weight=2)))
    jobs = with_worker_counts(generate(spec, GeneratorOptions(jobs=25, seed=seed, load=1.2, max_hours=2.0)),
                              1.0, seed)
    r = simulate(jobs, spec, legacy_config(), "elastic", SimSettings(checkpoint_interval=600))
    assert all(j.finished for j in r.jobs) and not r.rejected_decisions
    counts = {j.name: j.worker_counts for j in jobs}
    for res in r.jobs:
        if counts[res.name]:
            assert res.max_seen in counts[res.name], (res.name, res.max_seen, counts[res.name])
    gang = simulate(jobs, spec, legacy_config(), "volcano-gang", SimSettings(checkpoint_interval=600))
    assert all(j.finished for j in gang.jobs)  # the peer ignores the counts and still runs
