"""Interrupted plans: may the victims stamped ``evicted-for`` a gang still be evicted for it?

An agent killed (or deposed) between stamping a plan's victims and evicting them leaves pods with
``volcano-elastic.io/evicted-for``. Anyone who may patch a pod can write that annotation too, and
the agent holds eviction rights cluster-wide: the annotation is a claim to check, never an order.
A resumed eviction passes every check a fresh plan's victim passes (issue 23, items 1 and 6): the
gang exists, still waits and has starved; every victim is a running elastic worker of another job
of no higher priority, past its minimum runtime, in a job that stays at or above its current min
without all of them, out of cooldown (a cooldown stamped by this very plan excepted), with torchrun
restarts to spare (the restart this very plan counted once a victim left excepted), within the queue
shares; and the gang still needs them (its needed pods do not fit without them) and they
suffice (its needed pods fit with them gone: a record written only in part is planned afresh).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from . import keys
from .budget import RestartBudget
from .contract import Decision, Kind, ScaleRecord
from .eviction import Planner, starving_gangs
from .fit import place_all, pod_demand
from .model import PodGroupView, PodView, Snapshot
from .settings import ElasticConfig
from .world import build_world, is_candidate_role, job_id


@dataclass(frozen=True, slots=True)
class ResumeVerdict:
    """``refused``: victim key -> why it may not be evicted (the whole plan is then dropped).
    ``forget``: why the plan is dropped though no victim is at fault (gang placed, gone, not needed)."""

    refused: dict[str, str]
    forget: str = ""

    @property
    def ok(self) -> bool:
        return not self.refused and not self.forget


def plan_stamp_for(pg: PodGroupView | None, gang: str) -> bool:
    """True when ``pg``'s scale stamp is the one an agent writes for a plan evicting for ``gang``
    (direction down, a ``last-decision`` of kind down for ``gang``: ``contract.Decision``): that
    cooldown is the plan's own and does not bar finishing it."""
    if pg is None:
        return False
    ann = pg.annotations
    if ann.get(keys.LAST_SCALE_DIRECTION) != keys.Direction.DOWN:
        return False
    said = Decision.decode(ann.get(keys.LAST_DECISION))
    return said is not None and said.kind == Kind.DOWN and said.gang == gang


def check_resumable(snapshot: Snapshot, cfg: ElasticConfig, now: datetime, gang_key: str,
                    victims: Sequence[PodView], own_stamps: Collection[str] = ()) -> ResumeVerdict:
    """Whether the interrupted plan evicting ``victims`` for ``gang_key`` may be finished now.
    ``own_stamps``: job keys whose current cooldown stamp is this plan's own (see ``plan_stamp_for``)."""
    world = build_world(snapshot, cfg, now)
    gang = next((g for g in starving_gangs(world) if g.key == gang_key), None)
    if gang is None:
        if any(g.key == gang_key for g in world.waiting):
            return ResumeVerdict({v.key: f"gang {gang_key} has not waited its starvationSeconds"
                                  for v in victims})
        return ResumeVerdict({}, forget=f"gang {gang_key} does not wait (placed or gone)")
    for key in own_stamps:
        job = world.jobs.get(key)
        if job is not None:
            job.cooling = False
            # Once one of its victims left, the plan's restart was counted (restart_count.py): the job
            # is judged as the plan judged it, before that count (else a plan that took a job down to
            # its reserve could not finish). A plan none of whose victims left counted nothing yet.
            if job.budget is not None and job.budget.used and job.pg is not None and \
                    _counted_own(job.pg.annotations):
                job.budget = RestartBudget(job.budget.used - 1, job.budget.max_restarts)
    refused: dict[str, str] = {}
    for v in victims:
        if v.role is not keys.Role.ELASTIC:
            refused[v.key] = f"its role is {v.role.value}, not elastic"
        elif not is_candidate_role(v):
            refused[v.key] = "not a running elastic worker"
        elif v.key in world.ghosts:
            refused[v.key] = world.ghosts[v.key]  # its node is lost: evicting it frees nothing usable
    if refused:
        return ResumeVerdict(refused)
    planner = Planner(world)
    for v in victims:
        why = planner._why_not(gang, v)
        if why is not None:
            refused[v.key] = why
    if refused:
        return ResumeVerdict(refused)
    per_job: dict[str, int] = {}
    for v in victims:
        per_job[job_id(v)] = per_job.get(job_id(v), 0) + 1
    for jid, n in per_job.items():
        job = world.jobs[jid]
        assert job.bounds is not None
        if job.current_workers() - n < job.bounds.min_replicas:
            for v in victims:
                if job_id(v) == jid:
                    refused[v.key] = (f"its job {jid} would fall below its min ({job.current_workers()} "
                                      f"running, min {job.bounds.min_replicas}, {n} victims)")
    if refused:
        return ResumeVerdict(refused)
    if not planner._subset_ok(gang, list(victims)):
        return ResumeVerdict({v.key: "queue share" for v in victims})
    cap = world.future_capacity()
    if place_all(gang.needed, cap.copy()) is not None:
        return ResumeVerdict({}, forget=f"gang {gang_key}'s needed pods fit without these evictions")
    for v in victims:
        cap.give(v.node_name, pod_demand(v))
    if place_all(gang.needed, cap) is None:  # a record written only in part: plan afresh
        return ResumeVerdict({}, forget=f"these evictions alone do not make room for gang {gang_key}")
    return ResumeVerdict({})


def _counted_own(annotations: Mapping[str, str]) -> bool:
    """Whether the PodGroup's current scale record has counted its restart (``restart-counted``)."""
    rec = ScaleRecord.decode(annotations.get(keys.SCALE_RECORD))
    return rec is not None and annotations.get(keys.RESTART_COUNTED) == rec.id
