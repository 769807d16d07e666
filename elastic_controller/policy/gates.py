"""Gate releases (scale up): lift the scale-up gate of elastic pods when capacity is free.

ARCHITECTURE.md, "The agent's cycle", step 5: nothing while a waiting gang could be placed by evicting elastic workers
(``blocking_gangs`` says which), except that the room of such a gang that fits on free capacity now
is set aside and growth goes on around it;
only pods of running jobs out of cooldown; least fulfilled job first, then lowest index; only
where the pod fits now; at most ``maxScaleUpPerCycle`` per queue.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable, Mapping

from .decisions import GateRelease
from .fit import Capacity, alike, fits_all, place_all, pod_demand
from .model import PodView
from .ordering import ScaleUpKey, scale_up_key, scale_up_pod_rank
from .quantity import add
from .world import Gang, World, job_id


def queue_may_give(world: World, gang_queue: str, queue: str) -> bool:
    """Whether elastic workers of ``queue`` may ever be victims for a gang of ``gang_queue``
    (ARCHITECTURE.md, "The agent's cycle", step 3: the same queue, or a reclaimable queue above its
    deserved share while the gang's queue is below its own; ``gang_queue`` "" takes the latter as
    given). Cooldowns and minimum runtimes pass: they are not checked."""
    if queue == gang_queue:
        return True
    m = world.model
    if not m.reclaimable(queue) or (gang_queue and not m.below_share(gang_queue, m.allocated(gang_queue))):
        return False
    return m.overused(queue, m.allocated(queue))


def _merged(parts: Iterable[Mapping[str, Mapping[str, int]]]) -> dict[str, dict[str, int]]:
    """node -> resources, summed over ``parts`` (one capacity update per node, not per part)."""
    out: dict[str, dict[str, int]] = {}
    for part in parts:
        for node, demand in part.items():
            out[node] = add(out.get(node, {}), demand)
    return out


def _needed(g: Gang) -> dict[str, int]:
    """What ``g``'s needed pods ask for in all, per resource."""
    out: dict[str, int] = {}
    for p in g.needed:
        out = add(out, p.requests)
    return out


def blocking_gangs(world: World) -> list[Gang]:
    """Waiting gangs that evicting elastic workers could get placed: they would fit if every
    running elastic worker that may ever be a victim for them (a job of no higher priority, from a
    queue the gang may take from) were gone, and Volcano's proportion plugin would then admit them
    (their queue's allocation within its deserved share once its own such workers are gone).

    A gang that cannot be placed even then does not hold back scale-up: growing other jobs into
    idle capacity takes nothing from it (what grows is elastic, and reclaimable later)."""
    complete = [g for g in world.waiting if len(g.needed) >= g.pg.min_member - g.placed]
    if not complete:
        return []  # no gang could be placed: the capacity below is not worth building
    dom = world.dominant
    # Running elastic workers summed per (queue, job priority, node): one update per node, not per pod.
    freed: dict[tuple[str, int], dict[str, dict[str, int]]] = {}
    for pod in world.elastic_holding:
        job = world.jobs.get(pod.job_id)
        kind = (job.queue, job.priority) if job is not None else (world.cfg.defaultQueue, 0)
        per_node = freed.get(kind)
        if per_node is None:
            per_node = freed[kind] = {}
        acc = per_node.get(pod.node_name)
        if acc is None:
            acc = per_node[pod.node_name] = {}
        for k, v in pod.demand.items():
            acc[k] = acc.get(k, 0) + v
    base: Capacity | None = None
    maximal: Capacity | None = None
    capacities: dict[tuple[str, int, bool], Capacity] = {}  # per (gang queue, gang priority, below share)
    others: dict[tuple[bool, int], Capacity] = {}  # what other queues give, per (below share, priority)
    # Gangs alike (queue, priority, needed pods' requests, selector, tolerations) get the same answer.
    verdicts: dict[tuple[object, ...], bool] = {}
    own_freed: dict[tuple[str, int], int] = {}  # per (queue, priority): what its own workers would free
    out = []
    for g in complete:
        excess = world.share_excess(g)
        if excess > 0:
            own = own_freed.get((g.queue, g.priority))
            if own is None:
                own = own_freed[(g.queue, g.priority)] = sum(  # its own queue's (and what relieves it)
                    acc.get(dom, 0) for (queue, prio), per_node in freed.items()
                    if (queue == g.queue or world.model.relieved_by(g.queue, queue)) and prio <= g.priority
                    for acc in per_node.values())
            if own < excess:
                continue  # proportion keeps it out until its queue's own jobs shrink or finish
        pods_shape = tuple(sorted(
            (tuple(sorted(p.requests.items())), tuple(sorted(p.node_selector.items())), p.tolerations)
            for p in g.needed))
        shape = (g.queue, g.priority, pods_shape)
        if shape not in verdicts:
            # Quick answers first: every capacity below lies between the base (nothing freed) and the
            # maximal one (every running elastic worker freed), whatever the queue and priority.
            if base is None:
                base = world.future_capacity()
            if ("base", pods_shape) not in verdicts:
                verdicts[("base", pods_shape)] = fits_all(g.needed, base)
            if verdicts[("base", pods_shape)]:
                verdicts[shape] = True
                out.append(g)
                continue
            if ("max", pods_shape) not in verdicts:
                if maximal is None:
                    maximal = base.copy()
                    maximal.give_many(_merged(freed.values()))
                verdicts[("max", pods_shape)] = fits_all(g.needed, maximal)
            if not verdicts[("max", pods_shape)]:
                verdicts[shape] = False
                continue
            # Other queues give only to a gang whose queue is below its share (for the gang: the
            # capacity plugin weighs its request), and then every one of them that may give does:
            # that part is shared by all such gangs of one priority.
            below = world.model.below_share(g.queue, world.model.allocated(g.queue), _needed(g))
            cap = capacities.get((g.queue, g.priority, below))
            if cap is None:
                shared = others.get((below, g.priority))
                if shared is None:
                    if base is None:
                        base = world.future_capacity()
                    shared = others[(below, g.priority)] = base.copy()
                    shared.give_many(_merged(per_node for (queue, prio), per_node in freed.items()
                                             if below and prio <= g.priority and queue_may_give(world, "", queue)))
                cap = capacities[(g.queue, g.priority, below)] = shared.copy()
                cap.give_many(_merged(per_node for (queue, prio), per_node in freed.items()
                                      if queue == g.queue and prio <= g.priority))
            verdicts[shape] = fits_all(g.needed, cap)
        if verdicts[shape]:
            out.append(g)
    return out


def plan_gate_releases(world: World, capacity: Capacity | None = None,
                       evicted_for: Collection[str] = ()) -> tuple[list[GateRelease], list[str]]:
    """(releases in decision order, keys of the gangs that block scale-up).

    A blocking gang whose needed pods fit on free capacity now (the scheduler is about to place
    it, or it waits for room in its queue's share) has that room reserved, and growth goes on
    around it; any other blocking gang holds back all growth. A pod is released only while its
    queue stays where Volcano would place it (``ShareModel.admits``: within its deserved share as the
    proportion plugin counts it; within its real capability and its ancestors' under capacity; beyond,
    Volcano would leave it pending and the job would have spent a scale event for nothing). Gangs in
    ``evicted_for`` (victims were chosen for them this cycle) count as blocking."""
    if not world.cfg.gating.enabled:
        return [], []
    cap = (capacity or world.free_now).copy()
    blocking = {g.key for g in blocking_gangs(world)} | set(evicted_for)
    blocked: list[str] = []
    # Per queue: what this cycle places in it besides the snapshot (blocking gangs' room set aside,
    # released pods), which the share model weighs with it (``ShareModel.admits``).
    placed: dict[str, dict[str, int]] = {}

    for g in world.waiting:
        if g.key not in blocking:
            continue
        if place_all(g.needed, cap) is None:
            blocked.append(g.key)
        else:  # its room is set aside, on the nodes and in its queue's share
            placed[g.queue] = add(placed.get(g.queue, {}), _needed(g))
    if blocked:
        return [], blocked
    gate = world.cfg.gating.gateName
    by_job: dict[str, list[PodView]] = {}
    # (The heap below orders the jobs completely: the order groups come in here does not matter.)
    for key, (held, running) in world.gated_elastic().items():
        pg = world.podgroups.get(key)
        if pg is None or running < pg.min_member:
            continue
        for pod in held:
            if pod.gated(gate):
                by_job.setdefault(job_id(pod), []).append(pod)
    heap: list[ScaleUpKey] = []
    queues: dict[str, list[PodView]] = {}
    for jid, pods in by_job.items():
        job = world.jobs.get(jid)
        if job is None or job.bounds is None or job.cooling:
            continue
        pods.sort(key=scale_up_pod_rank)
        queues[jid] = pods
        heapq.heappush(heap, scale_up_key(job, pods[0], jid))
    per_queue: dict[str, int] = {}
    releases: list[GateRelease] = []
    while heap:
        _, _, _, jid = heapq.heappop(heap)
        job = world.jobs[jid]
        pending = queues[jid]
        pod = pending.pop(0)
        limit = world.policy(job.queue).maxScaleUpPerCycle
        if per_queue.get(job.queue, 0) >= limit:
            continue
        assert job.bounds is not None
        if job.current_workers() >= job.bounds.max_replicas:
            continue
        if not world.model.admits(job.queue, pod.requests, placed):
            # Volcano would leave it pending: its queue is at its deserved share (proportion) or
            # its real capability, or an ancestor's (capacity)
            continue
        node = cap.choose_node(pod)
        if node is None and all(alike(p, pod) for p in pending):
            continue  # capacity only shrinks while releasing: the job's other pods would not fit either
        if node is not None:
            placed[job.queue] = add(placed.get(job.queue, {}), pod.requests)
            cap.take(node, pod_demand(pod))
            job.added += 1
            per_queue[job.queue] = per_queue.get(job.queue, 0) + 1
            releases.append(GateRelease(
                pod.key, jid, node, job.queue,
                f"job {jid} has {job.current_workers() - 1} of max {job.bounds.max_replicas} workers "
                f"running (least fulfilled first); fits on {node} now",
            ))
        if pending:
            heapq.heappush(heap, scale_up_key(job, pending[0], jid))
    return releases, []
