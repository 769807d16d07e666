"""A cycle's decision in, its writes out: one plain, fenced writer per action kind
(``policy/actions.py``), in the decision's order: the ``SpendRestart`` of restarts that happened and
are not counted yet (``Executor.count_restart``), each starving gang's ``Evict`` or ``GiveNotice``,
then the ``LiftGates``, then the records (every starving gang's ``RecordGang`` and held job's ``Hold``:
``last-decision`` and Event). The notice actions (``EvictDueNotice``, ``WithdrawNotice``) come earlier
in the cycle (``notices.act_on_notices``). Consecutive ``Evict`` actions go out in waves of gangs that share no
victim job, each wave in lockstep (``evictions.execute_eviction_waves``). ``AnnounceSize`` is the controller's to write
(``target-workers``, by the same rule, ``policy/announce.py``, once the pods change: two writers of one
annotation would race), except an in-place event (issue 39: ``ShrinkInPlace``, and an ``AnnounceSize``
with a generation, ``inplace.announce_resize``: the generation and the size in one patch per pod; the
controller then writes the same size). Every write is fenced (``Executor.fence``); no writer decides anything the
action does not say."""

from __future__ import annotations

from datetime import datetime
from itertools import groupby
from typing import cast

from ..policy.actions import AnnounceSize, CycleDecision, Evict, GiveNotice, LiftGates, ShrinkInPlace, SpendRestart
from ..policy.model import Snapshot
from .decisions import record_tasks, write_decisions
from .evictions import execute_eviction_waves
from .executor import CycleReport, Executor
from .gates import execute_releases
from .inplace import announce_resize, shrink_in_place
from .notices import give_notices


def execute_decision(ex: Executor, decision: CycleDecision, now: datetime, report: CycleReport,
                     snapshot: Snapshot | None = None) -> None:
    if not ex.dry_run:
        ex.count_restarts(decision.of(SpendRestart))
    lifts = decision.of(LiftGates)
    # The records no action's outcome changes (a gang that waits, a held job) go out alongside the
    # scale-ups' writes when there are any (one run: no writer idles), else with the others at the end.
    early = record_tasks(ex, decision, report, now, snapshot, early=True) if lifts else []
    # Consecutive Evicts go out in waves (evictions.py: gangs sharing no victim job in lockstep, one
    # pool run per step for all of them), consecutive GiveNotices in the same waves (notices.py: one
    # pool run per wave, each gang's writes in order); a ShrinkInPlace between them keeps its place.
    for kind, run in groupby(decision.actions, key=type):
        if kind is Evict:
            execute_eviction_waves(ex, cast(list[Evict], list(run)), now, report)
        elif kind is GiveNotice:
            give_notices(ex, cast(list[GiveNotice], list(run)), now, report)
        elif kind is ShrinkInPlace:
            for action in cast(list[ShrinkInPlace], list(run)):
                shrink_in_place(ex, action, now, report)
    execute_releases(ex, lifts, now, report, alongside=early)
    # issue 39: the in-place events of the jobs whose shrink or growth was carried out
    not_done = {e.job for a in decision.of(ShrinkInPlace) if a.gang in report.failed for e in a.evictions}
    released = set(report.released)
    not_done |= {a.job for a in lifts if not any(r.pod in released for r in a.releases)}
    announce_resize(ex, decision.of(AnnounceSize), report, not_done)
    write_decisions(ex, decision, report, now, snapshot, early=False if lifts else None)
