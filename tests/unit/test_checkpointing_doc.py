"""docs/checkpointing.md and the elastic example agree with each other and with the code.

The Python snippets of the doc are executed here (the downward API reader against a file in the
kubelet's format) and in tests/integration/test_checkpoint_rbac.py (the annotation writer, with a
real ServiceAccount token bound by the example's Role).
"""

from __future__ import annotations

import re
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_controller.policy import keys
from elastic_controller.policy.parse import parse_job
from elastic_controller.policy.podgroups import plan_podgroup
from elastic_controller.policy.settings import ElasticConfig
from tests.unit.test_manifests import _example, example_job

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "checkpointing.md"
EXAMPLE = "pytorchjob-elastic.yaml"


def snippets(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), re.S)


def snippet(first_line: str) -> str:
    (code,) = [c for c in snippets("python") if c.startswith(f"# {first_line}")]
    return code


def load_snippet(first_line: str) -> types.ModuleType:
    module = types.ModuleType(first_line.split(":")[0])
    exec(compile(snippet(first_line), str(DOC), "exec"), module.__dict__)
    return module


def go_quote(value: str) -> str:
    """strconv.Quote for the characters the tests use (what the kubelet writes)."""
    out = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{out}"'


def annotations_file(tmp_path: Path, annotations: dict[str, str]) -> Path:
    """The downward API file as the kubelet writes it (fieldpath.FormatMap): sorted key="value" lines."""
    path = tmp_path / "annotations"
    path.write_text("\n".join(f"{k}={go_quote(v)}" for k, v in sorted(annotations.items())))
    return path


def test_every_python_snippet_compiles_and_the_names_are_the_contracts() -> None:
    codes = snippets("python")
    assert len(codes) == 3
    for code in codes:
        compile(code, str(DOC), "exec")
    assert load_snippet("record_checkpoint.py").ANNOTATION == keys.LAST_CHECKPOINT_TIME
    assert load_snippet("eviction_notice.py").EVICT_AFTER == keys.EVICT_AFTER


def test_eviction_notice_reads_the_kubelet_file(tmp_path: Path) -> None:
    read = load_snippet("eviction_notice.py").eviction_notice
    assert read(str(tmp_path / "missing")) is None
    plain = annotations_file(tmp_path, {"scheduling.k8s.io/group-name": "j", "note": 'a "quoted"\nline\\x'})
    assert read(str(plain)) is None
    noticed = annotations_file(tmp_path, {
        "note": 'tricky: volcano-elastic.io/evict-after="1999-01-01T00:00:00Z"\n',
        keys.EVICTED_FOR: "ns/gang", keys.EVICT_AFTER: "2026-11-25T10:30:00Z",
        "z.io/after": "x=y"})
    assert read(str(noticed)) == datetime(2026, 11, 25, 10, 30, tzinfo=UTC)


def test_the_docs_rbac_block_is_the_examples() -> None:
    (block,) = [b for b in snippets("yaml") if "kind: Role\n" in b]
    doc_objs = [d for d in yaml.safe_load_all(block) if d]
    example = {d["kind"]: d for d in _example(EXAMPLE) if d["kind"] != "PyTorchJob"}
    assert [d["kind"] for d in doc_objs] == ["ServiceAccount", "Role", "RoleBinding"]
    for d in doc_objs:
        assert d == example[d["kind"]], d["kind"]


def worker_template(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    return spec


def test_example_rbac_lets_the_job_patch_exactly_its_own_pods() -> None:
    objs = _example(EXAMPLE)
    job = example_job(EXAMPLE)
    by_kind = {d["kind"]: d for d in objs}
    assert sorted(by_kind) == ["PyTorchJob", "Role", "RoleBinding", "ServiceAccount"]
    ns = job["metadata"]["namespace"]
    assert {d["metadata"]["namespace"] for d in objs} == {ns}
    sa, role, binding = by_kind["ServiceAccount"], by_kind["Role"], by_kind["RoleBinding"]
    template = worker_template(job)
    assert template["serviceAccountName"] == sa["metadata"]["name"]
    assert template.get("automountServiceAccountToken", True) and sa.get("automountServiceAccountToken", True)
    replicas = job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"]
    (rule,) = role["rules"]
    assert rule["apiGroups"] == [""] and rule["resources"] == ["pods"] and rule["verbs"] == ["patch"]
    assert rule["resourceNames"] == [f"{job['metadata']['name']}-worker-{i}" for i in range(replicas)]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": ns}]


def test_example_pods_know_their_name_and_see_their_annotations_live() -> None:
    template = worker_template(example_job(EXAMPLE))
    (container,) = [c for c in template["containers"] if c["name"] == keys.PYTORCH_CONTAINER]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert "POD_NAME" in snippet("record_checkpoint.py")
    volumes = {v["name"]: v for v in template["volumes"]}
    (mount,) = [m for m in container["volumeMounts"] if "downwardAPI" in volumes[m["name"]]]
    assert "subPath" not in mount, "a subPath mount of a downward API volume never updates"
    (item,) = volumes[mount["name"]]["downwardAPI"]["items"]
    assert item["fieldRef"] == {"fieldPath": "metadata.annotations"}
    reader = load_snippet("eviction_notice.py")
    assert f"{mount['mountPath']}/{item['path']}" == reader.ANNOTATIONS_FILE


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
    assert int(rdzv["last_call_timeout"]) < 30 and int(rdzv["join_timeout"]) >= 600
    grace = worker_template(job)["terminationGracePeriodSeconds"]
    base = load_config_file(ROOT / "manifests" / "base" / "config.yaml")
    job["metadata"]["uid"] = "0000"
    assert validate_job(job, base).warnings == ()
    # a queue whose notice is longer than the example's grace period: the owner hears about it
    long_notice = parse_config({"defaults": {"noticeSeconds": grace + 1}})
    assert any("terminationGracePeriodSeconds" in w for w in validate_job(job, long_notice).warnings)


@pytest.mark.parametrize("name", ["record_checkpoint.py", "eviction_notice.py"])
def test_snippets_need_only_the_standard_library(name: str) -> None:
    imports = re.findall(r"^import (\w+)|^from (\w+) import", snippet(name), re.M)
    modules = {a or b for a, b in imports}
    assert modules <= {"ast", "datetime", "json", "os", "ssl", "urllib"}, modules
