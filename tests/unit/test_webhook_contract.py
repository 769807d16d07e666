"""The validating webhook on the job contract (issue 20): allowed Worker counts and the notice."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from elastic_controller.config import parse_config
from elastic_controller.policy.keys import WORKER_COUNTS, WORKER_STEP
from elastic_controller.policy.settings import ElasticConfig
from tests.harness.webhook_objects import job, review
from webhook.review import review_job
from webhook.validate import DEFAULT_GRACE_SECONDS, validate_job, worker_grace_seconds

CFG = ElasticConfig()


def annotated(obj: dict[str, Any], **annotations: str) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"]["annotations"] = {{"counts": WORKER_COUNTS, "step": WORKER_STEP}.get(k, k): v
                                      for k, v in annotations.items()}
    return obj


def with_grace(obj: dict[str, Any], seconds: int) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["terminationGracePeriodSeconds"] = seconds
    return obj


def answer(obj: dict[str, Any], cfg: ElasticConfig = CFG, **kw: Any) -> dict[str, Any]:
    kw.setdefault("kind", "PyTorchJob")
    kw.setdefault("group", "kubeflow.org")
    resp: dict[str, Any] = review_job(review(obj, **kw), cfg).response["response"]
    return resp


JOB8 = job(workers=8, min_replicas=2, max_replicas=8)

DENIED = [
    ("malformed counts", annotated(JOB8, counts="2,four,8"),
     f"{WORKER_COUNTS} '2,four,8': count 'four' is not a whole number; write the allowed Worker counts "
     "separated by commas, e.g. \"2,4,8\""),
    ("empty counts", annotated(JOB8, counts=""), "is empty"),
    ("zero in counts", annotated(JOB8, counts="0,2,4"), "'0' must be at least 1"),
    ("malformed step", annotated(JOB8, step="2x"), f"{WORKER_STEP} '2x': step '2x' is not a whole number"),
    ("zero step", annotated(JOB8, step="0"), "step '0' must be at least 1"),
    ("count above max", annotated(JOB8, counts="2,4,8,16"),
     "lists 16, outside elasticPolicy [minReplicas=2, maxReplicas=8]"),
    ("count below min", annotated(JOB8, counts="1,2,4,8"), "lists 1, outside"),
    ("counts without min", annotated(JOB8, counts="4,8"),
     "does not include minReplicas (2): the job's gang starts with minReplicas workers"),
    ("both annotations", annotated(JOB8, counts="2,4,8", step="2"), "use one of them"),
    ("min defaulted from max", annotated(job(workers=4, min_replicas=None, max_replicas=4), counts="2,4"),
     "lists 2, outside elasticPolicy [minReplicas=4, maxReplicas=4]"),
]


@pytest.mark.parametrize(("obj", "needle"), [c[1:] for c in DENIED], ids=[c[0] for c in DENIED])
def test_denied_with_a_message(obj: dict[str, Any], needle: str) -> None:
    resp = answer(obj)
    assert resp["allowed"] is False and resp["status"]["code"] == 422
    assert resp["status"]["message"].startswith("PyTorchJob team-a/train: ")
    assert needle in resp["status"]["message"], resp["status"]["message"]


def test_contract_errors_add_to_the_other_denials() -> None:
    resp = answer(annotated(job(workers=8, min_replicas=2, max_replicas=8, restart_policy="Never"), counts="4,8"))
    assert "restartPolicy is Never" in resp["status"]["message"]
    assert "does not include minReplicas" in resp["status"]["message"]


NOTICE = parse_config({"queues": {"research": {"noticeSeconds": 120}}, "namespaceQueues": {"team-a": "research"}})
NOTICE_UNBOUND = parse_config({"queues": {"research": {"noticeSeconds": 120}}})


def in_queue(obj: dict[str, Any], queue: str) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["spec"]["runPolicy"] = {"schedulingPolicy": {"queue": queue}}
    return obj


WARNED = [
    ("counts without max", annotated(JOB8, counts="2,4"), CFG,
     f"{WORKER_COUNTS} never reaches maxReplicas (8): the job grows to at most 4 workers"),
    ("step that misses max", annotated(JOB8, step="4"), CFG, "worker-step 4 from 2 never reaches maxReplicas (8)"),
    ("notice longer than the default grace", JOB8, NOTICE,
     "queue 'research' gives evicted workers a 120s notice (volcano-elastic.io/evict-after) but their "
     f"terminationGracePeriodSeconds is {DEFAULT_GRACE_SECONDS}"),
    ("notice longer than the grace", with_grace(JOB8, 60), NOTICE, "terminationGracePeriodSeconds is 60"),
    ("notice of the job's own queue", in_queue(JOB8, "research"), parse_config(
        {"queues": {"research": {"noticeSeconds": 45}}}), "a 45s notice"),
    ("notice from defaults", JOB8, parse_config({"defaults": {"noticeSeconds": 31}}), "queue 'default'"),
    ("job of 4 under notice when none starts whole", job(workers=4, min_replicas=2, max_replicas=4),
     parse_config({"defaults": {"wholeGangUpTo": 0}, "queues": {"research": {"noticeSeconds": 120}},
                   "namespaceQueues": {"team-a": "research"}}), "a 120s notice"),
]


@pytest.mark.parametrize(("obj", "cfg", "needle"), [c[1:] for c in WARNED], ids=[c[0] for c in WARNED])
def test_allowed_with_warnings(obj: dict[str, Any], cfg: ElasticConfig, needle: str) -> None:
    resp = answer(obj, cfg)
    assert resp["allowed"] is True
    assert any(needle in w for w in resp["warnings"]), resp["warnings"]
    assert all(len(w) < 256 for w in resp["warnings"])  # the API server truncates longer ones


CLEAN = [
    ("counts", annotated(JOB8, counts="2,4,8"), CFG),
    ("counts with spaces and out of order", annotated(JOB8, counts=" 8, 2,4"), CFG),
    ("step reaching max", annotated(JOB8, step="2"), CFG),
    ("step 1", annotated(JOB8, step="1"), CFG),
    ("non-elastic job with its one count", annotated(job(elastic=False), counts="4"), CFG),
    ("grace as long as the notice", with_grace(JOB8, 120), NOTICE),
    ("grace longer than the notice", with_grace(JOB8, 600), NOTICE),
    # (an unbound namespace: in a bound one the namespace's queue is the job's, issue 36 T9)
    ("notice in another queue", in_queue(JOB8, "batch"), NOTICE_UNBOUND),
    ("non-elastic job under notice", job(elastic=False), NOTICE),
    # the built-in notice (60 s) is longer than the default grace (30 s), and warns about nothing
    ("the default notice", JOB8, CFG),
    ("the default notice set by the admin", JOB8, parse_config({"defaults": {"noticeSeconds": 60}})),
    # a job admitted whole (wholeGangUpTo, default 4) is never a victim
    ("job admitted whole under notice", job(workers=4, min_replicas=2, max_replicas=4), NOTICE),
    ("other annotations", annotated(JOB8, **{"volcano-elastic.io/last-checkpoint-time": "not a time"}), CFG),
]


@pytest.mark.parametrize(("obj", "cfg"), [c[1:] for c in CLEAN], ids=[c[0] for c in CLEAN])
def test_clean_jobs_pass_silently(obj: dict[str, Any], cfg: ElasticConfig) -> None:
    assert answer(obj, cfg) == {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": True}


def test_update_that_changes_only_the_contract_is_validated() -> None:
    good = annotated(JOB8, counts="2,4,8")
    assert answer(annotated(JOB8, counts="4,8"), operation="UPDATE", old=good)["allowed"] is False
    assert answer(annotated(JOB8, step="3,"), operation="UPDATE", old=JOB8)["allowed"] is False
    # the training code recording a checkpoint on the job is a metadata-only update: not reviewed
    checkpointed = annotated(JOB8, counts="2,4,8", **{"volcano-elastic.io/last-checkpoint-time": "x"})
    assert answer(checkpointed, operation="UPDATE", old=good) == {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": True}
    # dropping the contract is fine
    assert answer(JOB8, operation="UPDATE", old=good)["allowed"] is True


@pytest.mark.parametrize(("value", "want"), [(None, DEFAULT_GRACE_SECONDS), (0, 0), (90, 90), (-1, 30),
                                             ("60", 30), (True, 30)])
def test_worker_grace_seconds(value: Any, want: int) -> None:
    obj = copy.deepcopy(JOB8)
    if value is not None:
        obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["terminationGracePeriodSeconds"] = value
    assert worker_grace_seconds(obj) == want
    assert worker_grace_seconds({"spec": {"pytorchReplicaSpecs": ["Worker"]}}) == DEFAULT_GRACE_SECONDS


def test_verdict_lists_contract_findings_once() -> None:
    verdict = validate_job(annotated(JOB8, counts="2,4"), NOTICE)
    assert verdict.allowed and len(verdict.warnings) == 2
