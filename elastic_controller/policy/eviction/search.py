"""The search for the fewest victims that make every needed pod of a gang fit on real nodes:
per needed pod (largest first) the node with the smallest score, then every victim the plan can do
without dropped (``_minimize``)."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from itertools import combinations
from typing import NamedTuple

from ..fit import Capacity, fits_all, node_accepts, pod_demand, size_key
from ..keys import GPU
from ..model import PodView
from ..ordering import Key
from ..quantity import add
from ..world import Gang
from .admissibility import Admissibility
from .base import _MAX_COMBINATIONS, _covers, _deficit, _sum_demand
from .index import NodeIndex


class _Score(NamedTuple):
    """A node's plan for one needed pod; the smallest wins (fields compared in order: ordering.py,
    "Victim sets")."""

    new_jobs: int  # jobs it disrupts that no victim of this cycle disrupted yet (each restarts)
    victims: int  # how many
    order: tuple[Key, ...]  # their victim keys in order (ordering.sequence_key)
    left: int  # dominant resource left free on the node after the pod
    node: str


class VictimSearch(Admissibility, NodeIndex):
    # -- restart cost ---------------------------------------------------------------------
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
        equally small sets); None when there are none, or none that could beat the score ``beat``
        (a set that cannot beat it may still be returned: the caller compares)."""
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
        # A job with allowed counts gives as many more workers as round it down to one (``_round_up``:
        # its next candidates in victim order, wherever they are); they count as victims. Every set
        # whose jobs are all at allowed counts rounds to itself, so the sizes still go up from 1.
        # (A set with extras has more victims than its size ``k``: it never ties with ``beat`` at ``k``, so
        # the first candidate's key stays the bound of the sets that can.)
        rounds = self._constrained(cands)
        low = self.preference(cands[0])
        budget = _MAX_COMBINATIONS
        best: tuple[tuple[int, int, tuple[Key, ...]], Sequence[PodView]] | None = None
        for k in range(1, len(cands) + 1):
            if best is not None and (floor, k) > best[0][:2]:
                break  # more victims and no fewer new jobs: cannot win
            if not self._can_beat(floor, k, low, beat):
                # No set of ``k`` or more can beat the best plan found on other nodes; a smaller set
                # found already still may: its extra victims (allowed counts) come from other nodes
                # and may come first in victim order (the caller compares it with ``beat``).
                break
            for subset in combinations(cands, k):
                budget -= 1
                if budget < 0:
                    break
                if _covers(deficit, subset) and self._subset_ok(gang, subset):
                    full: Sequence[PodView] = subset
                    if rounds:
                        extras = self._round_up(gang, subset, chosen)
                        if extras is None:
                            continue
                        if extras:
                            full = (*subset, *extras)
                            if not self._subset_ok(gang, full):
                                continue
                    score = (self.new_jobs(full), len(full), self.order_key(full))
                    if best is None or score < best[0]:
                        best = (score, full)
            if budget < 0:
                if best is not None:
                    return list(best[1])
                self.used_greedy = True
                return self._greedy(gang, deficit, cands, chosen)
        return list(best[1]) if best is not None else None

    def _greedy(self, gang: Gang, deficit: dict[str, int], cands: list[PodView],
                exclude: set[str] | frozenset[str] = frozenset()) -> list[PodView] | None:
        """Most preferred first while the jobs stay at or above min, until the deficit is covered
        (and, for jobs with allowed counts, rounded down to one: ``_round_up``)."""
        chosen: list[PodView] = []
        for c in cands:
            if self._subset_ok(gang, [*chosen, c]):
                chosen.append(c)
                if _covers(deficit, chosen):
                    extras = self._round_up(gang, chosen, exclude)
                    if extras is None:
                        continue
                    if not extras:
                        return chosen
                    if self._subset_ok(gang, [*chosen, *extras]):
                        return [*chosen, *extras]
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
        self._reset_gang_caches()  # verdicts and share refusals depended on those picks
        self.restart_aware = False
        try:
            victims = self._assign_greedy(gang, self.capacity.copy())  # (``cap`` is not read afterwards)
        finally:
            self.restart_aware = True
        if victims is not None:
            self.fell_back = True
            self.fell_back_why = ("the victims disrupting the fewest jobs for one needed pod left no room "
                                  "for another")
        return victims

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
        # (extra victims of a job with allowed counts may be on other nodes: only this node's count here)
        left = add(cap.free[name], _sum_demand(subset if not self.counts else
                                              [v for v in subset if v.node_name == name]))
        return _Score(self.new_jobs(subset), len(subset), self.order_key(subset), left.get(self.w.dominant, 0),
                      name), subset

    def _best_node(self, gang: Gang, pod: PodView, cap: Capacity,
                   chosen: set[str]) -> tuple[_Score, list[PodView]] | None:
        """The node with the smallest score (fewest victims, then their order, then the least
        dominant resource left, then name) for ``pod``."""
        gpus = pod.requests.get(GPU, 0)
        if self.search == "exhaustive" or self.w.dominant != GPU or gpus <= 0:
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

    def _minimize(self, gang: Gang, victims: list[PodView], excess: int = 0) -> list[PodView]:
        """Drop every victim the gang can do without (least preferred victims tried first): it must
        still fit, and its own queue's victims still cover its share ``excess``."""
        kept = list(victims)
        cap = self.capacity.copy()  # with every victim kept so far given back (one change per trial)
        for k in kept:
            cap.give(k.node_name, pod_demand(k))
        own = self._own_share(gang, kept) if excess else 0
        rounds = self._constrained(victims)
        for v in sorted(victims, key=self.preference, reverse=True):
            if not rounds:
                group: Sequence[PodView] = (v,)
                trial = [k for k in kept if k.key != v.key]
            else:
                # A job with allowed counts takes back as many victims as bring it up to its next
                # allowed count (or all of them): ``v`` and its job's least preferred others.
                if not any(k.key == v.key for k in kept):
                    continue  # (given back with an earlier group)
                group = self._give_back(v, kept)
                out = {g.key for g in group}
                trial = [k for k in kept if k.key not in out]
            own_trial = own - self._own_share(gang, group) if excess else 0  # = _own_share(gang, trial)
            if excess and own_trial < excess:
                continue
            for g in group:
                cap.take(g.node_name, pod_demand(g))
            if fits_all(gang.needed, cap):
                kept, own = trial, own_trial
            else:
                for g in group:
                    cap.give(g.node_name, pod_demand(g))
        return kept

    def _give_back(self, v: PodView, kept: Sequence[PodView]) -> list[PodView]:
        """The victims of ``kept`` that must stay with ``v`` if it stays: ``v`` alone, or, when its job
        has allowed counts, ``v`` and as many of its job's least preferred other victims as take the
        job from its count after ``kept`` up to the next allowed count (its count before the plan
        when there is none in between)."""
        allowed = self.counts.get(v.job_id)
        if allowed is None:
            return [v]
        mine = [k for k in kept if k.job_id == v.job_id]
        before = self.w.jobs[v.job_id].current_workers()  # (the plan's victims are not counted taken)
        after = before - len(mine)
        up = next((t for t in allowed.grow_targets(after) if t < before), before)
        others = sorted((k for k in mine if k.key != v.key), key=self.preference, reverse=True)
        return [v, *others[:up - after - 1]]
