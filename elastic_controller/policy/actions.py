"""What one cycle decided, as actions: plain, frozen values carrying every decided value (ARCHITECTURE.md,
"The agent's cycle", "Decide once, write as data").

``cycle.decide`` returns them; the agent's writers (``execute/``) carry each kind out without deciding
anything more, the simulator applies them to its own state, ``plan`` and ``status`` print them. A new
kind of decision is a new action here with its writer there.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from .decisions import CyclePlan, Eviction, GangDecision, GateRelease, HoldNote
from .notices import DueNotice, NoticeReview, Withdrawal

_A = TypeVar("_A")


@dataclass(frozen=True, slots=True)
class SpendRestart:
    """One of torchrun's restarts of ``job`` happened (issue 36, F2: counted once it happened, once
    per scale record, ``policy/restart_count.py``): ``restarts-used`` becomes ``used`` on its PodGroup,
    marked ``restart-counted: record``, only while that record is still there and uncounted and the
    count is still ``used - 1`` (a compare-and-swap; otherwise the next cycle decides again).

    ``record``: the scale record whose victims left; "" in an ``Evict``: the record that action's own
    stamp writes (its restart is spent once one of its evictions succeeded)."""

    job: str  # ns/podgroup
    used: int  # the count to write
    record: str = ""


@dataclass(frozen=True, slots=True)
class Evict:
    """A starving gang's victims, evicted now (the immediate path: docs/failure-model.md)."""

    gang: str
    victims: tuple[Eviction, ...]
    # one per victim job, in job order: spent once that job's first eviction succeeded (never with the stamp)
    restarts: tuple[SpendRestart, ...]

    @property
    def fairness(self) -> bool:
        """The fairness scale-down's victims (issue 38): ``gang`` is the least-served job they give
        their room to, a running job, not a gang (``Eviction.fairness``)."""
        return any(e.fairness for e in self.victims)


@dataclass(frozen=True, slots=True)
class Noticed:
    victim: Eviction
    evict_after: datetime  # the notice's deadline (whole seconds, never before now + noticeSeconds)


@dataclass(frozen=True, slots=True)
class GiveNotice:
    """A starving gang's victims put under an eviction notice (any victim's queue gives one)."""

    gang: str
    victims: tuple[Noticed, ...]  # the cooldown starts with the notice; a restart only once a victim left

    @property
    def evictions(self) -> tuple[Eviction, ...]:
        return tuple(n.victim for n in self.victims)


@dataclass(frozen=True, slots=True)
class ShrinkInPlace:
    """A gang's victims of jobs resized in place (``resize: in-place`` on the PyTorchJob, issue 39):
    not evicted now. Their jobs' PodGroups are stamped (cooldown, scale record path ``in-place``: no
    torchrun restart is spent), each victim gets the in-flight ledger (``evicted-for``) and the bounded
    wait's deadline (``evict-after``), and the same cycle's ``AnnounceSize`` (with its ``generation``)
    tells every pod of the job the event, the victims that they leave. A later cycle evicts a victim
    once its pod says ``left: G`` or its deadline passed (``EvictDueNotice``)."""

    gang: str
    victims: tuple[Noticed, ...]  # evict_after: now + the victim's queue's inPlaceLeaveSeconds

    @property
    def evictions(self) -> tuple[Eviction, ...]:
        return tuple(n.victim for n in self.victims)


@dataclass(frozen=True, slots=True)
class EvictDueNotice:
    """A notice ran out, or its job checkpointed since: evict the victim now."""

    notice: DueNotice


@dataclass(frozen=True, slots=True)
class WithdrawNotice:
    """A notice no longer needed: its annotations are removed."""

    withdrawal: Withdrawal


@dataclass(frozen=True, slots=True)
class LiftGates:
    """One job grows: these scale-up gates are lifted (in one scale event)."""

    job: str
    releases: tuple[GateRelease, ...]


@dataclass(frozen=True, slots=True)
class AnnounceSize:
    """The number of workers ``job`` runs once this cycle's actions land (what ``target-workers``
    says, on each pod that will run torchrun): live pods not gated, not claimed as victims, not on a
    lost node (``world.ghosts_of``)."""

    job: str
    size: int
    pods: tuple[str, ...]  # ns/name of the pods it is written on
    # A job resized in place (issue 39): the event this cycle announces (its pods' highest
    # ``resize-generation`` + 1; 0: none, the job restarts as before) and the pods that leave at it
    # (this cycle's victims of the job). The agent writes ``resize-generation`` and ``target-workers``
    # on ``pods`` and ``leaving`` pods, plus ``leaving`` on the latter, one patch per pod
    # (``execute/inplace.announce_resize``); ``target-workers`` alone stays the controller's.
    generation: int = 0
    leaving: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RecordGang:
    """A starving gang's outcome as decided (its ``last-decision``; the writer says whether it was carried out)."""

    decision: GangDecision


@dataclass(frozen=True, slots=True)
class Hold:
    """A job's growth held back, and why."""

    job: str
    note: HoldNote


Action = (SpendRestart | Evict | GiveNotice | ShrinkInPlace | EvictDueNotice | WithdrawNotice | LiftGates | AnnounceSize
          | RecordGang | Hold)


@dataclass(frozen=True, slots=True)
class CycleDecision:
    """One cycle's whole decision.

    ``actions``: in the order they are carried out (notices acted on first, then the restarts that
    happened and are not counted yet, then each gang's evictions or notices, the gate lifts, the
    sizes announced, the records). ``plan``: the plan they come from, told as the agent records it
    (due victims are actions, not evictions; reasons without the seconds a notice has left, so a
    stored ``last-decision`` stays the same all through it).
    ``shown``: the same plan as ``plan`` and ``status`` print it (due victims listed first among the
    evictions, a notice's time left in its gang's reason). ``notices``: the review of the notices
    already given."""

    plan: CyclePlan
    shown: CyclePlan
    notices: NoticeReview
    actions: tuple[Action, ...]

    def of(self, kind: type[_A]) -> tuple[_A, ...]:
        """The actions of one kind, in order."""
        return tuple(a for a in self.actions if isinstance(a, kind))
