"""Writes only while leading: a ``KubeAPI`` that checks leadership before every mutating call.

The agent checks ``may_write`` itself between the steps of a plan (so that it stops cleanly and
reports it); the controller's workers write through this wrapper, so a replica paused past its
Lease (issue 23, item 7) makes no PodGroup write either. Reads, dry-runs and Events pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .api import KubeAPI
from .client import PatchType
from .errors import KubeError
from .resources import EVENTS, Resource


class NotLeadingError(KubeError):
    """A write refused locally: this replica does not hold (or has not renewed) the Lease."""


class FencedAPI:
    def __init__(self, api: KubeAPI, may_write: Callable[[], bool]) -> None:
        self.inner = api
        self.may_write = may_write

    def _check(self, what: str, res: Resource | None = None, dry_run: bool = False) -> None:
        if dry_run or res is EVENTS:
            return
        if not self.may_write():
            raise NotLeadingError(f"{what}: not leading (Lease not held or not renewed in time)", 0, "NotLeading")

    def list(self, res: Resource, namespace: str | None = None, *, label_selector: str | None = None,
             field_selector: str | None = None) -> tuple[list[dict[str, Any]], str]:
        return self.inner.list(res, namespace, label_selector=label_selector, field_selector=field_selector)

    def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        return self.inner.get(res, name, namespace)

    def create(self, res: Resource, body: dict[str, Any], namespace: str | None = None, *,
               dry_run: bool = False) -> dict[str, Any]:
        self._check(f"create {res.plural}", res, dry_run)
        return self.inner.create(res, body, namespace, dry_run=dry_run)

    def replace(self, res: Resource, name: str, body: dict[str, Any],
                namespace: str | None = None) -> dict[str, Any]:
        self._check(f"replace {res.plural}/{name}", res)
        return self.inner.replace(res, name, body, namespace)

    def patch(self, res: Resource, name: str, patch: Any, namespace: str | None = None, *,
              patch_type: PatchType = "merge", dry_run: bool = False,
              subresource: str | None = None) -> dict[str, Any]:
        self._check(f"patch {res.plural}/{name}", res, dry_run)
        return self.inner.patch(res, name, patch, namespace, patch_type=patch_type, dry_run=dry_run,
                                subresource=subresource)

    def delete(self, res: Resource, name: str, namespace: str | None = None, *, uid: str | None = None,
               propagation: str | None = "Background", dry_run: bool = False) -> dict[str, Any]:
        self._check(f"delete {res.plural}/{name}", res, dry_run)
        return self.inner.delete(res, name, namespace, uid=uid, propagation=propagation, dry_run=dry_run)

    def evict(self, namespace: str, name: str, *, uid: str | None = None, dry_run: bool = False) -> None:
        self._check(f"evict {namespace}/{name}", None, dry_run)
        self.inner.evict(namespace, name, uid=uid, dry_run=dry_run)
