"""The grant that lets an elastic job record its checkpoints: its ServiceAccount may ``patch``
exactly the job's own pods, and nothing else.

The job kit's ``record_checkpoint()`` writes ``volcano-elastic.io/last-checkpoint-time`` on its own
pod with the pod's ServiceAccount token. The pod names are known (the training operator names them
``<job>-<replica type>-<index>``), so the controller keeps one Role (``<job>-volcano-elastic-
checkpoint``, ``resourceNames`` = those names, verb ``patch``) and its RoleBinding to the
ServiceAccount(s) the job's pod templates name, owned by the PyTorchJob (deleted with it). The job
brings no Role and lists no pod name; a new ``maxReplicas`` is followed at the next reconcile.

Granted only to a ServiceAccount the job names: ``default`` is shared by every pod of the
namespace, so a job that runs as ``default`` gets no grant (and record_checkpoint() logs a 403 that
says so). The controller can grant this because it holds ``patch`` on pods itself (RBAC refuses to
grant more than the granter has); where the chart did not give it ``roles``/``rolebindings`` it
logs once per job and goes on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from .kube.api import KubeAPI
from .kube.errors import ForbiddenError, KubeError, NotFoundError
from .kube.resources import ROLEBINDINGS, ROLES
from .policy import keys

log = logging.getLogger(__name__)

SUFFIX = "-volcano-elastic-checkpoint"
DEFAULT_SERVICE_ACCOUNT = "default"


def access_name(job: str) -> str:
    return f"{job}{SUFFIX}"


def pod_names(job: Mapping[str, Any]) -> list[str]:
    """The names the training operator gives the job's pods, every replica type, 0 .. replicas-1."""
    name = str((job.get("metadata") or {}).get("name") or "")
    specs = (job.get("spec") or {}).get("pytorchReplicaSpecs") or {}
    out: list[str] = []
    for rtype in sorted(specs):
        count = (specs[rtype] or {}).get("replicas")
        count = count if isinstance(count, int) and not isinstance(count, bool) else 1
        out += [f"{name}-{str(rtype).lower()}-{i}" for i in range(max(count, 0))]
    return out


def service_accounts(job: Mapping[str, Any]) -> list[str]:
    """The ServiceAccounts the job's pod templates name, without ``default``."""
    specs = (job.get("spec") or {}).get("pytorchReplicaSpecs") or {}
    found: set[str] = set()
    for rspec in specs.values():
        pod = ((rspec or {}).get("template") or {}).get("spec") or {}
        sa = pod.get("serviceAccountName") or pod.get("serviceAccount") or DEFAULT_SERVICE_ACCOUNT
        if isinstance(sa, str) and sa != DEFAULT_SERVICE_ACCOUNT:
            found.add(sa)
    return sorted(found)


def wanted(job: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The Role and RoleBinding for ``job`` (an elastic PyTorchJob), or None: nothing to grant."""
    meta = job.get("metadata") or {}
    accounts = service_accounts(job)
    names = pod_names(job)
    if not accounts or not names or not meta.get("uid"):
        return None
    ns, name = str(meta.get("namespace") or ""), access_name(str(meta["name"]))
    common = {"name": name, "namespace": ns, "labels": {keys.MANAGED_BY_LABEL: keys.MANAGED_BY},
              "ownerReferences": [{"apiVersion": job.get("apiVersion") or "kubeflow.org/v1",
                                   "kind": job.get("kind") or "PyTorchJob", "name": meta["name"],
                                   "uid": meta["uid"]}]}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": dict(common),
            "rules": [{"apiGroups": [""], "resources": ["pods"], "resourceNames": names, "verbs": ["patch"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": dict(common),
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
               "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns} for sa in accounts]}
    return role, binding


class CheckpointAccess:
    """Keeps each elastic job's grant; remembers what it applied, so a reconcile that changes
    nothing makes no API call."""

    def __init__(self, api: KubeAPI) -> None:
        self.api = api
        self._applied: dict[str, tuple[str, ...]] = {}  # ns/job -> what was applied (uid, names, accounts)
        self._lock = threading.Lock()

    def ensure(self, job: Mapping[str, Any]) -> str:
        """Create or update ``job``'s grant. Returns what it did: applied | unchanged | none | refused."""
        meta = job.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        want = wanted(job)
        if want is None:
            return "none"
        role, binding = want
        signature = (str(meta.get("uid")), *role["rules"][0]["resourceNames"], "|",
                     *(s["name"] for s in binding["subjects"]))
        with self._lock:
            if self._applied.get(key) == signature:
                return "unchanged"
        ns = role["metadata"]["namespace"]
        try:
            owners = {"ownerReferences": role["metadata"]["ownerReferences"]}  # a job re-created: its uid
            self._apply(ROLES, role, {"metadata": owners, "rules": role["rules"]}, ns)
            self._apply(ROLEBINDINGS, binding, {"metadata": owners, "subjects": binding["subjects"]}, ns)
        except ForbiddenError as exc:
            # The chart gives the controller roles/rolebindings; a smaller install may not: say it once.
            log.warning("cannot grant the job's ServiceAccount patch on its pods; record_checkpoint() will "
                        "get 403 (docs/checkpointing.md)", extra={"job": key, "error": str(exc)})
            with self._lock:
                self._applied[key] = signature
            return "refused"
        with self._lock:
            self._applied[key] = signature
        log.info("checkpoint access granted", extra={"job": key, "pods": len(role["rules"][0]["resourceNames"]),
                                                      "serviceAccounts": [s["name"] for s in binding["subjects"]]})
        return "applied"

    def _apply(self, res: Any, body: dict[str, Any], patch: dict[str, Any], ns: str) -> None:
        try:
            self.api.patch(res, body["metadata"]["name"], patch, ns, patch_type="merge")
        except NotFoundError:
            try:
                self.api.create(res, body, ns)
            except KubeError as exc:
                if exc.status != 409:
                    raise
                self.api.patch(res, body["metadata"]["name"], patch, ns, patch_type="merge")

    def forget(self, key: str) -> None:
        with self._lock:
            self._applied.pop(key, None)
