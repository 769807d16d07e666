"""Roles of PyTorchJob pods (master / core / elastic), PET_NNODES bounds and task priority."""

from __future__ import annotations

import pytest

from elastic_controller.policy import keys
from elastic_controller.policy.keys import Role
from elastic_controller.policy.model import ElasticBounds
from elastic_controller.policy.parse import parse_pod
from elastic_controller.policy.roles import (
    BoundsError,
    RolePlan,
    parse_nnodes,
    plan_role,
    preemptable,
    replica_of,
    task_priority,
)
from elastic_controller.policy.settings import ElasticConfig, PrioritiesConfig
from tests.harness.builders import job_pod, pod


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("2:4", ElasticBounds(2, 4), id="min-max"),
        pytest.param(" 2:4 ", ElasticBounds(2, 4), id="padded"),
        pytest.param("3", ElasticBounds(3, 3), id="N-non-elastic"),
        pytest.param("3:3", ElasticBounds(3, 3), id="n-n-non-elastic"),
        pytest.param("1:1", ElasticBounds(1, 1), id="1-1"),
        pytest.param(None, None, id="absent"),
        pytest.param("", None, id="empty"),
        pytest.param("  ", None, id="blank"),
    ],
)
def test_parse_nnodes(value: str | None, expected: ElasticBounds | None) -> None:
    assert parse_nnodes(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("4:2", id="min-above-max"),
        pytest.param("0:2", id="min-zero"),
        pytest.param("0", id="zero"),
        pytest.param("-1:2", id="negative"),
        pytest.param("a:b", id="words"),
        pytest.param("2:", id="missing-max"),
        pytest.param(":4", id="missing-min"),
        pytest.param("1:2:3", id="three-parts"),
        pytest.param("1.5", id="fraction"),
    ],
)
def test_parse_nnodes_malformed(value: str) -> None:
    with pytest.raises(BoundsError):
        parse_nnodes(value)


def test_bounds_elastic_only_when_max_above_min() -> None:
    assert ElasticBounds(1, 2).elastic
    assert not ElasticBounds(2, 2).elastic


def _labels(rtype: str, index: int | str, master_label: bool = False) -> dict[str, str]:
    labels = {keys.REPLICA_TYPE_LABEL: rtype, keys.REPLICA_INDEX_LABEL: str(index)}
    if master_label:
        labels[keys.JOB_ROLE_LABEL] = "master"
    return labels


B24 = ElasticBounds(2, 4)


@pytest.mark.parametrize(
    ("labels", "bounds", "role", "rtype", "index"),
    [
        pytest.param(_labels("master", 0, True), B24, Role.MASTER, "master", 0, id="master-0"),
        pytest.param(_labels("Master", 0), B24, Role.MASTER, "master", 0, id="master-type-without-role-label"),
        pytest.param(_labels("worker", 0, True), B24, Role.MASTER, "worker", 0, id="worker-0-no-master-replica"),
        pytest.param(_labels("worker", 0), B24, Role.CORE, "worker", 0, id="worker-0-with-master-replica-core"),
        pytest.param(_labels("worker", 1), B24, Role.CORE, "worker", 1, id="worker-below-min-core"),
        pytest.param(_labels("worker", 2), B24, Role.ELASTIC, "worker", 2, id="worker-at-min-elastic"),
        pytest.param(_labels("worker", 3), B24, Role.ELASTIC, "worker", 3, id="worker-max-1-elastic"),
        pytest.param(_labels("Worker", 3), B24, Role.ELASTIC, "worker", 3, id="replica-type-case-insensitive"),
        pytest.param(_labels("worker", 3), ElasticBounds(4, 4), Role.CORE, "worker", 3, id="n-n-no-elastic"),
        pytest.param(_labels("worker", 9), ElasticBounds(4, 4), Role.CORE, "worker", 9, id="n-n-beyond-is-core"),
        pytest.param(_labels("worker", 3), None, Role.CORE, "worker", 3, id="unknown-bounds-core"),
        pytest.param(_labels("worker", 0, True), None, Role.MASTER, "worker", 0, id="unknown-bounds-master"),
        pytest.param(_labels("worker", "x"), B24, Role.CORE, "worker", -1, id="bad-index-core"),
        pytest.param({keys.REPLICA_TYPE_LABEL: "worker"}, B24, Role.CORE, "worker", -1, id="no-index-core"),
        pytest.param(_labels("launcher", 5), B24, Role.CORE, "launcher", 5, id="other-type-core"),
        pytest.param({}, B24, Role.CORE, "", -1, id="no-labels"),
        # issue 36, T2: job-role=master where the operator never puts it is the tenant's word: ignored
        pytest.param(_labels("worker", 3, True), B24, Role.ELASTIC, "worker", 3, id="relabelled-elastic-worker"),
        pytest.param(_labels("worker", 1, True), B24, Role.CORE, "worker", 1, id="relabelled-core-worker"),
        pytest.param(_labels("launcher", 0, True), B24, Role.CORE, "launcher", 0, id="relabelled-other-type"),
        pytest.param({keys.JOB_ROLE_LABEL: "master"}, B24, Role.CORE, "", -1, id="role-label-alone"),
    ],
)
def test_plan_role(labels: dict[str, str], bounds: ElasticBounds | None, role: Role, rtype: str,
                   index: int) -> None:
    plan = plan_role(labels, bounds)
    assert (plan.role, plan.replica_type, plan.replica_index) == (role, rtype, index)
    assert plan.task_spec == rtype


def test_replica_of() -> None:
    assert replica_of(_labels("Worker", 7)) == ("worker", 7)
    assert replica_of({}) == ("", -1)


PRIOS = PrioritiesConfig(master=1000, core=500, elastic=100)


@pytest.mark.parametrize(
    ("role", "index", "bounds", "prios", "expected"),
    [
        pytest.param(Role.MASTER, 0, B24, PRIOS, 1000, id="master"),
        pytest.param(Role.CORE, 1, B24, PRIOS, 500, id="core"),
        pytest.param(Role.ELASTIC, 2, B24, PRIOS, 100, id="first-elastic"),
        pytest.param(Role.ELASTIC, 3, B24, PRIOS, 99, id="second-elastic"),
        pytest.param(Role.ELASTIC, 150, ElasticBounds(1, 200), PRIOS, 1, id="floor-1"),
        pytest.param(Role.ELASTIC, 101, ElasticBounds(1, 200), PRIOS, 1, id="exactly-floor"),
        pytest.param(Role.ELASTIC, 100, ElasticBounds(1, 200), PRIOS, 1, id="reaches-1"),
        pytest.param(Role.ELASTIC, 5, ElasticBounds(1, 9), PrioritiesConfig(9, 5, 3), 1, id="custom-floor"),
    ],
)
def test_task_priority(role: Role, index: int, bounds: ElasticBounds, prios: PrioritiesConfig,
                       expected: int) -> None:
    assert task_priority(RolePlan(role, "worker", index, bounds), prios) == expected


def test_task_priority_order_master_core_elastic() -> None:
    plans = [plan_role(_labels("master", 0, True), B24), plan_role(_labels("worker", 0), B24),
             plan_role(_labels("worker", 2), B24), plan_role(_labels("worker", 3), B24)]
    prios = [task_priority(p, PRIOS) for p in plans]
    assert prios == sorted(prios, reverse=True) and len(set(prios)) == 4


@pytest.mark.parametrize(
    ("role", "expected"),
    [pytest.param(Role.MASTER, False, id="master"), pytest.param(Role.CORE, False, id="core"),
     pytest.param(Role.ELASTIC, True, id="elastic")],
)
def test_preemptable(role: Role, expected: bool) -> None:
    assert preemptable(role) is expected


# -- the same rule applied to whole pods (parse_pod) -------------------------------------------------
@pytest.mark.parametrize(
    ("obj", "role", "prio"),
    [
        pytest.param(job_pod("ns", "j", "master", 0, nnodes="2:4", master_replica=True), Role.MASTER, 1000,
                     id="pod-master-0"),
        pytest.param(job_pod("ns", "j", "worker", 0, nnodes="2:4"), Role.MASTER, 1000,
                     id="pod-worker-0-without-master"),
        pytest.param(job_pod("ns", "j", "worker", 0, nnodes="2:4", master_replica=True), Role.CORE, 500,
                     id="pod-worker-0-with-master"),
        pytest.param(job_pod("ns", "j", "worker", 2, nnodes="2:4"), Role.ELASTIC, 100, id="pod-elastic"),
        pytest.param(job_pod("ns", "j", "worker", 3, nnodes="4"), Role.CORE, 500, id="pod-nnodes-N"),
        pytest.param(job_pod("ns", "j", "worker", 3, nnodes="4:4"), Role.CORE, 500, id="pod-nnodes-n-n"),
        pytest.param(job_pod("ns", "j", "worker", 3, nnodes="bad"), Role.CORE, 500, id="pod-nnodes-malformed"),
        pytest.param(job_pod("ns", "j", "worker", 3, nnodes=None), Role.CORE, 500, id="pod-no-nnodes"),
        pytest.param(pod("ns", "plain"), Role.CORE, 0, id="pod-not-a-pytorchjob"),
    ],
)
def test_parse_pod_role(obj: dict, role: Role, prio: int) -> None:  # type: ignore[type-arg]
    view = parse_pod(obj, ElasticConfig())
    assert view.role is role
    assert view.task_priority == prio


def test_pet_nnodes_read_from_pytorch_container_first() -> None:
    obj = job_pod("ns", "j", "worker", 2, nnodes="2:4")
    obj["spec"]["containers"].insert(0, {"name": "sidecar", "env": [{"name": "PET_NNODES", "value": "5"}]})
    view = parse_pod(obj)
    assert view.bounds == ElasticBounds(2, 4) and view.role is Role.ELASTIC


def test_job_name_needs_operator_label() -> None:
    obj = job_pod("ns", "j", "worker", 2, nnodes="2:4")
    del obj["metadata"]["labels"][keys.OPERATOR_NAME_LABEL]
    view = parse_pod(obj)
    assert view.job_name == "" and view.role is Role.CORE
