"""The mutating webhook gives every pod of an elastic job what the job kit needs (webhook/podinfo.py):
the downward-API file of the pod's annotations where the kit reads it, and POD_NAME. It keeps what the
user wrote, never reuses a name or path the user took, and adds nothing the second time."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import volcano_elastic_job.checkpoint as kit_checkpoint
import volcano_elastic_job.podinfo as kit_podinfo

from elastic_controller.policy.settings import ElasticConfig
from tests.harness.webhook_objects import apply, decode_patch, pod, review
from webhook import podinfo
from webhook.envelope import BadReviewError
from webhook.review import review_pod

CFG = ElasticConfig()
OURS = {"name": "volcano-elastic-podinfo", "downwardAPI": {"items": [
    {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]}}
POD_NAME = {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}


def mutate(obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    out = review_pod(review(obj), CFG).response
    assert out["response"]["allowed"] is True
    return apply(obj, out), out["response"]


def pytorch(p: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = next(c for c in p["spec"]["containers"] if c["name"] == "pytorch")
    return container


def env(p: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in pytorch(p).get("env") or []}


def annotations_file(p: dict[str, Any]) -> str | None:
    """Where the kit in this pod's pytorch container finds a live annotations file, or None: the
    kit's rule (VOLCANO_ELASTIC_PODINFO, else /etc/podinfo/annotations) against the pod's mounts."""
    var = env(p).get("VOLCANO_ELASTIC_PODINFO")
    path = var["value"] if var else kit_podinfo.ANNOTATIONS_FILE
    volumes = {v["name"]: v for v in p["spec"].get("volumes") or []}
    for m in pytorch(p).get("volumeMounts") or []:
        if m.get("subPath") or not path.startswith(m["mountPath"].rstrip("/") + "/"):
            continue
        items = (volumes[m["name"]].get("downwardAPI") or {}).get("items") or []
        rel = path[len(m["mountPath"].rstrip("/")) + 1:]
        if any(i["path"] == rel and i["fieldRef"]["fieldPath"] == "metadata.annotations" for i in items):
            return str(path)
    return None


def test_the_webhooks_names_are_the_kits() -> None:
    assert f"{podinfo.MOUNT_DIR}/{podinfo.FILE}" == kit_podinfo.ANNOTATIONS_FILE
    assert podinfo.PODINFO_ENV == kit_podinfo.ANNOTATIONS_ENV
    assert kit_checkpoint.pod_name.__doc__ and podinfo.POD_NAME_ENV in kit_checkpoint.pod_name.__doc__


@pytest.mark.parametrize("index", [0, 1, 2, 3])  # worker-0 (never evicted), core, elastic, elastic
def test_every_pod_of_an_elastic_job_gets_the_pod_info_and_its_name(index: int) -> None:
    after, resp = mutate(pod(index=index))
    assert annotations_file(after) == "/etc/podinfo/annotations"
    assert after["spec"]["volumes"] == [OURS]
    assert env(after)["POD_NAME"] == POD_NAME
    assert "VOLCANO_ELASTIC_PODINFO" not in env(after)  # the kit's default path: nothing to say
    assert "warnings" not in resp


@pytest.mark.parametrize("kw", [{"nnodes": "4"}, {"nnodes": "4:4"}, {"nnodes": None}, {"operator": False}],
                         ids=["static N", "static n:n", "bounds unknown", "not a PyTorchJob pod"])
def test_other_pods_are_left_alone(kw: dict[str, Any]) -> None:
    obj = pod(index=2, **kw)
    after, _ = mutate(obj)
    assert "volumes" not in after["spec"] and "volumeMounts" not in pytorch(after)
    assert "POD_NAME" not in env(after)


def test_a_reinvoked_webhook_adds_nothing() -> None:
    once, _ = mutate(pod(index=2))
    out = review_pod(review(copy.deepcopy(once)), CFG).response["response"]
    assert "patch" not in out or decode_patch(out) == []


def test_the_old_yaml_a_researcher_wrote_is_used_as_it_is() -> None:
    """The job YAML of earlier releases (docs/checkpointing.md): its own volume, mount and POD_NAME."""
    obj = pod(index=2)
    c = pytorch(obj)
    c["env"].append(copy.deepcopy(POD_NAME))
    c["volumeMounts"] = [{"name": "podinfo", "mountPath": "/etc/podinfo", "readOnly": True}]
    obj["spec"]["volumes"] = [{**OURS, "name": "podinfo"}]
    after, resp = mutate(obj)
    assert after["spec"]["volumes"] == obj["spec"]["volumes"]
    assert pytorch(after)["volumeMounts"] == c["volumeMounts"]
    assert [e for e in pytorch(after)["env"] if e["name"] == "POD_NAME"] == [POD_NAME]
    assert annotations_file(after) == "/etc/podinfo/annotations"
    assert "warnings" not in resp


def test_a_projected_volume_counts() -> None:
    obj = pod(index=2)
    pytorch(obj)["volumeMounts"] = [{"name": "info", "mountPath": "/etc/podinfo"}]
    obj["spec"]["volumes"] = [{"name": "info", "projected": {"sources": [
        {"configMap": {"name": "x"}}, {"downwardAPI": OURS["downwardAPI"]}]}}]
    after, _ = mutate(obj)
    assert after["spec"]["volumes"] == obj["spec"]["volumes"]


def test_a_user_volume_of_our_name_is_not_clobbered() -> None:
    obj = pod(index=2)
    obj["spec"]["volumes"] = [{"name": "volcano-elastic-podinfo", "emptyDir": {}},
                              {"name": "volcano-elastic-podinfo-2", "emptyDir": {}}]
    after, _ = mutate(obj)
    assert after["spec"]["volumes"][:2] == obj["spec"]["volumes"]
    assert after["spec"]["volumes"][2] == {**OURS, "name": "volcano-elastic-podinfo-3"}
    assert pytorch(after)["volumeMounts"] == [
        {"name": "volcano-elastic-podinfo-3", "mountPath": "/etc/podinfo", "readOnly": True}]
    assert annotations_file(after) == "/etc/podinfo/annotations"


@pytest.mark.parametrize("mount_path", ["/etc/podinfo", "/etc/podinfo/extra", "/etc"])
def test_a_user_mount_at_the_kits_path_moves_ours_and_the_env_says_where(mount_path: str) -> None:
    obj = pod(index=2)
    pytorch(obj)["volumeMounts"] = [{"name": "cfg", "mountPath": mount_path}]
    obj["spec"]["volumes"] = [{"name": "cfg", "configMap": {"name": "cfg"}}]
    after, resp = mutate(obj)
    assert pytorch(after)["volumeMounts"][0] == {"name": "cfg", "mountPath": mount_path}
    assert env(after)["VOLCANO_ELASTIC_PODINFO"] == {"name": "VOLCANO_ELASTIC_PODINFO",
                                                       "value": "/var/run/volcano-elastic/podinfo/annotations"}
    assert annotations_file(after) == "/var/run/volcano-elastic/podinfo/annotations"
    assert "warnings" not in resp
    again = review_pod(review(copy.deepcopy(after)), CFG).response["response"]
    assert "patch" not in again or decode_patch(again) == []


def test_a_subpath_mount_is_never_updated_so_ours_is_added_and_the_user_told() -> None:
    obj = pod(index=2)
    pytorch(obj)["volumeMounts"] = [{"name": "podinfo", "mountPath": "/etc/podinfo/annotations",
                                     "subPath": "annotations"}]
    obj["spec"]["volumes"] = [{**OURS, "name": "podinfo"}]
    after, resp = mutate(obj)
    assert annotations_file(after) == "/var/run/volcano-elastic/podinfo/annotations"
    assert any("subPath" in w for w in resp["warnings"])


def test_the_users_own_path_is_kept_and_a_wrong_one_named() -> None:
    obj = pod(index=2)
    pytorch(obj)["env"].append({"name": "VOLCANO_ELASTIC_PODINFO", "value": "/info/annotations"})
    pytorch(obj)["volumeMounts"] = [{"name": "podinfo", "mountPath": "/info"}]
    obj["spec"]["volumes"] = [{**OURS, "name": "podinfo"}]
    after, resp = mutate(obj)
    assert after["spec"]["volumes"] == obj["spec"]["volumes"] and annotations_file(after) == "/info/annotations"
    assert "warnings" not in resp

    wrong = pod(index=2)
    pytorch(wrong)["env"].append({"name": "VOLCANO_ELASTIC_PODINFO", "value": "/nowhere/annotations"})
    after, resp = mutate(wrong)
    assert "volumes" not in after["spec"]  # the user's arrangement: not ours to change ...
    assert env(after)["VOLCANO_ELASTIC_PODINFO"]["value"] == "/nowhere/annotations"
    assert any("VOLCANO_ELASTIC_PODINFO='/nowhere/annotations'" in w and "eviction notices" in w
               for w in resp["warnings"])  # ... but said


def test_a_pod_name_of_the_users_is_kept_and_a_wrong_one_named() -> None:
    obj = pod(index=2)
    pytorch(obj)["env"].append({"name": "POD_NAME", "value": "train-worker-0"})
    after, resp = mutate(obj)
    assert [e for e in pytorch(after)["env"] if e["name"] == "POD_NAME"] == [{"name": "POD_NAME",
                                                                              "value": "train-worker-0"}]
    assert any("POD_NAME is set and kept" in w for w in resp["warnings"])


def test_both_paths_taken_adds_no_mount_and_says_so() -> None:
    obj = pod(index=2)
    pytorch(obj)["volumeMounts"] = [{"name": "a", "mountPath": "/etc/podinfo"}, {"name": "b", "mountPath": "/var/run"}]
    obj["spec"]["volumes"] = [{"name": "a", "emptyDir": {}}, {"name": "b", "emptyDir": {}}]
    after, resp = mutate(obj)
    assert after["spec"]["volumes"] == obj["spec"]["volumes"]
    assert env(after)["POD_NAME"] == POD_NAME
    assert any("not mounted" in w for w in resp["warnings"])


@pytest.mark.parametrize(("where", "value"), [("volumes", "x"), ("volumeMounts", [1])])
def test_malformed_volumes_are_a_bad_review(where: str, value: Any) -> None:
    obj = pod(index=2)
    if where == "volumes":
        obj["spec"]["volumes"] = value
    else:
        pytorch(obj)["volumeMounts"] = value
    with pytest.raises(BadReviewError, match=where):
        review_pod(review(obj), CFG)
