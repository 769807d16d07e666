"""The validating webhook for PyTorchJobs: denials a researcher can act on, and warnings."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_controller.policy.settings import ElasticConfig
from tests.harness.validator_parity import PARITY, _worker
from tests.harness.webhook_objects import job, review
from webhook.review import review_job
from webhook.validate import MIN_MAX_RESTARTS

CFG = ElasticConfig()


def answer(obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
    kw.setdefault("kind", "PyTorchJob")
    kw.setdefault("group", "kubeflow.org")
    resp: dict[str, Any] = review_job(review(obj, **kw), CFG).response["response"]
    assert "patch" not in resp
    return resp


def with_command(command: list[str], args: list[str] | None = None) -> dict[str, Any]:
    obj = job()
    container = obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    container["command"] = command
    if args is not None:
        container["args"] = args
    return obj


DENIED = [
    ("min > max", job(workers=4, min_replicas=5, max_replicas=4), "minReplicas (5) is greater than maxReplicas"),
    ("min < 1", job(workers=4, min_replicas=0, max_replicas=4), "must be at least 1"),
    ("replicas above max", job(workers=6, min_replicas=2, max_replicas=4), "Worker.replicas (6) is outside"),
    ("replicas below min", job(workers=1, min_replicas=2, max_replicas=4), "Worker.replicas (1) is outside"),
    ("elasticPolicy without Worker", job(workers=None, master=True), "no Worker replica spec"),
    ("restartPolicy Never on elastic workers", job(restart_policy="Never"), "restartPolicy is Never"),
    ("two masters", {**job(master=True), "spec": {**job(master=True)["spec"], "pytorchReplicaSpecs": {
        **job(master=True)["spec"]["pytorchReplicaSpecs"],
        "Master": {"replicas": 2, "template": {"spec": {"containers": []}}}}}}, "exactly one master"),
    ("bad quantity", {**job(), "spec": {**job()["spec"], "pytorchReplicaSpecs": {"Worker": {
        "replicas": 4, "template": {"spec": {"containers": [{"name": "pytorch", "image": "pytorch",
                                                             "resources": {"limits": {"cpu": "lots"}}}]}}}}}},
     "Worker: not a quantity: 'lots'"),
    ("unreadable spec", {**job(), "spec": {"pytorchReplicaSpecs": ["Worker"]}}, "malformed"),
    ("standalone on an elastic job", {**job(), "spec": {**job()["spec"], "elasticPolicy": {
        **job()["spec"]["elasticPolicy"], "standalone": True}}}, "never form one job"),
]


@pytest.mark.parametrize(("obj", "needle"), [c[1:] for c in DENIED], ids=[c[0] for c in DENIED])
def test_denied_with_a_message(obj: dict[str, Any], needle: str) -> None:
    resp = answer(obj)
    assert resp["allowed"] is False
    assert resp["status"]["code"] == 422
    assert resp["status"]["message"].startswith("PyTorchJob team-a/train: ")
    assert needle in resp["status"]["message"]


WARNED = [
    ("replicas below max", job(workers=3), ["never grows beyond 3", "set replicas to 4"]),
    ("metrics", job(metrics=True), ["elasticPolicy.metrics"]),
    ("master with elasticPolicy", job(master=True), ["Master replica"]),
    ("maxRestarts unset", job(max_restarts=None), ["maxRestarts is unset", "the first eviction ends the job"]),
    ("maxRestarts 0", job(max_restarts=0), ["maxRestarts is 0", "the first eviction ends the job"]),
    ("a SIGTERM trap that exits 0",
     with_command(["sh", "-c", "trap 'echo bye; exit 0' TERM; torchrun train.py & wait"]),
     ["traps SIGTERM and exits 0", "marks the whole elastic job Succeeded", "exit 143"]),
    ("a bare exit on SIGTERM", with_command(["bash", "-c"], ["trap \"kill $PID; exit\" SIGTERM INT; python t.py"]),
     ["traps SIGTERM and exits 0"]),
    ("maxRestarts low", job(max_restarts=MIN_MAX_RESTARTS - 1),
     [f"maxRestarts is {MIN_MAX_RESTARTS - 1}", f"fails at scale-down number {MIN_MAX_RESTARTS}",
      "every surviving worker"]),
]


@pytest.mark.parametrize(("obj", "needles"), [c[1:] for c in WARNED], ids=[c[0] for c in WARNED])
def test_allowed_with_warnings(obj: dict[str, Any], needles: list[str]) -> None:
    resp = answer(obj)
    assert resp["allowed"] is True
    text = " | ".join(resp["warnings"])
    for needle in needles:
        assert needle in text
    assert all(len(w) < 256 for w in resp["warnings"])  # the API server truncates longer ones


CLEAN = [
    ("elastic job", job()),
    ("only max set (min = max)", job(workers=4, min_replicas=None, max_replicas=4, max_restarts=None)),
    ("only min set", job(workers=2, min_replicas=2, max_replicas=None, max_restarts=None)),
    ("neither set", job(workers=3, min_replicas=None, max_replicas=None, max_restarts=None)),
    ("non-elastic job", job(elastic=False)),
    ("non-elastic job with Never", job(elastic=False, restart_policy="Never")),
    ("min == max with Never", job(workers=3, min_replicas=3, max_replicas=3, restart_policy="Never")),
    ("maxRestarts at threshold", job(max_restarts=MIN_MAX_RESTARTS)),
    ("a SIGTERM trap that exits 143", with_command(["sh", "-c", "trap 'kill $P; exit 143' TERM; torchrun t.py"])),
    ("a trap on another signal", with_command(["sh", "-c", "trap 'exit 0' HUP; torchrun t.py"])),
    ("torchrun itself", with_command(["torchrun", "--nnodes=2:4", "train.py"])),
    ("standalone on a job of fixed size", {**job(elastic=False), "spec": {
        **job(elastic=False)["spec"], "elasticPolicy": {"standalone": True}}}),
]


@pytest.mark.parametrize("obj", [c[1] for c in CLEAN], ids=[c[0] for c in CLEAN])
def test_clean_jobs_pass_silently(obj: dict[str, Any]) -> None:
    assert answer(obj) == {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": True}


def test_generate_name_on_create() -> None:
    obj = job(min_replicas=5)
    obj["metadata"] = {"generateName": "train-", "namespace": "team-a"}
    resp = answer(obj)
    assert resp["allowed"] is False and "train-" in resp["status"]["message"]


def test_update_that_keeps_the_spec_is_allowed() -> None:
    bad = job(restart_policy="Never")
    labelled = {**bad, "metadata": {**bad["metadata"], "labels": {"x": "y"}}}
    assert answer(labelled, operation="UPDATE", old=bad)["allowed"] is True


def test_update_that_changes_the_spec_is_validated() -> None:
    assert answer(job(workers=6), operation="UPDATE", old=job())["allowed"] is False


def test_deleting_job_is_allowed() -> None:
    bad = job(restart_policy="Never")
    bad["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert answer(bad, operation="UPDATE", old=job())["allowed"] is True


@pytest.mark.parametrize("operation", ["DELETE", "CONNECT"])
def test_other_operations_allowed(operation: str) -> None:
    assert answer(None, operation=operation, old=job())["allowed"] is True


def test_status_subresource_and_other_kinds_allowed() -> None:
    assert answer(job(restart_policy="Never"), operation="UPDATE", old=job(), sub_resource="status")["allowed"]
    assert answer(job(restart_policy="Never"), kind="TFJob")["allowed"]


@pytest.mark.parametrize(("obj", "operator", "needles"), [c[1:] for c in PARITY], ids=[c[0] for c in PARITY])
def test_parity_with_the_training_operator_webhook(obj: dict[str, Any], operator: str, needles: list[str]) -> None:
    resp = answer(obj)
    if operator == "deny":
        assert resp["allowed"] is False, resp
        text = resp["status"]["message"]
        assert text.startswith(f"PyTorchJob team-a/{obj['metadata']['name']}: ")
        assert "minReplicas is 0" not in text, "a Worker.replicas problem must not blame minReplicas"
    else:
        assert resp["allowed"] is True, resp
        text = " | ".join(resp.get("warnings") or [])
        if operator == "admit":
            assert not text, text
    for needle in needles:
        assert needle in text, (needle, text)


# ---------------------------------------------------------------------- neighbours
def _kueue_job(template_label: bool, **kw: Any) -> dict[str, Any]:
    obj = job(**kw)
    obj["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-lq"}
    if template_label:
        _worker(obj)["template"]["metadata"] = {"labels": {"kueue.x-k8s.io/queue-name": "team-lq"}}
    return obj


def test_neighbours_jobs_skip_our_elastic_rules_but_not_the_operators() -> None:
    """A job Kueue or another scheduler owns is not ours: our elastic rules do not apply to it (it
    is admitted with a note), what the training operator rejects is still rejected."""
    never = _kueue_job(True, restart_policy="Never", min_replicas=5, max_replicas=4)
    resp = answer(never)
    assert resp["allowed"] is True
    assert any("leaves this job alone because it is managed by Kueue" in w for w in resp["warnings"])
    assert not any("add the label" in w for w in resp["warnings"])
    other = job(restart_policy="Never")
    _worker(other)["template"]["spec"]["schedulerName"] = "kai-scheduler"
    resp = answer(other)
    assert resp["allowed"] is True and any("scheduled by 'kai-scheduler'" in w for w in resp["warnings"])
    broken = _kueue_job(True)
    _worker(broken)["replicas"] = 0
    resp = answer(broken)
    assert resp["allowed"] is False and "Worker.replicas is 0" in resp["status"]["message"]


def test_kueue_job_without_the_label_in_its_templates_is_told_to_add_it() -> None:
    resp = answer(_kueue_job(False))
    assert resp["allowed"] is True
    assert any("add the label kueue.x-k8s.io/queue-name to the pod template of Worker" in w for w in resp["warnings"])
    assert all(len(w) < 256 for w in resp["warnings"])
