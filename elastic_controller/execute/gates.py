"""Lifting scale-up gates (the plan's ``GateRelease``s), per job: stamp the scale-up (cooldown state),
announce it with the job's Event, then lift each pod's gate; fewer lifted than planned says so."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from ..kube.api import KubeAPI
from ..kube.errors import KubeError, NotFoundError
from ..kube.resources import PODS
from ..policy import contract, keys
from ..policy.actions import LiftGates
from ..policy.parse import format_time
from .executor import CycleReport, Executor, NotLeaderError, log, split


def lift_gate(api: KubeAPI, pod_key: str, gate: str) -> dict[str, Any] | None:
    """Remove only ``gate`` from the pod's schedulingGates (strategic merge keyed by name; other
    gates survive). None when the pod is gone."""
    ns, name = split(pod_key)
    patch = {"spec": {"schedulingGates": [{"$patch": "delete", "name": gate}]}}
    try:
        return api.patch(PODS, name, patch, ns, patch_type="strategic")
    except NotFoundError:
        return None


def lifting_decision(stamp: str, n: int, reason: str) -> str:
    """The job's ``last-decision`` while its scale-up runs: a plan, not yet a claim (a leader killed or
    deposed mid-way leaves this; the next one says how many were lifted: ``resume.check_records``)."""
    return contract.up_lifting(stamp, n, reason).encode()


def lifted_decision(stamp: str, lifted: int, n: int, reason: str, how: str = "") -> str:
    return contract.up_lifted(stamp, lifted, n, reason, how).encode()


def execute_releases(ex: Executor, lifts: Iterable[LiftGates], now: datetime, report: CycleReport) -> None:
    """Per ``LiftGates`` (one job): stamp the scale-up (its record names the pods), lift each gate,
    then say how many were lifted (``last-decision`` and the ``ScaledUp`` Event count the gates
    actually lifted, also when the Lease is lost mid-way)."""
    if ex.dry_run:
        return
    stamp = format_time(now)
    gate = ex.cfg.gating.gateName
    for lift in lifts:
        job, items = lift.job, lift.releases
        reason = items[0].reason
        ours: dict[str, str] = {}
        before = ex.pg_annotations(job)
        try:
            if ex.ours(job):
                uids = {r.pod: str(((ex.store.get(PODS, *reversed(split(r.pod))) or {}).get("metadata") or {})
                                   .get("uid") or "") for r in items}
                ours = {keys.LAST_SCALE_TIME: stamp, keys.LAST_SCALE_DIRECTION: keys.Direction.UP,
                        keys.LAST_DECISION: lifting_decision(stamp, len(items), reason),
                        keys.SCALE_RECORD: ex.new_record("up", "", uids, before, stamp)}
                ex.stamp(job, ours)
        except KubeError as exc:
            log.warning("scale-up not stamped; skipped", extra={"job": job, "error": str(exc)})
            continue
        ex.fault("gates-stamped")
        ref = ex.job_ref(job)
        lifted = 0
        try:
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
        except NotLeaderError:
            # Deposed mid-way: the Event (not a write to our objects) still says what was done; the
            # next leader corrects last-decision from the pods (resume.check_records).
            if ref is not None and lifted:
                ex.recorder.emit(ref, "Normal", "ScaledUp",
                                 f"lifted the scale-up gate of {lifted} of {len(items)} elastic pod(s) before "
                                 f"losing the Lease: {reason}")
            raise
        if ref is not None and lifted:
            ex.recorder.emit(ref, "Normal", "ScaledUp",
                             f"lifted the scale-up gate of {lifted} elastic pod(s): {reason}")
        if lifted < len(items) and ref is not None:
            ex.recorder.emit(ref, "Warning", "ScaleUpIncomplete",
                             f"lifted {lifted} of {len(items)} scale-up gate(s); the rest stay gated")
        if ours and not lifted:  # nothing scaled: the stamp is taken back (only while it is ours)
            try:
                ex.restore_pg(job, ours, before)
            except KubeError as exc:
                log.warning("scale-up stamp not taken back", extra={"job": job, "error": str(exc)})
        elif ours:
            final = lifted_decision(stamp, lifted, len(items), reason)
            try:
                ex.patch_pg(job, {keys.LAST_DECISION: final})
            except KubeError as exc:
                log.warning("scale-up's last-decision not written", extra={"job": job, "error": str(exc)})
