"""Issue 36, T8-T11: what a job's owner writes that would move or grow it at others' expense is
refused by the validating webhook (CREATE and UPDATE), and the pod webhook reads the PET_NNODES
torchrun gets (the last value)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from elastic_controller.policy import keys
from elastic_controller.policy.settings import ElasticConfig
from tests.harness.webhook_objects import apply, job, pod, review
from webhook.review import review_job, review_pod

CFG = ElasticConfig(namespaceQueues={"team-a": "vision"})


def sched(obj: dict[str, Any], **fields: Any) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["spec"].setdefault("runPolicy", {}).setdefault("schedulingPolicy", {}).update(fields)
    return obj


def running(obj: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["status"] = {"startTime": "2026-01-01T00:00:00Z",
                     "conditions": [{"type": "Running", "status": "True"}]}
    return obj


def verdict(obj: dict[str, Any], old: dict[str, Any] | None = None, cfg: ElasticConfig = CFG) -> tuple[bool, str]:
    doc = review(obj, operation="UPDATE" if old is not None else "CREATE", kind="PyTorchJob",
                 group="kubeflow.org", old=old)
    inner = review_job(doc, cfg).response["response"]
    return inner["allowed"], (inner.get("status") or {}).get("message", "")


def grown(obj: dict[str, Any], min_r: int) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["spec"]["elasticPolicy"]["minReplicas"] = min_r
    return obj


BASE = job(workers=8, min_replicas=2, max_replicas=8)


# -- T8: priority class ---------------------------------------------------------------------------

@pytest.mark.parametrize("pc", ["system-cluster-critical", "system-node-critical"])
def test_a_system_priority_class_is_refused(pc: str) -> None:
    ok, why = verdict(sched(BASE, priorityClass=pc))
    assert not ok and "reserved for the cluster" in why
    ok, why = verdict(running(sched(BASE, priorityClass=pc)), old=running(BASE))
    assert not ok and pc in why


def test_the_priority_class_of_a_started_job_cannot_change() -> None:
    ok, why = verdict(running(sched(BASE, priorityClass="high")), old=running(sched(BASE, priorityClass="low")))
    assert not ok and "cannot change on a started job" in why
    assert verdict(sched(BASE, priorityClass="high"))[0]  # chosen at creation: fine
    assert verdict(sched(BASE, priorityClass="high"), old=sched(BASE, priorityClass="low"))[0]  # not started yet


# -- T9: queue ------------------------------------------------------------------------------------

def test_a_queue_other_than_the_namespaces_is_refused() -> None:
    ok, why = verdict(sched(BASE, queue="speech"))
    assert not ok and "namespace team-a uses queue 'vision'" in why
    assert verdict(sched(BASE, queue="vision"))[0]
    assert verdict(BASE)[0]
    assert verdict(sched(BASE, queue="speech"), cfg=ElasticConfig())[0]  # an unbound namespace chooses


def test_the_queue_of_a_started_job_cannot_change() -> None:
    cfg = ElasticConfig()
    ok, why = verdict(running(sched(BASE, queue="b")), old=running(sched(BASE, queue="a")), cfg=cfg)
    assert not ok and "queue cannot change on a started job" in why


# -- T10: minReplicas -----------------------------------------------------------------------------

def test_raising_min_replicas_on_a_started_job_is_refused() -> None:
    ok, why = verdict(running(grown(BASE, 8)), old=running(BASE))
    assert not ok and "minReplicas cannot be raised on a started job (2 -> 8)" in why
    assert verdict(running(grown(BASE, 1)), old=running(BASE))[0]  # lowering gives more room: fine
    assert verdict(grown(BASE, 8), old=BASE)[0]  # not started: admitted with the new terms


def test_a_status_or_metadata_only_update_passes() -> None:
    old = running(sched(BASE, priorityClass="system-cluster-critical"))  # admitted before this rule
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"x": "y"}
    assert verdict(new, old=old)[0]


# -- T11: PET_NNODES ------------------------------------------------------------------------------

def with_env(obj: dict[str, Any], *values: str) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    container = obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": keys.PET_NNODES, "value": v} for v in values]
    return obj


def test_pet_nnodes_in_an_elastic_template_is_refused() -> None:
    ok, why = verdict(with_env(BASE, "8"))
    assert not ok and "Worker/pytorch: PET_NNODES is set in the template of an elastic job" in why
    ok, why = verdict(with_env(job(elastic=False, workers=2), "2", "2"))
    assert not ok and "PET_NNODES is set 2 times" in why
    assert verdict(with_env(job(elastic=False, workers=2), "2"))[0]  # a rigid job's own value, once


def test_the_pod_webhook_reads_the_value_torchrun_gets() -> None:
    # The template's "8" first, the operator's "2:8" appended: the process gets the last one.
    p = pod(index=3, nnodes="8")
    p["spec"]["containers"][1]["env"].append({"name": keys.PET_NNODES, "value": "2:8"})
    out = apply(p, review_pod(review(p), ElasticConfig()).response)
    assert out["metadata"]["annotations"][keys.ROLE] == "elastic"
    assert keys.DEFAULT_GATE in [g["name"] for g in out["spec"].get("schedulingGates") or []]
