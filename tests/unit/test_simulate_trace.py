"""Trace and cluster readers: our CSV/YAML, Helios and Alibaba layouts, errors with file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic_controller.simulate.cluster import load_cluster, parse_cluster
from elastic_controller.simulate.generate import GeneratorOptions, generate
from elastic_controller.simulate.scaling import CurveError, ScalingCurve, parse_curve
from elastic_controller.simulate.trace import (
    ImportOptions,
    JobSpec,
    TraceError,
    dump_csv,
    load_trace,
    parse_own_csv,
)

OWN_CSV = """\
# our format
name,submit,queue,priority,min,max,gpus,work
train-b,30,vision,0,2,4,8,115200
train-a,0,default,1,1,1,1,3600
"""

OWN_YAML = """\
jobs:
  - {name: train-a, submit: 0, min: 1, max: 1, gpus: 1, work: 3600, priority: 1}
  - name: train-b
    submit: 30
    queue: vision
    min: 2
    max: 4
    gpus: 8
    work: 115200
    cpu: "32"
    memory: 256Gi
"""

HELIOS = """\
job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue
7165,uGXm,vc6YE,16,64,2,COMPLETED,2020-04-01 00:00:10,2020-04-01 00:00:12,2020-04-01 01:00:12,3600,2
7166,uGXm,vc6YE,0,4,1,COMPLETED,2020-04-01 00:00:20,2020-04-01 00:00:21,2020-04-01 00:10:21,600,1
7167,u8ts,vcEhy,1,2,1,FAILED,2020-04-01 00:01:10,2020-04-01 00:01:10,2020-04-01 00:01:40,30,0
7168,u8ts,vcEhy,4,8,1,CANCELLED,2020-04-01 00:02:10,2020-04-01 00:03:10,2020-04-01 00:03:10,0,60
"""

ALIBABA = """\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0
openb-pod-0001,6000,12288,1,460,,BE,Running,427061,12902960,427061
openb-pod-0002,4000,8192,0,0,,BE,Running,500000,600000,500000
openb-pod-0003,88000,327680,8,1000,V100M32,LS,Succeeded,600000,603600,600100
openb-pod-0004,8000,30517,1,320,,BE,Pending,700000,700025,
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_own_csv_and_yaml_agree(tmp_path: Path) -> None:
    from_csv = load_trace(write(tmp_path, "t.csv", OWN_CSV))
    from_yaml = load_trace(write(tmp_path, "t.yaml", OWN_YAML))
    assert [j.name for j in from_csv] == ["train-a", "train-b"]  # sorted by submit time
    a, b = from_csv
    assert (a.priority, a.queue, a.work, a.min_workers, a.max_workers) == (1, "default", 3600.0, 1, 1)
    assert (b.submit, b.queue, b.gpus, b.min_workers, b.max_workers) == (30.0, "vision", 8, 2, 4)
    assert b.cpu_request == 64_000 and b.memory_request == 512 * 2**30  # defaults per GPU
    yb = from_yaml[1]
    assert (yb.cpu_request, yb.memory_request) == (32_000, 256 * 2**30)
    assert [j.line for j in from_yaml] == [2, 3]


@pytest.mark.parametrize(("text", "line", "message"), [
    ("name,submit,min,max,gpus,work\na,0,1,2,8,100\nb,0,1,2,eight,100\n", 3, "'gpus' must be an integer"),
    ("name,submit,min,max,gpus,work\na,0,3,2,8,100\n", 2, "'max' (2) must be >= 'min' (3)"),
    ("name,submit,min,max,gpus,work\na,0,1,2,8\n", 2, "expected 6 columns, got 5"),
    ("name,submit,min,max,gpus,work\na,-5,1,2,8,100\n", 2, "'submit' must be a finite number >= 0"),
    ("name,submit,min,max,gpus,work\na,0,1,2,8,0\n", 2, "'work' must be a finite number > 0"),
    ("name,submit,min,max,gpus,work\na,0,1,2,8,100\na,1,1,2,8,100\n", 3, "already used on line 2"),
    ("name,submit,min,max,gpus,work\nA_b,0,1,2,8,100\n", 2, "DNS label"),
    ("name,submit,min,max,gpus,work,color\na,0,1,2,8,100,red\n", 1, "unknown column(s): color"),
    ("name,submit,min,max,gpus\na,0,1,2,8\n", 1, "lacks column(s): work"),
], ids=["not-an-int", "max-below-min", "short-row", "negative-submit", "zero-work", "duplicate",
        "bad-name", "unknown-column", "missing-column"])
def test_malformed_csv_names_file_and_line(text: str, line: int, message: str) -> None:
    with pytest.raises(TraceError) as err:
        parse_own_csv(text, "t.csv")
    assert err.value.line == line
    assert str(err.value).startswith(f"t.csv:{line}: ")
    assert message in str(err.value)


def test_malformed_yaml_names_line(tmp_path: Path) -> None:
    bad = OWN_YAML.replace("    gpus: 8\n", "    gpus: many\n")
    with pytest.raises(TraceError, match=r"t\.yaml:3: 'gpus' must be an integer"):
        load_trace(write(tmp_path, "t.yaml", bad))
    with pytest.raises(TraceError, match=r"t\.yaml:2: unknown key\(s\): colour"):
        load_trace(write(tmp_path, "t.yaml", "jobs:\n  - {name: a, colour: red}\n"))
    with pytest.raises(TraceError, match=r"t\.yaml:3: not valid YAML"):
        load_trace(write(tmp_path, "t.yaml", "jobs:\n  - {name: a\n"))


def test_helios_layout(tmp_path: Path) -> None:
    jobs = load_trace(write(tmp_path, "cluster_log.csv", HELIOS))
    # CPU-only (7166) and zero-length (7168) jobs are skipped.
    assert [j.name for j in jobs] == ["h-7165", "h-7167"]
    big, small = jobs
    assert (big.submit, big.queue, big.max_workers, big.min_workers, big.gpus) == (0.0, "vc6ye", 2, 1, 8)
    assert big.work == 16 * 3600 and big.cpu == 32_000
    assert (small.submit, small.work, small.gpus, small.max_workers) == (60.0, 30.0, 1, 1)
    split = load_trace(write(tmp_path, "cluster_log.csv", HELIOS),
                       opts=ImportOptions(worker_gpus=2, min_fraction=0.25, queue="default"))
    assert (split[0].max_workers, split[0].min_workers, split[0].gpus, split[0].queue) == (8, 2, 2, "default")


def test_helios_bad_line(tmp_path: Path) -> None:
    bad = HELIOS.replace("2020-04-01 00:01:10,2020", "yesterday,2020", 1)
    with pytest.raises(TraceError, match=r"cluster_log\.csv:4: 'submit_time' must be"):
        load_trace(write(tmp_path, "cluster_log.csv", bad))


def test_alibaba_layout(tmp_path: Path) -> None:
    jobs = load_trace(write(tmp_path, "openb_pod_list_default.csv", ALIBABA))
    # No GPU (0002) and never scheduled (0004) are skipped.
    assert [j.name for j in jobs] == ["openb-pod-0000", "openb-pod-0001", "openb-pod-0003"]
    first, shared, eight = jobs
    assert (first.work, first.cpu, first.memory, first.priority) == (12537496.0, 12000, 16384 * 2**20, 2)
    assert shared.gpus == 1 and shared.priority == -1  # a 0.46 share still holds one device
    assert (eight.gpus, eight.max_workers, eight.work, eight.submit) == (8, 1, 8 * 3500.0, 600000.0)
    split = load_trace(write(tmp_path, "openb_pod_list_default.csv", ALIBABA),
                       opts=ImportOptions(worker_gpus=1))
    assert (split[2].max_workers, split[2].min_workers, split[2].gpus) == (8, 4, 1)


def test_alibaba_bad_line(tmp_path: Path) -> None:
    bad = ALIBABA.replace("openb-pod-0001,6000", "openb-pod-0001,six", 1)
    with pytest.raises(TraceError, match=r"\.csv:3: 'cpu_milli' must be an integer"):
        load_trace(write(tmp_path, "openb_pod_list_default.csv", bad))


def test_cluster_file(tmp_path: Path) -> None:
    spec = parse_cluster("nodes:\n  - {name: a, count: 2, gpus: 8}\n  - {name: b, count: 1, gpus: 4, cpu: 32,"
                         " memory: 256Gi}\nqueues:\n  - {name: x, weight: 3}\n", "c.yaml")
    assert spec.total_gpus == 20 and spec.node_count == 3
    assert spec.pools[1].cpu == 32_000 and spec.pools[1].memory == 256 * 2**30
    assert spec.queues[0].weight == 3
    with pytest.raises(TraceError, match=r"c\.yaml:2: 'gpus' must be a positive integer"):
        load_cluster(write(tmp_path, "c.yaml", "nodes:\n  - {count: 2}\n"))


def test_generator_is_seeded_and_round_trips() -> None:
    spec = parse_cluster("nodes:\n  - {count: 64, gpus: 8}\nqueues:\n  - {name: a}\n  - {name: b, weight: 2}\n",
                         "c.yaml")
    one = generate(spec, GeneratorOptions(jobs=50, seed=4))
    assert one == generate(spec, GeneratorOptions(jobs=50, seed=4))
    assert one != generate(spec, GeneratorOptions(jobs=50, seed=5))
    assert all(1 <= j.min_workers <= j.max_workers and j.max_workers * j.gpus <= 128 for j in one)
    again = parse_own_csv(dump_csv(one), "round.csv")
    assert [(j.name, j.submit, j.min_workers, j.max_workers, j.gpus, j.work, j.queue, j.priority)
            for j in again] == [(j.name, j.submit, j.min_workers, j.max_workers, j.gpus, j.work, j.queue,
                                 j.priority) for j in one]


def test_scaling_curves() -> None:
    assert parse_curve("1") == ScalingCurve(1.0)
    assert parse_curve("0.9").efficiency(4) == pytest.approx(0.81)
    pts = parse_curve("1:1,2:0.9,4:0.8")
    assert [pts.efficiency(n) for n in (1, 2, 3, 4, 16)] == pytest.approx([1, 0.9, 0.85, 0.8, 0.8])
    for bad in ("0", "1.5", "fast", "2:1,1:1", "1:0"):
        with pytest.raises(CurveError):
            parse_curve(bad)


def test_jobspec_defaults() -> None:
    j = JobSpec("a", 0, 1, 2, 4, 10.0)
    assert j.cpu_request == 32_000 and j.memory_request == 256 * 2**30
