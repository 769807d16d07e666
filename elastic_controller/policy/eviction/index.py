"""The victim search's node index.

Invariants (what makes the pruning in ``search.VictimSearch._best_node`` exact):

1. **Profiles.** A node holding candidates is tagged with its profile: the sizes (dominant resource)
   of its candidates that may still be victims this cycle (old enough, job known, not taken yet),
   largest first, as prefix sums, and the (queue, job priority, cooling) kinds of their jobs. A node
   whose candidates may not give for a gang (``_may_give``) is skipped; the fewest victims a node can
   need for a pod is ``bisect(prefix, deficit) + 1``, without looking at its pods. Nodes are re-tagged
   whenever a committed plan takes victims there (``_retag``), so a tag never promises a victim that
   is gone.
2. **Lower bounds.** ``start_pref[node]`` is the smallest victim key (``ordering.victim_key``) among
   the node's candidates at the start of the cycle; ``pref_at_least[size][node]`` the smallest among
   those at least ``size`` large. By the monotonicity contract of ``policy/ordering.py`` (a job's
   rank never sorts earlier as it loses workers) these stay lower bounds of the first key of any
   victim set chosen on the node later in the cycle, so a node whose bound is worse than the best
   plan found (as many victims) cannot win and the scan stops.
   Jobs with allowed counts (``worker-counts`` / ``-step``) need nothing more: a set holding one of their
   workers is completed with extra victims of its job from any node (``Admissibility._round_up``), but
   keys are compared only between plans with as many victims (and new jobs) as the node's bound, and a
   set whose raw size is at least that bound has that many victims only when it got no extras: its
   first key is then one of the node's own candidates'.
3. **One key.** Every key here comes from ``ordering``; the index never spells the order out again
   (it did once, and a reordered ``preference`` then made the index prune the node the exhaustive
   scan chose).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from ..cooldowns import old_enough
from ..ordering import Key, job_rank, victim_key
from .base import PlannerBase


class NodeIndex(PlannerBase):
    def _build_index(self) -> None:
        """Build the index over ``candidates_by_node`` (see the module docstring)."""
        world = self.w
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
        job_key = {jid: job_rank(jobs[jid]) for jid in self.candidates_by_job}
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
            if job.budget is not None and job.budget.spent:
                continue  # never a victim (its restart budget), as a job without PodGroup
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

    def _retag(self, nodes: Iterable[str]) -> None:
        """Re-tag ``nodes`` after a committed plan took victims there (they have fewer candidates left)."""
        for node in nodes:
            tag = self._profile_tag(node, self._profile_ids)
            self.capacity.set_tag(node, tag)
            if tag:
                self.tag_members.setdefault(tag, []).append(node)
                for key in [k for k in self._tag_orders if k[0] == tag]:
                    del self._tag_orders[key]
