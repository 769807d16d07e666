"""Lifting scale-up gates (the plan's ``GateRelease``s), per job: stamp the scale-up (cooldown state),
announce it with the job's Event, then lift each pod's gate; fewer lifted than planned says so."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from functools import partial
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


def lifting_decision(stamp: str, n: int, reason: str, in_place: bool = False) -> str:
    """The job's ``last-decision`` while its scale-up runs: a plan, not yet a claim (a leader killed or
    deposed mid-way leaves this; the next one says how many were lifted: ``resume.check_records``)."""
    return contract.up_lifting(stamp, n, reason, in_place).encode()


def lifted_decision(stamp: str, lifted: int, n: int, reason: str, how: str = "", in_place: bool = False) -> str:
    return contract.up_lifted(stamp, lifted, n, reason, how, in_place).encode()


def execute_releases(ex: Executor, lifts: Iterable[LiftGates], now: datetime, report: CycleReport) -> None:
    """Per ``LiftGates`` (one job): stamp the scale-up (its record names the pods), lift each gate,
    then say how many were lifted (``last-decision`` and the ``ScaledUp`` Event count the gates
    actually lifted, also when the Lease is lost mid-way).

    In three steps over all the cycle's jobs, each step's writes concurrent (``Executor.pool``: at
    most ``writers.WRITERS`` at once, one object's writes in order), each step ended before the next
    begins: every job's stamp (a job whose stamp failed is skipped), then every gate of the stamped
    jobs, then each job's Events and final ``last-decision`` (or its stamp taken back when nothing
    was lifted) with, alongside, the PyTorchJob's copy of each stamp that stays. A job is never
    scaled without its stamp; a crash between steps leaves stamps whose pods say what happened
    (``resume.check_records``)."""
    if ex.dry_run:
        return
    lifts = list(lifts)
    if not lifts:
        return
    stamp = format_time(now)
    gate = ex.cfg.gating.gateName
    befores = {lift.job: ex.pg_annotations(lift.job) for lift in lifts}
    stamps: dict[str, dict[str, str]] = {}  # job -> the stamp written for it

    def stamp_job(lift: LiftGates) -> None:
        job, items = lift.job, lift.releases
        if not ex.ours(job):
            ex.fault("gates-stamped")
            return
        uids = {r.pod: str(((ex.store.get(PODS, *reversed(split(r.pod))) or {}).get("metadata") or {})
                           .get("uid") or "") for r in items}
        ours = {keys.LAST_SCALE_TIME: stamp, keys.LAST_SCALE_DIRECTION: keys.Direction.UP,
                keys.LAST_DECISION: lifting_decision(stamp, len(items), items[0].reason, items[0].in_place),
                keys.SCALE_RECORD: ex.new_record("up", "", uids, befores[job], stamp)}
        ex.stamp(job, ours, over=befores[job], copy=False)  # (its job's copy goes out with the last-decision)
        stamps[job] = ours
        ex.fault("gates-stamped")

    stamped: list[LiftGates] = []
    deposed: Exception | None = None
    for lift, done in zip(lifts, ex.pool.run([(lift.job, partial(stamp_job, lift)) for lift in lifts]),
                          strict=True):
        if isinstance(done.error, NotLeaderError):
            deposed = deposed or done.error
        elif isinstance(done.error, KubeError):
            log.warning("scale-up not stamped; skipped", extra={"job": lift.job, "error": str(done.error)})
        elif done.error is not None:
            raise done.error
        else:
            stamped.append(lift)
    if deposed is not None:
        # Deposed before a gate: whatever was stamped is judged by the next leader (check_records).
        raise deposed

    def lift_one(key: str) -> None:
        ex.fence(f"lift gate of {key}")
        out = lift_gate(ex.api, key, gate)
        if out is not None:
            ex.store.put(PODS, out)
        ex.fault("gate-lifted-one")

    results = iter(ex.pool.run([(r.pod, partial(lift_one, r.pod)) for lift in stamped for r in lift.releases]))
    lifted: dict[str, int] = {}
    for lift in stamped:
        lifted[lift.job] = 0
        for r in lift.releases:
            done = next(results)
            if isinstance(done.error, NotLeaderError):
                deposed = deposed or done.error
                continue
            if isinstance(done.error, KubeError):
                log.warning("gate not lifted", extra={"pod": r.pod, "job": lift.job, "error": str(done.error)})
                continue
            if done.error is not None:
                raise done.error
            lifted[lift.job] += 1
            report.released.append(r.pod)
            ex.metrics.gate_release(r.queue, "scale-up")
            log.info("gate lifted", extra={"pod": r.pod, "job": lift.job, "queue": r.queue, "node": r.node,
                                           "reason": r.reason})
    if deposed is not None:
        # Deposed mid-way: the Events (not writes to our objects) still say what was done; the next
        # leader corrects last-decision from the pods (resume.check_records).
        for lift in stamped:
            ref = ex.job_ref(lift.job)
            if ref is not None and lifted[lift.job]:
                ex.recorder.emit(ref, "Normal", "ScaledUp",
                                 f"lifted the scale-up gate of {lifted[lift.job]} of {len(lift.releases)} elastic "
                                 f"pod(s) before losing the Lease: {lift.releases[0].reason}")
        raise deposed
    tasks: list[tuple[str, Callable[[], None]]] = [
        (lift.job, partial(_finish, ex, lift, lifted[lift.job], stamps.get(lift.job), befores[lift.job], stamp))
        for lift in stamped]
    # The jobs' copies of the stamps that stay (for people, never read by a decision) go out
    # alongside the final last-decisions: one round less than before the gates.
    tasks += [(f"{lift.job} copy", partial(ex.copy_stamp, lift.job, stamps[lift.job]))
              for lift in stamped if lifted[lift.job] and lift.job in stamps]
    finals = ex.pool.run(tasks)
    for done in finals:
        if done.error is not None:
            raise done.error  # (each KubeError is handled in _finish: this is NotLeaderError)


def _finish(ex: Executor, lift: LiftGates, lifted: int, ours: dict[str, str] | None, before: dict[str, str],
            stamp: str) -> None:
    """One job's scale-up told: its Events, then its final ``last-decision`` (or, when nothing was
    lifted, its stamp taken back while it is still ours)."""
    job, items = lift.job, lift.releases
    reason, in_place = items[0].reason, items[0].in_place
    ref = ex.job_ref(job)
    if ref is not None and lifted:
        ex.recorder.emit(ref, "Normal", "ScaledUp", f"lifted the scale-up gate of {lifted} elastic pod(s): {reason}")
    if lifted < len(items) and ref is not None:
        ex.recorder.emit(ref, "Warning", "ScaleUpIncomplete",
                         f"lifted {lifted} of {len(items)} scale-up gate(s); the rest stay gated")
    if ours and not lifted:  # nothing scaled: the stamp is taken back (only while it is ours)
        try:
            ex.restore_pg(job, ours, before)
        except KubeError as exc:
            log.warning("scale-up stamp not taken back", extra={"job": job, "error": str(exc)})
    elif ours:
        final = lifted_decision(stamp, lifted, len(items), reason, in_place=in_place)
        try:
            ex.patch_pg(job, {keys.LAST_DECISION: final})
        except KubeError as exc:
            log.warning("scale-up's last-decision not written", extra={"job": job, "error": str(exc)})
