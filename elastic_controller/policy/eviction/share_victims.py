"""Own-queue share victims: when a gang's queue would be above the share Volcano admits it in, the
fewest elastic workers of its own queue that bring it under, first in victim order among equally
few."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from itertools import combinations

from ..model import PodView
from ..ordering import JobRank, Key, job_rank, victim_key
from ..world import Gang
from .admissibility import Admissibility
from .base import _MAX_COMBINATIONS


class ShareVictims(Admissibility):
    def _excess_text(self, gang: Gang, excess: int) -> str:
        dom = self.w.dominant
        need = sum(p.requests.get(dom, 0) for p in gang.needed)
        m = self.w.model
        if m.name == "proportion":
            return (f"allocated {self._dom(gang.queue)} + needed {need} > deserved "
                    f"{m.admission_deserved(gang.queue)} {dom}, as Volcano's proportion plugin counts it")
        return (f"allocated {self._dom(gang.queue)} + needed {need} > {m.admission_deserved(gang.queue)} {dom}, "
                f"what the real capability of queue {gang.queue} and its ancestors leaves it, as Volcano's "
                f"{m.name} plugin counts it")

    def _share_wait_reason(self, gang: Gang, excess: int, fits: str, supply: bool = False) -> str:
        """Why ``gang`` waits when its queue would be above its Volcano share and its own queue's
        elastic workers cannot bring it under (``supply``: not even all of them, admissible or not)."""
        reasons = self.exclusions(gang, own_queue=True)
        excluded = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items())) or "none excluded"
        why = (f"even all of the queue's own elastic workers above their jobs' min "
               f"({sum(self._queue_supply(q) for q in self._share_queues(gang))} {self.w.dominant}) could not"
               if supply else
               "not enough of the queue's own elastic workers are admissible to")
        limit = "deserved share" if self.w.model.name == "proportion" else "real capability"
        return (f"{fits}, but queue {gang.queue} would be above its {limit} "
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
        queues = self._share_queues(gang)
        if sum(self._queue_supply(q) for q in queues) < excess:
            return None  # even every elastic worker of the queue could not bring it under
        taken = {c.key for c in chosen}
        cands = [c for q in queues for jid in self._jobs_of_queue(q) for c in self.candidates_by_job[jid]
                 if c.key not in taken and c.requests.get(dom, 0) > 0 and self._why_not(gang, c) is None]
        cands.sort(key=self.preference)
        if self._constrained(cands):
            return self._share_victims_rounded(gang, excess, cands, taken)
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

    def _share_victims_rounded(self, gang: Gang, excess: int, cands: list[PodView],
                               chosen: set[str]) -> list[PodView] | None:
        """``_share_victims`` when some candidates' jobs have allowed counts: every set of ``k``
        candidates, each job rounded down to an allowed count (``_round_up``: its extra victims count
        and give back too), ``k`` going up while it could still beat the best found; the fewest
        victims in all win, then ``order_key``. Every set whose jobs are at allowed counts rounds to
        itself, so this is the optimum (within ``_MAX_COMBINATIONS``; then greedily, most preferred
        first, each job rounded as it is taken)."""
        dom = self.w.dominant

        def gives(pods: Sequence[PodView]) -> int:
            return sum(p.requests.get(dom, 0) for p in pods)

        best: tuple[int, tuple[Key, ...], list[PodView]] | None = None
        budget = _MAX_COMBINATIONS
        for k in range(1, len(cands) + 1):
            if best is not None and k > best[0]:
                break
            for subset in combinations(cands, k):
                budget -= 1
                if budget < 0:
                    break
                extras = self._round_up(gang, subset, chosen)
                if extras is None:
                    continue
                full = [*subset, *extras]
                if gives(full) < excess or not self._subset_ok(gang, full):
                    continue
                key = (len(full), self.order_key(full))
                if best is None or key < best[:2]:
                    best = (*key, full)
            if budget < 0:
                break
        if best is not None:
            return best[2]
        picked: list[PodView] = []
        for c in cands:
            if any(p.key == c.key for p in picked):
                continue  # (an extra victim of its job already)
            extras = self._round_up(gang, [*picked, c], chosen)
            if extras is None or not self._subset_ok(gang, [*picked, c, *extras]):
                continue
            picked = [*picked, c, *extras]
            if gives(picked) >= excess:
                return picked
        return None
