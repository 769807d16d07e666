"""Eviction plans: the fewest elastic workers whose eviction lets a starving gang's min set fit.

Per DESIGN "The agent's cycle" steps 2-3. For each starving gang (higher priority first, then
older): if its needed pods fit once terminating pods are gone, ``wait``; else choose victims
among admissible candidates so that every needed pod fits on a real node, taking on each node
the smallest set of victims that makes room (ties: most fulfilled job, lower job priority,
highest replica index, UID), then drop every victim the plan can do without.

A gang must also fit in its queue's deserved share as Volcano's proportion plugin counts it
(allocated + needed <= deserved, dominant resource), or Volcano will not place it however much is
free: when it would be above, victims of its *own* queue (the only ones that bring it under) are
added until it is not, fewest first, and the plan is minimized against both conditions.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import NamedTuple

from .cooldowns import old_enough
from .decisions import Eviction, GangDecision
from .fit import Capacity, fits_all, node_accepts, place_all, pod_demand, size_key
from .keys import GPU
from .model import PodView, newest_checkpoint
from .ordering import JobRank, Key, gang_key, job_rank, sequence_key, victim_key
from .quantity import add, format_resources, sub
from .world import Gang, JobState, World, is_candidate_role, job_id

_MAX_COMBINATIONS = 4000


class _Score(NamedTuple):
    """A node's plan for one needed pod; the smallest wins (fields compared in order: ordering.py,
    "Victim sets")."""

    new_jobs: int  # jobs it disrupts that no victim of this cycle disrupted yet (each restarts)
    victims: int  # how many
    order: tuple[Key, ...]  # their victim keys in order (ordering.sequence_key)
    left: int  # dominant resource left free on the node after the pod
    node: str

# Every node is scored for every needed pod when True (the reference the indexed search must match;
# the properties compare both).
EXHAUSTIVE_NODE_SCAN = False


@dataclass(slots=True)
class GangPlan:
    decision: GangDecision
    evictions: list[Eviction]


def _deficit(demand: dict[str, int], free: dict[str, int]) -> dict[str, int]:
    return {k: v - free.get(k, 0) for k, v in demand.items() if free.get(k, 0) < v}


def _covers(deficit: dict[str, int], pods: Sequence[PodView]) -> bool:
    for k, v in deficit.items():
        if sum(p.requests.get(k, 0) for p in pods) + (len(pods) if k == "pods" else 0) < v:
            return False
    return True


class Planner:
    """Plans every starving gang of one cycle against shared, mutable capacity."""

    def __init__(self, world: World) -> None:
        self.w = world
        self.capacity = world.future_capacity()  # terminating pods' resources count as free
        self.evictions_left: dict[str, int] = {}
        self.alloc = {q: dict(s.allocated) for q, s in world.shares.items()}
        self.taken: set[str] = set()
        self.inflight: list[PodView] = []  # victims chosen so far for the gang being planned
        self.candidates_by_node: dict[str, list[PodView]] = {}
        self.candidates_by_job: dict[str, list[PodView]] = {}
        # Candidates are among the elastic pods holding resources; taken in ``pods_by_group`` order
        # (group by group) so that every map below fills in the same order as a walk over the groups.
        rank = {key: i for i, key in enumerate(world.pods_by_group)}
        by_node, by_job = self.candidates_by_node, self.candidates_by_job
        for pod in sorted((p for p in world.elastic_holding if is_candidate_role(p)), key=lambda p: rank[p.group_key]):
            pods = by_node.get(pod.node_name)
            if pods is None:
                pods = by_node[pod.node_name] = []
            pods.append(pod)
            pods = by_job.get(pod.job_id)
            if pods is None:
                pods = by_job[pod.job_id] = []
            pods.append(pod)
        # Search index: nodes holding candidates are tagged with their profile: the sizes (dominant
        # resource) of the candidates that may still be victims this cycle (old enough, job known, not
        # taken yet: re-tagged as plans commit),
        # largest first as prefix sums, and the (queue, job priority, cooling) of their jobs. A node's
        # fewest possible victims for a gang is bounded from its profile without looking at its pods.
        # Nodes are also ranked by their most preferred candidate, a lower bound of the first key of
        # any victim set there (fulfillment only drops as victims are taken).
        dom = world.dominant
        tags: dict[str, int] = {}
        self.profiles: list[tuple[int, ...]] = []
        profile_ids: dict[tuple[int, ...], int] = {}
        self._profile_ids = profile_ids
        self.kinds: dict[str, frozenset[tuple[str, int, bool]]] = {}
        self._kinds_ok: dict[frozenset[tuple[str, int, bool]], bool] = {}  # for the gang being planned
        self.start_pref: dict[str, Key] = {}
        self.tag_members: dict[int, list[str]] = {}  # nodes given each tag (some may have moved on)
        self._tag_orders: dict[tuple[int, int], list[str]] = {}  # (tag, size) -> members by preference
        jobs = world.jobs  # only the candidates' jobs are ranked
        # What disrupting each candidate's job loses beyond fairness (ordering.py, victim criterion 3):
        # the work since its last checkpoint (newest first; unknown counts as oldest) and how many GPUs
        # restart (all of its workers'). Fixed for the cycle.
        for jid, pods in self.candidates_by_job.items():
            job = jobs[jid]
            ckpt = newest_checkpoint(None, job.pg, world.pods_by_group.get(pods[0].group_key, ()))
            job.loss = (-ckpt.timestamp() if ckpt is not None else math.inf,
                        job.running_workers * pods[0].requests.get(world.dominant, 0))
        job_key = {jid: job_rank(jobs[jid]) for jid in self.candidates_by_job}
        # Nodes holding candidates of a job disrupted this cycle (victims taken, or picked for the gang
        # being planned), counted per such job: more victims there may disrupt no new job.
        self.hit_nodes: dict[str, int] = {}
        # False while a gang is planned again by fewest victims alone (see _assign): disrupted jobs
        # then count 0 in every score.
        self.restart_aware = True
        # Per node: its candidates as (size, preference at the start = self.preference(p)).
        keyed: dict[str, list[tuple[int, Key]]] = {}
        sizes: set[int] = set()
        for node, pods in self.candidates_by_node.items():
            pairs = keyed[node] = [(p.requests.get(dom, 0), victim_key(job_key[p.job_id], p))
                                   for p in pods]
            sizes.update(size for size, _ in pairs)
            self.start_pref[node] = min(pref for _, pref in pairs)
            tag = self._profile_tag(node, profile_ids)
            if tag:
                tags[node] = tag
                self.tag_members.setdefault(tag, []).append(node)
        # For single-victim plans the victim must be at least as large as the node's deficit: nodes are
        # also ranked, per candidate size, by their most preferred candidate at least that large.
        self.sizes = sorted(sizes)
        self.pref_at_least: dict[int, dict[str, Key]] = {size: {} for size in self.sizes}
        for node, pairs in keyed.items():
            pairs.sort(key=lambda sp: sp[0], reverse=True)  # largest first: a running minimum per size
            i, best = 0, None
            for size in reversed(self.sizes):
                while i < len(pairs) and pairs[i][0] >= size:
                    if best is None or pairs[i][1] < best:
                        best = pairs[i][1]
                    i += 1
                if best is not None:
                    self.pref_at_least[size][node] = best
        self.capacity.retag(tags)
        self._job_verdicts: dict[str, str] = {}  # while one gang is planned (see _why_not)
        self.used_greedy = False  # the combination budget ran out while planning this gang
        self._share_refusals: set[tuple[str, int]] = set()
        self.version = 0  # bumped by every committed plan (exclusion counts are cached per version)
        # Per queue: bumped by every committed plan taking a victim from it (what the own-queue
        # caches depend on: a plan taking victims elsewhere leaves them valid).
        self.queue_versions: dict[str, int] = {}
        self._exclusion_cache: dict[tuple[int, str, int, bool], dict[str, int]] = {}
        self._by_queue: dict[str, list[str]] | None = None  # queue -> jobs with candidates
        self._old: dict[str, list[PodView]] = {}  # job -> candidates past minRuntimeSeconds
        self._supply: dict[str, int] = {}  # see _queue_supply
        self._admissible: dict[tuple[str, int, int], int] = {}  # see _admissible_supply

    # -- admissibility ------------------------------------------------------------------
    def _dom(self, queue: str, res: dict[str, int] | None = None) -> int:
        return (res if res is not None else self.alloc.get(queue, {})).get(self.w.dominant, 0)

    def _queue_admissible(self, gang: Gang, job: JobState, extra: Sequence[PodView]) -> bool:
        if job.queue == gang.queue:
            return True
        share = self.w.shares.get(job.queue)
        gang_share = self.w.shares.get(gang.queue)
        if share is None or gang_share is None or not share.reclaimable:
            return False
        dom = self.w.dominant
        if self._dom(gang.queue) >= gang_share.deserved.get(dom, 0):
            return False
        # Victims already chosen for this gang (on other nodes) come out of the same queue.
        keys = {p.key for p in extra}
        leaving = [*extra, *(p for p in self.inflight
                             if p.key not in keys and self.w.jobs[job_id(p)].queue == job.queue)]
        after = self._dom(job.queue) - sum(p.requests.get(dom, 0) for p in leaving)
        return after >= share.deserved.get(dom, 0)

    def _profile_tag(self, node: str, profile_ids: dict[tuple[int, ...], int]) -> int:
        """The search tag of ``node`` from its candidates not yet taken (0: none may be a victim)."""
        w = self.w
        sizes: list[int] = []
        kinds: set[tuple[str, int, bool]] = set()
        jobs, taken, dom, now = w.jobs, self.taken, w.dominant, w.now
        for p in self.candidates_by_node.get(node, ()):
            job = jobs.get(p.job_id)
            if job is None or job.bounds is None or job.pg is None or p.key in taken:
                continue
            policy = w.policy(job.queue)
            if not old_enough(p.scheduled_at, policy.minRuntimeSeconds, now):
                continue
            sizes.append(p.requests.get(dom, 0))
            kinds.add((job.queue, job.priority, job.cooling and not policy.preemptDuringCooldown))
        if not sizes:
            return 0
        profile = tuple(itertools.accumulate(sorted(sizes, reverse=True)))
        self.kinds[node] = frozenset(kinds)
        if profile not in profile_ids:
            profile_ids[profile] = len(self.profiles)
            self.profiles.append(profile)
        return 1 + profile_ids[profile]

    def _may_give(self, gang: Gang, kinds: frozenset[tuple[str, int, bool]]) -> bool:
        """Whether a node whose candidates' jobs are ``kinds`` may hold a victim for ``gang``
        (cached while one gang is planned: priorities, cooldowns and shares do not change)."""
        verdict = self._kinds_ok.get(kinds)
        if verdict is None:
            verdict = any(priority <= gang.priority and not cooling and self._queue_may_give(gang, queue)
                          for queue, priority, cooling in kinds)
            self._kinds_ok[kinds] = verdict
        return verdict

    def _queue_may_give(self, gang: Gang, queue: str) -> bool:
        """Whether some victim from ``queue`` could be admissible for ``gang`` (ignoring its size)."""
        if queue == gang.queue:
            return True
        share = self.w.shares.get(queue)
        gang_share = self.w.shares.get(gang.queue)
        if share is None or gang_share is None or not share.reclaimable:
            return False
        dom = self.w.dominant
        if self._dom(gang.queue) >= gang_share.deserved.get(dom, 0):
            return False
        return self._dom(queue) >= share.deserved.get(dom, 0)

    def _why_not(self, gang: Gang, pod: PodView) -> str | None:
        """None when ``pod`` may be a victim for ``gang``, else a short reason.

        While one gang is planned, job-level verdicts only get stricter (victims are only added), so
        they are remembered per job (and per queue and victim size for shares) until the next gang."""
        if pod.key in self.taken or pod.group_key == gang.key:
            return "taken"
        jid = job_id(pod)
        known = self._job_verdicts.get(jid)
        if known is not None:
            return known
        job = self.w.jobs.get(jid)
        barred = self._job_barred(gang, job)
        if barred is not None:
            self._job_verdicts[jid] = barred
            return barred
        assert job is not None
        policy = self.w.policy(job.queue)
        if not old_enough(pod.scheduled_at, policy.minRuntimeSeconds, self.w.now):
            return "min runtime"
        if not job.can_lose():
            self._job_verdicts[jid] = "at min"
            return "at min"
        if job.queue != gang.queue:
            share_key = (job.queue, pod.requests.get(self.w.dominant, 0))
            if share_key in self._share_refusals or not self._queue_admissible(gang, job, [pod]):
                self._share_refusals.add(share_key)
                return "queue share"
        return None

    def _job_barred(self, gang: Gang, job: JobState | None) -> str | None:
        """Why no worker of ``job`` may be a victim for ``gang``, from the job alone (``_why_not``'s
        first rules, in its order), or None."""
        if job is None or job.bounds is None:
            return "unknown job"
        if job.pg is None:
            return "no PodGroup"  # not ours to shrink: a neighbour's job, or one the controller refused
        if job.priority > gang.priority:
            return "higher priority"
        if job.cooling and not self.w.policy(job.queue).preemptDuringCooldown:
            return "cooldown"
        return None

    def _subset_ok(self, gang: Gang, subset: Sequence[PodView]) -> bool:
        per_job: dict[str, int] = {}
        per_queue: dict[str, list[PodView]] = {}
        for pod in subset:
            jid = job_id(pod)
            per_job[jid] = per_job.get(jid, 0) + 1
            job = self.w.jobs[jid]
            assert job.bounds is not None
            if job.current_workers() - per_job[jid] < job.bounds.min_replicas:
                return False
            per_queue.setdefault(job.queue, []).append(pod)
        for pods in per_queue.values():
            job = self.w.jobs[job_id(pods[0])]
            if not self._queue_admissible(gang, job, pods):
                return False
        return True

    def preference(self, pod: PodView, extra_taken: int = 0) -> Key:
        """``pod``'s victim key (``ordering.victim_key``) with ``extra_taken`` more of its job's workers taken."""
        return victim_key(job_rank(self.w.jobs[pod.job_id], extra_taken), pod)

    def order_key(self, subset: Sequence[PodView]) -> tuple[Key, ...]:
        """``ordering.sequence_key`` of ``subset``: among equally small sets, the smallest comes first."""
        return sequence_key(self.w.jobs, subset)

    def _take(self, pod: PodView, delta: int) -> None:
        """Count ``pod`` as a victim (``delta`` 1) or not any more (-1) in its job's ``taken``,
        keeping ``hit_nodes`` (nodes with candidates of a disrupted job) up to date."""
        jid = job_id(pod)
        job = self.w.jobs[jid]
        before = job.taken
        job.taken += delta
        if (before == 0) == (job.taken == 0):
            return
        hit = self.hit_nodes
        for node in {c.node_name for c in self.candidates_by_job.get(jid, ())}:
            n = hit.get(node, 0) + (1 if delta > 0 else -1)
            if n:
                hit[node] = n
            else:
                del hit[node]

    def new_jobs(self, subset: Sequence[PodView]) -> int:
        """How many jobs ``subset`` disrupts that no victim of this cycle (or of the gang being planned)
        disrupted yet: every worker of such a job restarts, however many of its workers go."""
        if not self.restart_aware:
            return 0
        jobs = self.w.jobs
        return len({v.job_id for v in subset if jobs[v.job_id].taken == 0})

    def _jobs_floor(self, hit: bool) -> int:
        """The fewest new jobs any victim set on a node disrupts (``hit``: it holds candidates of a job
        already disrupted)."""
        return 0 if hit or not self.restart_aware else 1

    @staticmethod
    def _can_beat(jobs_low: int, victims_low: int, pref_low: Key | tuple[()], beat: _Score | None) -> bool:
        """Whether a plan disrupting at least ``jobs_low`` new jobs with at least ``victims_low`` victims,
        the first preferred no more than ``pref_low``, could score below ``beat``."""
        if beat is None:
            return True
        if (jobs_low, victims_low) != (beat.new_jobs, beat.victims):
            return (jobs_low, victims_low) < (beat.new_jobs, beat.victims)
        return not beat.order or pref_low <= beat.order[0]

    # -- choosing victims -----------------------------------------------------------------
    def _cheapest_on_node(self, gang: Gang, pod: PodView, node: str, cap: Capacity,
                          chosen: set[str], beat: _Score | None = None) -> list[PodView] | None:
        """The fewest admissible victims on ``node`` that make room for ``pod`` (first in order among
        equally small sets); None when there are none, or none that could beat the score ``beat``."""
        demand = pod_demand(pod)
        deficit = _deficit(demand, cap.free[node])
        if not deficit:
            return []
        cands = [c for c in self.candidates_by_node.get(node, ())
                 if c.key not in chosen and self._why_not(gang, c) is None]
        if not cands or not _covers(deficit, cands):
            return None
        cands.sort(key=self.preference)
        # Fewest newly disrupted jobs first, then fewest victims, then preference: a larger set may win
        # when it takes from fewer jobs (or from jobs already disrupted), so sizes go up until no
        # larger set can beat the best found (no set disrupts fewer than ``floor`` new jobs).
        jobs = self.w.jobs
        floor = self._jobs_floor(any(jobs[c.job_id].taken for c in cands))
        budget = _MAX_COMBINATIONS
        best: tuple[tuple[int, int, tuple[Key, ...]], tuple[PodView, ...]] | None = None
        for k in range(1, len(cands) + 1):
            if best is not None and (floor, k) > best[0][:2]:
                break  # more victims and no fewer new jobs: cannot win
            if not self._can_beat(floor, k, self.preference(cands[0]), beat):
                return None  # cannot beat the best plan found on other nodes
            for subset in combinations(cands, k):
                budget -= 1
                if budget < 0:
                    break
                if _covers(deficit, subset) and self._subset_ok(gang, subset):
                    score = (self.new_jobs(subset), k, self.order_key(subset))
                    if best is None or score < best[0]:
                        best = (score, subset)
            if budget < 0:
                if best is not None:
                    return list(best[1])
                self.used_greedy = True
                return self._greedy(gang, deficit, cands)
        return list(best[1]) if best is not None else None

    def _greedy(self, gang: Gang, deficit: dict[str, int], cands: list[PodView]) -> list[PodView] | None:
        chosen: list[PodView] = []
        for c in cands:
            if self._subset_ok(gang, [*chosen, c]):
                chosen.append(c)
                if _covers(deficit, chosen):
                    return chosen
        return None

    def _assign(self, gang: Gang, cap: Capacity) -> list[PodView] | None:
        """Greedy per needed pod: the node whose victims disrupt the fewest new jobs, then are fewest
        (then most preferred). Greedy choices that save a restart for one pod may leave no room for a
        later one: the gang is then planned again by fewest victims alone (the order before issue
        19), so that restart awareness never makes a gang wait that could be placed."""
        victims = self._assign_greedy(gang, cap)
        if victims is not None or not self.inflight:
            return victims  # a plan, or not even the first needed pod found room: no other order helps
        for v in self.inflight:  # the picks of the failed attempt are not victims
            self._take(v, -1)
        self.inflight = []
        self._job_verdicts = {}  # verdicts and share refusals depended on those picks
        self._share_refusals = set()
        self.restart_aware = False
        try:
            return self._assign_greedy(gang, self.capacity.copy())  # (``cap`` is not read afterwards)
        finally:
            self.restart_aware = True

    def _assign_greedy(self, gang: Gang, cap: Capacity) -> list[PodView] | None:
        victims: list[PodView] = []
        self.inflight = victims
        chosen: set[str] = set()
        for pod in sorted(gang.needed, key=size_key):
            found = self._best_node(gang, pod, cap, chosen)
            if found is None:
                return None
            score, best_subset = found
            for v in best_subset:
                cap.give(v.node_name, pod_demand(v))
                chosen.add(v.key)
                victims.append(v)
                self._take(v, 1)
            cap.take(score.node, pod_demand(pod))
        return victims

    def _score(self, gang: Gang, pod: PodView, name: str, cap: Capacity, chosen: set[str],
               beat: _Score | None = None) -> tuple[_Score, list[PodView]] | None:
        subset = self._cheapest_on_node(gang, pod, name, cap, chosen, beat)
        if subset is None:
            return None
        left = add(cap.free[name], _sum_demand(subset))
        return _Score(self.new_jobs(subset), len(subset), self.order_key(subset), left.get(self.w.dominant, 0),
                      name), subset

    def _best_node(self, gang: Gang, pod: PodView, cap: Capacity,
                   chosen: set[str]) -> tuple[_Score, list[PodView]] | None:
        """The node with the smallest score (fewest victims, then their order, then the least
        dominant resource left, then name) for ``pod``."""
        gpus = pod.requests.get(GPU, 0)
        if EXHAUSTIVE_NODE_SCAN or self.w.dominant != GPU or gpus <= 0:
            return self._scan(gang, pod, cap, chosen, cap.nodes)
        index = cap.gpu_index()
        demand = pod_demand(pod)
        # No victims: the fewest free GPUs that fit, then name (what the scan's score prefers).
        levels: dict[int, list[set[str]]] = {}  # the buckets of each level (joined only when scanned)
        for (free, _), names in index.items():
            if free >= gpus:
                levels.setdefault(free, []).append(names)
        wants = tuple(demand.items())
        all_free, nodes = cap.free, cap.nodes
        for free in sorted(levels):
            name = None  # the smallest name that fits: a name compare first skips most checks
            for names in levels[free]:
                for n in names:
                    if name is not None and n >= name:
                        continue
                    node_free = all_free[n]
                    for k, v in wants:
                        if node_free.get(k, 0) < v:
                            break
                    else:
                        if node_accepts(nodes[n], pod):
                            name = n
            if name is not None:
                return _Score(0, 0, (), free, name), []
        # Victims: buckets of nodes by (free GPUs, largest candidate), fewest possible victims first;
        # inside a bucket nodes go by their best candidate, so the scan stops as soon as no node left
        # can beat the best plan found.
        buckets: list[tuple[int, int, int, set[str]]] = []
        for (free, tag), names in index.items():
            if tag == 0:
                continue  # no candidate on these nodes may be a victim this cycle
            prefix = self.profiles[tag - 1]
            if free >= gpus:
                bound = 1
            else:
                bound = bisect.bisect_left(prefix, gpus - free) + 1
                if bound > len(prefix):
                    continue  # not even every candidate there would free enough GPUs
            buckets.append((bound, free, tag, names))
        buckets.sort(key=lambda b: (b[0], b[1], b[2]))
        best: tuple[_Score, list[PodView]] | None = None
        hit = self.hit_nodes
        for bound, free, tag, names in buckets:
            # No node of this bucket or later ones (as many victims or more) disrupts fewer than one new
            # job, unless it holds candidates of a disrupted job (then 0).
            if best is not None and not self._can_beat(self._jobs_floor(bool(hit)), bound, (), best[0]):
                break
            size, low = 0, self.start_pref
            if bound == 1 and free < gpus:
                i = bisect.bisect_left(self.sizes, gpus - free)
                if i == len(self.sizes):
                    continue
                size = self.sizes[i]
                low = self.pref_at_least[size]
            order = self._tag_order(tag, size, low)
            if not order or (best is not None and not self._can_beat(self._jobs_floor(bool(hit)), bound,
                                                                     low[order[0]], best[0])):
                continue  # even the tag's best node cannot beat the best plan found
            for name in self._ranked(names, order, low):
                if best is not None and not self._can_beat(self._jobs_floor(name in hit), bound, low[name], best[0]):
                    if hit and self.restart_aware:
                        continue  # (a later node holding a disrupted job's candidates still may)
                    break  # later nodes come by preference: none can beat it either
                kinds = self.kinds[name]
                may_give = self._kinds_ok.get(kinds)  # _may_give's cache, read inline: a hot loop
                if may_give is None:
                    may_give = self._may_give(gang, kinds)
                if not may_give or not node_accepts(cap.nodes[name], pod):
                    continue
                found = self._score(gang, pod, name, cap, chosen, best[0] if best is not None else None)
                if found is not None and (best is None or found[0] < best[0]):
                    best = found
        return best

    def _tag_order(self, tag: int, size: int, low: dict[str, Key]) -> list[str]:
        """Every node given ``tag`` (some may have moved on) by ``low``, most preferred first; nodes
        missing from ``low`` have no large enough candidate."""
        order = self._tag_orders.get((tag, size))
        if order is None:
            members = dict.fromkeys(n for n in self.tag_members.get(tag, ()) if n in low)
            order = self._tag_orders[(tag, size)] = sorted(members, key=low.__getitem__)
        return order

    @staticmethod
    def _ranked(names: set[str], order: list[str], low: dict[str, Key]) -> Iterable[str]:
        """``names`` (nodes of one tag, now in one bucket) in ``order``: a large bucket is walked along
        the tag's order, a small one sorted."""
        if len(names) * 8 < len(order):
            return sorted((n for n in names if n in low), key=low.__getitem__)
        return (n for n in order if n in names)

    def _scan(self, gang: Gang, pod: PodView, cap: Capacity, chosen: set[str],
              names: Iterable[str]) -> tuple[_Score, list[PodView]] | None:
        best: tuple[_Score, list[PodView]] | None = None
        for name in names:
            if not node_accepts(cap.nodes[name], pod):
                continue
            found = self._score(gang, pod, name, cap, chosen)
            if found is None:
                continue
            if best is None or found[0] < best[0]:
                best = found
                if not found[1] and found[0].left == pod.requests.get(self.w.dominant, 0):
                    break  # exact fit without victims: cannot do better
        return best

    def _queue_supply(self, queue: str) -> int:
        """An upper bound of what victims of ``queue`` can give back this cycle (dominant resource):
        each job's largest candidates, as many as it has workers above min."""
        supply = self._supply.get(queue)
        if supply is None:
            supply = 0
            dom = self.w.dominant
            for jid in self._jobs_of_queue(queue):
                job = self.w.jobs[jid]
                spare = job.running_workers - job.bounds.min_replicas if job.bounds is not None else 0
                sizes = sorted((p.requests.get(dom, 0) for p in self.candidates_by_job[jid]), reverse=True)
                supply += sum(sizes[:max(0, spare)])
            self._supply[queue] = supply
        return supply

    def _admissible_supply(self, gang: Gang) -> int:
        """What admissible victims of ``gang``'s own queue can give back at most (dominant resource):
        each job's largest admissible candidates, as many as it has workers above min (``_why_not``'s
        rules for the own queue, job by job; cached per gang priority until the next committed plan)."""
        key = (gang.queue, gang.priority, self.queue_versions.get(gang.queue, 0))
        cacheable = gang.key not in self.candidates_by_job
        if cacheable and key in self._admissible:
            return self._admissible[key]
        dom = self.w.dominant
        total = 0
        for jid in self._jobs_of_queue(gang.queue):
            job = self.w.jobs.get(jid)
            if jid == gang.key or self._job_barred(gang, job) is not None:
                continue
            assert job is not None and job.bounds is not None
            if not job.can_lose():
                continue
            sizes = sorted((p.requests.get(dom, 0) for p in self._old_candidates(jid) if p.key not in self.taken),
                           reverse=True)
            total += sum(sizes[:max(0, job.current_workers() - job.bounds.min_replicas)])
        if cacheable:
            self._admissible[key] = total
        return total

    def _old_candidates(self, jid: str) -> list[PodView]:
        """The job's candidates past their queue's minRuntimeSeconds (fixed for the cycle: computed once)."""
        old = self._old.get(jid)
        if old is None:
            minimum = self.w.policy(self.w.jobs[jid].queue).minRuntimeSeconds
            old = self._old[jid] = [p for p in self.candidates_by_job[jid]
                                    if old_enough(p.scheduled_at, minimum, self.w.now)]
        return old

    def _jobs_of_queue(self, queue: str) -> list[str]:
        """Keys of the jobs of ``queue`` that have candidates (indexed on first use)."""
        if self._by_queue is None:
            self._by_queue = {}
            for jid in self.candidates_by_job:
                self._by_queue.setdefault(self.w.jobs[jid].queue, []).append(jid)
        return self._by_queue.get(queue, [])

    def exclusions(self, gang: Gang, own_queue: bool = False) -> dict[str, int]:
        """How many candidates (of the gang's own queue only, with ``own_queue``) are not admissible
        for ``gang``, by reason (``_why_not``'s order), counted per job rather than per pod; cached
        until the next committed plan."""
        key = (gang.priority, gang.queue, self.queue_versions.get(gang.queue, 0) if own_queue else self.version,
               own_queue)
        cacheable = gang.key not in self.candidates_by_job
        if cacheable and key in self._exclusion_cache:
            return self._exclusion_cache[key]
        reasons: dict[str, int] = {}

        def count(why: str, n: int) -> None:
            if n > 0:
                reasons[why] = reasons.get(why, 0) + n

        jids = self._jobs_of_queue(gang.queue) if own_queue else self.candidates_by_job
        for jid in jids:
            pods = self.candidates_by_job[jid]
            if jid == gang.key:
                continue
            job = self.w.jobs.get(jid)
            live = [p for p in pods if p.key not in self.taken] if job is not None and job.taken else pods
            barred = self._job_barred(gang, job)
            if barred is not None:
                count(barred, len(live))
                continue
            assert job is not None
            old = self._old_candidates(jid)
            if live is not pods:
                old = [p for p in old if p.key not in self.taken]
            count("min runtime", len(live) - len(old))
            if not job.can_lose():
                count("at min", len(old))
                continue
            if job.queue != gang.queue:
                verdicts: dict[int, bool] = {}
                for p in old:
                    size = p.requests.get(self.w.dominant, 0)
                    if size not in verdicts:
                        verdicts[size] = self._queue_admissible(gang, job, [p])
                    if not verdicts[size]:
                        count("queue share", 1)
        if cacheable:
            self._exclusion_cache[key] = reasons
        return reasons

    def _minimize(self, gang: Gang, victims: list[PodView], excess: int = 0) -> list[PodView]:
        """Drop every victim the gang can do without (least preferred victims tried first): it must
        still fit, and its own queue's victims still cover its share ``excess``."""
        kept = list(victims)
        cap = self.capacity.copy()  # with every victim kept so far given back (one change per trial)
        for k in kept:
            cap.give(k.node_name, pod_demand(k))
        own = self._own_share(gang, kept) if excess else 0
        for v in sorted(victims, key=self.preference, reverse=True):
            trial = [k for k in kept if k.key != v.key]
            own_trial = own - self._own_share(gang, (v,)) if excess else 0  # = _own_share(gang, trial)
            if excess and own_trial < excess:
                continue
            cap.take(v.node_name, pod_demand(v))
            if fits_all(gang.needed, cap):
                kept, own = trial, own_trial
            else:
                cap.give(v.node_name, pod_demand(v))
        return kept

    def _own_share(self, gang: Gang, victims: Sequence[PodView]) -> int:
        """The dominant resource that ``victims`` from ``gang``'s own queue give back to it."""
        dom = self.w.dominant
        return sum(v.requests.get(dom, 0) for v in victims if self.w.jobs[job_id(v)].queue == gang.queue)

    def _excess_text(self, gang: Gang, excess: int) -> str:
        dom = self.w.dominant
        need = sum(p.requests.get(dom, 0) for p in gang.needed)
        return (f"allocated {self._dom(gang.queue)} + needed {need} > deserved "
                f"{self.w.volcano_deserved(gang.queue)} {dom}, as Volcano's proportion plugin counts it")

    def _share_wait_reason(self, gang: Gang, excess: int, fits: str, supply: bool = False) -> str:
        """Why ``gang`` waits when its queue would be above its Volcano share and its own queue's
        elastic workers cannot bring it under (``supply``: not even all of them, admissible or not)."""
        reasons = self.exclusions(gang, own_queue=True)
        excluded = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items())) or "none excluded"
        why = (f"even all of the queue's own elastic workers above their jobs' min "
               f"({self._queue_supply(gang.queue)} {self.w.dominant}) could not" if supply else
               "not enough of the queue's own elastic workers are admissible to")
        return (f"{fits}, but queue {gang.queue} would be above its deserved share "
                f"({self._excess_text(gang, excess)}), and {why} bring it under; "
                f"its queue's candidates excluded: {excluded}")

    def _first_in_order(self, cands: Sequence[PodView], k: int, excess: int) -> list[PodView] | None:
        """The ``k`` victims among ``cands`` giving back at least ``excess`` of the dominant resource
        whose ``order_key`` is smallest, no job taken below min: what ``min(feasible subsets,
        key=order_key)`` gives, built one victim at a time (the most preferred, preferences
        recomputed as victims are taken, that the largest others left can still complete).
        None when per-job minimums make that construction fail (the caller then enumerates)."""
        dom = self.w.dominant
        picked: list[PodView] = []
        extra: dict[str, int] = {}
        left = list(cands)
        need = excess
        ascending = sorted(c.requests.get(dom, 0) for c in left)  # sizes of `left`
        # Per job: its job_rank with this construction's picks taken, or None when one more victim
        # would take it below min; only the job of the last pick changes between steps.
        job_part: dict[str, JobRank | None] = {}
        while len(picked) < k:
            slots = k - len(picked) - 1
            with_c = sum(ascending[max(0, len(ascending) - slots - 1):])  # the largest slots + 1
            without_c = sum(ascending[max(0, len(ascending) - slots):]) if slots else 0  # the largest slots
            edge = ascending[len(ascending) - slots - 1] if slots < len(ascending) else 0
            best: tuple[Key, int] | None = None
            for i, c in enumerate(left):
                jid = c.job_id
                if jid in job_part:
                    part = job_part[jid]
                else:
                    job = self.w.jobs[jid]
                    assert job.bounds is not None
                    n = extra.get(jid, 0)
                    part = job_part[jid] = (
                        None if job.current_workers() - n - 1 < job.bounds.min_replicas
                        else job_rank(job, n))
                if part is None:
                    continue
                size = c.requests.get(dom, 0)
                others = with_c - size if size >= edge else without_c  # the largest `slots` besides c
                if size + others < need:
                    continue
                key = victim_key(part, c)  # = self.preference(c, extra[jid])
                if best is None or key < best[0]:
                    best = (key, i)
            if best is None:
                return None
            chosen = left.pop(best[1])
            size = chosen.requests.get(dom, 0)
            del ascending[bisect.bisect_left(ascending, size)]
            picked.append(chosen)
            need -= size
            extra[chosen.job_id] = extra.get(chosen.job_id, 0) + 1
            job_part.pop(chosen.job_id, None)
        return picked if need <= 0 else None

    def _share_victims(self, gang: Gang, excess: int, chosen: Sequence[PodView]) -> list[PodView] | None:
        """The fewest admissible elastic workers of ``gang``'s own queue (not in ``chosen``, whose
        picks the jobs' ``taken`` counts already hold) giving back at least ``excess`` of the
        dominant resource, first in preference order among equally few; None when they cannot."""
        if excess <= 0:
            return []
        dom = self.w.dominant
        if self._queue_supply(gang.queue) < excess:
            return None  # even every elastic worker of the queue could not bring it under
        taken = {c.key for c in chosen}
        cands = [c for jid in self._jobs_of_queue(gang.queue) for c in self.candidates_by_job[jid]
                 if c.key not in taken and c.requests.get(dom, 0) > 0 and self._why_not(gang, c) is None]
        cands.sort(key=self.preference)
        sizes = sorted((c.requests.get(dom, 0) for c in cands), reverse=True)
        fewest = next((k for k in range(1, len(sizes) + 1) if sum(sizes[:k]) >= excess), None)
        if fewest is None:
            return None
        first = self._first_in_order(cands, fewest, excess)
        if first is not None:
            return first
        budget = _MAX_COMBINATIONS
        feasible: list[tuple[PodView, ...]] = []
        for subset in combinations(cands, fewest):
            budget -= 1
            if budget < 0:
                break
            if (sum(c.requests.get(dom, 0) for c in subset) >= excess
                    and self._subset_ok(gang, subset)):
                feasible.append(subset)
        if feasible:
            best: tuple[PodView, ...] = min(feasible, key=self.order_key)
            return list(best)
        picked: list[PodView] = []  # greedy: most preferred first, while the jobs stay at or above min
        for c in cands:
            if self._subset_ok(gang, [*picked, c]):
                picked.append(c)
                if sum(p.requests.get(dom, 0) for p in picked) >= excess:
                    return picked
        return None

    # -- one gang ------------------------------------------------------------------------
    def plan_gang(self, gang: Gang) -> GangPlan:
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
        # Volcano's proportion plugin places the gang only within its queue's deserved share.
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

        left = self.evictions_left.setdefault(gang.queue, w.policy(gang.queue).maxEvictionsPerCycle)
        if left == 0:  # any plan needs a victim: nothing to search for
            return wait(f"needs evictions but queue {gang.queue} has none left this cycle (maxEvictionsPerCycle)")
        self._kinds_ok = {}
        self.used_greedy = False
        self._job_verdicts = {}
        self._share_refusals = set()
        if excess:
            # Victims of its own queue must give back ``excess``: when even every one of them above its
            # job's min (or every admissible one) would not, no plan exists; the node search is skipped.
            fits = ("its min set fits on free capacity" if placement is not None
                    else "its min set does not fit on free capacity")
            if self._queue_supply(gang.queue) < excess:
                return wait(self._share_wait_reason(gang, excess, fits, supply=True))
            if self._admissible_supply(gang) < excess:
                return wait(self._share_wait_reason(gang, excess, fits))

        cap = self.capacity.copy()
        victims = [] if placement is not None else self._assign(gang, cap)
        share_failed = False
        if victims is not None and excess:
            # Its own queue's elastic workers make room in the queue's share (others' cannot).
            extra = self._share_victims(gang, excess - self._own_share(gang, victims), victims)
            share_failed = extra is None
            victims = None if extra is None else victims + extra
        for v in self.inflight:  # _assign counted its picks as taken: undo (committed below)
            self._take(v, -1)
        self.inflight = []
        if victims is None:
            if share_failed:
                return wait(self._share_wait_reason(gang, excess, "its min set fits on free capacity"
                                                    if placement is not None else
                                                    "evicting elastic workers would make room on the nodes"))
            reasons = self.exclusions(gang)
            excluded = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items())) or "none excluded"
            need = format_resources(_sum_requests(gang.needed))
            return wait(f"no set of admissible elastic workers makes its {len(gang.needed)} needed pod(s) "
                        f"({need}) fit{' within its queue share' if excess else ''}; "
                        f"candidates excluded: {excluded}")
        if excess:
            self.used_greedy = True  # share victims are chosen greedily: always minimize
        if len(gang.needed) > 1 or self.used_greedy:
            # One needed pod with the fewest victims any node needs is minimal already: fewer victims on
            # its node do not make room, and no other node lost any.
            victims = self._minimize(gang, victims, excess)
        victims.sort(key=self.preference)
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
        evictions = []
        for v in victims:
            job = w.jobs[job_id(v)]
            reason = (f"elastic worker (index {v.replica_index}) of {job.key} "
                      f"(fulfillment {job.fulfillment():.2f}, priority {job.priority}) makes room for "
                      f"{gang.key} in queue {gang.queue}")
            self._take(v, 1)
            self.taken.add(v.key)
            self.alloc[job.queue] = sub(self.alloc.get(job.queue, {}), v.requests)
            evictions.append(Eviction(v.key, v.node_name, job.key, job.queue, gang.key, reason, v.uid))
        self.alloc[gang.queue] = add(self.alloc.get(gang.queue, {}), _sum_requests(gang.needed))
        for node in sorted({v.node_name for v in victims}):  # their nodes have fewer candidates left
            tag = self._profile_tag(node, self._profile_ids)
            self.capacity.set_tag(node, tag)
            if tag:
                self.tag_members.setdefault(tag, []).append(node)
                for key in [k for k in self._tag_orders if k[0] == tag]:
                    del self._tag_orders[key]
        why = f"evicting {len(victims)} elastic worker(s) lets its {len(gang.needed)} needed pod(s) fit"
        if excess:
            why += f" and brings queue {gang.queue} back within its deserved share (before: {share_note})"
        decision = GangDecision(gang.key, gang.queue, "evict", why, needed_keys, tuple(v.key for v in victims))
        return GangPlan(decision, evictions)


def _queue_blocks(world: World, queue: str) -> str:
    """Why Volcano will never place a gang of ``queue`` whatever the capacity ("" when nothing we see)."""
    for q in world.snapshot.queues:
        if q.name == queue:
            return "" if q.state in ("", "Open") else f"its queue {queue} is {q.state}"
    return f"its queue {queue} does not exist"


def _sum_demand(pods: Sequence[PodView]) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in pods:
        out = add(out, pod_demand(p))
    return out


def _sum_requests(pods: Sequence[PodView]) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in pods:
        out = add(out, p.requests)
    return out


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
