"""An in-memory API server for unit tests and benchmarks: the same verbs as ``KubeClient``
and the same reads as ``Caches``, with PDB refusals and faults injectable."""

from __future__ import annotations

import copy
import itertools
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from .client import PatchType
from .clock import ServerClock
from .errors import AlreadyExistsError, ConflictError, InvalidError, KubeError, NotFoundError, TooManyRequestsError
from .resources import PODS, Resource

Fault = Callable[[str, Resource, str, str, bool], None]  # (verb, res, namespace, name, dry_run) may raise


def _merge_map(target: Any, patch: Any, merge: Callable[[Any, Any, str], Any]) -> Any:
    """RFC 7386 for one level: a patch that is not a map replaces ``target``; in a map, null removes
    the key and any other value is merged into the target's by ``merge(old, new, key)``."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge(out.get(k), v, k)
    return out


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    return _merge_map(target, patch, lambda old, new, _key: merge_patch(old, new))


_MERGE_KEYS = {"schedulingGates": "name", "containers": "name", "conditions": "type"}


def strategic_patch(target: Any, patch: Any, field: str = "") -> Any:
    """The subset of strategic merge the agent uses: maps merge, keyed lists merge by key,
    ``{"$patch": "delete", key: ...}`` removes an item."""
    if isinstance(patch, list) and field in _MERGE_KEYS:
        key = _MERGE_KEYS[field]
        items = [copy.deepcopy(i) for i in (target or [])]
        for p in patch:
            idx = next((i for i, it in enumerate(items) if it.get(key) == p.get(key)), None)
            if p.get("$patch") == "delete":
                if idx is not None:
                    items.pop(idx)
            elif idx is None:
                items.append(copy.deepcopy(p))
            else:
                items[idx] = strategic_patch(items[idx], p)
        return items
    return _merge_map(target, patch, strategic_patch)


def json_patch(target: Any, ops: list[dict[str, Any]]) -> Any:
    doc = copy.deepcopy(target)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in str(op["path"]).split("/")[1:]]
        parent = doc
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent[p]
        last = parts[-1]
        key: Any = int(last) if isinstance(parent, list) and last != "-" else last
        try:
            if op["op"] == "test":
                if parent[key] != op["value"]:
                    raise InvalidError(f"test failed at {op['path']}", 422)
            elif op["op"] == "remove":
                del parent[key]
            elif op["op"] in ("add", "replace"):
                if isinstance(parent, list):
                    if key == "-":
                        parent.append(op["value"])
                    elif op["op"] == "add":
                        parent.insert(key, op["value"])
                    else:
                        parent[key] = op["value"]
                else:
                    parent[key] = op["value"]
        except (KeyError, IndexError) as exc:
            raise InvalidError(f"json patch: no {op['path']}", 422) from exc
    return doc


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeKube:
    def __init__(self, *, terminate_on_evict: bool = True) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}  # (plural, ns, name) -> obj
        self.resources: dict[str, Resource] = {}
        self.calls: list[tuple[str, str, str, str, bool]] = []
        self.pdb_blocked: set[str] = set()  # ns/name of pods whose eviction a PDB refuses
        self.faults: list[Fault] = []
        self.terminate_on_evict = terminate_on_evict  # True: evicted pods linger with deletionTimestamp
        self.stale_caches: set[str] = set()  # what Store.stale() reports (an API outage in a test)
        self.clock = ServerClock()  # no Date headers: the local clock, as KubeClient's before any answer
        self._rv = itertools.count(1)
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ helpers for tests
    def add(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        obj.setdefault("apiVersion", res.api_version)
        obj.setdefault("kind", res.kind)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        meta["resourceVersion"] = str(next(self._rv))
        self.resources[res.plural] = res
        with self._lock:
            self.objects[(res.plural, meta.get("namespace") or "", meta["name"])] = obj
        return obj

    def of(self, res: Resource) -> list[dict[str, Any]]:
        with self._lock:
            return [copy.deepcopy(o) for (p, _, _), o in sorted(self.objects.items()) if p == res.plural]

    def verbs(self, verb: str | None = None, *, dry_run: bool | None = None) -> list[tuple[str, str, str, str, bool]]:
        return [c for c in self.calls if (verb is None or c[0] == verb) and (dry_run is None or c[4] == dry_run)]

    def _call(self, verb: str, res: Resource, ns: str | None, name: str, dry_run: bool) -> None:
        self.calls.append((verb, res.plural, ns or "", name, dry_run))
        for fault in list(self.faults):
            fault(verb, res, ns or "", name, dry_run)

    def _find(self, res: Resource, name: str, ns: str | None) -> dict[str, Any]:
        obj = self.objects.get((res.plural, (ns or "") if res.namespaced else "", name))
        if obj is None:
            raise NotFoundError(f"{res.plural} {ns}/{name} not found", 404, "NotFound")
        return obj

    # ------------------------------------------------------------------ Store
    def items(self, res: Resource) -> list[dict[str, Any]]:
        return self.of(res)

    def get_cached(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        with self._lock:
            obj = self.objects.get((res.plural, (namespace or "") if res.namespaced else "", name))
            return copy.deepcopy(obj) if obj else None

    def put(self, res: Resource, obj: dict[str, Any]) -> None:
        return None

    def has(self, res: Resource) -> bool:
        return True

    def stale(self) -> list[str]:
        return sorted(self.stale_caches)

    # ------------------------------------------------------------------ KubeAPI
    def list(self, res: Resource, namespace: str | None = None, *, label_selector: str | None = None,
             field_selector: str | None = None) -> tuple[list[dict[str, Any]], str]:
        items = [o for o in self.of(res) if not namespace or o["metadata"].get("namespace") == namespace]
        if label_selector:
            want = dict(p.split("=", 1) for p in label_selector.split(",") if "=" in p)
            items = [o for o in items
                     if all((o["metadata"].get("labels") or {}).get(k) == v for k, v in want.items())]
        return items, str(next(self._rv))

    def watch(self, res: Resource, resource_version: str, namespace: str | None = None, *,
              timeout_seconds: int = 300, label_selector: str | None = None) -> Iterator[dict[str, Any]]:
        return iter(())

    def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        self._call("get", res, namespace, name, False)
        with self._lock:
            return copy.deepcopy(self._find(res, name, namespace))

    def create(self, res: Resource, body: dict[str, Any], namespace: str | None = None, *,
               dry_run: bool = False) -> dict[str, Any]:
        meta = body.get("metadata") or {}
        name = meta.get("name") or f"{meta.get('generateName', 'obj-')}{uuid.uuid4().hex[:5]}"
        self._call("create", res, namespace, name, dry_run)
        with self._lock:
            if (res.plural, (namespace or "") if res.namespaced else "", name) in self.objects:
                raise AlreadyExistsError(f"{res.plural} {name} exists", 409, "AlreadyExists")
            obj = copy.deepcopy(body)
            obj["metadata"] = dict(meta, name=name, namespace=namespace) if res.namespaced else dict(meta, name=name)
            if dry_run:
                return obj
            return copy.deepcopy(self.add(res, obj))

    def replace(self, res: Resource, name: str, body: dict[str, Any],
                namespace: str | None = None) -> dict[str, Any]:
        self._call("replace", res, namespace, name, False)
        with self._lock:
            old = self._find(res, name, namespace)
            want = (body.get("metadata") or {}).get("resourceVersion")
            if want and want != old["metadata"]["resourceVersion"]:
                raise ConflictError(f"{res.plural} {name}: resourceVersion changed", 409, "Conflict")
            obj = copy.deepcopy(body)
            obj["metadata"] = dict(obj.get("metadata") or {}, uid=old["metadata"]["uid"],
                                   creationTimestamp=old["metadata"].get("creationTimestamp"))
            return copy.deepcopy(self.add(res, obj))

    def patch(self, res: Resource, name: str, patch: Any, namespace: str | None = None, *,
              patch_type: PatchType = "merge", dry_run: bool = False,
              subresource: str | None = None) -> dict[str, Any]:
        self._call(f"patch-{patch_type}", res, namespace, name, dry_run)
        with self._lock:
            old = self._find(res, name, namespace)
            want = ((patch.get("metadata") or {}).get("resourceVersion") if isinstance(patch, dict) else None)
            if want and want != old["metadata"]["resourceVersion"]:  # as the API server: a precondition
                raise ConflictError(f"{res.plural} {name}: resourceVersion changed", 409, "Conflict")
            if patch_type == "merge":
                new = merge_patch(old, patch)
            elif patch_type == "strategic":
                new = strategic_patch(old, patch)
            else:
                new = json_patch(old, patch)
            if res is PODS:
                before = [g.get("name") for g in (old.get("spec") or {}).get("schedulingGates") or []]
                after = [g.get("name") for g in (new.get("spec") or {}).get("schedulingGates") or []]
                if any(g not in before for g in after):
                    raise InvalidError("spec.schedulingGates: only deletion is allowed", 422, "Invalid")
                if not after:
                    new.get("spec", {}).pop("schedulingGates", None)
            if dry_run:
                return copy.deepcopy(new)
            new["metadata"]["uid"] = old["metadata"]["uid"]
            return copy.deepcopy(self.add(res, new))

    def delete(self, res: Resource, name: str, namespace: str | None = None, *, uid: str | None = None,
               propagation: str | None = "Background", dry_run: bool = False) -> dict[str, Any]:
        self._call("delete", res, namespace, name, dry_run)
        with self._lock:
            obj = self._find(res, name, namespace)
            if uid and obj["metadata"]["uid"] != uid:
                raise ConflictError(f"{res.plural} {name}: uid precondition failed", 409, "Conflict")
            if not dry_run:
                self._remove_or_terminate(res, obj)
            return {}

    def _remove_or_terminate(self, res: Resource, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        if res is PODS and self.terminate_on_evict and meta.get("deletionTimestamp") is None and \
                (obj.get("spec") or {}).get("nodeName"):
            meta["deletionTimestamp"] = _now()
            meta["resourceVersion"] = str(next(self._rv))
        else:
            self.objects.pop((res.plural, meta.get("namespace") or "", meta["name"]), None)

    def evict(self, namespace: str, name: str, *, uid: str | None = None, dry_run: bool = False) -> None:
        self._call("evict", PODS, namespace, name, dry_run)
        with self._lock:
            obj = self._find(PODS, name, namespace)
            if uid and obj["metadata"]["uid"] != uid:
                raise ConflictError(f"pod {name}: uid precondition failed", 409, "Conflict")
            if f"{namespace}/{name}" in self.pdb_blocked and (obj.get("status") or {}).get("phase") == "Running":
                raise TooManyRequestsError(
                    "Cannot evict pod as it would violate the pod's disruption budget.", 429, "TooManyRequests")
            if not dry_run:
                self._remove_or_terminate(PODS, obj)

    def finish_terminations(self) -> None:
        """What the kubelet (kwok) does: terminating pods go away."""
        with self._lock:
            for key, obj in list(self.objects.items()):
                if key[0] == PODS.plural and obj["metadata"].get("deletionTimestamp"):
                    del self.objects[key]


class FakeStore:
    """``Store`` view over a FakeKube (always consistent: no watch lag)."""

    def __init__(self, kube: FakeKube) -> None:
        self.kube = kube

    def items(self, res: Resource) -> list[dict[str, Any]]:
        return self.kube.of(res)

    def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        return self.kube.get_cached(res, name, namespace)

    def put(self, res: Resource, obj: dict[str, Any]) -> None:
        return None

    def has(self, res: Resource) -> bool:
        return True

    def stale(self) -> list[str]:
        return sorted(self.kube.stale_caches)


def raise_on(verb: str, plural: str, name: str | None = None, *, error: KubeError | None = None,
             dry_run: bool | None = None, times: int = 1) -> Fault:
    """A fault raising ``error`` for the first ``times`` matching calls."""
    left = [times]

    def fault(v: str, res: Resource, ns: str, n: str, dr: bool) -> None:
        if v == verb and res.plural == plural and (name is None or n == name) and \
                (dry_run is None or dr == dry_run) and left[0] > 0:
            left[0] -= 1
            raise error or KubeError(f"injected failure on {verb} {plural}/{n}", 500)

    return fault
