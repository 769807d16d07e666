"""The restart budget: torchrun's ``--max-restarts`` that our scale-downs use up.

Measured with torch 2.15 (``torch/distributed/elastic/agent/server/api.py``, ``_invoke_run``): new
nodes joining restart the worker group without counting, but a peer that dies (an eviction, a
Volcano preemption) makes every surviving agent's workers fail, and that costs one of
``--max-restarts`` (``PET_MAX_RESTARTS``, which the training operator sets from the PyTorchJob's
``elasticPolicy.maxRestarts``; unset means torchrun's default, 0) on every surviving agent. An agent
whose restarts are spent fails the job at the next failure. The count only grows while an agent
lives: a regrow does not give restarts back (the survivors keep their count; the new agents start
at 0, but the job's budget is the oldest agent's).

So each shrink of ours uses one restart of the job. The agent counts them in
``volcano-elastic.io/restarts-used`` once a restart really happened: when the first of a stamp's
victims is evicted or leaves (``Executor.count_restart``, once per scale record, marked by
``restart-counted``), not when the stamp is written, so a notice withdrawn, a plan undone or an
interrupted plan dropped never counts (issue 36, F2). Volcano's own preemptions count at their
stamp (they happened). The count is read from the PodGroup only: the PyTorchJob carries a copy for
people, which its owner may write (issue 36, T3: ``99`` would make the job never a victim). The
agent never shrinks a job that would be left with fewer
than ``RESTART_RESERVE`` restarts: one is kept for a failure that is not ours (a node lost, a worker
crash, an OOM), which we neither see nor count, so that it does not end the job.

A count that is there but is no number (hand-edited) is read as the budget spent: the job is never
shrunk until someone fixes or removes it (never a job killed by a guess).
"""

from __future__ import annotations

from dataclasses import dataclass

from .contract import in_place
from .keys import RESTARTS_USED
from .model import JobView, PodGroupView

# Restarts a shrink must leave the job: one for a failure that is not ours.
RESTART_RESERVE = 1
BUDGET_SPENT = "restart budget spent"  # the start of every exclusion reason of this rule


@dataclass(frozen=True, slots=True)
class RestartBudget:
    used: int | None  # our shrinks counted so far (None: the annotation is there but unreadable)
    max_restarts: int  # elasticPolicy.maxRestarts (0 when unset: torchrun's default)

    @property
    def left(self) -> int:
        """Restarts the job has left (0 when the count is unreadable)."""
        return 0 if self.used is None else max(0, self.max_restarts - self.used)

    @property
    def spent(self) -> bool:
        """One more shrink would leave the job fewer than ``RESTART_RESERVE`` restarts."""
        return self.left - 1 < RESTART_RESERVE

    def reason(self) -> str:
        """Why the job is no victim, e.g. ``restart budget spent (2 of 3 used, 1 kept in reserve)``."""
        if self.used is None:
            return f"{BUDGET_SPENT} ({RESTARTS_USED} unreadable)"
        if self.max_restarts == 0:
            return f"{BUDGET_SPENT} (maxRestarts 0: one eviction ends the job)"
        return f"{BUDGET_SPENT} ({self.used} of {self.max_restarts} used, {RESTART_RESERVE} kept in reserve)"


def parse_used(raw: str | None) -> int | None:
    """The annotation's count: 0 when absent, None when it is no non-negative integer."""
    if raw is None:
        return 0
    text = raw.strip()
    return int(text) if text.isdigit() else None


def restarts_used(pg: PodGroupView | None, job: JobView | None) -> int | None:
    """Our shrinks counted on the job: the PodGroup's count (0 without a PodGroup), None when it is
    unreadable. ``job`` (the PyTorchJob, which its owner may write) is not read: a PodGroup
    recreated by hand starts from 0 (docs/failure-model.md)."""
    del job  # tenant-writable: never trusted for a decision about other tenants
    if pg is None:
        return 0
    return parse_used(pg.annotations.get(RESTARTS_USED))


def budget_of(pg: PodGroupView | None, job: JobView | None) -> RestartBudget | None:
    """The job's restart budget, or None when its PyTorchJob is not known (a dump of pods and
    PodGroups only: nothing says what torchrun was given, so the rule does not apply), or resizes in
    place (``resize: in-place``, issue 39: a planned shrink restarts nothing)."""
    if job is None or in_place(job.annotations):
        return None
    max_restarts = job.max_restarts if job.max_restarts is not None and job.max_restarts > 0 else 0
    return RestartBudget(restarts_used(pg, job), max_restarts)


def next_count(pg_annotations: dict[str, str], job_annotations: dict[str, str] | None = None) -> str:
    """The count to write for one more restart: one more than the PodGroup's count (an unreadable
    one counts as 0 here: the write repairs it). ``job_annotations`` are not read (tenant-writable)."""
    del job_annotations
    n = parse_used(pg_annotations.get(RESTARTS_USED))
    return str((n or 0) + 1)


def previous_count(written: str) -> str | None:
    """The count to put back when a scale-down's stamp is taken back: one less than the count it
    wrote (``next_count``: the larger count before it, plus one), None (removed) at 0."""
    n = parse_used(written)
    return str(n - 1) if n is not None and n > 1 else None
