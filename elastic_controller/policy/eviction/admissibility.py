"""Admissibility: which candidates may be victims for a gang (ARCHITECTURE.md, "The agent's cycle",
step 3), with the per-gang caches that keep the search cheap, and the bounds on what a queue's
victims can give back."""

from __future__ import annotations

from collections.abc import Sequence

from ..cooldowns import old_enough
from ..model import PodView
from ..world import ALLOWED_COUNTS, TOO_SMALL, Gang, JobState, job_id, no_smaller_count
from .base import PlannerBase

PDB_REFUSED = "PDB refused eviction"  # the exclusion reason of a pod a PodDisruptionBudget protected lately


class Admissibility(PlannerBase):
    def _queue_admissible(self, gang: Gang, job: JobState, extra: Sequence[PodView]) -> bool:
        if job.queue == gang.queue:
            return True
        m = self.w.model
        if not m.reclaimable(job.queue) or not self._gang_below_share(gang):
            return False
        dom = self.w.dominant
        # Victims already chosen for this gang (on other nodes) come out of the same queue.
        keys = {p.key for p in extra}
        leaving = [*extra, *(p for p in self.inflight
                             if p.key not in keys and self.w.jobs[job_id(p)].queue == job.queue)]
        after = self._dom(job.queue) - sum(p.requests.get(dom, 0) for p in leaving)
        return m.keeps_share(job.queue, after, [p.requests for p in leaving], self.alloc.get(job.queue))

    def _gang_below_share(self, gang: Gang) -> bool:
        """Whether ``gang``'s queue may reclaim from other queues for it (``ShareModel.below_share``
        with the gang's needed pods' requests and the queue's allocation as plans have moved it)."""
        return self.w.model.below_share(gang.queue, self._dom(gang.queue), self._gang_need(gang),
                                        self.alloc.get(gang.queue))

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
        m = self.w.model
        return (m.reclaimable(queue) and self._gang_below_share(gang)
                and m.keeps_share(queue, self._dom(queue)))

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
        if no_smaller_count(self.counts.get(jid), job.current_workers()):
            self._job_verdicts[jid] = ALLOWED_COUNTS  # no allowed count below it (or an unusable contract)
            return ALLOWED_COUNTS
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
        if job.budget is not None and job.budget.spent:
            return job.budget.reason()  # one more shrink would end it, or leave no restart in reserve
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

    def _round_up(self, gang: Gang, subset: Sequence[PodView], exclude: set[str] | frozenset[str] = frozenset(),
                  ) -> list[PodView] | None:
        """The extra victims that leave every job of ``subset`` at an allowed count: for each job
        with allowed counts, as many more of its admissible candidates (not in ``subset`` nor
        ``exclude``, first in victim order) as take it from ``current - taken in subset`` down to the
        next allowed count (``AllowedCounts.floor``). [] when none is needed (every job unconstrained,
        or already at an allowed count); None when a job has no allowed count to go to or too few
        admissible candidates to reach it."""
        counts = self.counts
        if not counts:
            return []
        per_job: dict[str, int] = {}
        for v in subset:
            if v.job_id in counts:
                per_job[v.job_id] = per_job.get(v.job_id, 0) + 1
        if not per_job:
            return []
        extras: list[PodView] = []
        keys: set[str] | None = None
        for jid, k in per_job.items():
            after = self.w.jobs[jid].current_workers() - k
            target = counts[jid].floor(after)
            if target is None:
                return None
            more = after - target
            if not more:
                continue
            if keys is None:
                keys = {v.key for v in subset}
            pool = self._pools.get(jid)
            if pool is None:
                # The job's admissible candidates in victim order (one job: by replica index, fixed), kept
                # while the gang is planned: its verdicts only get stricter, and what turns them (min,
                # queue share) is checked on the whole set (``floor``, then the caller's ``_subset_ok``).
                pool = self._pools[jid] = sorted(
                    (c for c in self.candidates_by_job[jid] if self._why_not(gang, c) is None), key=self.preference)
            taken = self.taken
            found = 0
            for c in pool:
                if c.key not in keys and c.key not in exclude and c.key not in taken:
                    extras.append(c)
                    found += 1
                    if found == more:
                        break
            else:
                return None
        return extras

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
        queues = self._share_queues(gang)
        key: tuple[str | int, ...] = (gang.queue, gang.priority, *(self.queue_versions.get(q, 0) for q in queues))
        cacheable = gang.key not in self.candidates_by_job
        if cacheable and key in self._admissible:
            return self._admissible[key]
        dom = self.w.dominant
        total = 0
        for jid in (jid for q in queues for jid in self._jobs_of_queue(q)):
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
            if no_smaller_count(self.counts.get(jid), job.current_workers()):
                count(ALLOWED_COUNTS, len(old))
                continue
            if job.queue != gang.queue:
                verdicts: dict[int, bool] = {}
                for p in old:
                    size = p.requests.get(self.w.dominant, 0)
                    if size not in verdicts:
                        verdicts[size] = self._queue_admissible(gang, job, [p])
                    if not verdicts[size]:
                        count("queue share", 1)
        for p in self.refused:  # never candidates this cycle (see PlannerBase.__init__)
            owner = self.w.jobs.get(p.job_id)
            if p.job_id != gang.key and (not own_queue or (owner is not None and owner.queue == gang.queue)):
                count(PDB_REFUSED, 1)
        for p in self.too_small:  # never candidates this cycle (see PlannerBase.__init__)
            owner = self.w.jobs.get(p.job_id)
            if p.job_id != gang.key and (not own_queue or (owner is not None and owner.queue == gang.queue)):
                count(TOO_SMALL, 1)
        for p in self.ghosts:  # never candidates this cycle (see PlannerBase.__init__)
            owner = self.w.jobs.get(p.job_id)
            if p.job_id != gang.key and (not own_queue or (owner is not None and owner.queue == gang.queue)):
                count(self.w.ghosts[p.key], 1)
        if cacheable:
            self._exclusion_cache[key] = reasons
        return reasons
