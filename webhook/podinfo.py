"""What the job kit needs on an elastic job's pods, written by the mutating webhook at CREATE.

The kit (``volcano_elastic_job``) reads the eviction notice and the announced size from a
downward-API file of the pod's annotations, ``/etc/podinfo/annotations`` unless
``VOLCANO_ELASTIC_PODINFO`` names another path, and annotates its own pod by ``POD_NAME``
(docs/checkpointing.md, "What the webhook adds"). Without them the kit cannot see a notice and
its rendezvous cannot complete early, so the webhook adds them to the ``pytorch`` container of
every pod of an elastic job instead of asking each researcher for ~13 lines of YAML.

What the pod already has is kept: a downward-API (or projected) volume of ``metadata.annotations``
mounted where the kit looks is used as it is, a ``POD_NAME`` or ``VOLCANO_ELASTIC_PODINFO`` of
the user's is never replaced, and a volume name or mount path the user took is not reused: the
volume gets the next free name, the mount moves to :data:`FALLBACK_DIR` (and the env var says so).
A reinvoked webhook therefore adds nothing the second time.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# The kit's names (jobkit/src/volcano_elastic_job/podinfo.py; tests/unit/test_webhook_podinfo.py
# holds them equal: the webhook does not import the kit).
PODINFO_ENV = "VOLCANO_ELASTIC_PODINFO"
POD_NAME_ENV = "POD_NAME"
MOUNT_DIR = "/etc/podinfo"  # the kit's default file is MOUNT_DIR/FILE
FILE = "annotations"
VOLUME = "volcano-elastic-podinfo"
FALLBACK_DIR = "/var/run/volcano-elastic/podinfo"  # when the user mounted something at MOUNT_DIR
ANNOTATIONS_FIELD = "metadata.annotations"


@dataclass(slots=True)
class PodinfoPlan:
    """For the pytorch container at index ``container``: env vars to append, other ops, warnings."""

    env: list[dict[str, Any]] = field(default_factory=list)
    ops: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def podinfo_volume(name: str = VOLUME) -> dict[str, Any]:
    return {"name": name, "downwardAPI": {"items": [{"path": FILE, "fieldRef": {"fieldPath": ANNOTATIONS_FIELD}}]}}


def pod_name_env() -> dict[str, Any]:
    return {"name": POD_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}


def _projects_annotations(volume: Mapping[str, Any], rel: str) -> bool:
    """Whether ``volume`` writes the pod's annotations at ``rel`` inside its mount."""
    sources: list[Any] = []
    if isinstance(volume.get("downwardAPI"), Mapping):
        sources.append(volume["downwardAPI"])
    projected = volume.get("projected")
    if isinstance(projected, Mapping) and isinstance(projected.get("sources"), list):
        sources += [s["downwardAPI"] for s in projected["sources"]
                    if isinstance(s, Mapping) and isinstance(s.get("downwardAPI"), Mapping)]
    for source in sources:
        for item in source.get("items") or []:
            if (isinstance(item, Mapping) and posixpath.normpath(str(item.get("path", ""))) == rel
                    and isinstance(item.get("fieldRef"), Mapping)
                    and item["fieldRef"].get("fieldPath") == ANNOTATIONS_FIELD):
                return True
    return False


def _overlaps(a: str, b: str) -> bool:
    a, b = posixpath.normpath(a), posixpath.normpath(b)
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def _coverage(path: str, mounts: Sequence[Mapping[str, Any]], volumes: Mapping[str, Mapping[str, Any]]) -> str:
    """"live" when a mount makes ``path`` the annotations file, "subpath" when only a subPath mount
    does (the kubelet never updates those), "" when nothing does."""
    path = posixpath.normpath(path)
    found = ""
    for m in mounts:
        mount_path = posixpath.normpath(str(m.get("mountPath", "")))
        volume = volumes.get(str(m.get("name")))
        if volume is None:
            continue
        sub = m.get("subPath") or m.get("subPathExpr")
        if sub:
            if mount_path == path and _projects_annotations(volume, posixpath.normpath(str(sub))):
                found = "subpath"
            continue
        if path.startswith(mount_path.rstrip("/") + "/") and \
                _projects_annotations(volume, path[len(mount_path.rstrip("/")) + 1:]):
            return "live"
    return found


def _free_name(taken: set[str]) -> str:
    name, n = VOLUME, 2
    while name in taken:
        name, n = f"{VOLUME}-{n}", n + 1
    return name


def plan_podinfo(spec: Mapping[str, Any], index: int, container: Mapping[str, Any],
                 env: Mapping[str, Mapping[str, Any]]) -> PodinfoPlan:
    """What to add to the pytorch container ``container`` (``spec.containers[index]``, whose env
    by name is ``env``) and to the pod's volumes so that the kit finds its pod info and its name."""
    out = PodinfoPlan()
    raw_volumes = spec.get("volumes")
    volumes = {str(v.get("name")): v for v in raw_volumes or [] if isinstance(v, Mapping)}
    mounts = [m for m in container.get("volumeMounts") or [] if isinstance(m, Mapping)]

    if POD_NAME_ENV not in env:
        out.env.append(pod_name_env())
    elif (env[POD_NAME_ENV].get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath") != "metadata.name":
        out.warnings.append(f"volcano-elastic: {POD_NAME_ENV} is set and kept, but not to the pod's own name "
                            "(fieldRef metadata.name): the job kit's record_checkpoint() annotates the pod it names")

    user_path = env.get(PODINFO_ENV)
    if user_path is not None:
        value = user_path.get("value")
        if "valueFrom" in user_path or not isinstance(value, str) or not value:
            return out  # the user's own arrangement, not ours to judge
        state = _coverage(value, mounts, volumes)
        if state != "live":
            out.warnings.append(
                f"volcano-elastic: {PODINFO_ENV}={value!r} is set and kept, but "
                + ("it is mounted with subPath, which the kubelet never updates"
                   if state == "subpath" else "no downward-API volume of metadata.annotations is mounted there")
                + ": the job kit will not see eviction notices or the announced worker count")
        return out

    state = _coverage(posixpath.join(MOUNT_DIR, FILE), mounts, volumes)
    if state == "live":
        return out
    if state == "subpath":
        out.warnings.append(f"volcano-elastic: {MOUNT_DIR}/{FILE} is mounted with subPath, which the kubelet "
                            f"never updates; the pod info is mounted again at {FALLBACK_DIR} ({PODINFO_ENV})")
    directory = MOUNT_DIR
    if state or any(_overlaps(str(m.get("mountPath", "")), MOUNT_DIR) for m in mounts):
        directory = FALLBACK_DIR
        if any(_overlaps(str(m.get("mountPath", "")), FALLBACK_DIR) for m in mounts):
            out.warnings.append(f"volcano-elastic: {MOUNT_DIR} and {FALLBACK_DIR} are both taken by the "
                                "pytorch container's own mounts, so the pod info is not mounted: the job kit "
                                f"will not see eviction notices (mount it yourself and set {PODINFO_ENV})")
            return out
        out.env.append({"name": PODINFO_ENV, "value": posixpath.join(directory, FILE)})
    name = _free_name(set(volumes))
    if raw_volumes is None:
        out.ops.append({"op": "add", "path": "/spec/volumes", "value": [podinfo_volume(name)]})
    else:
        out.ops.append({"op": "add", "path": "/spec/volumes/-", "value": podinfo_volume(name)})
    mount = {"name": name, "mountPath": directory, "readOnly": True}
    if container.get("volumeMounts") is None:
        out.ops.append({"op": "add", "path": f"/spec/containers/{index}/volumeMounts", "value": [mount]})
    else:
        out.ops.append({"op": "add", "path": f"/spec/containers/{index}/volumeMounts/-", "value": mount})
    return out
