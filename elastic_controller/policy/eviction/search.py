"""The search for the fewest victims that make every needed pod of a gang fit on real nodes:
per needed pod (largest first) the node with the smallest score, then every victim the plan can do
without dropped (``_minimize``)."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from itertools import combinations
from typing import NamedTuple

from ..fit import Capacity, fits_all, node_accepts, pod_demand, size_key
from ..keys import GPU
from ..model import PodView
from ..ordering import Key
from ..quantity import add
from ..world import Gang, job_id
from .admissibility import Admissibility
from .base import _MAX_COMBINATIONS, _covers, _deficit, _sum_demand
from .index import NodeIndex


class _Score(NamedTuple):
    """A node's plan for one needed pod; the smallest wins (fields compared in order)."""

    victims: int  # how many
    order: tuple[Key, ...]  # their victim keys in order (ordering.sequence_key)
    left: int  # dominant resource left free on the node after the pod
    node: str


class VictimSearch(Admissibility, NodeIndex):
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
        budget = _MAX_COMBINATIONS
        for k in range(1, len(cands) + 1):
            if beat is not None and (k > beat.victims or
                                     (k == beat.victims and self.preference(cands[0]) > beat.order[0])):
                return None  # more victims, or as many whose first is less preferred: cannot win
            feasible: list[tuple[PodView, ...]] = []
            for subset in combinations(cands, k):
                budget -= 1
                if budget < 0:
                    break
                if _covers(deficit, subset) and self._subset_ok(gang, subset):
                    feasible.append(subset)
            if feasible:
                best: tuple[PodView, ...] = min(feasible, key=self.order_key)
                return list(best)
            if budget < 0:
                self.used_greedy = True
                return self._greedy(gang, deficit, cands)
        return None

    def _greedy(self, gang: Gang, deficit: dict[str, int], cands: list[PodView]) -> list[PodView] | None:
        chosen: list[PodView] = []
        for c in cands:
            if self._subset_ok(gang, [*chosen, c]):
                chosen.append(c)
                if _covers(deficit, chosen):
                    return chosen
        return None

    def _assign(self, gang: Gang, cap: Capacity) -> list[PodView] | None:
        """Greedy per needed pod: the node needing the fewest (most preferred) victims."""
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
                self.w.jobs[job_id(v)].taken += 1
            cap.take(score.node, pod_demand(pod))
        return victims

    def _score(self, gang: Gang, pod: PodView, name: str, cap: Capacity, chosen: set[str],
               beat: _Score | None = None) -> tuple[_Score, list[PodView]] | None:
        subset = self._cheapest_on_node(gang, pod, name, cap, chosen, beat)
        if subset is None:
            return None
        left = add(cap.free[name], _sum_demand(subset))
        return _Score(len(subset), self.order_key(subset), left.get(self.w.dominant, 0), name), subset

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
                return _Score(0, (), free, name), []
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
        for bound, free, tag, names in buckets:
            if best is not None and bound > best[0].victims:
                break
            size, low = 0, self.start_pref
            if bound == 1 and free < gpus:
                i = bisect.bisect_left(self.sizes, gpus - free)
                if i == len(self.sizes):
                    continue
                size = self.sizes[i]
                low = self.pref_at_least[size]
            order = self._tag_order(tag, size, low)
            if not order or (best is not None and bound == best[0].victims and low[order[0]] > best[0].order[0]):
                continue  # even the tag's best node cannot beat the best plan found
            for name in self._ranked(names, order, low):
                if best is not None and bound == best[0].victims and low[name] > best[0].order[0]:
                    break
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
