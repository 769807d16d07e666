"""bench/scale_box.py's pure parts (bench/_scale_parts.py): percentiles, the Prometheus text parser
and histogram quantiles (what every number of the bench is read through), the seeded workload, and
the comparison of a dump's plan with the decisions the live agent logged."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import _scale_parts as bench

OURS = 'name="pods.volcano-elastic.io",operation="CREATE",type="admit"'
OTHER = 'name="other.example.com",operation="CREATE",type="validating"'
H = "apiserver_admission_webhook_admission_duration_seconds"
APISERVER = "\n".join([
    f"# HELP {H} [STABLE] Admission webhook latency",
    f"# TYPE {H} histogram",
    *(f'{H}_bucket{{{OURS},rejected="false",le="{le}"}} {n}' for le, n in
      (("0.005", 10), ("0.025", 60), ("0.1", 90), ("+Inf", 100))),
    f'{H}_sum{{{OURS},rejected="false"}} 3.5',
    f'{H}_count{{{OURS},rejected="false"}} 100',
    *(f'{H}_bucket{{{OURS},rejected="true",le="{le}"}} {n}' for le, n in
      (("0.005", 0), ("0.025", 0), ("0.1", 0), ("+Inf", 2))),
    f'{H}_sum{{{OURS},rejected="true"}} 20',
    f'{H}_count{{{OURS},rejected="true"}} 2',
    f'{H}_bucket{{{OTHER},rejected="false",le="0.005"}} 5',
    f'{H}_bucket{{{OTHER},rejected="false",le="+Inf"}} 5',
    f'{H}_count{{{OTHER},rejected="false"}} 5',
    f'apiserver_admission_webhook_request_total{{code="200",{OURS},rejected="false"}} 100',
    f'apiserver_admission_webhook_request_total{{code="500",{OURS},rejected="true"}} 2',
    'some_label_with_quote{msg="a \\"quoted\\" value"} 1e3',
])


def test_pct_is_nearest_rank_and_none_when_empty() -> None:
    values = list(range(1, 101))  # 1..100
    assert bench.pct(values, 0.5) == 50
    assert bench.pct(values, 0.99) == 99
    assert bench.pct(values, 1.0) == 100
    assert bench.pct([3.0], 0.99) == 3.0
    assert bench.pct([], 0.5) is None
    assert bench.summary([0.2, 0.1, 0.4]) == {"n": 3, "p50": 0.2, "p99": 0.4, "max": 0.4}


def test_parse_prom_reads_names_labels_values_and_escapes() -> None:
    samples = bench.parse_prom(APISERVER)
    assert not [s for s in samples if s[0].startswith("#")]
    quoted = bench.select(samples, "some_label_with_quote")
    assert quoted == [({"msg": 'a "quoted" value'}, 1000.0)]
    codes = {lab["code"]: v for lab, v in bench.select(samples, "apiserver_admission_webhook_request_total",
                                                       name="pods.volcano-elastic.io")}
    assert codes == {"200": 100.0, "500": 2.0}


def test_histogram_sums_series_of_one_webhook_only() -> None:
    h = bench.histogram(bench.parse_prom(APISERVER), "apiserver_admission_webhook_admission_duration_seconds",
                        name="pods.volcano-elastic.io")
    assert h["count"] == 102  # both rejected="false" and "true"; not the other webhook's 5
    assert h["sum"] == 23.5
    assert h["buckets"] == [(0.005, 10.0), (0.025, 60.0), (0.1, 90.0), (float("inf"), 102.0)]


def test_hist_quantile_interpolates_like_prometheus() -> None:
    b = [(0.005, 10.0), (0.025, 60.0), (0.1, 90.0), (float("inf"), 100.0)]
    assert bench.hist_quantile(b, 0.5) == pytest.approx(0.005 + 0.02 * 40 / 50)  # rank 50 in (0.005, 0.025]
    assert bench.hist_quantile(b, 0.05) == pytest.approx(0.0025)  # first bucket from 0
    assert bench.hist_quantile(b, 0.99) == 0.1  # in +Inf: the highest finite bound
    assert bench.hist_quantile([(1.0, 0.0), (float("inf"), 0.0)], 0.5) is None
    assert bench.hist_quantile([], 0.5) is None


def test_hist_delta_takes_the_run_out_of_cumulative_counters() -> None:
    before = {"buckets": [(0.1, 5.0), (float("inf"), 5.0)], "count": 5.0, "sum": 0.2}
    after = {"buckets": [(0.1, 5.0), (float("inf"), 15.0)], "count": 15.0, "sum": 20.2}
    d = bench.hist_delta(after, before)
    assert d["count"] == 10 and d["sum"] == pytest.approx(20.0)
    assert bench.hist_quantile(d["buckets"], 0.5) == 0.1  # all ten new ones above 0.1
    assert bench.hist_summary(d)["mean"] == 2.0


def test_workload_is_seeded_mixed_in_queues_and_inside_the_run() -> None:
    jobs = bench.workload(200, 4, 100.0, seed=7)
    assert jobs == bench.workload(200, 4, 100.0, seed=7)
    assert jobs != bench.workload(200, 4, 100.0, seed=8)
    assert len({j.name for j in jobs}) == 200
    assert {j.queue for j in jobs} == {"dept-0", "dept-1", "dept-2", "dept-3"}
    elastic = [j for j in jobs if j.elastic]
    assert 60 < len(elastic) < 140
    assert all(j.min_workers == 2 and j.workers == 8 for j in elastic)
    assert all(j.min_workers == j.workers for j in jobs if not j.elastic)
    assert all(0 <= j.arrive <= 60 and 25 <= j.lifetime <= 50 for j in jobs)
    assert [j.arrive for j in jobs] == sorted(j.arrive for j in jobs)


def test_manifest_without_us_names_volcano_and_the_group() -> None:
    job = bench.JobSpec("j1", "team-0", "dept-0", 8, 2, (2, 8), 0.0, 10.0)
    tmpl = bench.manifest(job, with_group=True)["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    assert tmpl["spec"]["schedulerName"] == "volcano"
    assert tmpl["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "j1"
    ours = bench.manifest(job, with_group=False)
    assert "metadata" not in ours["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    assert ours["spec"]["elasticPolicy"]["minReplicas"] == 2


def test_plan_and_log_decisions_compare_set_against_set() -> None:
    plan = {"starving": [{"podGroup": "team-0/g", "queue": "dept-0", "decision": "evict", "reason": "r"}],
            "evictions": [{"pod": "team-1/e-worker-7", "node": "n", "for": "team-0/g", "reason": "r"}],
            "gateReleases": [{"pod": "team-2/x-worker-3", "node": "n"}]}
    lines = [json.dumps({"msg": "gang decision", "podgroup": "team-0/g", "decision": "evict"}),
             json.dumps({"msg": "eviction planned", "pod": "team-1/e-worker-7"}),
             json.dumps({"msg": "gate release planned", "pod": "team-2/x-worker-3"}),
             json.dumps({"msg": "scale-up held back", "job": "team-3/y"}), "not json"]
    same = bench.compare(bench.plan_decisions(plan), bench.log_decisions(lines))
    assert same["same"] and same["counts"] == {"starving": 1, "evictions": 1, "gateReleases": 1}
    other = bench.compare(bench.plan_decisions(plan), bench.log_decisions(lines[1:]))
    assert not other["same"]
    assert other["diff"] == {"starving": {"onlyPlan": ["team-0/g=evict"], "onlyLive": []}}


def test_minus_pauses_takes_out_only_the_overlap() -> None:
    pauses = [(10.0, 20.0), (30.0, 35.0)]
    assert bench.minus_pauses(0.0, 5.0, pauses) == 5.0  # before any pause
    assert bench.minus_pauses(5.0, 15.0, pauses) == 5.0  # half inside the first
    assert bench.minus_pauses(0.0, 40.0, pauses) == 25.0  # across both
    assert bench.minus_pauses(12.0, 18.0, pauses) == 0.0  # all inside
    assert bench.minus_pauses(0.0, 40.0, []) == 40.0


def test_run_histogram_leaves_out_what_the_plan_check_added() -> None:
    def expo(fast: int, slow: int) -> list[tuple[str, dict[str, str], float]]:
        m = "volcano_elastic_agent_cycle_seconds"
        return bench.parse_prom(f'{m}_bucket{{le="0.1"}} {fast}\n{m}_bucket{{le="10"}} {fast + slow}\n'
                                f'{m}_bucket{{le="+Inf"}} {fast + slow}\n{m}_count {fast + slow}\n{m}_sum 0\n')

    # 10 fast cycles before the check, one slow cycle across the controller's SIGSTOP, 10 fast after
    snaps = (expo(0, 0), expo(10, 0), expo(10, 1), expo(20, 1))
    h = bench.run_histogram(snaps, "volcano_elastic_agent_cycle_seconds")
    assert h["count"] == 20
    assert bench.hist_quantile(h["buckets"], 0.99) <= 0.1
    no_check = bench.run_histogram((expo(0, 0), [], [], expo(20, 1)), "volcano_elastic_agent_cycle_seconds")
    assert no_check["count"] == 21 and bench.hist_quantile(no_check["buckets"], 0.99) > 0.1


def _line(msg: str, **kw: object) -> str:
    return json.dumps({"ts": "2026-11-29T03:00:00.000Z", "level": "info", "msg": msg, **kw})


def test_the_log_is_cut_into_whole_cycles_at_their_agent_cycle_lines() -> None:
    first = [_line("gate release planned", pod="ns/a-worker-2"), _line("agent cycle", now="2026-11-29T03:00:01.000Z")]
    second = [_line("gang decision", podgroup="ns/g", decision="wait"),
              _line("agent cycle", now="2026-11-29T03:00:06.500Z")]
    partial = [_line("eviction planned", pod="ns/b-worker-1")]
    text = "\n".join(first + second + partial) + "\n"
    offset = bench.last_cycle_end("\n".join(first).encode() + b"\n" + b"\n".join(x.encode() for x in second[:1]))
    assert offset == len("\n".join(first)) + 1  # the end of the last whole cycle (the second is not whole)
    cycles, rest = bench.split_cycles(text[offset:])
    assert [now for now, _ in cycles] == ["2026-11-29T03:00:06.500Z"]
    assert bench.log_decisions(cycles[0][1])["starving"] == {"ns/g=wait"}
    assert rest == partial
    cycles, rest = bench.split_cycles(text[offset:] + _line("agent cycle", now="x")[:20])  # a line being written
    assert rest == partial and len(cycles) == 1
    assert bench.last_cycle_end(b"no cycle yet\n") == 0


def test_the_cycles_of_the_log_leave_out_the_plan_checks_window() -> None:
    log = "\n".join([
        _line("agent cycle", now="2026-11-29T03:00:01.000Z", seconds=0.5, released=0),
        _line("gate lifted", pod="ns/a-worker-2"),
        _line("agent cycle", now="2026-11-29T03:00:06.000Z", seconds=4.0, released=3),
        _line("agent cycle", now="2026-11-29T03:01:00.000Z", seconds=30.0, released=0),  # stopped under it
        _line("agent cycle", now="2026-11-29T03:02:00.000Z", seconds=1.0, released=1),
    ])
    got = bench.cycle_log(log, ["2026-11-29T03:00:50.000Z", "2026-11-29T03:01:30.000Z"])
    assert got["cycleSecondsFromLog"] == {"n": 3, "p50": 1.0, "p99": 4.0, "max": 4.0}
    assert [c["seconds"] for c in got["longestCycles"]] == [4.0, 1.0, 0.5]
    assert got["longestCycles"][0]["released"] == 3
    assert bench.cycle_log(log, [])["cycleSecondsFromLog"]["max"] == 30.0
