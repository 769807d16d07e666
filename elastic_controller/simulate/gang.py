"""``volcano-gang``: what a Volcano 1.15 user gets without volcano-elastic.

Every pod of a job exists from the start, none gated; Volcano's ``allocate`` (see ``volcano.py``)
places a job's ``minAvailable`` as a gang and its surplus pods in the same pass as its queue's
share and the free GPUs allow. After ``allocate``, the two evicting actions of Volcano v1.15 run
for the jobs that are starving (Inqueue, fewer placed pods than ``minAvailable``):

- ``gangpreempt`` (``pkg/scheduler/actions/gangpreempt/gangpreempt.go``): victims are running pods
  of lower-priority jobs of the same queue;
- ``gangreclaim`` (``pkg/scheduler/actions/gangreclaim/gangreclaim.go``): for a queue that is not
  overused and can take the job's pending pods within its deserved share (``Preemptive``),
  victims are running pods of jobs in other, reclaimable queues.

Victims are grouped per job into bundles (``pkg/scheduler/actions/utils/bundle.go``,
``CreateJobBundles``): a SAFE bundle holds the pods beyond the job's ``minAvailable``, a WHOLE
bundle the rest (taking it breaks the gang: every pod of the job is evicted). SAFE bundles come
first, then victim jobs (preempt) or victim queues (reclaim) in order, then the bundle's
return on investment, then job UID (random in a cluster; a hash of the job's name here).
Bundles are added until the idle and releasing GPUs plus the victims' cover every pending pod
of the starving job, and then only if its ``minAvailable`` pods fit on the nodes so freed
(``BuildNominationPlanInDomain``). The evicted pods terminate for the grace period and are
recreated pending by the training operator. docs/simulate.md lists each modelling assumption.

Under ``shares.plugin: capacity`` the capacity plugin judges instead (``quota.CapacityQuota``, the
policy's ``capacity.py`` rules): no queue is overused (the plugin has no ``OverusedFn``); a queue
reclaims only when ``PreemptiveFn`` lets it for the job's pending pods (within real capability, and
within deserved on a resource they ask for; never a best-effort queue); victim queues are taken in
``VictimQueueOrderFn``'s order. The plugin's victim rules (``UnifiedEvictableFn``: a victim queue
keeps its guarantee and must be above deserved on a resource the pod asks for) are *not* applied by
default: ``Session.UnifiedEvictable`` (framework/session_plugins.go:325) returns the first tier's
answer when it names any victim, and the first tier's priority, gang and conformance permit every
candidate of a gang reclaim, so a capacity plugin in the second tier (where Volcano's how-to and
``hack/volcano-scheduler-capacity.conf`` put it) is never asked. With
``SimSettings.capacity_first_tier`` (``simulate --capacity-first-tier``) it is: the flattened bundles
go through it, a WHOLE bundle surviving only whole (``ApplyAllowedTasks``). gangpreempt is not
filtered by the plugin either way (capacity.go:609).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from functools import cmp_to_key
from typing import Protocol

from .cluster import ClusterSpec
from .nodes import NodeTable
from .state import SimJob, SimPod
from .volcano import Allocator


class GangSettings(Protocol):
    """The settings the evicting actions read (``engine.SimSettings``)."""

    @property
    def pod_cooldown(self) -> float: ...
    @property
    def capacity_first_tier(self) -> bool: ...
    @property
    def allow_whole_bundle(self) -> bool: ...


class GangHost(Protocol):
    """What the evicting actions need of the simulator that runs them (``engine.Simulator``): passed
    in, so this module does not import the engine (which imports it)."""

    @property
    def cluster(self) -> ClusterSpec: ...
    @property
    def settings(self) -> GangSettings: ...
    @property
    def alloc(self) -> Allocator: ...
    @property
    def nodes(self) -> NodeTable: ...
    @property
    def active(self) -> Mapping[int, SimJob]: ...
    @property
    def pod_changes(self) -> int: ...
    @property
    def evictions(self) -> int: ...
    @property
    def terminating_gpus(self) -> int: ...

    def request_tick(self, t: float) -> None: ...
    def evict(self, pod: SimPod, now: float, for_gang: str) -> None: ...
    def workers_changed(self, job: SimJob, now: float) -> None: ...

SAFE, WHOLE = 0, 1


def _uid_order(name: str) -> int:
    """Stands in for a Kubernetes UID's order (random, stable for a job)."""
    return zlib.crc32(name.encode())


class GangActions:
    def __init__(self, sim: GangHost) -> None:
        self.sim = sim
        self.reclaimable = {q.name: q.reclaimable for q in sim.cluster.queues}
        self.queue_order = {q.name: i for i, q in enumerate(sim.cluster.queues)}
        self.idle_key: tuple[int, ...] | None = None  # the state in which the last run evicted nothing
        self.running: list[SimJob] = []  # jobs with running workers, gathered once per run

    def _starving(self) -> list[SimJob]:
        out = []
        for job in self.sim.alloc.waiting_gangs():
            if job.done or not job.admitted or job.running > 0:
                continue
            if job.nominated:
                # victims evicted for it still terminate: Volcano's allocate pipelines it onto
                # them (allocateFromNomination), so it is not starving
                job.nominated = [p for p in job.nominated if p.node >= 0]
                if job.nominated:
                    continue
            pending = sum(1 for p in job.pods if p.node < 0 and not p.deleting and not p.gated)
            if pending >= job.min_member:
                out.append(job)
        return out

    def run(self, now: float) -> None:
        sim = self.sim
        # Nothing placed, freed or evicted and no job admitted since a run that evicted nothing:
        # this run would find the same (a pod's cdp cooldown ending wakes it up through a tick).
        key = (sim.pod_changes, sim.alloc.admission.admitted_total, len(sim.alloc.waiting), int(now)
               if sim.settings.pod_cooldown else 0)
        if key == self.idle_key:
            return
        evictions = sim.evictions
        self._run(now)
        self.idle_key = key if sim.evictions == evictions else None

    def _run(self, now: float) -> None:
        starving = self._starving()
        if not starving:
            return
        self.running = [j for j in self.sim.active.values() if not j.done and j.running > 0]
        alloc = self.sim.alloc
        des = alloc.des
        share = {q: (alloc.allocated[q] / des[q] if des.get(q) else float("inf")) for q in alloc.queues}
        by_queue: dict[str, list[SimJob]] = {}
        for job in sorted(starving, key=lambda j: j.cand_key):
            by_queue.setdefault(job.queue, []).append(job)
        quota = alloc.quota
        if quota is not None:
            queues = alloc.queue_order(by_queue)
        else:
            queues = sorted(by_queue, key=lambda q: (share[q], self.queue_order[q]))
        for q in queues:  # gangpreempt
            for job in by_queue[q]:
                if not job.nominated:
                    self._evict_for(job, now, reclaim=False)
        for q in queues:  # gangreclaim
            if quota is None and des.get(q, 0.0) <= alloc.allocated[q] + 1e-9:
                continue  # overused
            for job in by_queue[q]:
                if job.nominated or job.running > 0:
                    continue
                pending = sum(1 for p in job.pods if p.node < 0 and not p.deleting)
                if quota is not None:
                    if not quota.preemptive(q, {k: v * pending for k, v in job.requests.items()}):
                        continue  # PreemptiveFn (capacity.go:648)
                elif alloc.allocated[q] + pending * job.spec.gpus > des[q] + 1e-6:
                    continue  # not Preemptive: its queue cannot take the pending pods
                self._evict_for(job, now, reclaim=True)

    def _bundles(self, starving: SimJob, reclaim: bool, now: float) -> list[tuple[tuple[object, ...], list[SimPod]]]:
        sim = self.sim
        cooldown = sim.settings.pod_cooldown
        alloc = sim.alloc
        quota = alloc.quota
        bundles: list[tuple[tuple[object, ...], list[SimPod]]] = []
        victim_rank: dict[str, int] = {}
        if reclaim and quota is not None:  # VictimQueueOrderFn: a rank per victim queue, ties equal
            def compare(a: str, b: str) -> int:
                return quota.compare_victims(a, b, starving.queue)

            ranked = sorted({j.queue for j in self.running if j.queue != starving.queue}, key=cmp_to_key(compare))
            for i, q in enumerate(ranked):
                tie = i > 0 and compare(ranked[i - 1], q) == 0
                victim_rank[q] = victim_rank[ranked[i - 1]] if tie else i
        for job in self.running:
            if job is starving or job.running == 0:
                continue
            if reclaim:
                if job.queue == starving.queue or not self.reclaimable.get(job.queue, True):
                    continue
            elif job.queue != starving.queue or job.spec.priority >= starving.spec.priority:
                continue
            running = [p for p in job.pods if p.node >= 0 and not p.deleting]
            candidates = [p for p in running if not cooldown or now - p.placed_at >= cooldown]
            if len(candidates) < len(running) and cooldown:
                soonest = min(p.placed_at for p in running if p not in candidates) + cooldown
                sim.request_tick(soonest)
            if not candidates:
                continue
            candidates.sort(key=lambda p: _uid_order(p.uid))  # task priorities tie; then UID (random)
            surplus = len(running) - job.min_member
            safe, whole = candidates[:max(0, surplus)], candidates[max(0, surplus):]
            uid = _uid_order(job.spec.name)
            if reclaim and quota is not None:
                victim_order: tuple[object, ...] = (victim_rank[job.queue],)
            elif reclaim:
                des = alloc.des.get(job.queue, 0.0)
                victim_order = (-(alloc.allocated[job.queue] / des) if des else float("-inf"),)
            else:  # the reverse of the job order: lower priority, larger, later first
                victim_order = (job.spec.priority, -len(running), -job.spec.submit)
            g = job.spec.gpus
            need = max(1, sum(1 for p in starving.pods if p.node < 0 and not p.deleting)) * starving.spec.gpus
            if safe:
                bundles.append(((SAFE, *victim_order, float("-inf"), uid), safe))
            if whole:
                local = min(len(whole) * g, need) / need
                roi = local / (job.replicas * g)  # GlobalRes: every task of the job
                bundles.append(((WHOLE, *victim_order, -roi, uid), whole))
        bundles.sort(key=lambda b: b[0])
        if reclaim and quota is not None and sim.settings.capacity_first_tier:
            bundles = self._allowed(bundles)
        if not sim.settings.allow_whole_bundle:
            bundles = [b for b in bundles if b[0][0] == SAFE]
        return bundles

    def _allowed(self, bundles: list[tuple[tuple[object, ...], list[SimPod]]]
                 ) -> list[tuple[tuple[object, ...], list[SimPod]]]:
        """The capacity plugin's ``UnifiedEvictableFn`` on the flattened bundles (gangreclaim.go
        ``selectDomainBundles``), then ``ApplyAllowedTasks`` (actions/utils/bundle.go:202): a SAFE
        bundle keeps its allowed pods, a WHOLE bundle only survives whole. The order is kept (a
        WHOLE bundle's return on investment does not change; SAFE bundles have none)."""
        quota = self.sim.alloc.quota
        assert quota is not None
        flat = [p for _, bundle in bundles for p in bundle]
        allowed = {id(flat[i]) for i in quota.allowed_victims([(p.job.queue, p.job.requests) for p in flat])}
        out: list[tuple[tuple[object, ...], list[SimPod]]] = []
        for key, bundle in bundles:
            kept = [p for p in bundle if id(p) in allowed]
            if kept and (key[0] == SAFE or len(kept) == len(bundle)):
                out.append((key, kept))
        return out

    def _evict_for(self, starving: SimJob, now: float, reclaim: bool) -> None:
        sim = self.sim
        nodes = sim.nodes
        g = starving.spec.gpus
        pending = sum(1 for p in starving.pods if p.node < 0 and not p.deleting)
        need_all = pending * g
        available = nodes.free_gpus + sim.terminating_gpus
        # a necessary condition first: all candidate victims together must cover the need
        candidates = 0
        for job in self.running:
            if job is starving:
                continue
            if reclaim:
                ok = job.queue != starving.queue and self.reclaimable.get(job.queue, True)
            else:
                ok = job.queue == starving.queue and job.spec.priority < starving.spec.priority
            if ok:
                candidates += job.running * job.spec.gpus
        if available + candidates < need_all:
            return
        releasing: dict[int, int] | None = None
        victims: list[SimPod] = []
        for _, bundle in self._bundles(starving, reclaim, now):
            victims.extend(bundle)
            available += sum(p.job.spec.gpus for p in bundle)
            if need_all > available:
                continue
            if releasing is None:
                releasing = {}
                for job in sim.active.values():
                    for p in job.pods:
                        if p.deleting and p.node >= 0:
                            releasing[p.node] = releasing.get(p.node, 0) + job.spec.gpus
            # BuildNominationPlanInDomain: minAvailable pods must fit on free + releasing + victims
            room = list(nodes.gpus)
            for node, gpus in releasing.items():
                room[node] += gpus
            for p in victims:
                room[p.node] += p.job.spec.gpus
            if sum(r // g for r in room) < starving.min_member:
                continue
            for p in victims:
                sim.evict(p, now, starving.key)
            starving.nominated = list(victims)
            for job in {p.job.id: p.job for p in victims}.values():
                sim.workers_changed(job, now)
            return
