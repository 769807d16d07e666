"""docs/checkpointing.md and the elastic example agree with each other and with the code.

The doc's training loop uses only the job kit's names; the kit's notice reader is tried on a file
in the kubelet's format; the example's ServiceAccount gets exactly its pods from the controller's
grant (tried on a real API server in tests/integration/test_checkpoint_rbac.py).
"""

from __future__ import annotations

import ast
import copy
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import volcano_elastic_job as kit
import yaml

from elastic_controller.checkpoint_access import wanted
from elastic_controller.policy import keys
from elastic_controller.policy.parse import parse_job
from elastic_controller.policy.podgroups import plan_podgroup
from elastic_controller.policy.settings import ElasticConfig
from tests.harness.manifests import EXAMPLE, _example, example_job

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "checkpointing.md"


def snippets(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), re.S)


def go_quote(value: str) -> str:
    """strconv.Quote for the characters the tests use (what the kubelet writes)."""
    out = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{out}"'


def annotations_file(tmp_path: Path, annotations: dict[str, str]) -> Path:
    """The downward API file as the kubelet writes it (fieldpath.FormatMap): sorted key="value" lines."""
    path = tmp_path / "annotations"
    path.write_text("\n".join(f"{k}={go_quote(v)}" for k, v in sorted(annotations.items())))
    return path


def kit_names(code: str) -> set[str]:
    return {a.name for node in ast.walk(ast.parse(code)) if isinstance(node, ast.ImportFrom)
            and node.module == "volcano_elastic_job" for a in node.names}


def test_the_docs_training_loop_uses_the_kit_and_the_kits_names_are_the_contracts() -> None:
    loop, in_place = snippets("python")  # section 2's loop, section 7's in-place loop
    assert {"NoticeWatch"} <= kit_names(loop) <= set(kit.__all__)
    assert "watch.checkpoint(" in loop  # save, agree, record (kit.record_checkpoint), hold: one call
    assert {"InPlace"} <= kit_names(in_place) <= set(kit.__all__)
    assert (kit.LAST_CHECKPOINT_TIME, kit.EVICT_AFTER, kit.TARGET_WORKERS) == \
        (keys.LAST_CHECKPOINT_TIME, keys.EVICT_AFTER, keys.TARGET_WORKERS)


def test_eviction_notice_reads_the_kubelet_file(tmp_path: Path) -> None:
    assert kit.eviction_notice(str(tmp_path / "missing")) is None
    plain = annotations_file(tmp_path, {"scheduling.k8s.io/group-name": "j", "note": 'a "quoted"\nline\\x'})
    assert kit.eviction_notice(str(plain)) is None
    noticed = annotations_file(tmp_path, {
        "note": 'tricky: volcano-elastic.io/evict-after="1999-01-01T00:00:00Z"\n',
        keys.EVICTED_FOR: "ns/gang", keys.EVICT_AFTER: "2026-11-25T10:30:00Z",
        "z.io/after": "x=y"})
    assert kit.eviction_notice(str(noticed)) == datetime(2026, 11, 25, 10, 30, tzinfo=UTC)


def test_the_docs_service_account_is_the_examples() -> None:
    (block,) = [b for b in snippets("yaml") if "kind: ServiceAccount\n" in b]
    doc_objs = [d for d in yaml.safe_load_all(block) if d]
    example = {d["kind"]: d for d in _example(EXAMPLE) if d["kind"] != "PyTorchJob"}
    assert [d["kind"] for d in doc_objs] == ["ServiceAccount"]
    assert doc_objs[0]["metadata"] == {k: example["ServiceAccount"]["metadata"][k] for k in ("name", "namespace")}


def worker_template(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    return spec


def test_the_example_writes_no_rbac_and_the_controller_grants_exactly_its_pods() -> None:
    objs = _example(EXAMPLE)
    job = example_job(EXAMPLE)
    by_kind = {d["kind"]: d for d in objs}
    assert sorted(by_kind) == ["PersistentVolumeClaim", "PyTorchJob", "ServiceAccount"]
    ns = job["metadata"]["namespace"]
    assert {d["metadata"]["namespace"] for d in objs} == {ns}
    sa = by_kind["ServiceAccount"]["metadata"]["name"]
    assert worker_template(job)["serviceAccountName"] == sa != "default"
    job["metadata"]["uid"] = "u1"
    want = wanted(job)
    assert want is not None
    role, binding = want
    replicas = job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"]
    (rule,) = role["rules"]
    assert rule == {"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"],
                    "resourceNames": [f"{job['metadata']['name']}-worker-{i}" for i in range(replicas)]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]


def test_example_pods_know_their_name_and_see_their_annotations_live() -> None:
    """The example names neither: its pods get them from the webhook, as the operator creates them."""
    import jsonpatch

    from webhook.mutate import plan_pod_patch

    job = example_job(EXAMPLE)
    template = copy.deepcopy(worker_template(job))
    (container,) = [c for c in template["containers"] if c["name"] == keys.PYTORCH_CONTAINER]
    assert "env" not in container and not any("downwardAPI" in v for v in template["volumes"])
    policy = job["spec"]["elasticPolicy"]
    container["env"] = [{"name": "PET_NNODES", "value": f"{policy['minReplicas']}:{policy['maxReplicas']}"}]
    for index in (0, policy["maxReplicas"] - 1):  # worker-0 and an elastic worker
        pod = {"metadata": {"name": f"{job['metadata']['name']}-worker-{index}", "labels": {
            keys.OPERATOR_NAME_LABEL: keys.OPERATOR_NAME, keys.JOB_NAME_LABEL: job["metadata"]["name"],
            "training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": str(index)}},
            "spec": copy.deepcopy(template)}
        patch = plan_pod_patch(pod, ElasticConfig())
        assert not patch.warnings
        mutated = jsonpatch.apply_patch(pod, patch.ops)
        (c,) = [c for c in mutated["spec"]["containers"] if c["name"] == keys.PYTORCH_CONTAINER]
        env = {e["name"]: e for e in c["env"]}
        assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
        volumes = {v["name"]: v for v in mutated["spec"]["volumes"]}
        (mount,) = [m for m in c["volumeMounts"] if "downwardAPI" in volumes[m["name"]]]
        assert "subPath" not in mount, "a subPath mount of a downward API volume never updates"
        (item,) = volumes[mount["name"]]["downwardAPI"]["items"]
        assert item["fieldRef"] == {"fieldPath": "metadata.annotations"}
        assert f"{mount['mountPath']}/{item['path']}" == kit.ANNOTATIONS_FILE


def test_example_checkpoints_to_a_shared_volume_and_runs_the_kits_launcher() -> None:
    objs = {d["kind"]: d for d in _example(EXAMPLE)}
    template = worker_template(example_job(EXAMPLE))
    (container,) = [c for c in template["containers"] if c["name"] == keys.PYTORCH_CONTAINER]
    assert container["command"][:3] == ["python", "-m", "volcano_elastic_job.run"]
    (flag,) = [a for a in container["command"] if a.startswith("--checkpoint-dir=")]
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == flag.split("=", 1)[1]]
    (volume,) = [v for v in template["volumes"] if v["name"] == mount["name"]]
    claim = objs["PersistentVolumeClaim"]
    assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]  # every worker, on any node


def test_example_job_uses_the_contract_and_passes_validation() -> None:
    from elastic_controller.config import load_config_file, parse_config
    from webhook.validate import validate_job

    job = example_job(EXAMPLE)
    view = parse_job(job)
    plan = plan_podgroup(view, ElasticConfig())
    assert view.worker_sizes.step == 2 and plan.annotations == {keys.WORKER_STEP: "2"}
    allowed = view.worker_sizes.allowed(plan.bounds.min_replicas, plan.bounds.max_replicas)
    assert allowed.as_tuple() == (2, 4)
    rdzv = {c["key"]: c["value"] for c in job["spec"]["elasticPolicy"]["rdzvConf"]}
    assert "last_call_timeout" not in rdzv and int(rdzv["join_timeout"]) >= 600  # the kit's rendezvous
    grace = worker_template(job)["terminationGracePeriodSeconds"]
    base = load_config_file(ROOT / "manifests" / "base" / "config.yaml")
    job["metadata"]["uid"] = "0000"
    assert validate_job(job, base).warnings == ()
    # a queue whose notice is longer than the example's grace period: the owner hears about it, once
    # the job (2..4 workers) is not admitted whole (wholeGangUpTo 4, the default: never a victim)
    assert validate_job(job, parse_config({"defaults": {"noticeSeconds": grace + 1}})).warnings == ()
    long_notice = parse_config({"defaults": {"noticeSeconds": grace + 1, "wholeGangUpTo": 0}})
    assert any("terminationGracePeriodSeconds" in w for w in validate_job(job, long_notice).warnings)
