"""PodGroup plans of PyTorchJobs: operator defaults, minMember, minTaskMember, minResources, queue,
priority class, validation; and the effective requests they are built from."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_controller.policy.model import ElasticBounds
from elastic_controller.policy.parse import effective_requests, parse_job
from elastic_controller.policy.podgroups import JobSpecError, job_bounds, plan_podgroup, resolve_queue
from elastic_controller.policy.settings import ElasticConfig
from tests.harness.builders import pytorchjob
from tests.harness.legacy import legacy_config

GI = 2**30
GPU = "nvidia.com/gpu"


def c(name: str, *, requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None,
      restart: str | None = None) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if requests is not None:
        res["requests"] = requests
    if limits is not None:
        res["limits"] = limits
    out: dict[str, Any] = {"name": name, "resources": res}
    if restart:
        out["restartPolicy"] = restart
    return out


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({"containers": [c("a", requests={"cpu": "1"})]}, {"cpu": 1000}, id="one-container"),
        pytest.param({"containers": [c("a", requests={"cpu": "1"}), c("b", requests={"cpu": "500m"})]},
                     {"cpu": 1500}, id="containers-summed"),
        pytest.param({"containers": [c("a", limits={"cpu": "2", GPU: "1"})]}, {"cpu": 2000, GPU: 1},
                     id="limits-default-requests"),
        pytest.param({"containers": [c("a", requests={"cpu": "1"}, limits={"cpu": "2", GPU: "1"})]},
                     {"cpu": 1000, GPU: 1}, id="requests-win-over-limits-per-resource"),
        pytest.param({"containers": [c("a", requests={"cpu": "1"})],
                      "initContainers": [c("init", requests={"cpu": "3"})]}, {"cpu": 3000},
                     id="big-init-container-dominates"),
        pytest.param({"containers": [c("a", requests={"cpu": "2"})],
                      "initContainers": [c("i1", requests={"cpu": "1"}), c("i2", requests={"cpu": "1"})]},
                     {"cpu": 2000}, id="init-containers-run-one-at-a-time"),
        pytest.param({"containers": [c("a", requests={"cpu": "1", "memory": "1Gi"})],
                      "initContainers": [c("i", requests={"memory": "4Gi"})]}, {"cpu": 1000, "memory": 4 * GI},
                     id="max-per-resource"),
        pytest.param({"containers": [c("a", requests={"cpu": "1"})],
                      "initContainers": [c("side", requests={"cpu": "1"}, restart="Always")]}, {"cpu": 2000},
                     id="sidecar-added-to-containers"),
        pytest.param({"containers": [c("a", requests={"cpu": "1"})],
                      "initContainers": [c("side", requests={"cpu": "1"}, restart="Always"),
                                         c("init", requests={"cpu": "3"})]}, {"cpu": 4000},
                     id="init-after-sidecar-counts-the-sidecar"),
        pytest.param({"containers": [c("a", requests={"cpu": "1"})],
                      "initContainers": [c("init", requests={"cpu": "3"}),
                                         c("side", requests={"cpu": "1"}, restart="Always")]}, {"cpu": 3000},
                     id="init-before-sidecar-does-not"),
        pytest.param({"containers": [c("a", requests={"cpu": "1"})], "overhead": {"cpu": "250m", "memory": "64Mi"}},
                     {"cpu": 1250, "memory": 64 * 2**20}, id="overhead-added"),
        pytest.param({"containers": [c("a", requests={"cpu": "1"})],
                      "initContainers": [c("init", requests={"cpu": "3"})], "overhead": {"cpu": "1"}},
                     {"cpu": 4000}, id="overhead-added-after-init-max"),
        pytest.param({"containers": [c("a")]}, {}, id="no-requests"),
        pytest.param({}, {}, id="no-containers"),
    ],
)
def test_effective_requests(spec: dict[str, Any], expected: dict[str, int]) -> None:
    assert {k: v for k, v in effective_requests(spec).items() if v} == expected


# -- bounds: defaults exactly as the training operator applies them -------------------------------------
@pytest.mark.parametrize(
    ("job", "expected"),
    [
        pytest.param(pytorchjob("ns", "j", workers=4, min_r=2, max_r=4), ElasticBounds(2, 4), id="both-set"),
        pytest.param(pytorchjob("ns", "j", workers=4, max_r=4), ElasticBounds(4, 4), id="only-max-min-eq-max"),
        pytest.param(pytorchjob("ns", "j", workers=3, min_r=3), ElasticBounds(3, 3), id="only-min-max-eq-min"),
        pytest.param(pytorchjob("ns", "j", workers=5), ElasticBounds(5, 5), id="neither-worker-replicas"),
        pytest.param(pytorchjob("ns", "j", workers=3, min_r=2, max_r=4), ElasticBounds(2, 4),
                     id="replicas-inside-range"),
        pytest.param(pytorchjob("ns", "j", workers=2, elastic=False), ElasticBounds(2, 2), id="no-elastic-policy"),
        pytest.param(pytorchjob("ns", "j", workers=1, min_r=1, max_r=1), ElasticBounds(1, 1), id="one-one"),
    ],
)
def test_job_bounds(job: dict[str, Any], expected: ElasticBounds) -> None:
    assert job_bounds(parse_job(job)) == expected


@pytest.mark.parametrize(
    ("job", "message"),
    [
        pytest.param(pytorchjob("ns", "j", workers=4, min_r=5, max_r=4), "greater than maxReplicas",
                     id="min-above-max"),
        pytest.param(pytorchjob("ns", "j", workers=4, min_r=0, max_r=4), "at least 1", id="min-zero"),
        pytest.param(pytorchjob("ns", "j", workers=0, max_r=0), "at least 1", id="only-max-zero"),
        pytest.param(pytorchjob("ns", "j", workers=0), "at least 1", id="neither-replicas-zero"),
        pytest.param(pytorchjob("ns", "j", workers=5, min_r=2, max_r=4), "outside", id="replicas-above-max"),
        pytest.param(pytorchjob("ns", "j", workers=1, min_r=2, max_r=4), "outside", id="replicas-below-min"),
        pytest.param(pytorchjob("ns", "j", workers=3, max_r=2), "outside", id="only-max-replicas-differ"),
        pytest.param(pytorchjob("ns", "j", workers=-1, min_r=1, max_r=2, master=True), "no Worker",
                     id="no-worker-spec"),
    ],
)
def test_job_bounds_errors(job: dict[str, Any], message: str) -> None:
    with pytest.raises(JobSpecError, match=message):
        plan_podgroup(parse_job(job), ElasticConfig())


def test_empty_replica_specs_is_an_error() -> None:
    job = pytorchjob("ns", "j", workers=-1, elastic=False)
    with pytest.raises(JobSpecError, match="empty"):
        plan_podgroup(parse_job(job), ElasticConfig())


def test_two_masters_is_an_error() -> None:
    job = pytorchjob("ns", "j", workers=2, master=True, min_r=1, max_r=2)
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    with pytest.raises(JobSpecError, match="exactly one master"):
        plan_podgroup(parse_job(job), ElasticConfig())


# -- the plan -----------------------------------------------------------------------------------------
POD = {"cpu": 4000, "memory": 16 * GI, GPU: 1}


def _times(res: dict[str, int], n: int) -> dict[str, int]:
    return {k: v * n for k, v in res.items()}


@pytest.mark.parametrize(
    ("job", "min_member", "min_task", "resources"),
    [
        pytest.param(pytorchjob("ns", "j", workers=4, min_r=2, max_r=4), 2, {"worker": 2}, _times(POD, 2),
                     id="no-master"),
        pytest.param(pytorchjob("ns", "j", workers=4, min_r=2, max_r=4, master=True), 3,
                     {"master": 1, "worker": 2}, _times(POD, 3), id="with-master"),
        pytest.param(pytorchjob("ns", "j", workers=4, max_r=4), 4, {"worker": 4}, _times(POD, 4),
                     id="only-max"),
        pytest.param(pytorchjob("ns", "j", workers=3, elastic=False, master=True), 4, {"master": 1, "worker": 3},
                     _times(POD, 4), id="non-elastic-with-master"),
        pytest.param(pytorchjob("ns", "j", workers=-1, elastic=False, master=True), 1, {"master": 1}, POD,
                     id="master-only-non-elastic"),
        pytest.param(pytorchjob("ns", "j", workers=2, min_r=1, max_r=2, gpus=0), 1, {"worker": 1},
                     {"cpu": 4000, "memory": 16 * GI}, id="zero-gpu-omitted"),
    ],
)
def test_plan_podgroup_members(job: dict[str, Any], min_member: int, min_task: dict[str, int],
                               resources: dict[str, int]) -> None:
    plan = plan_podgroup(parse_job(job), legacy_config())  # gangs of their min (wholeGangUpTo 0)
    assert plan.min_member == min_member
    assert plan.min_task_member == min_task
    assert plan.min_resources == resources
    assert (plan.namespace, plan.name, plan.key) == ("ns", "j", "ns/j")


def test_min_resources_use_effective_requests() -> None:
    job = pytorchjob("ns", "j", workers=3, min_r=2, max_r=3)
    tmpl = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    tmpl["initContainers"] = [c("init", requests={"cpu": "10"})]
    tmpl["overhead"] = {"cpu": "1"}
    plan = plan_podgroup(parse_job(job), legacy_config())
    assert plan.min_resources["cpu"] == 2 * 11000


CFG = ElasticConfig(defaultQueue="fallback", namespaceQueues={"ns": "from-config"})


@pytest.mark.parametrize(
    ("job_queue", "ns_annotation", "cfg", "queue", "source"),
    [
        # issue 36, T9: a bound namespace wins over what the job (its owner's to write) names
        pytest.param("from-job", "from-ns", CFG, "from-ns", "namespace-annotation", id="namespace-annotation-wins"),
        pytest.param("from-job", None, CFG, "from-config", "config", id="namespace-map-wins"),
        pytest.param("from-job", None, ElasticConfig(), "from-job", "job", id="job-queue-in-unbound-namespace"),
        pytest.param("", "from-ns", CFG, "from-ns", "namespace-annotation", id="namespace-annotation"),
        pytest.param("", None, CFG, "from-config", "config", id="config-namespace-map"),
        pytest.param("", "", CFG, "from-config", "config", id="empty-annotation-ignored"),
        pytest.param("", None, ElasticConfig(defaultQueue="fallback"), "fallback", "default", id="default"),
        pytest.param("", None, ElasticConfig(), "default", "default", id="default-default"),
        pytest.param("", None, ElasticConfig(namespaceQueues={"other": "x"}), "default", "default",
                     id="other-namespace-mapped"),
    ],
)
def test_queue_resolution(job_queue: str, ns_annotation: str | None, cfg: ElasticConfig, queue: str,
                          source: str) -> None:
    job = parse_job(pytorchjob("ns", "j", workers=2, min_r=1, max_r=2, queue=job_queue))
    assert resolve_queue(job, ns_annotation, cfg) == (queue, source)
    plan = plan_podgroup(job, cfg, ns_annotation)
    assert (plan.queue, plan.queue_source) == (queue, source)


def _with_template_pc(job: dict[str, Any], rtype: str, pc: str) -> dict[str, Any]:
    job["spec"]["pytorchReplicaSpecs"][rtype]["template"]["spec"]["priorityClassName"] = pc
    return job


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        pytest.param(pytorchjob("ns", "j", workers=2, min_r=1, max_r=2, priority_class="high"), "high",
                     id="scheduling-policy"),
        pytest.param(_with_template_pc(pytorchjob("ns", "j", workers=2, min_r=1, max_r=2), "Worker", "tmpl"),
                     "tmpl", id="worker-template-fallback"),
        pytest.param(_with_template_pc(pytorchjob("ns", "j", workers=2, min_r=1, max_r=2, priority_class="high"),
                                       "Worker", "tmpl"), "high", id="scheduling-policy-beats-template"),
        pytest.param(pytorchjob("ns", "j", workers=2, min_r=1, max_r=2), "", id="none"),
        pytest.param(_with_template_pc(_with_template_pc(
            pytorchjob("ns", "j", workers=2, min_r=1, max_r=2, master=True), "Master", "m"), "Worker", "w"),
            "w", id="worker-template-beats-master-template"),
    ],
)
def test_priority_class(job: dict[str, Any], expected: str) -> None:
    assert plan_podgroup(parse_job(job), ElasticConfig()).priority_class_name == expected


def test_plan_bounds_and_master_flag() -> None:
    plan = plan_podgroup(parse_job(pytorchjob("ns", "j", workers=4, min_r=2, max_r=4, master=True)),
                         ElasticConfig())
    assert plan.bounds == ElasticBounds(2, 4) and plan.has_master
