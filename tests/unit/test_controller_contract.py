"""The controller copies the job contract (worker-counts / worker-step) to the job's PodGroup."""

from __future__ import annotations

from typing import Any

from elastic_controller.controller import podgroup_patch
from elastic_controller.kube.resources import PODGROUPS, PYTORCHJOBS
from elastic_controller.policy import keys
from elastic_controller.policy.parse import parse_job, parse_podgroup
from elastic_controller.policy.podgroups import plan_podgroup
from elastic_controller.policy.settings import ElasticConfig
from elastic_controller.policy.worldsizes import WorkerSizes
from tests.harness import builders as b
from tests.harness.controllerworld import make, reasons


def job(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    obj = b.pytorchjob("ns", "j", workers=8, min_r=2, max_r=8)
    if annotations:
        obj["metadata"]["annotations"] = dict(annotations)
    return obj


COUNTS = "volcano-elastic.io/worker-counts"
STEP = "volcano-elastic.io/worker-step"


def set_annotations(kube: Any, ann: dict[str, str] | None) -> None:
    obj = kube.get(PYTORCHJOBS, "j", "ns")
    obj["metadata"]["annotations"] = ann or {}
    kube.add(PYTORCHJOBS, obj)


def pg_annotations(kube: Any) -> dict[str, str]:
    return dict(kube.get(PODGROUPS, "j", "ns")["metadata"].get("annotations") or {})


def test_plan_carries_only_the_contract_keys() -> None:
    obj = job()
    obj["metadata"]["annotations"] = {COUNTS: "2,4,8", keys.LAST_CHECKPOINT_TIME: "2026-01-01T00:00:00Z",
                                      "other.io/x": "y"}
    plan = plan_podgroup(parse_job(obj), ElasticConfig())
    assert plan.annotations == {COUNTS: "2,4,8"} and plan.contract_problems == ()
    assert plan_podgroup(parse_job(job()), ElasticConfig()).annotations == {}
    obj["metadata"]["annotations"] = {STEP: "0"}
    assert "at least 1" in plan_podgroup(parse_job(obj), ElasticConfig()).contract_problems[0]


def test_created_with_the_contract_and_the_planner_reads_it_back() -> None:
    obj = job()
    obj["metadata"]["annotations"] = {COUNTS: "2,4,8", "other.io/x": "y"}
    kube, ctl, rec = make(obj)
    assert ctl.reconcile("ns/j").action == "created"
    assert pg_annotations(kube) == {COUNTS: "2,4,8"}  # only the contract is copied
    view = parse_podgroup(kube.get(PODGROUPS, "j", "ns"))
    assert view.worker_sizes == WorkerSizes(counts=(2, 4, 8))
    assert view.worker_sizes.allowed(2, 8).shrink_targets(8) == (4, 2)
    assert ctl.reconcile("ns/j").action == "unchanged"
    assert reasons(rec) == []


def test_changed_switched_and_dropped_contract_is_patched_and_agent_annotations_survive() -> None:
    kube, ctl, _ = make(job({COUNTS: "2,4,8"}))
    ctl.reconcile("ns/j")
    # the agent's own annotations on the group are not ours to touch here
    pg = kube.get(PODGROUPS, "j", "ns")
    pg["metadata"]["annotations"][keys.LAST_SCALE_TIME] = "2026-01-01T00:00:00Z"
    kube.add(PODGROUPS, pg)

    set_annotations(kube, {COUNTS: "2,8"})
    out = ctl.reconcile("ns/j")
    assert out.action == "patched" and kube.calls[-1][0] == "patch-merge"
    assert pg_annotations(kube) == {COUNTS: "2,8", keys.LAST_SCALE_TIME: "2026-01-01T00:00:00Z"}

    set_annotations(kube, {STEP: "2"})  # counts -> step: one patch sets one and removes the other
    ctl.reconcile("ns/j")
    assert pg_annotations(kube) == {STEP: "2", keys.LAST_SCALE_TIME: "2026-01-01T00:00:00Z"}

    set_annotations(kube, None)  # the job dropped its contract
    assert ctl.reconcile("ns/j").action == "patched"
    assert pg_annotations(kube) == {keys.LAST_SCALE_TIME: "2026-01-01T00:00:00Z"}
    assert ctl.reconcile("ns/j").action == "unchanged"


def test_patch_is_only_the_annotations_that_differ() -> None:
    base = {"metadata": {"name": "j", "labels": {"app.kubernetes.io/managed-by": "volcano-elastic"},
                         "annotations": {COUNTS: "2,4", keys.LAST_DECISION: "x"}},
            "spec": {"minMember": 2, "queue": "q"}}
    want = {"metadata": {"name": "j", "annotations": {STEP: "2"}}, "spec": {"minMember": 2, "queue": "q"}}
    assert podgroup_patch(base, want) == {"metadata": {"annotations": {COUNTS: None, STEP: "2"}}}
    same = {"metadata": {"name": "j", "annotations": {COUNTS: "2,4"}}, "spec": {"minMember": 2, "queue": "q"}}
    assert podgroup_patch(base, same) is None


def test_invalid_contract_warns_and_is_still_copied() -> None:
    kube, ctl, rec = make(job({COUNTS: "4,8"}))  # admitted before the webhook knew the contract
    assert ctl.reconcile("ns/j").action == "created"  # the gang must still be scheduled
    assert pg_annotations(kube) == {COUNTS: "4,8"}
    assert reasons(rec) == ["InvalidJobContract"]
    assert "does not include minReplicas (2)" in rec.emitted[0]["message"]
    assert "only the listed counts" in rec.emitted[0]["message"]
    set_annotations(kube, {STEP: "two"})
    ctl.reconcile("ns/j")
    assert rec.emitted[-1]["reason"] == "InvalidJobContract"
    assert "neither shrinks nor grows this job" in rec.emitted[-1]["message"]
    assert parse_podgroup(kube.get(PODGROUPS, "j", "ns")).worker_sizes.allowed(2, 8).grow_targets(2) == ()
