"""The API resources we read and write, and their URL paths."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote


@dataclass(frozen=True, slots=True)
class Resource:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name, safe='')}"
            if sub:
                base += f"/{sub}"
        return base


PODS = Resource("", "v1", "pods", "Pod")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
EVENTS = Resource("", "v1", "events", "Event")
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False)
PODGROUPS = Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup")
QUEUES = Resource("scheduling.volcano.sh", "v1beta1", "queues", "Queue", namespaced=False)
PYTORCHJOBS = Resource("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")  # only Volcano's scheduler configuration, read once

# Everything the agent's snapshot is built from, in the order ``parse_objects`` likes.
SNAPSHOT_RESOURCES = (NODES, PODS, PODGROUPS, QUEUES, PRIORITY_CLASSES, PYTORCHJOBS, NAMESPACES)
# The Role and RoleBinding that let an elastic job's ServiceAccount annotate exactly its own pods
# (record_checkpoint(); elastic_controller/checkpoint_access.py).
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLEBINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
