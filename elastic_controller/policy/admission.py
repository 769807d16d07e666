"""Admission that does not starve the waiting (issue 38): which new jobs to hold behind a waiting gang.

Volcano admits and places any job whose gang (its ``minMember`` pods) fits, in its queue's order,
without head-of-line blocking: a gang that does not fit (a rigid job of 4 workers, an elastic job's
min set) is overtaken by every later job whose gang does, and under elastic the later elastic jobs
fill the room at their min. A queue's ``admission`` setting decides what a *new* job (its gang not
yet placed, its PodGroup not yet admitted) does while an older gang of its queue waits:

- ``volcano``: nothing held (Volcano's own admission, the behaviour before);
- ``holdElastic``: a new **elastic** job is held (its PodGroup withheld) while the oldest waiting
  gang of its queue waits, unless its gang fits beside that gang's reservation (below); rigid jobs
  are admitted as before;
- ``reserve``: EASY backfilling without run-time estimates: the oldest waiting gang of the queue
  holds a reservation and *every* later new job is held unless its gang fits beside it.

"Fits beside": the later gang plus the waiting gang fit into the queue's room for gangs, its
deserved GPUs (``room``) less the GPUs of the min sets of its running jobs (elastic workers above
min can be taken back by the agent, so they do not count against the room). The oldest waiting gang of
a queue reserves only when it fits in that room now, that is when the agent's evictions of elastic
workers above min can serve it: a gang that waits for running jobs to end (whose run times nobody
knows) would hold the jobs behind it for as long, with the GPUs idle (measured: much worse on every
class, docs/measurements.md "Admission behind a waiting gang"). Only the oldest waiting gang reserves.

Pure: the caller (the simulator's enqueue, the controller before it creates a PodGroup) passes the
gangs of every queue and the rooms; the answer names each held job with its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

ADMISSION_VOLCANO = "volcano"
ADMISSION_HOLD_ELASTIC = "holdElastic"
ADMISSION_RESERVE = "reserve"
ADMISSION = (ADMISSION_VOLCANO, ADMISSION_HOLD_ELASTIC, ADMISSION_RESERVE)


def gang_workers(min_workers: int, max_workers: int, whole_up_to: int) -> int:
    """The workers a job's gang (its PodGroup's ``minMember``) asks for: its min, or its max when its max
    is at most ``whole_up_to`` (the queue's ``wholeGangUpTo``): such a small job starts whole or not at
    all, as under static-max, instead of running at its min in the room the big jobs leave."""
    if min_workers < 1 or max_workers < min_workers:
        raise ValueError(f"workers must satisfy 1 <= min <= max, got min {min_workers}, max {max_workers}")
    return max_workers if max_workers <= whole_up_to else min_workers


@dataclass(frozen=True, slots=True)
class Gang:
    """One job of a queue as admission sees it."""

    key: str  # namespace/name
    queue: str
    rank: tuple[int, float, str]  # (-priority, creation time, key): the queue's order, first is oldest
    need: float  # GPUs of its gang (minMember workers)
    elastic: bool  # max workers above min
    started: bool  # its gang is placed (it runs)
    admitted: bool  # its PodGroup is let in already (created; Inqueue or further): never held again
    running_min: float = 0.0  # GPUs of its placed workers up to its min set (0 when not started)


@dataclass(frozen=True, slots=True)
class Hold:
    key: str
    behind: str  # the waiting gang it is held behind ("" when held by its queue's elasticMinShare)
    reason: str


def min_share_holds(queue: str, members: Iterable[Gang], room: float, share: float) -> dict[str, Hold]:
    """The new elastic jobs of ``queue`` held by its ``elasticMinShare``: the min sets of its elastic
    jobs (running, or let in and not yet placed) may hold at most ``share`` of its deserved GPUs
    (``room``). Rigid jobs and jobs admitted whole (``gang_workers``: their gang is their max) do not
    count and are never held here; new elastic jobs are let in in the queue's order while they fit
    under the limit, a later one whose min set fits passing an earlier one whose min set does not.
    When no elastic min set of the queue would run or be let in, the first held job is let in.

    Why: an elastic job's min set is never taken back (a job is not shrunk below its min), so the
    big elastic jobs that start at their min in a full queue keep its share until they end, and the
    rigid and small jobs that static sizes would have run there wait behind them (docs/measurements.md,
    "A share for min sets")."""
    limit = share * room
    members = list(members)
    held = (sum(g.running_min for g in members if g.elastic and g.started)
            + sum(g.need for g in members if g.elastic and g.admitted and not g.started))
    out: dict[str, Hold] = {}
    for g in sorted((g for g in members if g.elastic and not g.started and not g.admitted), key=lambda g: g.rank):
        if held + g.need > limit + 1e-6:
            out[g.key] = Hold(g.key, "", (
                f"held by elasticMinShare {share:g} of queue {queue}: the min sets of its elastic jobs hold "
                f"{held:g} of its {room:g} deserved GPUs, and this job's ({g.need:g} GPUs) would take them past "
                f"{limit:g}; it is let in when they leave room (rigid jobs and jobs admitted whole do not count)"))
            continue
        held += g.need
    if out and held <= 1e-6:
        # No elastic min set of the queue runs or is let in: nothing could leave room for the first
        # held job (held, it would wait until other jobs raise the queue's share, or forever, since a
        # queue's deserved share is capped at what its jobs ask for). It is let in.
        del out[next(iter(out))]
    return out


def holds(gangs: Iterable[Gang], room: Mapping[str, float], mode: Callable[[str], str],
          min_share: Callable[[str], float] = lambda _q: 1.0) -> dict[str, Hold]:
    """The new jobs held, by key: behind the oldest waiting gang of their queue (``mode``), or by their
    queue's ``elasticMinShare`` (``min_share``, ``min_share_holds``; 1 holds nothing).

    ``room``: each queue's GPUs for gangs (its deserved share; a queue missing here holds nothing).
    ``mode``: each queue's ``admission`` setting (``ADMISSION``)."""
    by_queue: dict[str, list[Gang]] = {}
    for g in gangs:
        by_queue.setdefault(g.queue, []).append(g)
    out: dict[str, Hold] = {}
    for queue, members in by_queue.items():
        how = mode(queue)
        share = min_share(queue)
        if queue in room and share < 1.0:
            out.update(min_share_holds(queue, members, room[queue], share))
        if how == ADMISSION_VOLCANO or queue not in room:
            continue
        if how not in ADMISSION:
            raise ValueError(f"queue {queue!r}: admission must be one of {', '.join(ADMISSION)}, got {how!r}")
        free = room[queue] - sum(g.running_min for g in members if g.started)
        waiting = sorted((g for g in members if not g.started), key=lambda g: g.rank)
        head = waiting[0] if waiting and waiting[0].need <= free + 1e-6 else None
        if head is None:
            continue
        for g in waiting[1:]:
            if g.admitted or g.key in out:
                continue
            if how == ADMISSION_HOLD_ELASTIC and not g.elastic:
                continue
            if g.need + head.need <= free + 1e-6:
                continue  # fits beside the reservation: backfilled
            out[g.key] = Hold(g.key, head.key, (
                f"held behind {head.key}, the oldest waiting gang of queue {queue} ({head.need:g} GPUs): "
                f"this job's gang ({g.need:g} GPUs) does not fit beside it ({free:g} GPUs of the queue's "
                f"{room[queue]:g} are not held by running min sets); admission: {how}"))
    return out
