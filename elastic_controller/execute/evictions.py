"""Starving gangs' evictions, the immediate path (docs/failure-model.md): stamp the victims
(``evicted-for``: the plan's record), dry-run every eviction, stamp the victims' job PodGroups
(cooldown state, written before acting), then evict through the Eviction API (the first victim
alone, then the others at once: a race or an outage met on the first stops the plan before anything
else is evicted), then count the restart the action spends for each job one of whose victims was
evicted (``Executor.count_restart``: once it happened, never with the stamp; issue 36, F2). A
failure undoes the stamps of what did not happen, each only if it is still the one we wrote, and
leaves the gang to the next cycle's plan: no victim is ever substituted, nothing is deleted.
Whether a gang's victims are evicted now or put under notice, and what each job's
``restarts-used`` becomes, is the action's (``policy.cycle.decide``): this writer decides
nothing.

**Waves** (issue 36, item 3: at 1,000 nodes a cycle evicting for 20 gangs wrote for 20.7 s, the gangs
one after the other, ~6 rounds each). A run of consecutive ``Evict`` actions is split, in decision
order, into waves (``waves``): a gang goes into the wave after the last wave holding a gang that
evicts from one of its jobs (so two gangs shrinking one job keep their order: the later one's stamp
compare-and-swap is over the earlier one's stamp, and its ``SpendRestart`` counts on the earlier
one's count), else into the first (``waves.py``). The gangs of one wave write disjoint objects; they go through
the steps above in lockstep, each step one ``Executor.pool`` run for all of them, so a wave costs
the rounds of one gang: the claims with the dry-runs (a pod's dry-run right after its own claim),
the stamps, the evictions (a gang's other victims right after its own first), the restart counts.
Each gang succeeds or fails on its own exactly as alone: a failure (a
``KubeError``: 409, 429, an outage) undoes that gang's writes, before its wave's next step, and
never stops or undoes another gang's. A lost Lease (or any other non-``KubeError``) stops the whole
plan, as before: the wave's other failed gangs are undone first (the undo is fenced too), nothing
more is written, and what was evicted is booked; a crash (``InjectedFault``) is raised once the
started writes have ended. A wave ends (undos and restart counts included) before the next begins;
each gang's ``before`` (the stamps its CAS replaces) is read when its wave starts. The fault points
keep their meaning per gang: ``victims-stamped`` once per gang whose claims and dry-runs passed,
``jobs-stamped`` once per gang whose stamps were written, ``evicted-one`` per eviction."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial

from ..kube.errors import KubeError, TooManyRequestsError
from ..policy import keys
from ..policy.actions import Evict, SpendRestart
from ..policy.decisions import Eviction
from ..policy.parse import format_time
from .executor import CycleReport, Executor, down_decision, log, made_room, record_id
from .pdb import remove
from .waves import waves
from .writers import Done


def execute_evictions(ex: Executor, action: Evict, now: datetime, report: CycleReport) -> None:
    """Carry out one gang's ``Evict`` (all of its victims, or none beyond those done before a race)."""
    execute_eviction_waves(ex, [action], now, report)


def execute_eviction_waves(ex: Executor, actions: Sequence[Evict], now: datetime, report: CycleReport) -> None:
    """Carry out consecutive ``Evict`` actions of one decision, wave by wave (``waves``, module doc)."""
    if ex.dry_run:
        return
    for wave in waves(actions):
        _Wave(ex, wave, now, report).run()


@dataclass
class _Gang:
    """One gang's path through its wave: what it wrote (for its undo) and how far it got."""

    action: Evict
    before: dict[str, dict[str, str]]  # job -> its PodGroup's annotations when the wave started
    stamped_jobs: dict[str, dict[str, str]] = field(default_factory=dict)  # job -> the stamp we wrote
    stamped_pods: list[str] = field(default_factory=list)
    claimed: set[str] = field(default_factory=set)  # pods whose claim was written (set in the pool's threads)
    first_failed: bool = False  # its first eviction failed: the rest of its victims are not evicted
    done: list[Eviction] = field(default_factory=list)
    failures: list[tuple[Eviction, KubeError]] = field(default_factory=list)
    out: bool = False  # failed and undone: takes no further step

    @property
    def gang(self) -> str:
        return self.action.gang

    @property
    def evictions(self) -> list[Eviction]:
        return list(self.action.victims)

    @property
    def jobs(self) -> list[str]:
        return sorted({e.job for e in self.action.victims})


Task = tuple[str, Callable[[], object]]


class _Wave:
    """The gangs of one wave, step by step in lockstep (module doc)."""

    def __init__(self, ex: Executor, actions: list[Evict], now: datetime, report: CycleReport) -> None:
        self.ex, self.now, self.report = ex, now, report
        self.stamp = format_time(now)
        self.gangs = [_Gang(a, {j: ex.pg_annotations(j) for j in sorted({e.job for e in a.victims})})
                      for a in actions]
        self.halted = False  # a non-KubeError met by an eviction or a copy (set in the pool's threads)

    def live(self) -> list[_Gang]:
        return [g for g in self.gangs if not g.out]

    def step(self, tasks: Callable[[_Gang], Sequence[Task]],
             after: Callable[[_Gang], list[list[int]]] | None = None) -> list[tuple[_Gang, list[Done[object]]]]:
        """One pool run: every live gang's ``tasks``; each gang's results, in order. ``after``: per
        gang, for each of its tasks, the indices of its own earlier tasks it starts after."""
        gangs = self.live()
        per = [tasks(g) for g in gangs]
        deps: list[list[int]] = []
        at = 0
        for g, ts in zip(gangs, per, strict=True):
            deps += [[at + k for k in ks] for ks in (after(g) if after is not None else [[] for _ in ts])]
            at += len(ts)
        results = self.ex.pool.run([t for ts in per for t in ts], deps if after is not None else None)
        out: list[tuple[_Gang, list[Done[object]]]] = []
        at = 0
        for g, ts in zip(gangs, per, strict=True):
            out.append((g, results[at:at + len(ts)]))
            at += len(ts)
        return out

    def settle(self, outcomes: list[tuple[_Gang, list[Done[object]]]]) -> None:
        """After a step before the evictions: a gang with a failure (a ``KubeError``, its first) is
        reported and undone; then a lost Lease (or a bug) met by any gang stops the plan."""
        stop: Exception | None = None
        for g, results in outcomes:
            errors = [d.error for d in results if d.error is not None]
            other = next((e for e in errors if not isinstance(e, KubeError)), None)
            first = next((e for e in errors if isinstance(e, KubeError)), None)
            if other is not None:  # that gang stops here, as alone: no undo (its plan is resumed or dropped)
                stop = stop or other
            elif first is not None:
                self.fail(g, first)
        if stop is not None:
            raise stop

    def fail(self, g: _Gang, exc: KubeError) -> None:
        why = "pdb" if isinstance(exc, TooManyRequestsError) else "conflict" if exc.status == 409 else "error"
        self.report.failed[g.gang] = f"{why}: {exc}"
        for e in g.evictions:
            self.ex.metrics.eviction_failed(e.queue, why)
        log.warning("eviction plan not executed; re-planning next cycle",
                    extra={"podgroup": g.gang, "reason": why, "error": str(exc)})
        g.out = True
        self.ex.undo(g.gang, g.before, g.stamped_jobs, g.stamped_pods)

    def run(self) -> None:
        ex = self.ex
        # 1. The plan's record: each victim names the gang. Recovery finds an interrupted plan here.
        # Then every eviction dry-run (a victim past its PDB is a DELETE: pdb.py). Both in one run: a
        # pod's dry-run is keyed by the pod, so it goes once its own claim is answered (and only if
        # that claim was written); the dry-runs write nothing, the claims still come first.
        def claim(g: _Gang, e: Eviction) -> None:
            ex.patch_pod_annotations(e.pod, {keys.EVICTED_FOR: g.gang})
            g.claimed.add(e.pod)

        def dry_run(g: _Gang, e: Eviction) -> None:
            if e.pod in g.claimed:
                remove(ex, e, dry_run=True)

        tried = self.step(lambda g: [(e.pod, partial(claim, g, e)) for e in g.evictions] +
                                    [(e.pod, partial(dry_run, g, e)) for e in g.evictions])
        for g, results in tried:
            n = len(g.evictions)
            g.stamped_pods.extend(e.pod for e, res in zip(g.evictions, results[:n], strict=True) if res.ok)
            if all(res.ok for res in results[:n]):  # (as alone: no dry-run counts once a claim failed)
                # every victim a PDB holds is remembered, not just the first
                for e, res in zip(g.evictions, results[n:], strict=True):
                    if isinstance(res.error, TooManyRequestsError):
                        ex.refused_by_pdb(e.pod, g.gang, self.now)
        self.settle(tried)  # (a gang's first failure: its claims' before its dry-runs')
        for _ in self.live():  # once per gang still going, as when each went alone
            ex.fault("victims-stamped")
        # 2. Cooldown state, before acting: a job is never scaled without its stamp.
        for g in self.live():
            for j in g.jobs:
                n = sum(1 for e in g.evictions if e.job == j)
                g.stamped_jobs[j] = {  # (before the write: a write that fails after it landed is undone too)
                    keys.LAST_SCALE_TIME: self.stamp, keys.LAST_SCALE_DIRECTION: keys.Direction.DOWN.value,
                    keys.LAST_DECISION: down_decision(self.stamp, n, g.gang, g.action.fairness),
                    keys.SCALE_RECORD: ex.new_record("evict", g.gang,
                                                     {e.pod: e.uid for e in g.evictions if e.job == j},
                                                     g.before[j], self.stamp)}
        self.settle(self.step(lambda g: [(j, partial(ex.stamp, j, g.stamped_jobs[j], over=g.before[j], copy=False))
                                         for j in g.jobs]))
        for _ in self.live():
            ex.fault("jobs-stamped")
        for g in self.live():
            self.scaling_down(g)
        self.evict()

    def scaling_down(self, g: _Gang) -> None:
        """The victims' jobs hear of it before their pods go (issue 40): one ScalingDown Event per job
        (its ScaledDown follows the evictions; with a notice, notice.py tells the job instead)."""
        for j in g.jobs:
            ref = self.ex.job_ref(j)
            if ref is not None:
                names = ", ".join(sorted(e.pod.partition("/")[2] for e in g.evictions if e.job == j))
                why = next((f"; {e.reason}" for e in g.evictions if e.job == j and e.fairness), "")
                room = made_room(g.gang, g.action.fairness)
                self.ex.recorder.emit(ref, "Normal", "ScalingDown",
                                      f"evicting elastic worker(s) {names} now {room}{why}")

    def evict(self) -> None:
        """3. Evict: each gang's first victim alone, then its others at once (after its first, in the
        same pool run: a gang waits for its own first eviction, not for every gang's). A race (the
        dry-run passed, the real call did not: a PDB tightened, the pod replaced) or an outage met on a
        gang's first stops that gang's plan before anything else of it is evicted; a lost Lease (or a
        bug) met by any eviction or copy stops every eviction not yet started. The others passed the
        same dry-run moments ago and go out together. Whatever failed among them: what was evicted is kept
        and booked, the rest is undone (the claims of the pods not evicted; the stamps of the jobs none
        of whose victims was). The jobs' copies of their stamps (``ex.copy_stamp``: for people, never
        read by a decision) go out alongside the first evictions, one round less; an undo takes them
        back with the stamps."""
        ex, report = self.ex, self.report
        gangs = self.live()
        stop: Exception | None = None
        stopped: set[str] = set()  # gangs that met the stop (no undo: the next leader judges the rest)

        def evict_one(g: _Gang, e: Eviction) -> bool:  # booked in its own task: a crash of another loses no booking
            try:
                remove(ex, e)
            except KubeError:
                raise
            except Exception:
                self.halted = True  # a lost Lease (or a bug): no victim's eviction starts after it
                raise
            ex.evicted(e.pod, e.uid, e.job, e.queue, g.gang, e.reason, report, resumed=False, past_pdb=e.past_pdb,
                       fairness=g.action.fairness)
            ex.fault("evicted-one")
            return True

        def first(g: _Gang, e: Eviction) -> bool:
            try:
                return evict_one(g, e)
            except Exception:
                g.first_failed = True
                raise

        def then(g: _Gang, e: Eviction) -> bool:  # False: not tried (its gang's first failed, or the plan stops)
            return False if g.first_failed or self.halted else evict_one(g, e)

        def copy(j: str, ours: dict[str, str]) -> bool:
            try:
                ex.copy_stamp(j, ours)  # (logs its own KubeError)
            except Exception:
                self.halted = True
                raise
            return True

        # One run: each gang's first victim and its jobs' copies, then (after them, and only once its
        # first was evicted) its other victims, together.
        def tasks(g: _Gang) -> list[Task]:
            rest = g.evictions[1:]
            return [(g.evictions[0].pod, partial(first, g, g.evictions[0])),
                    *((j, partial(copy, j, g.stamped_jobs[j])) for j in g.jobs),
                    *((e.pod, partial(then, g, e)) for e in rest)]

        def after(g: _Gang) -> list[list[int]]:
            head = 1 + len(g.jobs)
            return [[] for _ in range(head)] + [list(range(head)) for _ in g.evictions[1:]]

        for g, results in self.step(tasks, after):
            head = 1 + len(g.jobs)
            halted = [r.error for r in results[1:head] if r.error is not None and not isinstance(r.error, KubeError)]
            for e, res in zip(g.evictions, results[:1] + results[head:], strict=True):
                if res.ok:
                    if res.value:
                        g.done.append(e)
                elif isinstance(res.error, KubeError):
                    g.failures.append((e, res.error))
                elif res.error is not None:
                    halted.append(res.error)
            if halted:
                stop = stop or halted[0]
                stopped.add(g.gang)
        for g in gangs:
            if g.failures and g.gang not in stopped:
                self.race(g)
        if stop is not None:  # a lost Lease (or a bug): what was evicted is booked; the next leader judges the rest
            raise stop
        # The restart each job evicted from uses, now that it happened (the action's SpendRestart, on
        # the record stamped above; a crash before leaves it to the next cycle's decision): every
        # gang's ScaledDown Events, then their counts in one run (the wave's gangs share no job).
        spends: list[SpendRestart] = []
        for g in gangs:
            ex.scaled_down(g.gang, [(e.job, e.pod) for e in g.done], fairness=g.action.fairness)
            evicted = {e.job for e in g.done}
            spends += [replace(r, record=record_id(g.stamped_jobs[r.job])) for r in g.action.restarts
                       if r.job in g.stamped_jobs and r.job in evicted]
        ex.count_restarts(spends)

    def race(self, g: _Gang) -> None:
        """A gang some of whose evictions failed after the dry-run passed: reported, the rest undone."""
        ex = self.ex
        for e, err in g.failures:
            if isinstance(err, TooManyRequestsError):
                ex.refused_by_pdb(e.pod, g.gang, self.now)
            ex.metrics.eviction_failed(e.queue, "race")
            log.warning("eviction failed after dry-run passed", extra={"pod": e.pod, "podgroup": g.gang,
                                                                      "error": str(err)})
        self.report.failed[g.gang] = f"error after {len(g.done)} eviction(s): {g.failures[0][1]}"
        rest = [x.pod for x in g.evictions if x not in g.done]
        untouched = [j for j in g.jobs if not any(x.job == j for x in g.done)]
        ex.undo(g.gang, g.before, {j: g.stamped_jobs[j] for j in untouched}, rest)
