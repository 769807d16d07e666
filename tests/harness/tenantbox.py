"""Agent tests on a real kube-apiserver that act with real ServiceAccount tokens (a tenant's, the
controller's), and their usual world: a node of 8 GPUs, job a (elastic 2..6, all six workers running
there for an hour) and gang b (4 x 1 GPU) pending on it."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from elastic_controller.kube.caches import Caches
from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.errors import NotFoundError
from elastic_controller.kube.resources import NAMESPACES, NODES, PODS, Resource
from tests.harness import builders as b
from tests.harness.agentbox import KINDS, Cluster, elastic_job, gang
from tests.harness.appliedbox import sa_kubeconfig


def kubectl(box: Any, *args: str, stdin: str | None = None) -> str:
    """``kubectl`` on the box; a refusal fails the test."""
    proc = box.kubectl(*args, check=False, input=stdin)
    assert proc.returncode == 0, (args, proc.stderr)
    return str(proc.stdout)


def token_client(box: Any, sa: str, ns: str, path: Path) -> KubeClient:
    """A client authenticating with a real token of ServiceAccount ``ns/sa`` (TokenRequest)."""
    return KubeClient.from_kubeconfig(str(sa_kubeconfig(box, sa, path, namespace=ns)))


def tenant_client(box: Any, ns: str, path: Path, *, pytorchjobs: bool = False) -> KubeClient:
    """ServiceAccount `researcher`, bound to `edit` in ``ns`` (and, with ``pytorchjobs``, given the
    PyTorchJob rights kubeflow-edit gives), acting with its own token."""
    kubectl(box, "create", "serviceaccount", "researcher", f"--namespace={ns}")
    kubectl(box, "create", "rolebinding", "researcher-edit", "--clusterrole=edit",
            f"--serviceaccount={ns}:researcher", f"--namespace={ns}")
    if pytorchjobs:
        kubectl(box, "create", "role", "pytorchjobs", "--verb=get,list,watch,create,update,patch,delete",
                "--resource=pytorchjobs.kubeflow.org", f"--namespace={ns}")
        kubectl(box, "create", "rolebinding", "researcher-pytorchjobs", "--role=pytorchjobs",
                f"--serviceaccount={ns}:researcher", f"--namespace={ns}")
    return token_client(box, "researcher", ns, path)


def node(kc: KubeClient, gpus: int = 8) -> str:
    """A fresh node of ``gpus`` GPUs; the caller deletes it (``cleanup``)."""
    return Cluster(kc, "").node(gpus)


def create(kc: KubeClient, ns: str, objs: list[dict[str, Any]], *, owned: bool = False) -> None:
    """Create the builder objects in ``ns`` (Running pods made Running); with ``owned``, every pod of
    a PyTorchJob carries the job's ownerReference, as the operator would set it."""
    owner: dict[str, dict[str, Any]] = {}
    for obj in objs:
        if obj["kind"] not in KINDS:
            continue
        obj = copy.deepcopy(obj)
        status = obj.pop("status", None) or {}
        meta = obj["metadata"]
        for k in ("uid", "creationTimestamp", "resourceVersion"):
            meta.pop(k, None)
        meta["namespace"] = ns
        job = (meta.get("labels") or {}).get("training.kubeflow.org/job-name")
        if owned and obj["kind"] == "Pod" and job in owner:
            meta["ownerReferences"] = [owner[job]]
        out = kc.create(KINDS[obj["kind"]], obj, ns)
        if obj["kind"] == "PyTorchJob":
            owner[out["metadata"]["name"]] = {
                "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": out["metadata"]["name"],
                "uid": out["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
        if obj["kind"] == "Pod" and status.get("phase") == "Running":
            kc.patch(PODS, out["metadata"]["name"], {"status": status}, ns, subresource="status")


def starving_world(kc: KubeClient, ns: str, *, owned: bool = False) -> str:
    """A node of 8 GPUs; job a (elastic 2..6, all 6 running there for an hour); gang b (4 x 1 GPU)
    pending. Returns the node's name (the caller deletes it: ``cleanup``)."""
    name = node(kc)
    create(kc, ns, b.items(b.pytorchjob(ns, "a", workers=6, min_r=2, max_r=6),
                           elastic_job(ns, "a", name, min_r=2, max_r=6), gang(ns, "b", name, members=4)),
           owned=owned)
    return name


def _gone(kc: KubeClient, res: Resource, name: str, ns: str | None = None) -> None:
    try:
        kc.delete(res, name, ns)
    except NotFoundError:
        pass


def cleanup(kc: KubeClient, node: str, namespaces: Iterable[str], caches: Iterable[Caches | None] = (),
            *, drop_namespaces: Iterable[str] = ()) -> None:
    """Stop the caches; delete the pods of ``namespaces``, the namespaces ``drop_namespaces`` and
    the node."""
    for c in caches:
        if c is not None:
            c.stop()
    for ns in namespaces:
        for p in kc.list(PODS, ns)[0]:
            _gone(kc, PODS, p["metadata"]["name"], ns)
    for other in drop_namespaces:
        _gone(kc, NAMESPACES, other)
    _gone(kc, NODES, node)
