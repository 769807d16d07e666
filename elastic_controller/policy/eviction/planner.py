"""The eviction planner: one starving gang after another against shared, mutable capacity.

ARCHITECTURE.md, "The agent's cycle", steps 2-3. For each starving gang (``ordering.gang_key``
order): if its needed pods fit once terminating pods are gone, ``wait``; else choose victims among
admissible candidates (``admissibility``) so that every needed pod fits on a real node (``search``),
taking on each node the smallest set of victims that makes room, first in victim order
(``ordering.victim_key``), then drop every victim the plan can do without.

A gang must also fit in its queue's share as the share model admits it (``ShareModel.enqueue_excess``),
or Volcano will not place it however much is free: when it would be above, victims of its *own*
queue (the only ones that bring it under) are added until it is not (``share_victims``), fewest
first, and the plan is minimized against both conditions.
"""

from __future__ import annotations

import math
from datetime import timedelta

from ..cooldowns import cooldown_remaining
from ..decisions import Eviction, GangDecision
from ..fit import fits_all, place_all, pod_demand
from ..model import PodView
from ..ordering import VictimKey, gang_key
from ..quantity import add, format_resources, sub
from ..times import format_time
from ..world import Gang, World, job_id
from .base import GangPlan, SearchMode, _sum_requests
from .search import VictimSearch
from .share_victims import ShareVictims


class Planner(VictimSearch, ShareVictims):
    """Plans every starving gang of one cycle against shared, mutable capacity. ``search``: how the
    node of each needed pod is found ("exhaustive" is the reference the properties compare with)."""

    def __init__(self, world: World, search: SearchMode = "indexed",
                 refused: frozenset[str] = frozenset()) -> None:
        super().__init__(world, search, refused)
        self._build_index()

    # -- one gang ------------------------------------------------------------------------
    def plan_gang(self, gang: Gang) -> GangPlan:
        """Plan ``gang`` (one of the cycle's starving gangs, taken in ``starving_gangs`` order) and
        commit the plan against the planner's capacity, so later gangs plan around it.

        ``wait`` when: the gang lacks pods to place; victims evicted for it are still terminating;
        its min set fits (now, or once terminating pods are gone) and its queue's share admits it
        (its room is promised to it); its queue has no evictions left this cycle; no admissible
        victim set makes it fit (and, when its queue is above the share Volcano admits, brings the
        queue under with victims of its own queue); or the fewest victims exceed the evictions left.
        Otherwise ``evict``: the victims in victim order, each with its reason. Every ``wait`` and
        ``evict`` decision carries a reason naming what decided it.

        Victims are chosen by restart cost (``search``); when the plan disrupting the fewest jobs leaves
        no room for a needed pod or takes more victims than the evictions left, the gang is planned
        again by fewest victims alone (its reason says so): restart awareness never makes it wait."""
        w = self.w
        needed_keys = tuple(p.key for p in gang.needed)

        def wait(reason: str) -> GangPlan:
            return GangPlan(GangDecision(gang.key, gang.queue, "wait", reason, needed_keys), [])

        missing = gang.pg.min_member - gang.placed
        if len(gang.needed) < missing:
            return wait(f"needs {missing} more pods placed but only {len(gang.needed)} are pending and "
                        "ungated; waiting for the rest to be created")
        trial = self.capacity.copy()
        placement = place_all(gang.needed, trial)
        # Volcano places the gang only within what its queue's share plugin admits (proportion: the
        # deserved share; capacity: the real capability of the queue and its ancestors).
        excess = w.share_excess(gang, self._dom(gang.queue))
        if (placement is None or excess) and gang.releasing_for:
            return wait(f"{len(gang.releasing_for)} worker(s) evicted for it are still terminating; "
                        "no new victims until they are gone")
        if placement is not None and not excess:
            # Without terminating pods, capacity now is capacity then (only the reason differs).
            fits_now = not w.releasing or fits_all(gang.needed, w.free_now)
            self.capacity = trial  # promise the room to this gang
            if fits_now:
                blocked = _queue_blocks(w, gang.queue)
                if blocked:  # not "waiting for the scheduler" forever: it never will
                    return wait(f"its min set fits on free capacity now, but {blocked}: Volcano will not "
                                "place it")
                return wait("its min set fits on free capacity now; waiting for the scheduler to place it")
            n = sum(len(v) for v in w.releasing.values())
            return wait(f"fits once {n} terminating pod(s) release their resources "
                        f"({len(gang.releasing_for)} evicted for it); no further victims")

        refused = w.model.enqueue_reason(gang.pg)
        if refused is not None:  # evicting elastic workers does not change it (see CapacityModel)
            return wait(f"{refused}; evicting elastic workers would not change that")
        left = self.evictions_left.setdefault(gang.queue, w.policy(gang.queue).maxEvictionsPerCycle)
        if left == 0:  # any plan needs a victim: nothing to search for
            return wait(f"needs evictions but queue {gang.queue} has none left this cycle (maxEvictionsPerCycle)")
        self._kinds_ok = {}
        self._reset_gang_caches()
        self.fell_back, self.fell_back_why = False, ""
        if excess:
            # Victims of its own queue must give back ``excess``: when even every one of them above its
            # job's min (or every admissible one) would not, no plan exists; the node search is skipped.
            fits = ("its min set fits on free capacity" if placement is not None
                    else "its min set does not fit on free capacity")
            if sum(self._queue_supply(q) for q in self._share_queues(gang)) < excess:
                return wait(self._share_wait_reason(gang, excess, fits, supply=True))
            if self._admissible_supply(gang) < excess:
                return wait(self._share_wait_reason(gang, excess, fits))

        victims, share_failed = self._victims(gang, placement is None, excess)
        if (placement is None and victims is not None and len(victims) > left and not self.fell_back
                and self.shared_restart):
            # Restart awareness never makes a gang wait for evictions left: the plan disrupting the fewest
            # jobs may take more victims than its queue has evictions left where fewest victims alone
            # would do. Plan again that way (as _assign does when its greedy finds no room); the fewer
            # victims win. Only when a pick shared a restart (else restart cost decided nothing and the
            # plan would be the same), and no further than the node search when it picks the same
            # victims. (Its own queue's share victims need no second try: they give back the dominant
            # resource wherever they are, so whether they can is the same for both plans.)
            first = f"needs {len(victims)} evictions but queue {gang.queue} has {left} left this cycle"
            self._reset_gang_caches()
            self.restart_aware = False
            try:
                alt, _ = self._victims(gang, True, excess, unless=self.picks)
            finally:
                self.restart_aware = True
            if alt is not None and len(alt) < len(victims):
                victims = alt
                self.fell_back, self.fell_back_why = True, f"the plan disrupting the fewest jobs {first}"
        if victims is None:
            if share_failed:
                return wait(self._share_wait_reason(gang, excess, "its min set fits on free capacity"
                                                    if placement is not None else
                                                    "evicting elastic workers would make room on the nodes"))
            reasons = self.exclusions(gang)
            excluded = ", ".join(f"{n} {why}" + (self._cooldown_end(gang) if why == "cooldown" else "")
                                 for why, n in sorted(reasons.items())) or "none excluded"
            need = format_resources(_sum_requests(gang.needed))
            return wait(f"no set of admissible elastic workers makes its {len(gang.needed)} needed pod(s) "
                        f"({need}) fit{' within its queue share' if excess else ''}; "
                        f"candidates excluded: {excluded}{self._counts_note(gang)}")
        if len(victims) > left:
            return wait(f"needs {len(victims)} evictions but queue {gang.queue} has {left} left this cycle "
                        "(maxEvictionsPerCycle)")
        share_note = self._excess_text(gang, excess) if excess else ""
        # Commit: victims free their room, the gang's pods take it.
        cap = self.capacity.copy()
        for v in victims:
            cap.give(v.node_name, pod_demand(v))
        if place_all(gang.needed, cap) is None:  # pragma: no cover - _minimize guarantees a fit
            return wait("internal: plan did not verify")
        self.capacity = cap
        self.version += 1
        self.evictions_left[gang.queue] = left - len(victims)
        for queue in {w.jobs[job_id(v)].queue for v in victims}:
            self.queue_versions[queue] = self.queue_versions.get(queue, 0) + 1
        # Jobs with allowed counts: what each gives, said in every reason (the count is rounded to one).
        sizes: dict[str, str] = {}
        for jid in sorted({v.job_id for v in victims if v.job_id in self.counts}):
            n = sum(1 for v in victims if v.job_id == jid)
            before = w.jobs[jid].current_workers()
            sizes[jid] = (f"job {jid} gives {n} worker{'s' if n > 1 else ''} ({before} -> {before - n}): "
                          f"allowed counts {self.counts[jid].describe()}")
        evictions = []
        notes = _CostNotes(self, gang, victims)
        for v in victims:
            job = w.jobs[job_id(v)]
            reason = (f"elastic worker (index {v.replica_index}) of {job.key} "
                      f"(fulfillment {job.fulfillment():.2f}, priority {job.priority}) makes room for "
                      f"{gang.key} in queue {gang.queue}")
            if job.key in sizes:
                reason += f"; {sizes[job.key]}"
            reason += notes.of(v)
            self.disrupted_for.setdefault(job.key, gang.key)
            self._take(v, 1)
            self.taken.add(v.key)
            self.alloc[job.queue] = sub(self.alloc.get(job.queue, {}), v.requests)
            evictions.append(Eviction(v.key, v.node_name, job.key, job.queue, gang.key, reason, v.uid))
        self.alloc[gang.queue] = add(self.alloc.get(gang.queue, {}), _sum_requests(gang.needed))
        self._retag(sorted({v.node_name for v in victims}))  # their nodes have fewer candidates left
        why = f"evicting {len(victims)} elastic worker(s) lets its {len(gang.needed)} needed pod(s) fit"
        if excess:
            limit = "deserved share" if w.model.name == "proportion" else "real capability"
            why += f" and brings queue {gang.queue} back within its {limit} (before: {share_note})"
        if sizes:
            why += f" ({'; '.join(sizes.values())})"
        if self.fell_back:
            why += f"; planned by fewest victims alone: {self.fell_back_why}"
        decision = GangDecision(gang.key, gang.queue, "evict", why, needed_keys, tuple(v.key for v in victims))
        return GangPlan(decision, evictions)


    def replay(self, gang: Gang, decision: GangDecision) -> None:
        """Commit ``decision``, ``gang``'s outcome in another plan of the same cycle (issue 36, T13: the
        plan past a PDB keeps every other gang's), as ``plan_gang`` commits it: its victims taken and
        their room given to it, or, for a wait whose min set fits, that room promised to it. Gangs are
        replayed in the order they were planned, so the room is there."""
        w = self.w
        if decision.decision != "evict":
            if len(gang.needed) >= gang.pg.min_member - gang.placed:
                trial = self.capacity.copy()
                if place_all(gang.needed, trial) is not None and not w.share_excess(gang, self._dom(gang.queue)):
                    self.capacity = trial
            return
        pods = {p.key: p for p in w.elastic_holding}
        victims = [pods[key] for key in decision.victims]
        cap = self.capacity.copy()
        for v in victims:
            cap.give(v.node_name, pod_demand(v))
        place_all(gang.needed, cap)
        self.capacity = cap
        self.version += 1
        left = self.evictions_left.setdefault(gang.queue, w.policy(gang.queue).maxEvictionsPerCycle)
        self.evictions_left[gang.queue] = left - len(victims)
        for queue in {w.jobs[job_id(v)].queue for v in victims}:
            self.queue_versions[queue] = self.queue_versions.get(queue, 0) + 1
        for v in victims:
            self.disrupted_for.setdefault(job_id(v), gang.key)
            self._take(v, 1)
            self.taken.add(v.key)
            queue = w.jobs[job_id(v)].queue
            self.alloc[queue] = sub(self.alloc.get(queue, {}), v.requests)
        self.alloc[gang.queue] = add(self.alloc.get(gang.queue, {}), _sum_requests(gang.needed))
        self._retag(sorted({v.node_name for v in victims}))
        self._reset_gang_caches()

    def _victims(self, gang: Gang, on_nodes: bool, excess: int,
                 unless: frozenset[str] | None = None) -> tuple[list[PodView] | None, bool]:
        """The victims that let ``gang`` fit (``on_nodes``: its needed pods do not fit on free capacity)
        and bring its queue within its share (``excess``), minimized, in victim order; or None and
        whether the share victims failed. None too when the node search picks the victims ``unless``
        (what the plan is then is known: the rest does not depend on how they were picked). Nothing is
        committed; ``self.picks`` holds the keys of the node search's picks."""
        self.used_greedy = False
        victims = self._assign(gang, self.capacity.copy()) if on_nodes else []
        self.picks = frozenset(v.key for v in victims) if victims is not None else frozenset()
        if unless is not None and victims is not None and self.picks == unless:
            victims = None
        share_failed = False
        if victims is not None and excess:
            # Its own queue's elastic workers make room in the queue's share (others' cannot).
            extra = self._share_victims(gang, excess - self._own_share(gang, victims), victims)
            share_failed = extra is None
            victims = None if extra is None else victims + extra
        picks = self.inflight
        for v in picks:  # _assign counted its picks as taken: undo (committed by plan_gang)
            self._take(v, -1)
        self.inflight = []
        # Whether restart cost may have chosen the picks: some pick's job restarts anyway (another pick's
        # or an earlier plan's). When each disrupts a new job of its own, every smaller set would have
        # disrupted fewer jobs and won, so fewest victims alone picks the same (see plan_gang).
        self.shared_restart = self.new_jobs(picks) < len(picks)
        if victims is None:
            return None, share_failed
        if excess:
            self.used_greedy = True  # share victims are chosen greedily: always minimize
        if len(gang.needed) > 1 or self.used_greedy or self._constrained(victims):
            # One needed pod with the fewest victims any node needs is minimal already: fewer victims on
            # its node do not make room, and no other node lost any.
            victims = self._minimize(gang, victims, excess)
        victims.sort(key=self.preference)
        return victims, False

    def _cooldown_end(self, gang: Gang) -> str:
        """When the first of the candidates' jobs in cooldown leaves it: `` (the first ends TIME)``."""
        ends = []
        for jid in self.candidates_by_job:
            job = self.w.jobs.get(jid)
            if jid == gang.key or job is None or not job.cooling or job.pg is None:
                continue
            left = cooldown_remaining(job.pg, self.w.policy(job.queue), self.w.now, in_place=job.in_place)
            if left > 0:
                ends.append(self.w.now + timedelta(seconds=left))
        return f" (the first ends {format_time(min(ends))})" if ends else ""

    def _counts_note(self, gang: Gang) -> str:
        """For a gang no victim set helps: the jobs that could give but only whole steps (issue 20), whose
        rounding may be what no set survived (a queue share, min, too few admissible workers)."""
        jobs = [jid for jid in self.counts if jid != gang.key and self._job_barred(gang, self.w.jobs[jid]) is None]
        if not jobs:
            return ""
        shown = ", ".join(f"{jid} ({self.counts[jid].describe()})" for jid in jobs[:5])
        more = f" and {len(jobs) - 5} more" if len(jobs) > 5 else ""
        return f"; jobs shrunk only to their allowed counts (each victim set rounded to them): {shown}{more}"


def _queue_blocks(world: World, queue: str) -> str:
    """Why Volcano will never place a gang of ``queue`` whatever the capacity ("" when nothing we see)."""
    for q in world.snapshot.queues:
        if q.name == queue:
            return "" if q.state in ("", "Open") else f"its queue {queue} is {q.state}"
    return f"its queue {queue} does not exist"


def starving_gangs(world: World) -> list[Gang]:
    """Waiting gangs whose needed pods have waited at least their queue's starvationSeconds,
    higher PodGroup priority first, then older."""
    out = []
    for gang in world.waiting:
        policy = world.policy(gang.queue)
        if gang.since is None or (world.now - gang.since).total_seconds() >= policy.starvationSeconds:
            out.append(gang)
    epoch = world.now.replace(year=1970, month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
    out.sort(key=lambda g: gang_key(g, epoch))
    return out


class _CostNotes:
    """What restart cost decided about each victim of a committed plan, said in its reason. A victim is
    weighed against the workers that could take its place in the plan as it is: on its node, at least as
    large, of its queue, admissible, of a job the plan leaves alone (jobs with allowed counts neither
    give nor take a place: rounding, said in their reason, decided). Against the first of them in victim
    order: when its job was already disrupted (by this plan or an earlier one this cycle) and the rival
    comes first, the plan disrupting the fewest jobs took it (no extra restart); when both are equal in
    fulfillment and priority (and, restart cost counting, both disrupt a new job or neither), the least
    work lost decided (the more recent checkpoint, then fewer GPUs restarted). Computed from the plan
    alone, so both node searches say the same."""

    def __init__(self, planner: Planner, gang: Gang, victims: list[PodView]) -> None:
        self.p, self.gang = planner, gang
        self.plan_jobs = {v.job_id for v in victims}
        self.chosen = {v.key for v in victims}
        self.earlier: set[str] = set()  # jobs of this plan's victims already committed
        self.restart_aware = planner.restart_aware and not planner.fell_back
        planner._reset_gang_caches()  # verdicts cached while searching counted its picks as taken

    def _rivals(self, v: PodView) -> list[PodView]:
        p = self.p
        jobs, counts = p.w.jobs, p.counts
        if v.job_id in counts:
            return []
        queue = jobs[v.job_id].queue
        need = pod_demand(v)
        out = []
        for c in p.candidates_by_node.get(v.node_name, ()):
            jid = c.job_id
            if (c.key in self.chosen or jid in self.plan_jobs or jid in counts or jobs[jid].queue != queue
                    or any(c.requests.get(k, 0) < n for k, n in need.items() if k != "pods")):
                continue
            if p._why_not(self.gang, c) is None:
                out.append(c)
        return out

    def of(self, v: PodView) -> str:
        """The note for ``v`` (committed next: its job's ``taken`` not yet counting it)."""
        p = self.p
        jobs = p.w.jobs
        again = jobs[v.job_id].taken > 0  # its job restarts anyway
        first = v.job_id not in self.earlier
        self.earlier.add(v.job_id)
        rivals = self._rivals(v)
        if not rivals:
            return ""
        mine = p.preference(v)
        keyed = sorted(((p.preference(c), c) for c in rivals), key=lambda kc: kc[0])
        if again and self.restart_aware:
            ahead = next((c for key, c in keyed if key < mine and jobs[c.job_id].taken == 0), None)
            if ahead is not None:
                by = ("for this gang" if not first else
                      f"this cycle (for {p.disrupted_for.get(v.job_id, 'an earlier gang')})")
                return (f"; job already disrupted {by}: no extra restart ({ahead.job_id}, first in victim "
                        "order, would restart)")
        # (ordering.VictimKey's fields: criteria 0-2 tie, criterion 3 decides)
        tied = next(((key, c) for key, c in keyed if key[:3] == mine[:3] and key[3:5] > mine[3:5]
                     and (not self.restart_aware or (jobs[c.job_id].taken > 0) == again)), None)
        if tied is None:
            return ""
        raw, rival = tied
        key, me = VictimKey(*raw), VictimKey(*mine)
        if key.neg_checkpoint != me.neg_checkpoint:
            now = p.w.now.timestamp()
            theirs = ("no checkpoint time" if math.isinf(key.neg_checkpoint)
                      else f"{round(now + key.neg_checkpoint)}s ago")
            return f"; least work lost: checkpointed {round(now + me.neg_checkpoint)}s ago ({rival.job_id}: {theirs})"
        return (f"; least work lost: restarts {me.gpus_restarted} {p.w.dominant} ({rival.job_id} would restart "
                f"{key.gpus_restarted})")
