"""The PodGroup controller against the in-memory API (no cluster)."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_controller.controller import Controller, format_quantity, podgroup_patch
from elastic_controller.kube.errors import ConflictError
from elastic_controller.kube.fake import FakeKube, FakeStore, raise_on
from elastic_controller.kube.resources import PODGROUPS, PYTORCHJOBS, Resource
from tests.harness import builders as b
from tests.harness.controllerworld import make, reasons


def test_creates_the_podgroup_per_contract() -> None:
    kube, ctl, _ = make(b.pytorchjob("ns", "j", workers=6, min_r=2, max_r=6, master=True, gpus=1,
                                     queue="default", priority_class="high"))
    assert ctl.reconcile("ns/j").action == "created"
    pg = kube.get(PODGROUPS, "j", "ns")
    assert pg["spec"] == {"minMember": 3, "minTaskMember": {"master": 1, "worker": 2},
                          "minResources": {"cpu": "12", "memory": "48Gi", "nvidia.com/gpu": "3"},
                          "queue": "default", "priorityClassName": "high"}
    assert pg["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "volcano-elastic"}
    assert pg["metadata"]["ownerReferences"] == [{
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "j", "uid": "uid-job-ns-j",
        "controller": True, "blockOwnerDeletion": True}]


def test_is_idempotent_and_never_puts() -> None:
    kube, ctl, _ = make(b.pytorchjob("ns", "j", workers=4, min_r=2, max_r=4))
    ctl.reconcile("ns/j")
    assert ctl.reconcile("ns/j").action == "unchanged"
    assert [c[0] for c in kube.calls] == ["create"]


def min_raised_after_reconcile() -> tuple[FakeKube, Controller]:
    """Job ns/j (2..4 workers) reconciled once (its PodGroup exists), then its minReplicas raised to 3."""
    kube, ctl, _ = make(b.pytorchjob("ns", "j", workers=4, min_r=2, max_r=4))
    ctl.reconcile("ns/j")
    job = kube.get(PYTORCHJOBS, "j", "ns")
    job["spec"]["elasticPolicy"]["minReplicas"] = 3
    kube.add(PYTORCHJOBS, job)
    return kube, ctl


def test_job_change_merge_patches_only_what_changed() -> None:
    kube, ctl = min_raised_after_reconcile()
    out = ctl.reconcile("ns/j")
    assert out.action == "patched"
    assert kube.calls[-1][0] == "patch-merge"
    pg = kube.get(PODGROUPS, "j", "ns")
    assert pg["spec"]["minMember"] == 3 and pg["spec"]["minTaskMember"] == {"worker": 3}
    assert "queue" not in out.detail


def test_volcano_canonical_quantities_are_not_a_change() -> None:
    kube, ctl, _ = make(b.pytorchjob("ns", "j", workers=4, min_r=2, max_r=4))
    ctl.reconcile("ns/j")
    pg = kube.get(PODGROUPS, "j", "ns")
    pg["spec"]["minResources"] = {"cpu": "8000m", "memory": "32768Mi", "nvidia.com/gpu": "2"}
    pg["status"] = {"phase": "Running"}
    kube.add(PODGROUPS, pg)
    assert ctl.reconcile("ns/j").action == "unchanged"


def test_removed_priority_class_and_task_keys_are_nulled_in_the_patch() -> None:
    current = {"metadata": {"name": "j", "labels": {"app.kubernetes.io/managed-by": "volcano-elastic"}},
               "spec": {"minMember": 3, "minTaskMember": {"master": 1, "worker": 2}, "queue": "q",
                        "priorityClassName": "high"}}
    want = {"metadata": {"name": "j"}, "spec": {"minMember": 2, "minTaskMember": {"worker": 2}, "queue": "q"}}
    patch = podgroup_patch(current, want)
    assert patch == {"spec": {"minMember": 2, "minTaskMember": {"worker": 2, "master": None},
                              "priorityClassName": None}}


def test_foreign_podgroup_is_refused_loudly() -> None:
    foreign = b.podgroup("ns", "j", 3)
    foreign["metadata"]["labels"] = {}
    kube, ctl, rec = make(b.pytorchjob("ns", "j", workers=4, min_r=2, max_r=4), foreign)
    assert ctl.reconcile("ns/j").action == "foreign"
    assert reasons(rec) == ["ForeignPodGroup"]
    assert not [c for c in kube.calls if c[1] == "podgroups"]
    ev = kube.of(b_events())[0]
    assert ev["type"] == "Warning" and ev["involvedObject"]["kind"] == "PyTorchJob"


def b_events() -> Resource:
    from elastic_controller.kube.resources import EVENTS
    return EVENTS


@pytest.mark.parametrize(("kw", "needle"), [
    ({"workers": 4, "min_r": 5, "max_r": 4}, "greater than maxReplicas"),
    ({"workers": 8, "min_r": 2, "max_r": 4}, "outside elasticPolicy"),
], ids=["min-above-max", "replicas-out-of-range"])
def test_invalid_jobs_get_a_warning_and_no_podgroup(kw: dict[str, int], needle: str) -> None:
    kube, ctl, rec = make(b.pytorchjob("ns", "j", **kw))
    assert ctl.reconcile("ns/j").action == "invalid"
    assert reasons(rec) == ["InvalidElasticPolicy"]
    assert needle in rec.emitted[0]["message"]
    assert kube.of(PODGROUPS) == []


def test_missing_queue_warns_and_still_creates() -> None:
    kube, ctl, rec = make(b.pytorchjob("ns", "j", workers=4, min_r=2, max_r=4, queue="vision"))
    assert ctl.reconcile("ns/j").action == "created"
    assert reasons(rec) == ["QueueNotFound"]
    assert kube.get(PODGROUPS, "j", "ns")["spec"]["queue"] == "vision"


def test_namespace_annotation_chooses_the_queue() -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace",
          "metadata": {"name": "team", "annotations": {"scheduling.volcano.sh/queue-name": "vision"}}}
    kube, ctl, _ = make(ns, b.queue("vision"), b.pytorchjob("team", "j", workers=4, min_r=2, max_r=4))
    ctl.reconcile("team/j")
    assert kube.get(PODGROUPS, "j", "team")["spec"]["queue"] == "vision"


@pytest.mark.parametrize("state", ["finished", "suspended"])
def test_retired_jobs_lose_their_podgroup_and_gated_pods(state: str) -> None:
    job = b.pytorchjob("ns", "a", workers=4, min_r=2, max_r=4)
    if state == "finished":
        job["status"] = {"conditions": [{"type": "Succeeded", "status": "True"}]}
    else:
        job["spec"]["runPolicy"]["suspend"] = True
    objs = b.elastic_job("ns", "a", min_r=2, max_r=4, nodes=["n1"], running=2)
    kube, ctl, rec = make(job, objs, b.node("n1"))
    assert ctl.reconcile("ns/a").action == "deleted"
    assert kube.of(PODGROUPS) == []
    evicted = sorted(c[3] for c in kube.verbs("evict"))
    assert evicted == ["a-worker-2", "a-worker-3"]  # the gated ones only
    assert not kube.verbs("patch-strategic")  # gates never lifted
    assert "GatedPodsCleanedUp" in reasons(rec)


def test_conflicts_are_retried() -> None:
    kube, ctl = min_raised_after_reconcile()
    kube.faults.append(raise_on("patch-merge", "podgroups", error=ConflictError("conflict", 409), times=2))
    assert ctl.reconcile("ns/j").action == "patched"
    assert len(kube.verbs("patch-merge")) == 3


def test_already_exists_on_create_falls_back_to_patch() -> None:
    kube, ctl, _ = make(b.pytorchjob("ns", "j", workers=4, min_r=2, max_r=4))
    store = ctl.store

    class Blind(FakeStore):
        def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any] | None:
            return None if res is PODGROUPS else super().get(res, name, namespace)

    ctl.store = Blind(kube)
    ctl.reconcile("ns/j")
    pg = kube.get(PODGROUPS, "j", "ns")
    pg["spec"]["minMember"] = 1
    kube.add(PODGROUPS, pg)
    assert ctl.reconcile("ns/j").action == "patched"
    assert kube.get(PODGROUPS, "j", "ns")["spec"]["minMember"] == 2
    ctl.store = store


def test_podgroup_of_an_earlier_job_with_the_same_name_is_replaced() -> None:
    kube, ctl, _ = make(b.pytorchjob("ns", "j", workers=4, min_r=2, max_r=4))
    ctl.reconcile("ns/j")
    job = kube.get(PYTORCHJOBS, "j", "ns")
    job["metadata"]["uid"] = "new-uid"
    kube.add(PYTORCHJOBS, job)
    ctl.reconcile("ns/j")
    assert kube.get(PODGROUPS, "j", "ns")["metadata"]["ownerReferences"][0]["uid"] == "new-uid"


def test_pods_grouped_elsewhere_are_reported() -> None:
    pod = b.job_pod("ns", "j", "worker", 0, nnodes="2:4")
    pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = "j-operator-pg"
    _kube, ctl, rec = make(b.pytorchjob("ns", "j", workers=4, min_r=2, max_r=4), pod)
    ctl.reconcile("ns/j")
    assert "PodsGroupedElsewhere" in reasons(rec)


def test_events_are_deduplicated() -> None:
    kube, ctl, _rec = make(b.pytorchjob("ns", "j", workers=4, min_r=5, max_r=4))
    for _ in range(3):
        ctl.reconcile("ns/j")
    assert len(kube.of(b_events())) == 1


@pytest.mark.parametrize(("name", "value", "text"), [
    ("cpu", 4000, "4"), ("cpu", 1500, "1500m"), ("memory", 16 * 2**30, "16Gi"),
    ("memory", 1000, "1000"), ("nvidia.com/gpu", 3, "3"),
])
def test_format_quantity(name: str, value: int, text: str) -> None:
    assert format_quantity(name, value) == text


def test_work_queue_drives_reconcile() -> None:
    kube, ctl, _ = make(b.pytorchjob("ns", "j", workers=4, min_r=2, max_r=4))
    ctl.on_event(PYTORCHJOBS, "ADDED", kube.get(PYTORCHJOBS, "j", "ns"))
    assert ctl.process_one(0.1) == "ns/j"
    assert kube.of(PODGROUPS)


def _kueue(job: dict[str, Any]) -> dict[str, Any]:
    job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-a-lq"}
    return job


def _multikueue(job: dict[str, Any]) -> dict[str, Any]:
    job["spec"]["runPolicy"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    return job


def _other_scheduler(job: dict[str, Any]) -> dict[str, Any]:
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["schedulerName"] = "kai-scheduler"
    return job


@pytest.mark.parametrize(("neighbour", "needle"), [
    (_kueue, "managed by Kueue (label kueue.x-k8s.io/queue-name=team-a-lq)"),
    (_multikueue, "managed by MultiKueue"),
    (_other_scheduler, "its Worker pods are scheduled by 'kai-scheduler'"),
])
def test_neighbours_jobs_are_left_alone_with_one_warning(neighbour: Any, needle: str) -> None:
    kube, ctl, rec = make(neighbour(b.pytorchjob("ns", "j", workers=4, min_r=2, max_r=4)))
    for _ in range(3):
        out = ctl.reconcile("ns/j")
        assert out.action == "neighbour" and needle in out.detail
    assert [c for c in kube.calls if c[1] != "events"] == [], "nothing but the Event is written"
    assert ("podgroups", "ns", "j") not in kube.objects
    warnings = [e for e in rec.emitted if e["reason"] == "LeftToNeighbour"]
    assert len(warnings) == 1 and warnings[0]["type"] == "Warning" and needle in warnings[0]["message"]
    assert warnings[0]["involvedObject"]["kind"] == "PyTorchJob"


@pytest.mark.parametrize("scheduler", ["", "default-scheduler", "volcano"])
def test_our_own_scheduler_names_are_not_neighbours(scheduler: str) -> None:
    job = b.pytorchjob("ns", "j", workers=4, min_r=2, max_r=4)
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["schedulerName"] = scheduler
    _kube, ctl, rec = make(job)
    assert ctl.reconcile("ns/j").action == "created"
    assert "LeftToNeighbour" not in reasons(rec)


def test_podgroup_with_network_topology_gets_one_warning() -> None:
    pg = b.podgroup("ns", "vcjob-a-1234", 4)
    pg["metadata"]["labels"] = {}
    pg["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    plain = b.podgroup("ns", "vcjob-b-5678", 4)
    kube, ctl, rec = make(pg, plain)
    for _ in range(2):
        assert ctl.reconcile("ns/vcjob-a-1234").action == "gone"
        assert ctl.reconcile("ns/vcjob-b-5678").action == "gone"
    (event,) = [e for e in rec.emitted if e["reason"] == "NetworkTopologyIgnored"]
    assert event["type"] == "Warning" and event["involvedObject"]["name"] == "vcjob-a-1234"
    assert "ignore HyperNode topology" in event["message"]
    assert kube.get(PODGROUPS, "vcjob-a-1234", "ns")["spec"]["networkTopology"]["mode"] == "hard"
