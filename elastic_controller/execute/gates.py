"""Lifting scale-up gates (the plan's ``GateRelease``s), per job: stamp the scale-up (cooldown state),
announce it with the job's Event, then lift each pod's gate; fewer lifted than planned says so."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from ..kube.api import KubeAPI
from ..kube.errors import KubeError, NotFoundError
from ..kube.resources import PODS
from ..policy import keys
from ..policy.decisions import GateRelease
from ..policy.parse import format_time
from .executor import CycleReport, Executor, log, split


def lift_gate(api: KubeAPI, pod_key: str, gate: str) -> dict[str, Any] | None:
    """Remove only ``gate`` from the pod's schedulingGates (strategic merge keyed by name; other
    gates survive). None when the pod is gone."""
    ns, name = split(pod_key)
    patch = {"spec": {"schedulingGates": [{"$patch": "delete", "name": gate}]}}
    try:
        return api.patch(PODS, name, patch, ns, patch_type="strategic")
    except NotFoundError:
        return None


def execute_releases(ex: Executor, releases: Iterable[GateRelease], now: datetime, report: CycleReport) -> None:
    if ex.dry_run:
        return
    by_job: dict[str, list[GateRelease]] = {}
    for r in releases:
        by_job.setdefault(r.job, []).append(r)
    stamp = format_time(now)
    gate = ex.cfg.gating.gateName
    for job, items in by_job.items():
        try:
            if ex.ours(job):
                ex.stamp(job, {keys.LAST_SCALE_TIME: stamp, keys.LAST_SCALE_DIRECTION: keys.Direction.UP,
                               keys.LAST_DECISION: f"{stamp} up: {len(items)} gate(s) lifted; "
                                                      f"{items[0].reason}"})
        except KubeError as exc:
            log.warning("scale-up not stamped; skipped", extra={"job": job, "error": str(exc)})
            continue
        ex.fault("gates-stamped")
        # The Event first: a leader killed between two lifts has announced every gate it lifted.
        ref = ex.job_ref(job)
        if ref is not None:
            ex.recorder.emit(ref, "Normal", "ScaledUp",
                             f"lifting the scale-up gate of {len(items)} elastic pod(s): {items[0].reason}")
        lifted = 0
        for r in items:
            try:
                ex.fence(f"lift gate of {r.pod}")
                out = lift_gate(ex.api, r.pod, gate)
            except KubeError as exc:
                log.warning("gate not lifted", extra={"pod": r.pod, "job": job, "error": str(exc)})
                continue
            if out is not None:
                ex.store.put(PODS, out)
            lifted += 1
            report.released.append(r.pod)
            ex.metrics.gate_release(r.queue, "scale-up")
            log.info("gate lifted", extra={"pod": r.pod, "job": job, "queue": r.queue, "node": r.node,
                                           "reason": r.reason})
            ex.fault("gate-lifted-one")
        if lifted < len(items) and ref is not None:
            ex.recorder.emit(ref, "Warning", "ScaleUpIncomplete",
                             f"lifted {lifted} of {len(items)} scale-up gate(s); the rest stay gated")
