"""Issue 17's simulator: checkpoint losses, Volcano's enqueue, the volcano-gang peer, per-class
numbers, several seeds, the Philly and Tiresias layouts. Hand-computed trajectories."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from elastic_controller.cli import main
from elastic_controller.policy.settings import ElasticConfig
from elastic_controller.simulate.classes import per_class
from elastic_controller.simulate.cluster import ClusterSpec, NodePool, QueueSpec
from elastic_controller.simulate.engine import SimResult, SimSettings, simulate
from elastic_controller.simulate.restarts import fixed_cost
from elastic_controller.simulate.scaling import ScalingCurve
from elastic_controller.simulate.trace import ImportOptions, JobSpec, TraceError, detect_format, load_trace
from tests.harness.legacy import legacy_config, legacy_policy

LINEAR = SimSettings(curve=ScalingCurve(1.0), checkpoint_interval=0, restart_cost=fixed_cost(60))


def cluster(nodes: int = 1, gpus: int = 8) -> ClusterSpec:
    return ClusterSpec((NodePool("n", nodes, gpus, 96_000, 2**40),), (QueueSpec("default"),))


def job(name: str, submit: float, lo: int, hi: int, gpus: int, work: float, **kw: object) -> JobSpec:
    return JobSpec(name, submit, lo, hi, gpus, work, **kw)  # type: ignore[arg-type]


def times(result: SimResult) -> dict[str, tuple[float, float]]:
    return {j.name: (j.start, j.finish) for j in result.jobs}


# --- checkpoints ---------------------------------------------------------------------------------

def test_restarts_lose_the_work_since_the_last_checkpoint() -> None:
    """test_simulate_engine's eviction scenario with a checkpoint every 100 s of progress. A runs
    0..300 on 8 GPUs (its second worker joined its first rendezvous; 300 s: checkpoints at 100, 200
    and 300, nothing lost at the eviction), 360..1330 on 4 (970 s: 70 s = 280 lost when it
    regrows), then 2000 left on 8 from 1390: 1640."""
    jobs = [job("a", 0, 1, 2, 4, 8000), job("b", 200, 1, 1, 4, 4000)]
    any_size = ElasticConfig(defaults=legacy_policy(minWorkersToShrink=0))  # A (2 workers) may give
    r = simulate(jobs, cluster(), any_size, "elastic", dataclasses.replace(LINEAR, checkpoint_interval=100))
    assert times(r) == {"a": (0.0, 1640.0), "b": (330.0, 1330.0)}
    a = next(j for j in r.jobs if j.name == "a")
    assert a.lost_work == pytest.approx(280.0)
    assert a.work_done == pytest.approx(8000.0)
    # busy GPU time counts only work that stayed done: exactly the trace's work (linear scaling)
    assert r.gpu_seconds_busy == pytest.approx(12000.0)
    # without checkpoints nothing is lost (the engine tests' 1605)
    r0 = simulate(jobs, cluster(), any_size, "elastic", LINEAR)
    assert times(r0)["a"] == (0.0, 1605.0)
    assert sum(j.lost_work for j in r0.jobs) == 0.0


def test_jobs_publish_their_last_checkpoint_to_the_planner() -> None:
    """The planner sees volcano-elastic.io/last-checkpoint-time on a running elastic job's PodGroup:
    A (1..2 workers, grown at 0 in its first rendezvous) checkpoints every 100 s of progress."""
    from datetime import datetime

    from elastic_controller.policy import keys
    from elastic_controller.policy.decisions import CyclePlan
    from elastic_controller.policy.model import Snapshot

    seen: list[tuple[datetime, str]] = []

    def planner(snap: Snapshot, cfg: ElasticConfig, now: datetime) -> CyclePlan:
        for pg in snap.podgroups:
            if keys.LAST_CHECKPOINT_TIME in pg.annotations:
                seen.append((now, pg.annotations[keys.LAST_CHECKPOINT_TIME]))
        from elastic_controller.policy.cycle import plan_cycle
        return plan_cycle(snap, cfg, now)

    jobs = [job("a", 0, 1, 2, 4, 8000), job("b", 250, 1, 1, 4, 4000)]
    settings = dataclasses.replace(LINEAR, checkpoint_interval=100)
    simulate(jobs, cluster(), legacy_config(), "elastic", settings, planner=planner)
    assert seen, "no cycle saw a checkpoint time"
    for now, text in seen:
        age = (now - datetime.fromisoformat(text.replace("Z", "+00:00"))).total_seconds()
        assert 0 <= age < 100 + 60, (now, text)  # within one interval (plus a restart's penalty)
    off = dataclasses.replace(settings, publish_checkpoints=False)
    seen.clear()
    simulate(jobs, cluster(), legacy_config(), "elastic", off, planner=planner)
    assert not seen


# --- enqueue -------------------------------------------------------------------------------------

TWO_QUEUES = ClusterSpec((NodePool("n", 1, 8, 96_000, 2**40),), (QueueSpec("q1"), QueueSpec("q2")))


def test_enqueue_keeps_a_job_pending_beyond_the_overcommitted_idle_gpus() -> None:
    """8 GPUs, overcommit 1.2: A (q1) holds 7 from 0 to 100. B (q2, 2 GPUs) is admitted at 10
    (2 <= 9.6 - 7) and reserves 2; C (q2, 1 GPU) at 20 is not (1 > 9.6 - 7 - 2), though a GPU is
    free: it starts only at 100. Without enqueue C takes the free GPU at 20."""
    jobs = [job("a", 0, 1, 1, 7, 700, queue="q1"), job("b", 10, 1, 1, 2, 200, queue="q2"),
            job("c", 20, 1, 1, 1, 100, queue="q2")]
    r = simulate(jobs, TWO_QUEUES, legacy_config(), "static-max", LINEAR)
    assert times(r) == {"a": (0.0, 100.0), "b": (100.0, 200.0), "c": (100.0, 200.0)}
    r = simulate(jobs, TWO_QUEUES, legacy_config(), "static-max", dataclasses.replace(LINEAR, enqueue=False))
    assert times(r)["c"] == (20.0, 120.0)


def test_proportion_admits_nothing_into_a_queue_holding_the_cluster_at_its_minimums() -> None:
    """proportion's JobEnqueueableFn: minReq + allocated - elastic + inqueue <= the whole cluster.
    A holds all 8 GPUs at its minimum: B of the same queue stays Pending (no preemption for it)."""
    jobs = [job("a", 0, 2, 2, 4, 800), job("b", 50, 1, 1, 1, 100, priority=1)]
    r = simulate(jobs, cluster(), legacy_config(), "volcano-gang", LINEAR)
    assert times(r) == {"a": (0.0, 100.0), "b": (100.0, 200.0)}
    assert r.evictions == 0


def test_gated_pods_reserve_nothing_at_enqueue() -> None:
    """DeductSchGatedResources: an unstarted elastic job whose gated pods hold as many GPUs as its
    minimum reserves nothing. B (min 1, max 2 of 2 GPUs) reserves 0 under elastic (its second pod
    is gated) and 2 under static-min: C is admitted at 20 under elastic only."""
    from elastic_controller.policy.keys import Role
    from elastic_controller.simulate.enqueue import reservation
    from elastic_controller.simulate.state import SimJob, SimPod

    e = SimJob(0, job("e", 0, 2, 4, 4, 400), "sim", 4, 2, 4)
    e.pods = [SimPod(e, i, Role.ELASTIC if i >= 2 else Role.CORE, i >= 2, 0.0, f"u{i}") for i in range(4)]
    assert reservation(e) == 0
    e.pods[3].gated = False
    assert reservation(e) == 4
    jobs = [job("a", 0, 1, 1, 7, 700, queue="q1"), job("b", 10, 1, 2, 2, 400, queue="q2"),
            job("c", 20, 1, 1, 1, 100, queue="q2")]
    assert times(simulate(jobs, TWO_QUEUES, legacy_config(), "elastic", LINEAR))["c"] == (20.0, 120.0)
    assert times(simulate(jobs, TWO_QUEUES, legacy_config(), "static-min", LINEAR))["c"][0] == 100.0


# --- volcano-gang --------------------------------------------------------------------------------

def test_volcano_gang_places_surplus_pods_and_gangpreempt_takes_the_whole_safe_bundle() -> None:
    """2 nodes of 8 GPUs. A (min 1, max 4 workers of 4 GPUs) gets all 4 pods at 0. B (priority 1,
    one 2-GPU worker) comes at 100, is admitted (2 <= 19.2 - 16) and starving: gangpreempt takes
    A's SAFE bundle, all 3 pods beyond its minimum (bundles are taken whole), A restarts on 1
    worker. At 130 the victims are gone: B starts, A's recreated pods fill 8 of the 10 free GPUs
    (restart, resumes at 190 on 12 GPUs): 1600 + 12 * (t - 190) = 11200 at t = 990."""
    jobs = [job("a", 0, 1, 4, 4, 11200), job("b", 100, 1, 1, 2, 2000, priority=1)]
    r = simulate(jobs, cluster(nodes=2), legacy_config(), "volcano-gang", LINEAR)
    assert times(r) == {"a": (0.0, 990.0), "b": (130.0, 1130.0)}
    a = next(j for j in r.jobs if j.name == "a")
    assert (a.evictions, a.restarts, a.max_seen, a.min_seen) == (3, 2, 4, 1)
    assert r.cooldown_violations == 0 and r.bound_violations == 0


@pytest.mark.parametrize(("whole", "checkpoint", "expected", "restarts"), [
    # gangreclaim for B (q2): A (q1) evicted whole at 50 (400 done), B runs 80..180, A's gang
    # again at 180, resumes at 240: 290
    (True, 0.0, {"a": (0.0, 290.0), "b": (80.0, 180.0)}, 1),
    # with a checkpoint every 30 s A loses 20 s * 8 GPUs: 160 GPU-s more, 20 s later
    (True, 30.0, {"a": (0.0, 310.0), "b": (80.0, 180.0)}, 1),
    # allowWholeBundle false: a rigid job is no victim, B waits for A
    (False, 0.0, {"a": (0.0, 100.0), "b": (100.0, 200.0)}, 0),
], ids=["whole-bundle", "whole-bundle-checkpoints", "safe-only"])
def test_volcano_gang_whole_bundles(whole: bool, checkpoint: float, expected: dict[str, tuple[float, float]],
                                    restarts: int) -> None:
    jobs = [job("a", 0, 2, 2, 4, 800, queue="q1"), job("b", 50, 1, 1, 1, 100, queue="q2")]
    settings = dataclasses.replace(LINEAR, allow_whole_bundle=whole, checkpoint_interval=checkpoint)
    r = simulate(jobs, TWO_QUEUES, legacy_config(), "volcano-gang", settings)
    assert times(r) == expected
    assert r.restarts == restarts


def test_volcano_gang_pod_cooldown_delays_the_victims() -> None:
    """The cdp option: A's surplus pods placed at 0 are no victims before 300."""
    jobs = [job("a", 0, 1, 4, 4, 40000), job("b", 100, 1, 1, 2, 2000, priority=1)]
    r = simulate(jobs, cluster(nodes=2), legacy_config(), "volcano-gang",
                 dataclasses.replace(LINEAR, pod_cooldown=300))
    assert times(r)["b"][0] == 330.0


def test_volcano_gang_does_not_preempt_equal_priority_in_its_queue() -> None:
    jobs = [job("a", 0, 1, 4, 4, 16000), job("b", 100, 1, 1, 2, 2000)]
    r = simulate(jobs, cluster(nodes=2), legacy_config(), "volcano-gang", LINEAR)
    assert r.evictions == 0
    assert times(r)["b"] == (1000.0, 2000.0)


# --- per class -----------------------------------------------------------------------------------

def test_per_class_against_static_max() -> None:
    jobs = [job("a", 0, 1, 2, 4, 4000), job("r", 0, 1, 1, 4, 2000), job("s", 0, 1, 1, 4, 2000)]
    ref = simulate(jobs, cluster(nodes=2), legacy_config(), "static-max", LINEAR)
    low = simulate(jobs, cluster(nodes=2), legacy_config(), "static-min", LINEAR)
    classes = per_class(low, ref)
    assert [(c["kind"], c["maxWorkers"], c["jobs"]) for c in classes] == [("elastic", 2, 1), ("rigid", 1, 2)]
    elastic, rigid = classes
    # static-max: a on 8 GPUs 0..500; r and s 0..500. static-min: a on 4 GPUs: 1000 (2x)
    assert elastic["avgJctSeconds"] == 1000.0 and elastic["avgJctRatioVsStaticMax"] == 2.0
    assert elastic["jobsOver1_2xStaticMax"] == 1
    assert rigid["avgJctRatioVsStaticMax"] == 1.0 and rigid["jobsOver1_2xStaticMax"] == 0
    assert per_class(low, None)[0]["avgJctRatioVsStaticMax"] is None


# --- public layouts ------------------------------------------------------------------------------

PHILLY = """\
timestamp,duration,num_gpus,gpu_time,cluster
2017-10-03 10:00:00,3600,16,57600,Cluster-A
2017-10-03 09:00:00,600,1,600,cluster-b
2017-10-03 09:30:00,0,4,0,cluster-b
2017-10-03 11:00:00,1200,4,4800,Cluster-A
"""

TIRESIAS = """\
job_id,num_gpu,submit_time,iterations,model_name,duration,interval
7,8,120,1000,resnet50,3600,10
3,2,60,500,vgg16,600,5
"""


def test_philly_layout(tmp_path: Path) -> None:
    path = tmp_path / "philly.csv"
    path.write_text(PHILLY)
    assert detect_format(str(path), PHILLY) == "philly"
    jobs = load_trace(path, "auto", ImportOptions(min_fraction=0.5))
    # sorted by time, zero-duration row skipped, queue vc-<cluster lowercased>, 8-GPU workers
    assert [(j.name, j.submit, j.queue, j.min_workers, j.max_workers, j.gpus, j.work) for j in jobs] == [
        ("philly-3", 0.0, "vc-cluster-b", 1, 1, 1, 600.0),
        ("philly-2", 3600.0, "vc-cluster-a", 1, 2, 8, 57600.0),
        ("philly-5", 7200.0, "vc-cluster-a", 1, 1, 4, 4800.0),
    ]
    split = load_trace(path, "philly", ImportOptions(worker_gpus=2, min_fraction=0.25))
    assert [(j.min_workers, j.max_workers, j.gpus) for j in split] == [(1, 1, 2), (2, 8, 2), (1, 2, 2)]


def test_tiresias_layout(tmp_path: Path) -> None:
    path = tmp_path / "tiresias.csv"
    path.write_text(TIRESIAS)
    assert detect_format(str(path), TIRESIAS) == "tiresias"
    jobs = load_trace(path, "auto", ImportOptions(worker_gpus=1))
    assert [(j.name, j.submit, j.queue, j.min_workers, j.max_workers, j.work) for j in jobs] == [
        ("t-3", 0.0, "default", 1, 2, 1200.0), ("t-7", 60.0, "default", 4, 8, 28800.0)]


def test_elastic_fraction_is_seeded_and_keeps_rigid_jobs_rigid(tmp_path: Path) -> None:
    rows = "\n".join(f"{i},8,{i},1,m,600,1" for i in range(200))
    path = tmp_path / "t.csv"
    path.write_text("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n" + rows + "\n")
    draw = [j.min_workers < j.max_workers for j in load_trace(path, "tiresias", ImportOptions(
        worker_gpus=1, elastic_fraction=0.3, seed=5))]
    again = [j.min_workers < j.max_workers for j in load_trace(path, "tiresias", ImportOptions(
        worker_gpus=1, elastic_fraction=0.3, seed=5))]
    other = [j.min_workers < j.max_workers for j in load_trace(path, "tiresias", ImportOptions(
        worker_gpus=1, elastic_fraction=0.3, seed=6))]
    assert draw == again and draw != other
    assert 40 <= sum(draw) <= 80
    assert not any(j.min_workers < j.max_workers for j in load_trace(path, "tiresias", ImportOptions(
        worker_gpus=1, elastic_fraction=0.0)))


@pytest.mark.parametrize(("layout", "text", "line", "message"), [
    ("philly", PHILLY.replace("2017-10-03 11:00:00", "03/10/2017 11:00"), 5, "'timestamp' must be"),
    ("philly", PHILLY.replace("600,1,600", "600,one,600"), 3, "'num_gpus' must be an integer"),
    ("tiresias", TIRESIAS.replace("3,2,60", "3,2,sixty"), 3, "'submit_time' must be a number"),
])
def test_malformed_rows_name_file_and_line(tmp_path: Path, layout: str, text: str, line: int, message: str) -> None:
    path = tmp_path / f"{layout}.csv"
    path.write_text(text)
    with pytest.raises(TraceError) as err:
        load_trace(path)
    assert str(err.value).startswith(f"{path}:{line}: {message}")


def test_cli_malformed_philly_simulates_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "philly.csv"
    path.write_text(PHILLY.replace("3600,16", "3600,sixteen"))
    (tmp_path / "c.yaml").write_text("nodes:\n  - {name: gpu, count: 4, gpus: 8}\nqueues:\n"
                                     "  - {name: vc-cluster-a}\n  - {name: vc-cluster-b}\n")
    out = tmp_path / "out"
    assert main(["simulate", "--no-progress", "--trace", str(path), "--cluster", str(tmp_path / "c.yaml"),
                 "--out", str(out)]) == 2
    assert f"{path}:2: 'num_gpus' must be an integer" in capsys.readouterr().err
    assert not out.exists()


# --- several seeds -------------------------------------------------------------------------------

def test_seeds_write_one_summary_each_and_print_the_spread(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "c.yaml").write_text("nodes:\n  - {name: gpu, count: 4, gpus: 8}\n")
    out = tmp_path / "out"
    assert main(["simulate", "--no-progress", "--no-plots", "--generate", "15", "--load", "1.0",
                 "--cluster", str(tmp_path / "c.yaml"), "--seeds", "1,2", "--policy", "volcano-gang",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    one = json.loads((out / "seed-1" / "summary.json").read_text())
    two = json.loads((out / "seed-2" / "summary.json").read_text())
    assert (one.pop("inputs")["seed"], two.pop("inputs")["seed"]) == (1, 2)
    assert list(one) == list(two) == ["volcano-gang"]
    assert one != two
    assert "over seeds 1, 2: mean" in text and "per class" in text
    mean = (one["volcano-gang"]["avgJctSeconds"] + two["volcano-gang"]["avgJctSeconds"]) / 2 / 3600
    assert f"{mean:.2f}h" in text


@pytest.mark.parametrize(("argv", "message"), [
    (["--seeds", "1,x"], "--seeds '1,x': expected seeds like 1,2,3"),
    (["--seeds", "2,2"], "a seed is repeated"),
    (["--checkpoint-interval", "-1"], "must not be negative"),
    (["--elastic-fraction", "1.5"], "--elastic-fraction must be in [0, 1]"),
])
def test_bad_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert main(["simulate", "--no-progress", "--example", "--out", str(tmp_path / "o"), *argv]) == 2
    assert message in capsys.readouterr().err


def test_volcano_gang_skipping_unchanged_runs_changes_nothing() -> None:
    """GangActions.run skips a run when nothing was placed, freed, evicted or admitted since a run
    that evicted nothing: the same trajectories as running every time."""
    from elastic_controller.simulate.engine import Simulator
    from elastic_controller.simulate.generate import GeneratorOptions, generate

    spec = ClusterSpec((NodePool("n", 6, 8, 96_000, 2**40),), (QueueSpec("q1", 2), QueueSpec("q2")))
    jobs = generate(spec, GeneratorOptions(jobs=80, seed=4, load=1.3))
    jobs = [dataclasses.replace(j, priority=1) if i % 5 == 0 else j for i, j in enumerate(jobs)]

    def trajectories(skip: bool) -> list[tuple[object, ...]]:
        sim = Simulator(jobs, spec, legacy_config(), "volcano-gang", SimSettings())
        assert sim.gang_actions is not None
        if not skip:
            sim.alloc.after_allocate = sim.gang_actions._run
        r = sim.run()
        return [(j.name, j.start, j.finish, j.restarts, j.evictions, j.lost_work) for j in r.jobs]

    skipped, every = trajectories(True), trajectories(False)
    assert skipped == every
    assert sum(t[4] for t in every) > 0  # the trace does exercise the evicting actions


def test_a_job_waiting_for_its_checkpoint_window_grows_at_its_next_checkpoint() -> None:
    """The real agent plans every few seconds, so a job that may grow only within
    scaleUpAfterCheckpointSeconds of its last checkpoint grows in the first window after room frees,
    even when nothing else happens then. B (rigid, one node) holds the second node until 1000; A
    (1..2 workers of 8 GPUs) started at 0 on the first node, checkpoints every 1800 s of progress
    (its start counts as one). At 1000 its last checkpoint is 1000 s old (> the 300 s window): no
    growth; its next checkpoint, at 1800, opens the window and it grows then (1800 + the agent's
    5 s interval at most). Before the simulator woke at checkpoints, no cycle came until A
    finished, and A never grew."""
    jobs = [job("b", 0, 1, 1, 8, 8 * 1000), job("a", 1, 1, 2, 8, 8 * 20_000)]
    cfg = ElasticConfig(defaults=legacy_policy(scaleUpAfterCheckpointSeconds=300, minScaleUpGain=1))
    r = simulate(jobs, cluster(nodes=2), cfg, "elastic", dataclasses.replace(LINEAR, checkpoint_interval=1800))
    a = next(j for j in r.jobs if j.name == "a")
    ups = [t for t, d in a.scale_events if d == "up"]
    assert ups, "A never grew"
    assert 1800 <= ups[0] <= 1810
    assert a.max_seen == 2


@pytest.mark.parametrize("seed", [2, 5])
def test_planning_at_every_agent_interval_changes_nothing(seed: int) -> None:
    """The simulator plans only when something could change the agent's plan; the real agent plans
    every ``agent.intervalSeconds``. Planning at every interval must give the same jobs, or a
    time-based rule lacks its wake-up (as the checkpoint window did: without the wake-up, 6-40 of
    60 jobs of these traces ran differently). Queue b exercises a snooze longer than its cooldown
    and eviction notices; both queues publish checkpoints."""
    from elastic_controller.simulate.generate import GeneratorOptions, generate

    two = ClusterSpec((NodePool("gpu", 8, 8, 96_000, 2**40),), (QueueSpec("a", weight=2), QueueSpec("b")))
    cfg = ElasticConfig(queues={"b": legacy_policy(scaleUpSnoozeSeconds=900, noticeSeconds=30)})
    jobs = generate(two, GeneratorOptions(jobs=40, load=1.2, seed=seed, max_hours=2))
    settings = SimSettings(restart_cost=fixed_cost(60), checkpoint_interval=1800)
    events = simulate(jobs, two, cfg, "elastic", settings)
    every = simulate(jobs, two, cfg, "elastic", dataclasses.replace(settings, every_cycle=True))
    assert every.plan_calls > 3 * events.plan_calls  # it did plan far more often
    assert [(j.name, j.start, j.finish, j.restarts, j.scale_events) for j in every.jobs] == \
           [(j.name, j.start, j.finish, j.restarts, j.scale_events) for j in events.jobs]
