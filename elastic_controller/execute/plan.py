"""A cycle's decision in, its writes out: one plain, fenced writer per action kind
(``policy/actions.py``), in the decision's order: the ``SpendRestart`` of restarts that happened and
are not counted yet (``Executor.count_restart``), each starving gang's ``Evict`` or ``GiveNotice``,
then the ``LiftGates``, then the records (every starving gang's ``RecordGang`` and held job's ``Hold``:
``last-decision`` and Event). The notice actions (``EvictDueNotice``, ``WithdrawNotice``) come earlier
in the cycle (``notices.act_on_notices``). ``AnnounceSize`` is the controller's to write
(``target-workers``, by the same rule, ``policy/announce.py``, once the pods change: two writers of one
annotation would race). Every write is fenced (``Executor.fence``); no writer decides anything the
action does not say."""

from __future__ import annotations

from datetime import datetime

from ..policy.actions import CycleDecision, Evict, GiveNotice, LiftGates, SpendRestart
from ..policy.model import Snapshot
from .decisions import write_decisions
from .evictions import execute_evictions
from .executor import CycleReport, Executor
from .gates import execute_releases
from .notices import give_notice


def execute_decision(ex: Executor, decision: CycleDecision, now: datetime, report: CycleReport,
                     snapshot: Snapshot | None = None) -> None:
    if not ex.dry_run:
        ex.count_restarts(decision.of(SpendRestart))
    for action in decision.actions:
        if isinstance(action, Evict):
            execute_evictions(ex, action, now, report)
        elif isinstance(action, GiveNotice):
            give_notice(ex, action, now, report)
    execute_releases(ex, decision.of(LiftGates), now, report)
    write_decisions(ex, decision, report, now, snapshot)
