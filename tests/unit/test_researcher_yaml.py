"""A researcher's elastic job YAML, wherever the project shows one (README.md, the kit's README, docs/,
examples/ and the job examples under manifests/examples/ that they link), is the PyTorchJob and its
training command: nothing that volcano-elastic's webhook or controller adds on its own.

- the webhook (webhook/mutate.py, webhook/podinfo.py) adds to the pods: the pod-info downward-API
  volume and its mount, POD_NAME, VOLCANO_ELASTIC_PODINFO, the shared-store switch, the scheduler
  name, the scale-up gate and the role/gang annotations;
- the controller creates the PodGroup and grants the job's ServiceAccount a Role (and RoleBinding)
  on its own pods (elastic_controller/checkpoint_access.py).

The job's own objects stay: its ServiceAccount (which identity the pods run as is the job's choice:
it may carry the job's storage credentials) and its checkpoint storage.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook import podinfo
from webhook.mutate import DISABLE_SHARED_STORE

ROOT = Path(__file__).resolve().parents[2]
WEBHOOK_ENV = {podinfo.POD_NAME_ENV, podinfo.PODINFO_ENV, DISABLE_SHARED_STORE}
WEBHOOK_POD_FIELDS = {"schedulerName", "schedulingGates"}
OURS = re.compile(r"^(volcano-elastic\.io/(role|task-priority|preemptable|min-replicas|max-replicas)"
                  r"|scheduling\.k8s\.io/group-name|volcano\.sh/(task-spec|preemptable)"
                  r"|volcano\.sh/task-priority)$")
CONTROLLER_KINDS = {"Role", "RoleBinding", "PodGroup"}
JOB_KINDS = {"PyTorchJob", "ServiceAccount", "PersistentVolumeClaim"}


def sources() -> list[tuple[str, str]]:
    """(where, YAML text): the YAML blocks of the researcher-facing docs, and the YAML files of
    examples/ and the job examples of manifests/examples/."""
    out: list[tuple[str, str]] = []
    docs = [ROOT / "README.md", ROOT / "jobkit" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for doc in docs:
        text = doc.read_text()
        for m in re.finditer(r"```ya?ml\n(.*?)```", text, re.S):
            out.append((f"{doc.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}", m.group(1)))
    files = [*sorted((ROOT / "examples").rglob("*.y*ml")),
             *sorted((ROOT / "manifests" / "examples").glob("pytorchjob-*.yaml"))]
    out += [(str(f.relative_to(ROOT)), f.read_text()) for f in files]
    return out


def pod_specs(node: Any) -> Iterator[dict[str, Any]]:
    """Every pod spec (a mapping with ``containers``) anywhere in ``node``."""
    if isinstance(node, dict):
        if isinstance(node.get("containers"), list):
            yield node
        for value in node.values():
            yield from pod_specs(value)
    elif isinstance(node, list):
        for value in node:
            yield from pod_specs(value)


def annotation_maps(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if isinstance(node.get("annotations"), dict):
            yield node["annotations"]
        for value in node.values():
            yield from annotation_maps(value)
    elif isinstance(node, list):
        for value in node:
            yield from annotation_maps(value)


def what_we_would_add(text: str) -> list[str]:
    """What in this YAML the webhook or the controller adds by itself (empty: a researcher's YAML)."""
    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    if not any(list(pod_specs(d)) or (isinstance(d, dict) and d.get("kind") == "PyTorchJob") for d in docs):
        return []  # not a job: a configuration, a queue, a trace
    found = []
    for d in docs:
        kind = d.get("kind") if isinstance(d, dict) else None
        if kind in CONTROLLER_KINDS:
            found.append(f"a {kind} (the controller creates it)")
        elif kind is not None and kind not in JOB_KINDS:
            found.append(f"a {kind} next to the job")
        for spec in pod_specs(d):
            for v in spec.get("volumes") or []:
                projected = (v.get("projected") or {}).get("sources") or []
                if "downwardAPI" in v or any("downwardAPI" in s for s in projected):
                    found.append(f"volume {v.get('name')} (the webhook mounts the pod info)")
            for field in WEBHOOK_POD_FIELDS & set(spec):
                found.append(f"spec.{field} (the webhook sets it)")
            for c in spec["containers"]:
                for e in c.get("env") or []:
                    if e.get("name") in WEBHOOK_ENV:
                        found.append(f"env {e['name']} (the webhook sets it)")
                for m in c.get("volumeMounts") or []:
                    if str(m.get("mountPath", "")).startswith(podinfo.MOUNT_DIR):
                        found.append(f"mount {m.get('name')} at {m.get('mountPath')} (the webhook mounts the pod info)")
        for notes in annotation_maps(d):
            found += [f"annotation {k} (the webhook writes it)" for k in notes if OURS.match(str(k))]
    return found


@pytest.mark.parametrize(("where", "text"), sources(), ids=[w for w, _ in sources()])
def test_a_researchers_job_yaml_is_the_job_and_its_command(where: str, text: str) -> None:
    assert what_we_would_add(text) == [], where


def test_the_researchers_job_is_among_them() -> None:
    jobs = [w for w, t in sources() if any(isinstance(d, dict) and d.get("kind") == "PyTorchJob"
                                           for d in yaml.safe_load_all(t))]
    assert "manifests/examples/pytorchjob-elastic.yaml" in jobs


def test_the_check_sees_what_earlier_releases_asked_researchers_to_write() -> None:
    """The elastic example as it was before the webhook added the pod info (issue 40)."""
    old = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: j}
spec:
  pytorchReplicaSpecs:
    Worker:
      template:
        spec:
          containers:
          - name: pytorch
            env:
            - name: POD_NAME
              valueFrom: {fieldRef: {fieldPath: metadata.name}}
            volumeMounts:
            - {name: podinfo, mountPath: /etc/podinfo, readOnly: true}
          volumes:
          - name: podinfo
            downwardAPI:
              items:
              - {path: annotations, fieldRef: {fieldPath: metadata.annotations}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: j-checkpoint}
"""
    assert len(what_we_would_add(old)) == 4
    fragment = "spec:\n  schedulerName: volcano\n  containers:\n  - name: pytorch\n"
    assert what_we_would_add(fragment) == ["spec.schedulerName (the webhook sets it)"]
