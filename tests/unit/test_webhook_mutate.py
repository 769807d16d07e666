"""The mutating webhook: every emitted patch is applied with jsonpatch to the original pod."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from elastic_controller.policy import keys
from elastic_controller.policy.settings import ElasticConfig, GatingConfig
from tests.harness.legacy import legacy_config, legacy_policy
from tests.harness.webhook_objects import apply, decode_patch, pod, review
from webhook.envelope import BadReviewError
from webhook.mutate import escape
from webhook.review import review_pod

CFG = legacy_config()  # every elastic worker gated (no job admitted whole): what these tests are about
GATE = keys.DEFAULT_GATE


def mutate(obj: dict[str, Any], cfg: ElasticConfig = CFG, **kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(pod after the patch, response)."""
    out = review_pod(review(obj, **kw), cfg).response
    assert out["apiVersion"] == "admission.k8s.io/v1" and out["kind"] == "AdmissionReview"
    assert out["response"]["allowed"] is True
    return apply(obj, out), out["response"]


def ann(p: dict[str, Any]) -> dict[str, str]:
    result: dict[str, str] = p["metadata"].get("annotations") or {}
    return result


def gates(p: dict[str, Any]) -> list[str]:
    return [g["name"] for g in p["spec"].get("schedulingGates") or []]


# (id, pod, role, task-priority, preemptable, gated, min/max annotations)
ROLE_CASES = [
    ("master-0 of a job with a Master", pod(rtype="master", index=0, master_label=True), "master", "1000",
     "false", False, ("2", "4")),
    ("master-0 without job-role label", pod(rtype="master", index=0), "master", "1000", "false", False, ("2", "4")),
    ("worker-0 without Master (job-role=master)", pod(index=0, master_label=True), "master", "1000", "false",
     False, ("2", "4")),
    ("worker-0 with a Master is core", pod(index=0), "core", "500", "false", False, ("2", "4")),
    ("worker-1 inside min is core", pod(index=1), "core", "500", "false", False, ("2", "4")),
    ("worker-2 at min is elastic", pod(index=2), "elastic", "100", "true", True, ("2", "4")),
    ("worker-3 elastic, lower priority", pod(index=3), "elastic", "99", "true", True, ("2", "4")),
    ("non-elastic N", pod(index=3, nnodes="4"), "core", "500", "false", False, ("4", "4")),
    ("non-elastic n:n", pod(index=3, nnodes="4:4"), "core", "500", "false", False, ("4", "4")),
]


@pytest.mark.parametrize(("pod_", "role", "prio", "preempt", "gated", "bounds"),
                         [c[1:] for c in ROLE_CASES], ids=[c[0] for c in ROLE_CASES])
def test_roles_annotations_gate(pod_: dict[str, Any], role: str, prio: str, preempt: str, gated: bool,
                                bounds: tuple[str, str]) -> None:
    after, resp = mutate(pod_)
    a = ann(after)
    assert a[keys.ROLE] == role
    assert a[keys.TASK_PRIORITY] == prio
    assert a[keys.PREEMPTABLE] == preempt
    assert a[keys.GROUP_NAME] == "train"
    assert a[keys.TASK_SPEC] == pod_["metadata"]["labels"]["training.kubeflow.org/replica-type"]
    assert (a[keys.MIN_REPLICAS], a[keys.MAX_REPLICAS]) == bounds
    assert after["spec"]["schedulerName"] == "volcano"
    assert gates(after) == ([GATE] if gated else [])
    assert "warnings" not in resp
    # An elastic job's torchrun gets its own store per round (webhook/mutate.py DISABLE_SHARED_STORE).
    stripped = copy.deepcopy(after)
    container = next(c for c in stripped["spec"]["containers"] if c["name"] == "pytorch")
    env = container["env"]
    elastic = bounds[0] != bounds[1]
    added = [e for e in env if e["name"] in ("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "POD_NAME")]
    assert added == ([{"name": "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "value": "1"},
                      {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
                     if elastic else [])
    env[:] = [e for e in env if e not in added]
    # ... and the job kit's pod info (webhook/podinfo.py), on every pod of an elastic job.
    assert (container.pop("volumeMounts", None), stripped["spec"].pop("volumes", None)) == (
        ([{"name": "volcano-elastic-podinfo", "mountPath": "/etc/podinfo", "readOnly": True}],
         [{"name": "volcano-elastic-podinfo", "downwardAPI": {"items": [
             {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]}}])
        if elastic else (None, None))
    # Nothing else changed.
    del stripped["metadata"]["annotations"]
    del stripped["spec"]["schedulerName"]
    stripped["spec"].pop("schedulingGates", None)
    assert stripped == pod_


def test_patch_escapes_slash_and_tilde_in_keys() -> None:
    p = pod(index=3, annotations={"team.example.com/owner": "ana", "we~ird/key": "x"})
    _, resp = mutate(p)
    paths = [op["path"] for op in decode_patch({"response": resp})]
    assert "/metadata/annotations/volcano-elastic.io~1role" in paths
    assert "/metadata/annotations/scheduling.k8s.io~1group-name" in paths
    assert escape("a~b/c") == "a~0b~1c"
    after, _ = mutate(p)
    assert ann(after)["team.example.com/owner"] == "ana" and ann(after)["we~ird/key"] == "x"


@pytest.mark.parametrize("annotations", [None, {}, {"other": "1"}], ids=["absent", "empty", "others"])
@pytest.mark.parametrize("gate_list", [None, [], ["example.com/quota"]], ids=["no-gates", "empty-gates",
                                                                               "other-gate"])
def test_absent_or_present_annotations_and_gates(annotations: dict[str, str] | None,
                                                 gate_list: list[str] | None) -> None:
    p = pod(index=3, annotations=annotations, gates=gate_list)
    after, _ = mutate(p)
    assert ann(after)[keys.ROLE] == "elastic"
    for k, v in (annotations or {}).items():
        assert ann(after)[k] == v
    assert gates(after) == [*(gate_list or []), GATE]


def test_metadata_annotations_null() -> None:
    p = pod(index=3)
    p["metadata"]["annotations"] = None
    after, _ = mutate(p)
    assert ann(after)[keys.ROLE] == "elastic"


def test_reinvocation_is_idempotent() -> None:
    p = pod(index=3, annotations={"x": "y"}, gates=["other/gate"])
    once, _ = mutate(p)
    twice, resp = mutate(once)
    assert "patch" not in resp
    assert twice == once
    assert gates(twice).count(GATE) == 1


def test_gate_already_present_is_not_added_twice() -> None:
    after, _ = mutate(pod(index=3, gates=[GATE]))
    assert gates(after) == [GATE]


def test_dry_run_gets_the_same_patch() -> None:
    p = pod(index=3)
    assert review_pod(review(p, dry_run=True), CFG).response == review_pod(review(p), CFG).response


def test_user_values_are_never_clobbered() -> None:
    user = {keys.ROLE: "core", keys.PREEMPTABLE: "false", keys.TASK_PRIORITY: "7", keys.GROUP_NAME: "mine"}
    after, _ = mutate(pod(index=3, annotations=user))
    for k, v in user.items():
        assert ann(after)[k] == v
    assert ann(after)[keys.MIN_REPLICAS] == "2"
    out = review_pod(review(pod(index=3, annotations=user)), CFG)
    assert out.fields["kept"][keys.ROLE] == "core"


@pytest.mark.parametrize("scheduler", [None, "", "default-scheduler", "volcano"])
def test_scheduler_name_set_when_unset_or_default(scheduler: str | None) -> None:
    after, resp = mutate(pod(index=1, scheduler=scheduler))
    assert after["spec"]["schedulerName"] == "volcano"
    assert "warnings" not in resp


@pytest.mark.parametrize("index", [0, 1, 3])
def test_explicit_other_scheduler_is_left_alone_with_a_warning(index: int) -> None:
    """A neighbour's pod (another scheduler) joins no gang and gets no gate, whatever its role."""
    before = pod(index=index, scheduler="my-scheduler")
    after, resp = mutate(before)
    assert after == before and "patch" not in resp and resp["allowed"] is True
    assert any("left alone" in w and "my-scheduler" in w for w in resp["warnings"])


@pytest.mark.parametrize("label", ["kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/podset"])
def test_kueue_pods_are_left_alone(label: str) -> None:
    before = pod(index=3)
    before["metadata"]["labels"][label] = "team-a"
    after, resp = mutate(before)
    assert after == before and "patch" not in resp
    assert any("left alone" in w and label in w for w in resp["warnings"])


def test_configured_scheduler_and_gate_name() -> None:
    cfg = ElasticConfig(schedulerName="vc", gating=GatingConfig(gateName="corp.io/hold"), defaults=legacy_policy())
    after, _ = mutate(pod(index=3), cfg)
    assert after["spec"]["schedulerName"] == "vc"
    assert gates(after) == ["corp.io/hold"]


def test_gating_disabled() -> None:
    cfg = dataclasses.replace(CFG, gating=GatingConfig(enabled=False))
    after, _ = mutate(pod(index=3), cfg)
    assert gates(after) == []
    assert ann(after)[keys.ROLE] == "elastic"


@pytest.mark.parametrize("nnodes", [None, "", "lots", "0:2", "4:2", "2:x"],
                         ids=["unset", "empty", "word", "zero-min", "min>max", "bad-max"])
def test_unknown_bounds_no_gate_not_elastic_warning(nnodes: str | None) -> None:
    out = review_pod(review(pod(index=3, nnodes=nnodes)), CFG)
    after = apply(pod(index=3, nnodes=nnodes), out.response)
    assert gates(after) == []
    assert ann(after)[keys.ROLE] == "core"
    assert ann(after)[keys.PREEMPTABLE] == "false"
    assert keys.MIN_REPLICAS not in ann(after)
    assert out.response["response"]["warnings"]
    assert out.notable and "unknown" in out.fields["reason"]


def test_master_with_unknown_bounds_stays_master() -> None:
    after, resp = mutate(pod(rtype="master", nnodes=None))
    assert ann(after)[keys.ROLE] == "master"
    assert resp["warnings"]


def test_pet_nnodes_read_from_pytorch_container_first() -> None:
    p = pod(index=3)
    p["spec"]["containers"][0]["env"] = [{"name": "PET_NNODES", "value": "4"}]
    after, _ = mutate(p)
    assert ann(after)[keys.ROLE] == "elastic"


PASS_THROUGH = [
    ("not a PyTorchJob pod", review(pod(operator=False))),
    ("other operator", review({**pod(), "metadata": {"labels": {"training.kubeflow.org/operator-name": "tfjob"}}})),
    ("no labels", review({"metadata": {"name": "x"}, "spec": {"containers": []}})),
    ("UPDATE", review(pod(index=3), operation="UPDATE", old=pod(index=3))),
    ("DELETE", review(None, operation="DELETE", old=pod(index=3))),
    ("CONNECT", review(None, operation="CONNECT")),
    ("subresource", review(pod(index=3), sub_resource="ephemeralcontainers")),
    ("other kind", review(pod(index=3), kind="Deployment", group="apps")),
]


@pytest.mark.parametrize("doc", [c[1] for c in PASS_THROUGH], ids=[c[0] for c in PASS_THROUGH])
def test_everything_else_is_allowed_without_a_patch(doc: dict[str, Any]) -> None:
    resp = review_pod(doc, CFG).response["response"]
    assert resp == {"uid": doc["request"]["uid"], "allowed": True}


def test_metadata_null_gets_a_whole_metadata() -> None:
    # Not something the API server sends (labels live in metadata), but the patch stays valid.
    p = pod(index=3)
    p["metadata"] = None
    resp = review_pod(review(p), CFG).response["response"]
    assert resp == {"uid": resp["uid"], "allowed": True}


@pytest.mark.parametrize("breakage", [
    lambda p: p["spec"].__setitem__("containers", "nope"),
    lambda p: p["spec"]["containers"][1].__setitem__("env", [1, 2]),
    lambda p: p["spec"].__setitem__("schedulingGates", {"name": "x"}),
    lambda p: p["spec"].__setitem__("schedulerName", 5),
    lambda p: p["metadata"].__setitem__("annotations", ["a"]),
    lambda p: p["metadata"].__setitem__("labels", "x"),
    lambda p: p.__setitem__("spec", None),
], ids=["containers", "env", "gates", "scheduler", "annotations", "labels", "spec"])
def test_malformed_pod_is_a_bad_review(breakage: Any) -> None:
    p = pod(index=3)
    breakage(p)
    with pytest.raises(BadReviewError):
        review_pod(review(p), CFG)


# ------------------------------------------------------------------ what torchrun needs (issue 29)
def _env(p: dict[str, Any], container: str = "pytorch") -> dict[str, str]:
    c = next(c for c in p["spec"]["containers"] if c["name"] == container)
    return {e["name"]: e.get("value", "") for e in c.get("env") or []}


@pytest.mark.parametrize(("nnodes", "want"), [("2:4", "1"), ("4", None), ("4:4", None)])
def test_elastic_pods_get_a_rendezvous_store_per_round(nnodes: str, want: str | None) -> None:
    after, resp = mutate(pod(index=3, nnodes=nnodes))
    assert _env(after).get("TORCH_DISABLE_SHARE_RDZV_TCP_STORE") == want
    assert "env" not in after["spec"]["containers"][0]  # the sidecar is not torchrun
    assert "warnings" not in resp
    again, _ = mutate(after)
    assert again == after  # reinvoked: nothing added twice


def test_a_users_shared_store_setting_is_kept_with_a_warning() -> None:
    p = pod(index=2)
    p["spec"]["containers"][1]["env"].append({"name": "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "value": "0"})
    after, resp = mutate(p)
    assert _env(after)["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "0"
    assert any("TORCH_DISABLE_SHARE_RDZV_TCP_STORE is set to '0' and kept" in w for w in resp["warnings"])


@pytest.mark.parametrize("nnodes", ["2:4", "1"])
def test_the_operators_empty_pet_standalone_becomes_1(nnodes: str) -> None:
    p = pod(index=0, nnodes=nnodes, master_label=True)
    p["spec"]["containers"][1]["env"].insert(0, {"name": "PET_STANDALONE", "value": ""})
    after, _ = mutate(p)
    assert _env(after)["PET_STANDALONE"] == "1"
    assert [e["name"] for e in after["spec"]["containers"][1]["env"]][:3] == \
        ["PET_STANDALONE", "PET_RDZV_ENDPOINT", "PET_NNODES"]  # replaced in place
    again, _ = mutate(after)
    assert again == after
