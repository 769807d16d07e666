"""Lifting scale-up gates (the plan's ``GateRelease``s), per job: stamp the scale-up (cooldown state),
announce it with the job's Event, then lift each pod's gate; fewer lifted than planned says so."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
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


def execute_releases(ex: Executor, lifts: Iterable[LiftGates], now: datetime, report: CycleReport,
                     alongside: Sequence[tuple[str, Callable[[], None]]] = ()) -> None:
    """Per ``LiftGates`` (one job): stamp the scale-up (its record names the pods), lift each gate,
    then say how many were lifted (``last-decision`` and the ``ScaledUp`` Event count the gates
    actually lifted, also when the Lease is lost mid-way).

    Every job's writes in one run of ``Executor.pool`` (at most ``writers.WRITERS`` at once, one
    object's writes in order), each write started as soon as what it waits for has ended: a job's
    gates after its own stamp (a job whose stamp failed is skipped: a job is never scaled without
    its stamp), its Events and final ``last-decision`` (or its stamp taken back when nothing was
    lifted) and, alongside, the PyTorchJob's copy of a stamp that stays, after its own gates. No job
    waits on another's writes, and no writer idles at the end of a step (issue 36: the longest
    cycles at 1,000 nodes were scale-ups, each step waiting for its slowest write). ``alongside``:
    writes that depend on none of these (``decisions.early_records``), in the same run. A lost Lease
    or a crash starts nothing more; what was stamped is judged by the next leader from the pods
    (``resume.check_records``)."""
    if ex.dry_run:
        return
    lifts = list(lifts)
    if not lifts:
        _run_alone(ex, alongside)
        return
    stamp = format_time(now)
    gate = ex.cfg.gating.gateName
    befores = {lift.job: ex.pg_annotations(lift.job) for lift in lifts}
    stamps: dict[str, dict[str, str]] = {}  # job -> the stamp written for it
    lifted: dict[str, int] = {lift.job: 0 for lift in lifts}
    go: set[str] = set()  # jobs whose stamp step ended without error (stamped, or not our PodGroup)
    told: set[str] = set()  # jobs whose final last-decision (or take-back) was written
    lock = threading.Lock()

    def stamp_job(lift: LiftGates) -> None:
        job, items = lift.job, lift.releases
        if not ex.ours(job):  # (not our PodGroup: no stamp of ours to write; its gates still go)
            with lock:
                go.add(job)
            ex.fault("gates-stamped")
            return
        uids = {r.pod: str(((ex.store.get(PODS, *reversed(split(r.pod))) or {}).get("metadata") or {})
                           .get("uid") or "") for r in items}
        ours = {keys.LAST_SCALE_TIME: stamp, keys.LAST_SCALE_DIRECTION: keys.Direction.UP,
                keys.LAST_DECISION: lifting_decision(stamp, len(items), items[0].reason, items[0].in_place),
                keys.SCALE_RECORD: ex.new_record("up", "", uids, befores[job], stamp)}
        ex.stamp(job, ours, over=befores[job], copy=False)  # (its job's copy goes out with the last-decision)
        with lock:
            stamps[job] = ours
            go.add(job)
        ex.fault("gates-stamped")

    def lift_one(job: str, key: str) -> bool:
        """False when not tried (its job's stamp step failed)."""
        with lock:
            if job not in go:
                return False
        ex.fence(f"lift gate of {key}")
        out = lift_gate(ex.api, key, gate)
        if out is not None:
            ex.store.put(PODS, out)
        with lock:
            lifted[job] += 1
        ex.fault("gate-lifted-one")
        return True

    def finish(lift: LiftGates) -> None:
        with lock:
            ours, n, stamped = stamps.get(lift.job), lifted[lift.job], lift.job in go
        if not stamped:
            return
        _finish(ex, lift, n, ours, befores[lift.job], stamp)
        with lock:
            told.add(lift.job)

    def copy(lift: LiftGates) -> None:
        with lock:
            ours, n = stamps.get(lift.job), lifted[lift.job]
        if ours is not None and n:
            ex.copy_stamp(lift.job, ours)

    tasks: list[tuple[str, Callable[[], object]]] = list(alongside)
    after: list[tuple[int, ...]] = [()] * len(tasks)
    stamp_at: dict[str, int] = {}
    gates_at: dict[str, list[int]] = {}
    for lift in lifts:
        stamp_at[lift.job] = len(tasks)
        tasks.append((lift.job, partial(stamp_job, lift)))
        after.append(())
    for lift in lifts:
        gates_at[lift.job] = []
        for r in lift.releases:
            gates_at[lift.job].append(len(tasks))
            tasks.append((r.pod, partial(lift_one, lift.job, r.pod)))
            after.append((stamp_at[lift.job],))
    # The final last-decisions, and alongside them the jobs' copies of the stamps that stay (for
    # people, never read by a decision): each after its own job's gates.
    for lift in lifts:
        tasks.append((lift.job, partial(finish, lift)))
        after.append(tuple(gates_at[lift.job]))
        tasks.append((f"{lift.job} copy", partial(copy, lift)))
        after.append((stamp_at[lift.job], *gates_at[lift.job]))
    results = ex.pool.run(tasks, after)
    deposed: Exception | None = None
    for done in results[:len(alongside)]:
        if isinstance(done.error, NotLeaderError):
            deposed = deposed or done.error
        elif done.error is not None:
            raise done.error
    for lift in lifts:
        done = results[stamp_at[lift.job]]
        if isinstance(done.error, NotLeaderError):
            deposed = deposed or done.error
        elif isinstance(done.error, KubeError):
            log.warning("scale-up not stamped; skipped", extra={"job": lift.job, "error": str(done.error)})
        elif done.error is not None:
            raise done.error
        for r, i in zip(lift.releases, gates_at[lift.job], strict=True):
            done = results[i]
            if isinstance(done.error, NotLeaderError):
                deposed = deposed or done.error
                continue
            if isinstance(done.error, KubeError):
                log.warning("gate not lifted", extra={"pod": r.pod, "job": lift.job, "error": str(done.error)})
                continue
            if done.error is not None:
                raise done.error
            if not done.value:
                continue  # (its job's stamp step failed)
            report.released.append(r.pod)
            ex.metrics.gate_release(r.queue, "scale-up")
            log.info("gate lifted", extra={"pod": r.pod, "job": lift.job, "queue": r.queue, "node": r.node,
                                           "reason": r.reason})
    for done in results[len(tasks) - 2 * len(lifts):]:
        if isinstance(done.error, NotLeaderError):
            deposed = deposed or done.error
        elif done.error is not None:
            raise done.error  # (each KubeError is handled in _finish and copy_stamp)
    if deposed is not None:
        # Deposed mid-way: the Events (not writes to our objects) still say what was done for the jobs
        # not told yet; the next leader corrects last-decision from the pods (resume.check_records).
        for lift in lifts:
            ref = ex.job_ref(lift.job)
            if ref is not None and lifted[lift.job] and lift.job not in told:
                ex.recorder.emit(ref, "Normal", "ScaledUp",
                                 f"lifted the scale-up gate of {lifted[lift.job]} of {len(lift.releases)} elastic "
                                 f"pod(s) before losing the Lease: {lift.releases[0].reason}")
        raise deposed


def _run_alone(ex: Executor, tasks: Sequence[tuple[str, Callable[[], None]]]) -> None:
    """``alongside`` without a scale-up: its own run (a lost Lease raised once they ended)."""
    for done in ex.pool.run(tasks):
        if done.error is not None:
            raise done.error


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
