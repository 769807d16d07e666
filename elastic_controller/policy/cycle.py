"""One planning cycle: starving gangs, eviction plans, gate releases (ARCHITECTURE.md, "The agent's cycle",
steps 2, 3 and 5), and ``decide``: the cycle's whole decision as actions (``policy/actions.py``), the
one place that builds it for the agent, the simulator, ``plan`` and ``status``."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime

from .actions import (
    Action,
    AnnounceSize,
    CycleDecision,
    Evict,
    EvictDueNotice,
    GiveNotice,
    Hold,
    LiftGates,
    Noticed,
    RecordGang,
    ShrinkInPlace,
    SpendRestart,
    WithdrawNotice,
)
from .announce import announced
from .decisions import CyclePlan, Eviction, GangDecision, GateRelease, HoldNote, HoldReason
from .eviction import Planner, SearchMode, starving_gangs
from .eviction.pdb import mark_past_pdb, past_pdb_needed
from .fairness import plan_fairness
from .gates import plan_gate_releases
from .inplace import in_place_jobs, marked, next_generation
from .keys import EVICT_AFTER, EVICTED_FOR
from .model import PodView, Snapshot
from .notices import NoticeReview, in_flight, notice_deadline, review_notices, with_notices
from .restart_count import restarts_to_count, spend_for, with_counts
from .settings import ElasticConfig
from .world import Gang, PlanCache, World, build_world, ghosts_of

__all__ = ["CycleDecision", "PlanCache", "SearchMode", "decide", "plan_cycle", "records", "shrinks"]

PlanFn = Callable[[Snapshot, ElasticConfig, datetime], CyclePlan]


@contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while planning. A cycle allocates many short-lived objects among
    a large live snapshot (54,584 pod views at 5,000 nodes), so the collector's full passes would walk
    the snapshot again and again: 10 % of a 5,000-node cycle. Planning makes no reference cycles that
    matter; whatever it leaves is collected once the collector runs again."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def plan_cycle(snapshot: Snapshot, cfg: ElasticConfig, now: datetime, *, cache: PlanCache | None = None,
               search: SearchMode = "indexed", pdb_refused: frozenset[str] = frozenset()) -> CyclePlan:
    """Pure: the same snapshot, config and ``now`` always give the same plan.

    ``cache``: what the caller keeps from one cycle to the next (the agent and each simulation own
    one; without it every cycle is built cold). ``search``: how the victim search finds nodes
    ("exhaustive": every node scored, the reference the indexed search must match). Neither changes
    the plan. ``pdb_refused``: keys ("namespace/name") of pods whose eviction a PodDisruptionBudget
    refused lately (the agent remembers them for a while): no victims, counted as "PDB refused
    eviction" among a waiting gang's excluded candidates; unless a gang would wait without them:
    then they are victims past their PDB (``eviction/pdb.py``, issue 36, T13)."""
    with _collector_paused():
        return _plan(snapshot, cfg, now, cache, search, pdb_refused)


def _plan(snapshot: Snapshot, cfg: ElasticConfig, now: datetime, cache: PlanCache | None,
          search: SearchMode, pdb_refused: frozenset[str] = frozenset()) -> CyclePlan:
    plan = _plan_once(snapshot, cfg, now, cache, search, pdb_refused, pdb_refused)
    if cfg.agent.passPdb and past_pdb_needed(plan.starving, pdb_refused):  # issue 36, T13: eviction/pdb.py
        plan = _plan_once(snapshot, cfg, now, None, search, frozenset(), pdb_refused, first=plan)
    return plan


def _plan_once(snapshot: Snapshot, cfg: ElasticConfig, now: datetime, cache: PlanCache | None,
               search: SearchMode, pdb_refused: frozenset[str], fairness_refused: frozenset[str],
               first: CyclePlan | None = None) -> CyclePlan:
    """``first``: the plan made with ``fairness_refused`` excluded, when this one is made again past
    the PDBs (``pdb_refused`` empty): it keeps ``first``'s outcome of every gang that did not wait on a
    PDB refusal, and plans only those that did, on what the others leave (``_past_pdb``)."""
    world = build_world(snapshot, cfg, now, cache)
    if cache is not None:
        cache.world = world
    decisions: list[GangDecision] = []
    evictions: list[Eviction] = []
    starving = starving_gangs(world)
    if starving:  # the planner's search index is only worth building when some gang starves
        planner = Planner(world, search, pdb_refused)
        if first is not None:
            decisions, evictions = _past_pdb(planner, starving, first, fairness_refused)
        else:
            for gang in starving:
                result = planner.plan_gang(gang)
                decisions.append(result.decision)
                evictions.extend(result.evictions)
    releases, blockers, notes = plan_gate_releases(world, evicted_for={d.pod_group for d in decisions if d.victims})
    # issue 38: the fairness scale-down (fairness.py), in the queues where nothing else moves
    evictions.extend(plan_fairness(world, releases, evictions, fairness_refused, decisions))
    return CyclePlan(
        starving=tuple(decisions),
        evictions=tuple(evictions),
        gate_releases=tuple(releases),
        scale_up_blocked_by=tuple(blockers),
        waiting=tuple(g.key for g in world.waiting),
        notes=tuple(notes),
    )


def _past_pdb(planner: Planner, starving: Sequence[Gang], first: CyclePlan,
              refused: frozenset[str]) -> tuple[list[GangDecision], list[Eviction]]:
    """Each gang's outcome (decision, evictions), in ``starving`` order: ``first``'s for every gang that
    did not wait on a PDB refusal (replayed first, so their victims are taken), then each gang that did
    planned with the refused pods as candidates, its victims among them past the PDB (``mark_past_pdb``)."""
    kept = {d.pod_group: d for d in first.starving if not past_pdb_needed((d,), refused)}
    out: dict[str, tuple[GangDecision, list[Eviction]]] = {}
    for gang in starving:
        d = kept.get(gang.key)
        if d is not None:
            planner.replay(gang, d)
            out[gang.key] = (d, [e for e in first.evictions if e.for_gang == gang.key and e.pod in d.victims])
    for gang in starving:
        if gang.key not in kept:
            result = planner.plan_gang(gang)
            out[gang.key] = (result.decision, mark_past_pdb(result.evictions, refused))
    decisions = [out[g.key][0] for g in starving]
    return decisions, [e for g in starving for e in out[g.key][1]]


def decide(snapshot: Snapshot, cfg: ElasticConfig, now: datetime, *, given: Mapping[str, datetime] | None = None,
           cache: PlanCache | None = None, search: SearchMode = "indexed",
           pdb_refused: frozenset[str] = frozenset(), plan_cfg: ElasticConfig | None = None,
           planner: PlanFn | None = None, notices_only: bool = False,
           reviewed: NoticeReview | None = None) -> CycleDecision:
    """Pure: the cycle's whole decision on ``snapshot`` at ``now`` (ARCHITECTURE.md, "The agent's
    cycle"): the notices already given reviewed (due, pending, withdrawn; ``given``: the deadlines
    the agent itself stamped, ``review_notices``), the plan made with the victims under notice in
    flight for their gangs (``plan_cycle``; ``cache``, ``search`` and ``pdb_refused`` as there), and
    every action that follows, each with its decided values: the restarts that happened and are not
    counted yet (``restart_count.restarts_to_count``: a victim of a down scale record evicted or
    gone; the plan's budget rule counts them already), a gang's victims evicted now (with the restart
    each shrunk job uses once evicted) or put under notice (with each deadline), the gates lifted, the
    size each changed job is told, every gang's outcome and every hold.

    ``plan_cfg``: the configuration the plan is made with when it is not ``cfg`` (the simulator
    batches per-cycle limits); ``planner``: another planning function in place of ``plan_cycle``
    (the simulator's, with its own cache).

    The notices come first in a cycle that carries its decision out: evicting a due victim or
    withdrawing a notice changes what the plan sees. ``notices_only``: decide just that step (the
    review and its ``EvictDueNotice`` / ``WithdrawNotice`` actions; the plan is empty); then, once
    they are carried out, ``reviewed``: that review, for the rest of the same cycle on the snapshot
    taken after them (its victims still in flight for their gangs, no notice action again). Without
    either (``plan``, ``status``) one call decides it all."""
    review = reviewed if reviewed is not None else review_notices(snapshot, cfg, now, given)
    if notices_only:
        empty = CyclePlan()
        return CycleDecision(plan=empty, shown=empty, notices=review, actions=_notice_actions(review))
    # The restarts that happened and are not counted yet (restart_count.py), judged as counted by
    # this cycle's plan (the budget rule) and by the restarts its shrinks spend.
    counts = restarts_to_count(snapshot)
    snapshot = with_counts(snapshot, counts)
    flying = in_flight(snapshot, review)
    if planner is not None:
        raw = planner(flying, plan_cfg or cfg, now)
    else:
        raw = plan_cycle(flying, plan_cfg or cfg, now, cache=cache, search=search, pdb_refused=pdb_refused)
    resized = in_place_jobs(snapshot)  # (issue 39: none unless a PyTorchJob opts in)
    plan = marked(with_notices(raw, review, due=False, left=False), resized)
    shown = marked(with_notices(raw, review, due=True), resized)
    world = cache.world if cache is not None and planner is None else None  # (this cycle's, just built)
    actions = _actions(snapshot, cfg, now, plan, review, reviewed is None, world, counts, resized)
    return CycleDecision(plan=plan, shown=shown, notices=review, actions=actions)


def _notice_actions(review: NoticeReview) -> tuple[Action, ...]:
    return (*(WithdrawNotice(w) for w in review.withdrawn), *(EvictDueNotice(d) for d in review.due))


def _actions(snapshot: Snapshot, cfg: ElasticConfig, now: datetime, plan: CyclePlan,
             review: NoticeReview, notices: bool, world: World | None = None,
             counts: Sequence[SpendRestart] = (), resized: frozenset[str] = frozenset()) -> tuple[Action, ...]:
    out: list[Action] = list(_notice_actions(review)) if notices else []
    out.extend(counts)
    out.extend(shrinks(snapshot, cfg, now, plan.evictions, resized))
    by_job: dict[str, list[GateRelease]] = {}
    for r in plan.gate_releases:
        by_job.setdefault(r.job, []).append(r)
    out.extend(LiftGates(job, tuple(items)) for job, items in by_job.items())
    out.extend(_sizes(snapshot, cfg, plan, review, set(by_job), world, resized))
    out.extend(records(plan))
    return tuple(out)


def records(plan: CyclePlan) -> list[RecordGang | Hold]:
    """What is recorded of ``plan``: every starving gang's outcome, every job's hold (the first note
    naming it), by job."""
    return [*(RecordGang(d) for d in plan.starving), *(Hold(job, note) for job, note in _holds(plan.notes))]


def shrinks(snapshot: Snapshot, cfg: ElasticConfig, now: datetime, evictions: Sequence[Eviction],
            resized: frozenset[str] = frozenset()) -> list[Evict | GiveNotice | ShrinkInPlace]:
    """Each gang's victims (``evictions`` in plan order) as one action: ``GiveNotice`` when any of
    their queues gives a notice (each victim's deadline: ``notice_deadline`` with its own queue's
    ``noticeSeconds``), else ``Evict``, with the restart each job it shrinks uses once its eviction
    succeeded (one per gang that shrinks it, counted on from its PodGroup's ``restarts-used``; the
    PyTorchJob's copy is its owner's to write and never read). A notice spends no restart: its
    victims' leaving does, in a later cycle (``restart_count.restarts_to_count``). The victims of
    jobs resized in place (``resized``, issue 39) are one ``ShrinkInPlace`` per gang, first, each with
    the deadline of its bounded wait (its queue's ``inPlaceLeaveSeconds``); they spend no restart.
    Victims past a PodDisruptionBudget (issue 36, T13) are in the gang's ``Evict`` whatever the rest
    of its victims take."""
    by_gang: dict[str, list[Eviction]] = {}
    for ev in evictions:
        by_gang.setdefault(ev.for_gang, []).append(ev)
    if not by_gang:
        return []
    pgs = {pg.key: pg.annotations for pg in snapshot.podgroups}
    used: dict[str, int] = {}  # job -> restarts counted so far, this cycle's shrinks included
    out: list[Evict | GiveNotice | ShrinkInPlace] = []
    for gang, planned in by_gang.items():
        # Victims past a PDB (T13) are evicted now, no notice, no leave: a PDB refused them; the others
        # of the same gang take the usual path.
        past = [e for e in planned if e.past_pdb]
        victims = [e for e in planned if not e.past_pdb]
        if resized and any(e.job in resized for e in victims):
            out.append(ShrinkInPlace(gang, tuple(
                Noticed(e, notice_deadline(now, cfg.queue_policy(e.queue).inPlaceLeaveSeconds))
                for e in victims if e.job in resized)))
            victims = [e for e in victims if e.job not in resized]
        if any(cfg.queue_policy(e.queue).noticeSeconds > 0 for e in victims):
            out.append(GiveNotice(gang, tuple(Noticed(e, notice_deadline(now, cfg.queue_policy(e.queue).noticeSeconds))
                                              for e in victims)))
            victims = []
        victims = past + victims
        if not victims:
            continue
        restarts = []
        for job in sorted({e.job for e in victims}):
            if job not in used:
                used[job] = spend_for(job, pgs.get(job, {})).used - 1
            used[job] += 1
            restarts.append(SpendRestart(job, used[job]))
        out.append(Evict(gang, tuple(victims), tuple(restarts)))
    return out


def _sizes(snapshot: Snapshot, cfg: ElasticConfig, plan: CyclePlan, review: NoticeReview,
           grown: set[str], world: World | None, resized: frozenset[str] = frozenset()) -> list[AnnounceSize]:
    """The size of every job this cycle changes (evicted, under notice, grown, a notice due or withdrawn).
    ``world``: the cycle's (its ghosts and pods by group, instead of a walk over every pod). A job
    resized in place (``resized``) that this cycle's plan shrinks or grows is told a new event: its
    generation (one above its pods') and its victims, which leave at it."""
    leaving = {e.pod for e in plan.evictions} | {d.facts.pod for d in review.due}
    withdrawn = {w.facts.pod for w in review.withdrawn}
    changed = ({e.job for e in plan.evictions} | grown | {d.facts.job for d in review.due}
               | {w.facts.job for w in review.withdrawn})
    if not changed:
        return []
    lifted = {r.pod for r in plan.gate_releases}
    ghosts: Mapping[str, str]
    if world is not None and changed <= world.pods_by_group.keys():
        ghosts = world.ghosts
        members: Iterable[PodView] = (p for job in changed for p in world.pods_by_group[job])
    else:
        ghosts = ghosts_of(snapshot)
        members = snapshot.pods
    pods: dict[str, list[PodView]] = {}
    for p in members:
        if p.job_id in changed:
            if p.key in withdrawn:  # its evicted-for is removed this cycle
                p = _unclaimed(p)
            pods.setdefault(p.job_id, []).append(p)
    gate = cfg.gating.gateName
    planned = {e.job for e in plan.evictions} | grown
    out = []
    for job in sorted(changed):
        keys = announced(sorted(pods.get(job, ()), key=lambda p: p.order), gate, ghosts=ghosts, leaving=leaving,
                         lifted=lifted)
        if job in resized and job in planned:
            victims = tuple(sorted(e.pod for e in plan.evictions if e.job == job))
            out.append(AnnounceSize(job, len(keys), keys, next_generation(pods.get(job, ())), victims))
            continue
        out.append(AnnounceSize(job, len(keys), keys))
    return out


def _unclaimed(pod: PodView) -> PodView:
    return replace(pod, annotations={k: v for k, v in pod.annotations.items() if k not in (EVICTED_FOR, EVICT_AFTER)})


def _holds(notes: tuple[HoldNote, ...]) -> list[tuple[str, HoldNote]]:
    """(job, its note) for the notes that name their job (one per job: the first), by job."""
    out: dict[str, HoldNote] = {}
    for note in notes:
        if isinstance(note, HoldNote) and note.job and note.job not in out:
            out[note.job] = note
    # A job held only by the cycle's gate budget grows next cycle: recording that would cost a write
    # now and another then (plan and status still show the note).
    out = {job: note for job, note in out.items() if note.reason != HoldReason.CYCLE_GATE_LIMIT}
    return sorted(out.items())
