"""Gate releases (scale up): lift the scale-up gate of elastic pods when capacity is free.

Per DESIGN step 5: nothing while a waiting gang could be placed by evicting elastic workers;
only pods of running jobs out of cooldown; least fulfilled job first, then lowest index; only
where the pod fits now; at most ``maxScaleUpPerCycle`` per queue.
"""

from __future__ import annotations

import heapq

from .decisions import GateRelease
from .fit import Capacity, place_all, pod_demand
from .keys import Role
from .model import PodView
from .world import Gang, World, job_id


def blocking_gangs(world: World) -> list[Gang]:
    """Waiting gangs that would fit if every running elastic worker were gone."""
    complete = [g for g in world.waiting if len(g.needed) >= g.pg.min_member - g.placed]
    if not complete:
        return []  # no gang could be placed: the capacity below is not worth building
    cap = world.future_capacity()
    freed: dict[str, dict[str, int]] = {}  # summed per node first: one update per node, not per pod
    for pods in world.pods_by_group.values():
        for pod in pods:
            if pod.role is Role.ELASTIC and pod.holds_resources and not pod.deleting:
                acc = freed.get(pod.node_name)
                if acc is None:
                    acc = freed[pod.node_name] = {}
                for k, v in pod.requests.items():  # pod_demand, summed without a dict per pod
                    if v > 0:
                        acc[k] = acc.get(k, 0) + v
                acc["pods"] = acc.get("pods", 0) + 1
    for node, demand in freed.items():
        cap.give(node, demand)
    # Gangs whose needed pods look alike (requests, selector, tolerations) get the same answer.
    verdicts: dict[tuple[object, ...], bool] = {}
    out = []
    for g in complete:
        shape = tuple(sorted((tuple(sorted(p.requests.items())), tuple(sorted(p.node_selector.items())),
                              p.tolerations) for p in g.needed))
        if shape not in verdicts:
            verdicts[shape] = place_all(g.needed, cap.copy()) is not None
        if verdicts[shape]:
            out.append(g)
    return out


def plan_gate_releases(world: World, capacity: Capacity | None = None) -> tuple[list[GateRelease], list[str]]:
    """(releases in decision order, keys of the gangs that block scale-up)."""
    if not world.cfg.gating.enabled:
        return [], []
    blockers = blocking_gangs(world)
    if blockers:
        return [], [g.key for g in blockers]
    gate = world.cfg.gating.gateName
    cap = (capacity or world.free_now).copy()
    by_job: dict[str, list[PodView]] = {}
    for key, pods in world.pods_by_group.items():
        pg = world.podgroups.get(key)
        if pg is None:
            continue
        gated = [p for p in pods if p.role is Role.ELASTIC and p.pending and p.gated(gate)]
        if not gated:
            continue  # most groups: no need to count their placed pods
        running = sum(1 for p in pods if p.placed)
        if running < pg.min_member:
            continue
        for pod in gated:
            by_job.setdefault(job_id(pod), []).append(pod)
    heap: list[tuple[float, int, str, str]] = []
    queues: dict[str, list[PodView]] = {}
    for jid, pods in by_job.items():
        job = world.jobs.get(jid)
        if job is None or job.bounds is None or job.cooling:
            continue
        pods.sort(key=lambda p: (p.replica_index, p.name))
        queues[jid] = pods
        heapq.heappush(heap, (job.fulfillment(), pods[0].replica_index, pods[0].name, jid))
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
        node = cap.choose_node(pod)
        if node is not None:
            cap.take(node, pod_demand(pod))
            job.added += 1
            per_queue[job.queue] = per_queue.get(job.queue, 0) + 1
            releases.append(GateRelease(
                pod.key, jid, node, job.queue,
                f"job {jid} has {job.current_workers() - 1} of max {job.bounds.max_replicas} workers "
                f"running (least fulfilled first); fits on {node} now",
            ))
        if pending:
            heapq.heappush(heap, (job.fulfillment(), pending[0].replica_index, pending[0].name, jid))
    return releases, []
