"""Jobs resized in place (issue 39), the agent's writes: ``shrink_in_place`` for a ``ShrinkInPlace``
(the victims' PodGroups stamped, the victims claimed for their gang with the deadline of their bounded
wait, all or none, through ``notice.Notices``) and ``announce_resize`` for each ``AnnounceSize`` that
carries a generation (``resize-generation`` and ``target-workers`` on every pod of the job, ``leaving``
on the victims too, one patch per pod). The victims are evicted by the notice machinery once their pod
says ``left`` or their wait ran out (``policy/notices.py``, ``notices.act_on_notices``). No writer here
spends a torchrun restart: the scale record's path is ``in-place``."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime

from ..kube.errors import KubeError, NotFoundError
from ..policy import contract, keys
from ..policy.actions import AnnounceSize, ShrinkInPlace
from ..policy.parse import format_time
from .executor import CycleReport, Executor, log, split
from .notices import claim_or_undo

PATH = "in-place"  # the scale record's path (restart_count.DOWN_PATHS leaves it out: no restart)


def shrink_in_place(ex: Executor, action: ShrinkInPlace, now: datetime, report: CycleReport) -> None:
    """Carry out one gang's ``ShrinkInPlace``: stamp each victim job's PodGroup (cooldown and scale
    record, path ``in-place``; the ``last-decision`` says "in place"), then claim every victim for the
    gang with its deadline (``Notices.give``: dry-run evictions, then ``evicted-for`` and
    ``evict-after``, all or none); the stamps are taken back when that fails."""
    if ex.dry_run:
        return
    gang, evictions = action.gang, action.evictions
    jobs = sorted({e.job for e in evictions})
    before = {j: ex.pg_annotations(j) for j in jobs}
    stamp = format_time(now)
    stamped: dict[str, dict[str, str]] = {}
    ex.fence(f"in-place shrink for {gang}")
    why = ""
    try:
        for j in jobs:
            mine = {e.pod: e.uid for e in evictions if e.job == j}
            ours = {keys.LAST_SCALE_TIME: stamp, keys.LAST_SCALE_DIRECTION: keys.Direction.DOWN.value,
                    keys.LAST_DECISION: contract.down_in_place(stamp, len(mine), gang).encode(),
                    keys.SCALE_RECORD: ex.new_record(PATH, gang, mine, before.get(j, {}), stamp)}
            stamped[j] = ours
            ex.stamp(j, ours)
    except KubeError as exc:
        why = f"error: {exc}"
    if claim_or_undo(ex, action, now, report, why, before, stamped, what="in-place shrink",
                     failed="in-place shrink not started", in_place=True):
        report.in_place.add(gang)


def announce_resize(ex: Executor, sizes: Iterable[AnnounceSize], report: CycleReport,
                    skip: Collection[str] = ()) -> None:
    """Write each in-place event (an ``AnnounceSize`` with a generation; ``skip``: jobs whose shrink or
    growth was not carried out this cycle): on every pod of the job one patch with
    ``resize-generation: G`` and ``target-workers: N``, plus ``leaving: G`` on the pods that leave.
    A pod that cannot be patched is logged: the kit goes on at its size until every rank saw the event,
    and a victim is evicted at its deadline anyway (the job then restarts)."""
    if ex.dry_run:
        return
    for a in sizes:
        if not a.generation or a.job in skip:
            continue
        gen = contract.encode_count(a.generation)
        size = contract.encode_count(a.size)
        told = 0
        for pod in (*a.pods, *a.leaving):
            patch: dict[str, str | None] = {keys.RESIZE_GENERATION: gen, keys.TARGET_WORKERS: size}
            if pod in a.leaving:
                patch[keys.LEAVING] = gen
            try:
                ex.patch_pod_annotations(pod, patch)
            except NotFoundError:
                continue
            except KubeError as exc:
                log.warning("in-place event not told to a pod", extra={"pod": pod, "job": a.job, "error": str(exc)})
                continue
            told += 1
        report.resized[a.job] = a.generation
        log.info("in-place event announced", extra={"job": a.job, "generation": a.generation, "size": a.size,
                                                    "leaving": list(a.leaving), "pods": told})
        ref = ex.job_ref(a.job)
        if ref is not None:
            leaving = f"; leaving: {', '.join(split(p)[1] for p in a.leaving)}" if a.leaving else ""
            ex.recorder.emit(ref, "Normal", "ResizingInPlace",
                             f"in place: event {a.generation} resizes the job to {a.size} worker(s) without a "
                             f"restart{leaving}")
