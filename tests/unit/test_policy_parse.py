"""Kubernetes JSON -> views: what each parser reads, and which objects are skipped with a warning."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_controller.policy import keys
from elastic_controller.policy.model import Taint
from elastic_controller.policy.parse import (
    ParseError,
    format_time,
    parse_job,
    parse_node,
    parse_objects,
    parse_pod,
    parse_podgroup,
    parse_queue,
    parse_time,
)
from tests.harness.builders import NOW, T0, ago, node, pod, podgroup, priority_class, pytorchjob, queue, ts

GPU = "nvidia.com/gpu"


def test_pod_fields() -> None:
    obj = pod("ns", "p", group="g", node_name="n1", gates=["a/b"], node_selector={"z": "1"},
              tolerations=[{"key": "k", "operator": "Exists", "effect": "NoSchedule"}], scheduled_at=ago(60))
    v = parse_pod(obj)
    assert (v.key, v.group_key, v.node_name, v.phase, v.scheduling_gates) == ("ns/p", "ns/g", "n1", "Running", ("a/b",))
    assert v.requests == {"cpu": 4000, "memory": 16 * 2**30, GPU: 1}
    assert v.node_selector == {"z": "1"} and v.tolerations[0].operator == "Exists"
    assert v.scheduled_at == ago(60) and v.created == T0 and not v.deleting
    assert v.running and v.placed and v.holds_resources and not v.pending


@pytest.mark.parametrize(
    ("kw", "running", "placed", "holds", "pending"),
    [
        pytest.param({"node_name": "n"}, True, True, True, False, id="running"),
        pytest.param({}, False, False, False, True, id="pending"),
        pytest.param({"node_name": "n", "phase": "Pending"}, False, True, True, False, id="bound-not-started"),
        pytest.param({"node_name": "n", "deleting": True}, False, False, True, False, id="terminating"),
        pytest.param({"node_name": "n", "phase": "Succeeded"}, False, False, False, False, id="succeeded"),
        pytest.param({"node_name": "n", "phase": "Failed"}, False, False, False, False, id="failed"),
        pytest.param({"deleting": True}, False, False, False, False, id="pending-deleted"),
    ],
)
def test_pod_states(kw: dict[str, Any], running: bool, placed: bool, holds: bool, pending: bool) -> None:
    v = parse_pod(pod("ns", "p", **kw))
    assert (v.running, v.placed, v.holds_resources, v.pending) == (running, placed, holds, pending)


def test_group_from_label_too() -> None:
    obj = pod("ns", "p")
    obj["metadata"]["labels"][keys.GROUP_NAME] = "g"
    assert parse_pod(obj).group == "g"


def test_preempted_by_scheduler_condition() -> None:
    obj = pod("ns", "p", node_name="n")
    obj["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True",
                                        "reason": "PreemptionByScheduler"})
    assert parse_pod(obj).preempted_by_scheduler


def test_task_priority_annotation_wins() -> None:
    obj = pod("ns", "p", annotations={keys.TASK_PRIORITY: "42"})
    assert parse_pod(obj).task_priority == 42
    obj = pod("ns", "p", annotations={keys.TASK_PRIORITY: "high"})
    assert parse_pod(obj).task_priority == 0


def test_node_fields() -> None:
    obj = node("n", gpus=4, taints=[{"key": "k", "value": "v", "effect": "NoExecute"}], unschedulable=True,
               ready=False)
    v = parse_node(obj)
    assert v.allocatable[GPU] == 4 and v.allocatable["pods"] == 110
    assert v.taints == (Taint("k", "v", "NoExecute"),) and v.unschedulable and not v.ready


def test_node_capacity_when_no_allocatable() -> None:
    obj = node("n")
    del obj["status"]["allocatable"]
    assert parse_node(obj).allocatable[GPU] == 8


def test_podgroup_fields() -> None:
    v = parse_podgroup(podgroup("ns", "g", 3, "q", "high", last_scale=ago(10)))
    assert (v.key, v.min_member, v.queue, v.priority_class_name) == ("ns/g", 3, "q", "high")
    assert keys.LAST_SCALE_TIME in v.annotations


def test_podgroup_defaults() -> None:
    obj = podgroup("ns", "g", 3)
    obj["spec"] = {}
    v = parse_podgroup(obj)
    assert (v.min_member, v.queue) == (1, "default")


def test_queue_fields() -> None:
    v = parse_queue(queue("q", weight=3, capability={GPU: 8}, deserved={GPU: 4}, guarantee={GPU: 2}, parent="p",
                          reclaimable=False))
    assert (v.weight, v.capability, v.deserved, v.guarantee, v.parent, v.reclaimable) == (
        3, {GPU: 8}, {GPU: 4}, {GPU: 2}, "p", False)
    assert parse_queue(queue("q")).parent == "root" and parse_queue(queue("root")).parent == ""


def test_job_fields() -> None:
    v = parse_job(pytorchjob("ns", "j", workers=4, min_r=2, max_r=4, master=True, queue="q", priority_class="pc"))
    assert set(v.replicas) == {"master", "worker"} and v.replicas["worker"].replicas == 4
    assert (v.min_replicas, v.max_replicas, v.queue, v.priority_class, v.has_elastic_policy) == (2, 4, "q", "pc", True)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("2026-01-01T12:00:00Z", T0, id="zulu"),
        pytest.param("2026-01-01T13:00:00+01:00", T0, id="offset"),
        pytest.param("2026-01-01T12:00:00", T0, id="naive-utc"),
        pytest.param("garbage", None, id="garbage"),
        pytest.param("", None, id="empty"),
        pytest.param(None, None, id="none"),
        pytest.param(5, None, id="number"),
    ],
)
def test_parse_time(value: object, expected: object) -> None:
    assert parse_time(value) == expected


def test_format_time_roundtrip() -> None:
    assert format_time(NOW) == ts(NOW) and parse_time(format_time(NOW)) == NOW


@pytest.mark.parametrize(
    ("obj", "fragment"),
    [
        pytest.param({"kind": "Pod", "metadata": {"name": "p"}}, "without spec", id="pod-no-spec"),
        pytest.param({"kind": "Node", "metadata": {"name": "n"}, "status": {}}, "allocatable", id="node-no-alloc"),
        pytest.param({"kind": "PodGroup", "metadata": {"name": "g"}, "spec": {"minMember": "2"}}, "minMember",
                     id="pg-minmember-string"),
        pytest.param({"kind": "PodGroup", "metadata": {"name": "g"}, "spec": {"minMember": -1}}, "minMember",
                     id="pg-minmember-negative"),
        pytest.param({"kind": "PriorityClass", "metadata": {"name": "pc"}}, "integer value", id="pc-no-value"),
        pytest.param({"kind": "Queue", "metadata": {"name": "q"}, "spec": {"capability": {"cpu": "x"}}}, "Queue q",
                     id="queue-bad-quantity"),
        pytest.param({"kind": "PyTorchJob", "metadata": {"name": "j"}}, "without spec", id="job-no-spec"),
        pytest.param({"kind": "Pod"}, "metadata.name", id="no-metadata"),
    ],
)
def test_skipped_with_warning(obj: dict[str, Any], fragment: str) -> None:
    snap, warnings = parse_objects([node("ok"), obj])
    assert len(snap.nodes) == 1
    assert len(warnings) == 1 and fragment in warnings[0] and warnings[0].startswith("item 1:")


def test_parse_objects_sorts_kinds() -> None:
    ns = {"kind": "Namespace", "metadata": {"name": "team", "annotations": {keys.NAMESPACE_QUEUE: "vision"}}}
    snap, warnings = parse_objects([node("n"), pod("ns", "p"), podgroup("ns", "g", 1), queue("q"),
                                    priority_class("pc", 7), pytorchjob("ns", "j", workers=1), ns,
                                    {"kind": "ConfigMap", "metadata": {"name": "x"}}])
    assert (len(snap.nodes), len(snap.pods), len(snap.podgroups), len(snap.queues), len(snap.jobs)) == (1, 1, 1, 1, 1)
    assert snap.priority_classes == {"pc": 7} and snap.namespace_queues == {"team": "vision"}
    assert len(warnings) == 1 and "not used by the planner" in warnings[0]


def test_parse_errors_are_value_errors() -> None:
    with pytest.raises(ParseError):
        parse_pod({"metadata": {"name": "p"}, "spec": {"containers": "x"}})
    with pytest.raises(ValueError):
        parse_job({"metadata": {"name": "j"}, "spec": {"runPolicy": "x"}})


def test_duplicates_count_once() -> None:
    objs = [node("n"), pod("ns", "p", node_name="n"), podgroup("ns", "g", 1)]
    snap, warnings = parse_objects([*objs, *objs])
    assert (len(snap.nodes), len(snap.pods), len(snap.podgroups)) == (1, 1, 1) and warnings == []


def test_differing_duplicate_last_wins_with_warning() -> None:
    snap, warnings = parse_objects([pod("ns", "p"), pod("ns", "p", node_name="n")])
    assert len(snap.pods) == 1 and snap.pods[0].node_name == "n"
    assert len(warnings) == 1 and "ns/p" in warnings[0]


def test_same_name_other_namespace_or_kind_is_not_a_duplicate() -> None:
    snap, _ = parse_objects([pod("a", "p"), pod("b", "p"), podgroup("a", "p", 1)])
    assert len(snap.pods) == 2 and len(snap.podgroups) == 1


# ---------------------------------------------------------------------- the job contract (issue 20)
def test_contract_annotations_on_every_view() -> None:
    from elastic_controller.policy.model import job_worker_sizes, newest_checkpoint
    from elastic_controller.policy.worldsizes import UNCONSTRAINED, WorkerSizes

    job_obj = pytorchjob("ns", "j", workers=8, min_r=2, max_r=8)
    job_obj["metadata"]["annotations"] = {keys.WORKER_COUNTS: "2,4,8", keys.LAST_CHECKPOINT_TIME: ts(ago(300))}
    job = parse_job(job_obj)
    assert job.annotations[keys.WORKER_COUNTS] == "2,4,8"
    assert job.worker_sizes == WorkerSizes(counts=(2, 4, 8)) and job.last_checkpoint == ago(300)
    assert job.worker_sizes.allowed(2, 8).shrink_targets(8) == (4, 2)

    pg = parse_podgroup(podgroup("ns", "j", 2, annotations={keys.WORKER_STEP: "2"}))
    assert pg.worker_sizes == WorkerSizes(step=2) and pg.last_checkpoint is None
    assert pg.worker_sizes.allowed(4, 8).grow_targets(4) == (6, 8)
    bad = parse_podgroup(podgroup("ns", "j", 2, annotations={keys.WORKER_STEP: "0"}))
    assert "at least 1" in bad.worker_sizes.problem  # kept, never a ParseError: the group is still planned
    assert parse_podgroup(podgroup("ns", "k", 2)).worker_sizes is UNCONSTRAINED

    newer = parse_pod(pod("ns", "j-worker-3", annotations={keys.LAST_CHECKPOINT_TIME: ts(ago(30))}))
    older = parse_pod(pod("ns", "j-worker-2", annotations={keys.LAST_CHECKPOINT_TIME: ts(ago(600))}))
    unreadable = parse_pod(pod("ns", "j-worker-1", annotations={keys.LAST_CHECKPOINT_TIME: "yesterday"}))
    plain = parse_pod(pod("ns", "j-worker-0"))
    assert (newer.last_checkpoint, unreadable.last_checkpoint, plain.last_checkpoint) == (ago(30), None, None)
    assert newest_checkpoint(job, pg, [older, newer, unreadable, plain]) == ago(30)  # the newest wins
    assert newest_checkpoint(job, pg, [older, plain]) == ago(300)
    assert newest_checkpoint(None, None, [plain]) is None
    assert newest_checkpoint(None, parse_podgroup(podgroup("ns", "j", 2, annotations={
        keys.LAST_CHECKPOINT_TIME: ts(ago(5))})), [older]) == ago(5)

    # The job's own annotations are the source; its PodGroup's copy serves dumps without the job.
    assert job_worker_sizes(job, pg) == WorkerSizes(counts=(2, 4, 8))
    assert job_worker_sizes(None, pg) == WorkerSizes(step=2)
    assert job_worker_sizes(None, None) is UNCONSTRAINED


def test_evict_after_on_pods_and_replace_recomputes() -> None:
    import dataclasses

    v = parse_pod(pod("ns", "p", annotations={keys.EVICT_AFTER: ts(ago(-60)), keys.EVICTED_FOR: "ns/g"}))
    assert v.evict_after == ago(-60)
    cleared = dataclasses.replace(v, annotations={})
    assert cleared.evict_after is None and cleared.last_checkpoint is None
    assert v == dataclasses.replace(v)  # derived fields take no part in equality
