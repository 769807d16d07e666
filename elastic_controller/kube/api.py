"""What the controller and the agent need from the API server (``KubeClient`` or a fake)."""

from __future__ import annotations

from typing import Any, Protocol

from .client import PatchType
from .resources import Resource


class KubeAPI(Protocol):
    def list(self, res: Resource, namespace: str | None = None, *, label_selector: str | None = None,
             field_selector: str | None = None) -> tuple[list[dict[str, Any]], str]: ...

    def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]: ...

    def create(self, res: Resource, body: dict[str, Any], namespace: str | None = None, *,
               dry_run: bool = False) -> dict[str, Any]: ...

    def replace(self, res: Resource, name: str, body: dict[str, Any],
                namespace: str | None = None) -> dict[str, Any]: ...

    def patch(self, res: Resource, name: str, patch: Any, namespace: str | None = None, *,
              patch_type: PatchType = "merge", dry_run: bool = False,
              subresource: str | None = None) -> dict[str, Any]: ...

    def delete(self, res: Resource, name: str, namespace: str | None = None, *, uid: str | None = None,
               propagation: str | None = "Background", dry_run: bool = False) -> dict[str, Any]: ...

    def evict(self, namespace: str, name: str, *, uid: str | None = None, dry_run: bool = False) -> None: ...


def evicted_pod_ref(namespace: str, name: str, uid: str) -> dict[str, Any]:
    """A reference to the pod ``uid`` that was just evicted, for its Event. Built from what the plan
    named, not looked up: by the time the Event is written the informer may have dropped the pod, or
    hold the operator's replacement of the same name (another uid)."""
    return {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid, "namespace": namespace}


def owner_ref(obj: dict[str, Any]) -> dict[str, Any]:
    """A reference to ``obj`` for Events (involvedObject)."""
    meta = obj.get("metadata") or {}
    ref = {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""),
           "name": meta.get("name", ""), "uid": meta.get("uid", "")}
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    return ref
