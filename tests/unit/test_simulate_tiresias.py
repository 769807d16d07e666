"""``--policy tiresias`` (``simulate/tiresias.py``, issue 38): discretized 2D-LAS with whole-job
preemption and starvation promotion, run beside the other policies and reported like them."""

from __future__ import annotations

import json
from pathlib import Path

from elastic_controller.policy.settings import ElasticConfig
from elastic_controller.simulate.cluster import ClusterSpec, NodePool, QueueSpec
from elastic_controller.simulate.engine import SimSettings
from elastic_controller.simulate.restarts import fixed_cost
from elastic_controller.simulate.runner import run_policies
from elastic_controller.simulate.scaling import ScalingCurve
from elastic_controller.simulate.tiresias import TiresiasParams, simulate_tiresias
from elastic_controller.simulate.trace import JobSpec

ONE_NODE = ClusterSpec((NodePool("n", 1, 8, 96_000, 2**40),), (QueueSpec("default"),))
FLAT = SimSettings(curve=ScalingCurve(per_doubling=1.0), restart_cost=fixed_cost(10.0))


def _times(result: object) -> dict[str, tuple[float, float, int]]:
    return {j.name: (j.start, j.finish, j.restarts) for j in result.jobs}  # type: ignore[attr-defined]


def test_a_short_job_preempts_a_long_served_one_and_the_long_one_resumes() -> None:
    # long: 8 GPUs for 10 h of work; short arrives after 2 h (long has 16 GPU-h: demoted below queue 0;
    # the short one ends with 4)
    jobs = [JobSpec("long", 0.0, 8, 8, 1, 8 * 36_000.0), JobSpec("short", 7200.0, 4, 4, 2, 8 * 1800.0)]
    params = TiresiasParams(thresholds=(8 * 3600.0,), promote_knob=100.0)
    result = simulate_tiresias(jobs, ONE_NODE, FLAT, params)
    t = _times(result)
    assert t["short"] == (7200.0, 7200.0 + 1800.0, 0)  # starts at once (long is preempted), runs alone
    start, finish, restarts = t["long"]
    assert start == 0.0 and restarts == 1
    assert finish == 36_000.0 + 1800.0 + 10.0  # its 10 h, the short job's half hour, one restart's stall
    assert result.evictions == 8 and result.restarts == 1


def test_without_thresholds_it_is_fifo_and_never_preempts() -> None:
    jobs = [JobSpec("long", 0.0, 8, 8, 1, 8 * 36_000.0), JobSpec("short", 7200.0, 4, 4, 2, 8 * 1800.0)]
    t = _times(simulate_tiresias(jobs, ONE_NODE, FLAT, TiresiasParams(thresholds=())))
    assert t["long"] == (0.0, 36_000.0, 0) and t["short"] == (36_000.0, 37_800.0, 0)


def test_starvation_promotion() -> None:
    """A preempted job that waited promote_knob x its executed time goes back to the top queue, FIFO by
    arrival: before a stream of later short jobs that would otherwise keep it out."""
    jobs = [JobSpec("long", 0.0, 8, 8, 1, 8 * 7200.0)]
    jobs += [JobSpec(f"s{i}", 1800.0 + 600.0 * i, 8, 8, 1, 8 * 900.0) for i in range(40)]
    params = TiresiasParams(thresholds=(8 * 1200.0,), promote_knob=1.0)
    starved = _times(simulate_tiresias(jobs, ONE_NODE, FLAT, TiresiasParams(thresholds=(8 * 1200.0,),
                                                                            promote_knob=1e9)))
    promoted = _times(simulate_tiresias(jobs, ONE_NODE, FLAT, params))
    assert promoted["long"][1] < starved["long"][1]
    assert all(promoted[n][1] > 0 for n in promoted)  # everything finishes


def test_tiresias_is_one_of_all_in_summary_json(tmp_path: Path) -> None:
    cluster = ClusterSpec((NodePool("n", 2, 8, 96_000, 2**40),), (QueueSpec("default"),))
    jobs = [JobSpec(f"j{i}", 300.0 * i, 1 + i % 2, 2 + 2 * (i % 3), 1, 3600.0 * (1 + i % 4)) for i in range(12)]
    run = run_policies(jobs, cluster, ElasticConfig(), ["elastic", "static-max", "tiresias"], SimSettings(),
                       tmp_path, progress=False)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary) == {"elastic", "static-max", "tiresias"}
    entry = summary["tiresias"]
    for key in ("avgJctSeconds", "p50JctSeconds", "restartsPerJob", "perClass"):
        assert key in entry
    assert entry["perClass"] and all(c["avgJctRatioVsStaticMax"] is not None for c in entry["perClass"])
    assert (tmp_path / "jobs-tiresias.csv").exists()
    tiresias = next(r for r in run.results if r.policy == "tiresias")
    assert all(j.finished for j in tiresias.jobs)


def test_parameters_from_the_command_line() -> None:
    from elastic_controller.simulate.tiresias import tiresias_params

    assert tiresias_params("8,64", 8.0) == TiresiasParams((8 * 3600.0, 64 * 3600.0), 8.0)
    assert tiresias_params("", 2.0) == TiresiasParams((), 2.0)
    for bad, knob in (("64,8", 8.0), ("x", 8.0), ("-1", 8.0), ("8,8", 8.0), ("8", 0.0)):
        assert isinstance(tiresias_params(bad, knob), str), bad
