"""The fairness scale-down (issue 38; the design "Scheduler for TrainingJob", its step 7): when
nothing else moves, give a job that waits to grow some of the elastic workers of a job of its queue
that has had far more of the cluster.

Growth alone never takes back what a job got when the room was free: the first job to grow keeps
its workers until it ends, however long it has held them. So, for each queue with
``fairnessScaleDown`` where nothing else moves this cycle (**no gang of the queue waits**, starving
or not: gangs are served first, by the eviction planner; with ``fairnessWhileGangsWait``, a gang the
planner decided ``wait`` for does not count: no victims serve it, and moving elastic workers between
the queue's running jobs leaves its allocation as it was; **no gate of the queue was lifted**: there
was room), one scale-down per queue per cycle:

- the **taker** is the least served (``JobState.served``, ``attained.py``) of the queue's running
  jobs with gated workers that may grow now: at or above min and below max, not in cooldown or
  snoozed, and, when it publishes checkpoints, within ``scaleUpAfterCheckpointSeconds`` of its last
  one (the growth it waits for would happen);
- the **giver** is the most served job of the same queue that may lose workers: not the taker, out
  of cooldown, no ``World.never_victim`` reason (``minWorkersToShrink``, or the queue's
  ``fairnessMinWorkersToShrink`` when set; allowed counts; its restart budget), elastic workers past
  ``minRuntimeSeconds``, its own checkpoint within the same window (the restart costs it little
  work), and **far from even**: its service at least ``fairnessRatio`` times the taker's and
  ``fairnessMinGpuSeconds`` more;
- the giver loses its highest-index elastic workers (none the eviction planner chose this cycle, no
  ghost on a lost node: ``World.ghosts``, and no job that already loses one), as few as make room,
  with every terminating pod gone and the cycle's other victims too (a job with allowed counts: as
  few as leave it at one of them, ``worker-counts`` / ``-step``), for the growth the taker waits
  for (``minScaleUpGain`` of its workers, at least one, at most to its max), never below its min
  nor more than ``maxEvictionsPerCycle``; when no such count makes that room, or the room is there
  already (something else holds the taker back), nothing is taken.

The evictions name the taker as what they are for (``evicted-for``) and are of kind
``EvictionKind.FAIRNESS`` (what the giver's Events, ``last-decision`` and ``status`` say); the giver's scale-down starts
its cooldown and snooze like any shrink, and the freed room goes by the scale-up order
(``ordering.scale_up_key``: the least served first) in a later cycle. Pure: same world, same answer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .cooldowns import old_enough
from .decisions import Eviction, EvictionKind, GangDecision, GateRelease
from .fit import Capacity, pod_demand
from .gates import checkpoint_age, held_by_job, snoozed
from .model import PodView
from .ordering import scale_up_pod_rank
from .world import ALLOWED_COUNTS, TOO_SMALL, JobState, World, allowed_of, no_smaller_count

__all__ = ["plan_fairness"]


def _within_window(world: World, job: JobState, group: str) -> bool:
    window = world.policy(job.queue).checkpoint_window(job.in_place)
    age = checkpoint_age(world, job, group, window)
    return age is None or window is None or age <= window


def _gh(seconds: float) -> str:
    return f"{seconds / 3600:.1f} GPU-hours"


def plan_fairness(world: World, releases: Sequence[GateRelease] = (), planned: Sequence[Eviction] = (),
                  pdb_refused: frozenset[str] = frozenset(), gangs: Sequence[GangDecision] = ()) -> list[Eviction]:
    """The fairness scale-down's evictions this cycle (see the module's docstring). ``releases`` and
    ``planned``: the gates the cycle lifts and the victims it chose for starving gangs; ``pdb_refused``:
    pods whose eviction a PodDisruptionBudget refused lately, never taken (as for the gangs' plans);
    ``gangs``: the eviction planner's decisions this cycle (a queue with ``fairnessWhileGangsWait``
    is not stopped by its gangs that were decided ``wait``)."""
    waits = {d.pod_group for d in gangs if d.decision == "wait"}
    busy = {r.queue for r in releases} | {g.queue for g in world.waiting
                                          if not (g.key in waits and world.policy(g.queue).fairnessWhileGangsWait)}
    chosen = {e.pod for e in planned}
    losing = {e.job for e in planned}
    gated, group_of = held_by_job(world)
    if not gated:
        return []
    holding: dict[str, list[PodView]] = {}
    ghosts = world.ghosts  # never victims (a lost node's: evicting them frees nothing usable)
    for pod in world.elastic_holding:
        if pod.key not in chosen and pod.key not in ghosts:
            holding.setdefault(pod.job_id, []).append(pod)
    out: list[Eviction] = []
    queues = sorted({world.jobs[j].queue for j in gated if j in world.jobs})
    for queue in queues:
        policy = world.policy(queue)
        if not policy.fairnessScaleDown or policy.maxEvictionsPerCycle <= 0 or queue in busy:
            continue
        takers = sorted((j for j in gated if j in world.jobs and world.jobs[j].queue == queue),
                        key=lambda j: (world.jobs[j].served, j))
        taker = next((world.jobs[j] for j in takers if _may_grow(world, world.jobs[j], group_of[j])), None)
        if taker is None:
            continue
        givers = sorted((j for j, job in world.jobs.items() if job.queue == queue and j != taker.key
                         and j in holding and j not in losing and job.taken == 0),
                        key=lambda j: (-world.jobs[j].served, j))
        for jid in givers:
            giver = world.jobs[jid]
            if giver.served < policy.fairnessRatio * taker.served or \
                    giver.served - taker.served < policy.fairnessMinGpuSeconds:
                break  # sorted by service: no later giver is farther from even
            if giver.priority > taker.priority:
                continue  # as for a gang: never a victim of higher priority than the job it makes room for
            victims = _victims(world, giver, [p for p in holding[jid] if p.key not in pdb_refused], taker,
                               gated[taker.key], planned)
            if victims is None:
                continue
            assert taker.bounds is not None and giver.bounds is not None
            reason = (f"fairness: job {taker.key} waits to grow with {taker.current_workers()} of max "
                      f"{taker.bounds.max_replicas} workers and has had {_gh(taker.served)}; job {giver.key} "
                      f"of the same queue {queue} has had {_gh(giver.served)} (at least fairnessRatio "
                      f"{policy.fairnessRatio:g} times as much): it gives {len(victims)} of its "
                      f"{giver.current_workers()} workers (min {giver.bounds.min_replicas}), the fewest that "
                      f"make room for the growth the taker waits for")
            behind = sorted(g.key for g in world.waiting if g.queue == queue)
            if behind:  # only gangs decided "wait" reach here (fairnessWhileGangsWait)
                reason += (f"; the queue's waiting gang(s) {', '.join(behind)} have no victims this cycle "
                           "(fairnessWhileGangsWait)")
            for pod in victims:
                out.append(Eviction(pod.key, pod.node_name, giver.key, queue, taker.key, reason, pod.uid,
                                    EvictionKind.FAIRNESS))
            giver.taken += len(victims)
            break
    return out


def _may_grow(world: World, job: JobState, group: str) -> bool:
    """The taker's growth would happen once there is room: below max, not resting, checkpoint fresh."""
    if job.bounds is None or job.current_workers() >= job.bounds.max_replicas:
        return False
    if job.current_workers() < job.bounds.min_replicas or job.cooling or snoozed(world, job):
        return False
    return _within_window(world, job, group)


def _victims(world: World, giver: JobState, pods: Sequence[PodView], taker: JobState,
             wanted: Sequence[PodView], planned: Sequence[Eviction]) -> list[PodView] | None:
    """The fewest of ``giver``'s elastic workers (highest index first) whose leaving makes room for
    ``taker``'s growth by minScaleUpGain (rounded up to the taker's nearest allowed count, when it has
    any) and leaves ``giver`` at one of its allowed counts (when it has any), or None (giver may not
    give, or no count of them does)."""
    policy = world.policy(giver.queue)
    if giver.bounds is None or giver.cooling or _never_gives(world, giver) is not None:
        return None
    group = giver.pg.key if giver.pg is not None else giver.key
    if not _within_window(world, giver, group):
        return None  # a restart now would lose the work since its last checkpoint
    spare = min(giver.current_workers() - giver.bounds.min_replicas, policy.maxEvictionsPerCycle)
    candidates = sorted((p for p in pods if not p.deleting and old_enough(p.scheduled_at, policy.minRuntimeSeconds,
                                                                           world.now)),
                        key=lambda p: scale_up_pod_rank(p), reverse=True)[:max(0, spare)]
    assert taker.bounds is not None
    now_workers = taker.current_workers()
    need = min(max(1, math.ceil(now_workers * world.policy(taker.queue).min_scale_up_gain(taker.in_place))),
               taker.bounds.max_replicas - now_workers)
    taker_allowed = allowed_of(taker)  # a taker with allowed counts grows only to one of them: the
    if taker_allowed is not None:  # room is made for the nearest at least `need` above (none: nothing)
        need = next((k for k in taker_allowed.grow_amounts(now_workers) if k >= need), 0)
        if not need:
            return None
    grow = sorted(wanted, key=scale_up_pod_rank)[:need]
    if len(grow) < need or not candidates:
        return None
    cap = world.future_capacity()
    others = {p.key: p for p in world.elastic_holding}
    for e in planned:  # the cycle's other victims leave too
        if e.pod in others:
            cap.give(e.node, pod_demand(others[e.pod]))
    if _fits(cap.copy(), grow):
        return None  # there is room already: something else holds the taker back, not the giver
    allowed = allowed_of(giver)  # with allowed counts, only a count that leaves it at one of them
    workers = giver.current_workers()
    for n in range(1, len(candidates) + 1):
        cap.give(candidates[n - 1].node_name, pod_demand(candidates[n - 1]))
        if (allowed is None or workers - n in allowed) and _fits(cap.copy(), grow):
            return candidates[:n]
    return None


def _never_gives(world: World, giver: JobState) -> str | None:
    """Why ``giver`` gives nothing (``World.never_victim``), except that its queue's
    ``fairnessMinWorkersToShrink`` (when set) stands for ``minWorkersToShrink``: a job far more served
    than the taker may give at a smaller size than it would to a gang."""
    why = world.never_victim(giver.key)
    floor = world.policy(giver.queue).fairnessMinWorkersToShrink
    if why != TOO_SMALL or floor is None:
        return why
    n = giver.running_workers
    if n < floor:
        return TOO_SMALL
    if no_smaller_count(allowed_of(giver), n):
        return ALLOWED_COUNTS
    return giver.budget.reason() if giver.budget is not None and giver.budget.spent else None


def _fits(cap: Capacity, pods: Sequence[PodView]) -> bool:
    for pod in pods:
        node = cap.choose_node(pod)
        if node is None:
            return False
        cap.take(node, pod_demand(pod))
    return True
