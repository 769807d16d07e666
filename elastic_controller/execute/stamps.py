"""Cooldown stamps the agent writes outside a plan: an unreadable ``last-scale-time`` repaired
(``repair_stamps``), and Volcano's own preemptions counted as scale events (``Preemptions``)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

from ..kube.errors import KubeError
from ..kube.resources import PODGROUPS, PODS, PYTORCHJOBS, Resource
from ..policy import contract, keys
from ..policy.model import Snapshot
from ..policy.parse import format_time, parse_time
from .executor import Executor, log, split


def _path(key: str) -> str:
    return "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")


# The job's copies of the PodGroup's record: its owner may write them (``edit``), we never read them.
JOB_COPIES = (keys.RESTARTS_USED, keys.LAST_SCALE_TIME)


def check_job_copies(ex: Executor, snapshot: Snapshot) -> list[str]:
    """A PyTorchJob whose copy of ``restarts-used`` or ``last-scale-time`` differs from its PodGroup's
    (issue 36, T3/T4: a tenant wrote 99, garbage or 2099 on its own job) is read from the PodGroup
    anyway (policy/budget.py, policy/cooldowns.py); here the copy is set back to the PodGroup's value
    (JSON patch ``test``: only while it still is the value seen) and a Warning Event
    ``UntrustedJobAnnotation`` says so. Returns the jobs repaired (ns/name)."""
    groups = {pg.key: pg for pg in snapshot.podgroups}
    repaired: list[str] = []
    for job in snapshot.jobs:
        pg = groups.get(job.key)
        if pg is None or pg.labels.get(keys.MANAGED_BY_LABEL) != keys.MANAGED_BY:
            continue
        ops: list[dict[str, Any]] = []
        said: list[str] = []
        for key in JOB_COPIES:
            theirs, ours = job.annotations.get(key), pg.annotations.get(key)
            if theirs is None or theirs == ours:
                continue
            ops.append({"op": "test", "path": _path(key), "value": theirs})
            ops.append({"op": "replace", "path": _path(key), "value": ours} if ours is not None else
                       {"op": "remove", "path": _path(key)})
            said.append(f"{key}={theirs[:40]!r} (the PodGroup says {ours or 'nothing'})")
        if not ops:
            continue
        ex.fence(f"repair pytorchjob {job.key}")
        try:
            out = ex.api.patch(PYTORCHJOBS, job.name, ops, job.namespace, patch_type="json")
        except KubeError as exc:  # changed since (a test failed), or gone: the next cycle looks again
            log.info("job copy not repaired", extra={"job": job.key, "error": str(exc)})
            continue
        ex.store.put(PYTORCHJOBS, out)
        repaired.append(job.key)
        log.warning("job annotations differ from the PodGroup's record: not read, set back",
                    extra={"job": job.key, "values": said})
        ref = ex.job_ref(job.key)
        if ref is not None:
            ex.recorder.emit(ref, "Warning", "UntrustedJobAnnotation",
                             "not read (the PodGroup's record is), set back to the PodGroup's: " + "; ".join(said))
    return repaired


def repair_stamps(ex: Executor, snapshot: Snapshot, now: datetime) -> int:
    """An unreadable ``last-scale-time`` on a PodGroup counts as a scale event now: rewrite it
    as the time we first saw it (so the cooldown runs out one day) and say so with a Warning Event.
    Only while the bad value is still there (JSON patch ``test``). Returns how many were found."""
    bad: list[tuple[Resource, str, str]] = []
    for pg in snapshot.podgroups:
        if pg.last_scale_invalid and pg.labels.get(keys.MANAGED_BY_LABEL) == keys.MANAGED_BY:
            bad.append((PODGROUPS, pg.key, pg.annotations.get(keys.LAST_SCALE_TIME, "")))
    stamp = format_time(now)
    path = _path(keys.LAST_SCALE_TIME)
    for res, key, value in bad:
        ns, name = split(key)
        ex.fence(f"repair {res.plural} {key}")
        try:
            out = ex.api.patch(res, name, [{"op": "test", "path": path, "value": value},
                                           {"op": "replace", "path": path, "value": stamp}], ns,
                               patch_type="json")
        except KubeError as exc:
            log.warning("unreadable cooldown stamp not repaired", extra={"job": key, "error": str(exc)})
            continue
        ex.store.put(res, out)
        ref = ex.job_ref(key)
        if ref is not None:
            ex.recorder.emit(ref, "Warning", "InvalidScaleStamp",
                             f"{keys.LAST_SCALE_TIME} on the {res.kind} was {value[:60]!r}, not a time: "
                             f"read as a scale event at {stamp} (cooldown in force from then)")
    return len(bad)


def preemption_time(pod: dict[str, Any]) -> datetime | None:
    """When Volcano marked ``pod`` for preemption (condition DisruptionTarget, reason
    PreemptionByScheduler), else None."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "DisruptionTarget" and cond.get("reason") == "PreemptionByScheduler" and \
                cond.get("status", "True") == "True":
            return parse_time(cond.get("lastTransitionTime")) or datetime.now(UTC)
    return None


class Preemptions:
    """Pods Volcano preempted itself (DisruptionTarget/PreemptionByScheduler) are scale events: their
    job's PodGroup gets a cooldown stamp at the condition's time. Volcano deletes the pods it preempts
    right after marking them: ``note`` remembers them from the watch events (group ns/name ->
    (condition time, pod ns/name)) so no cycle misses one; ``count`` stamps them."""

    def __init__(self) -> None:
        self._pending: dict[str, tuple[datetime, list[str]]] = {}
        self._lock = threading.Lock()

    def note(self, obj: dict[str, Any]) -> bool:
        """A pod's watch event (not ADDED): True when it marks a preemption (remembered)."""
        at = preemption_time(obj)
        meta = obj.get("metadata") or {}
        group = (meta.get("annotations") or {}).get(keys.GROUP_NAME) or \
            (meta.get("labels") or {}).get(keys.GROUP_NAME)
        if at is None or not group:
            return False
        key = f"{meta.get('namespace')}/{group}"
        with self._lock:
            prev = self._pending.get(key)
            pods = (prev[1] if prev else []) + [f"{meta.get('namespace')}/{meta.get('name')}"]
            self._pending[key] = (max(at, prev[0]) if prev else at, sorted(set(pods)))
        return True

    def count(self, ex: Executor, snapshot: Snapshot, now: datetime) -> list[str]:
        """Stamp the jobs of the preemptions noted or seen in ``snapshot``; returns the pods newly counted."""
        seen: dict[str, list[str]] = {}
        latest: dict[str, datetime] = {}
        with self._lock:
            pending, self._pending = self._pending, {}
        for group, (at, pods) in pending.items():
            latest[group] = at
            seen[group] = list(pods)
        for view in snapshot.pods:
            if not view.preempted_by_scheduler or not view.group_key:
                continue
            raw = ex.store.get(PODS, view.name, view.namespace) or {}
            at = preemption_time(raw) or now
            if view.key not in seen.get(view.group_key, []):
                seen.setdefault(view.group_key, []).append(view.key)
            if view.group_key not in latest or at > latest[view.group_key]:
                latest[view.group_key] = at
        if ex.dry_run:
            return []
        stamped: list[str] = []
        for key, at in latest.items():
            if not ex.ours(key):
                continue
            last = parse_time(ex.pg_annotations(key).get(keys.LAST_SCALE_TIME))
            if last is not None and last >= at.replace(microsecond=0):
                continue
            stamp = format_time(at)
            try:
                ex.stamp(key, {keys.LAST_SCALE_TIME: stamp, keys.LAST_SCALE_DIRECTION: keys.Direction.DOWN,
                               keys.RESTARTS_USED: ex.spent_restarts(key),
                               keys.LAST_DECISION: contract.down_preempted(stamp).encode()})
            except KubeError as exc:
                log.warning("scheduler preemption not stamped", extra={"job": key, "error": str(exc)})
                with self._lock:
                    self._pending.setdefault(key, (at, seen.get(key, [])))  # next cycle tries again
                continue
            stamped.append(key)
            pg = ex.store.get(PODGROUPS, split(key)[1], split(key)[0]) or {}
            ex.metrics.eviction(str((pg.get("spec") or {}).get("queue") or ""), "volcano-preemption")
            ref = ex.job_ref(key)
            if ref is not None:
                ex.recorder.emit(ref, "Warning", "PreemptedByScheduler",
                                 "Volcano preempted pod(s) of this job; counted as a scale event (cooldown)")
        return [p for k in stamped for p in seen[k]]
