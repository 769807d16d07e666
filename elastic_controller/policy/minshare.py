"""The controller's ``elasticMinShare``: whether a new elastic job's PodGroup is withheld (issue 38).

``admission.min_share_holds`` decides; this module gives it, from what the controller has cached, the
same inputs the simulator's allocator gives it (``simulate/enqueue.py``, ``_holds``):

- **the queue's deserved GPUs** (``rooms``): proportion's water-filling of the cluster's capacity
  (ready, schedulable nodes) by the queues' weights, capability and guarantee (``shares.plan_shares``),
  each queue's request being **every pod its unfinished PyTorchJobs ask for** (their specs: gated
  workers and the pods of held jobs included, as Volcano and the simulator count them). The agent's
  own share view (``sharemodel``) is not used: it counts neither gated pods nor pods without a
  PodGroup, so a held job's demand would never raise its queue's share and a queue alone in the
  cluster would keep it held forever. Under ``shares.plugin: capacity`` the queue's ``spec.deserved``
  where set, else the cluster's capacity (the simulator's ``gang_room``). The cluster's dominant
  resource (``nvidia.com/gpu`` when it has GPUs, else ``cpu``) is counted.
- per job of the queue: its gang's amount (the PodGroup's ``minResources``, ``podgroups.plan_podgroup``),
  whether it counts (elastic and not admitted whole), whether it is **let in** (its PodGroup of ours
  exists: the controller lets a job in by creating it) and what its placed pods hold.

A job is never held again once its PodGroup exists, and a job is let in when no elastic min set of
its queue is let in (``min_share_holds``, as in the simulator: a queue's deserved share is capped at
what its jobs ask for, so a lone elastic job whose min set is more than the key's fraction of its max
would otherwise never start). Pure: the controller (``controller.py``,
``Controller._min_share_hold``) builds the ``QueueJob`` rows from its caches."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .admission import Gang, Hold, min_share_holds
from .model import NodeView, QueueView
from .podgroups import PodGroupPlan
from .quantity import Resources, add, total
from .settings import ElasticConfig
from .shares import Usage, cluster_capacity, dominant_resource, plan_shares

HELD_REASON = "HeldByMinShare"  # the Event's reason, and the code status shows


@dataclass(frozen=True, slots=True)
class QueueJob:
    """One unfinished PyTorchJob as the min-share check sees it."""

    plan: PodGroupPlan
    created: float  # creation time (epoch seconds): the queue's order among new jobs
    request: Resources  # what all of its pods ask for (its spec: replicas x per-pod requests)
    admitted: bool  # its PodGroup (ours) exists (only read for the jobs of the queue judged)
    placed: Resources  # what its placed (bound, live) pods hold (the same)


def job_request(replicas: Iterable[tuple[int, Resources]]) -> Resources:
    """Sum of ``count x requests`` over a job's replica specs."""
    return total({k: count * v for k, v in requests.items()} for count, requests in replicas)


def rooms(cfg: ElasticConfig, queues: Sequence[QueueView], nodes: Sequence[NodeView],
          requests: Mapping[str, Resources]) -> dict[str, float]:
    """Each queue's deserved amount of the dominant resource (see the module docstring); empty when
    the cluster's capacity of it is 0 (no nodes known: nothing is held)."""
    dominant = dominant_resource(nodes)
    capacity = cluster_capacity(nodes)
    if capacity.get(dominant, 0) <= 0:
        return {}
    if cfg.shares.plugin == "capacity":  # capacity_ledger.CapacityModel.name
        names = {q.name for q in queues} | set(requests)
        spec = {q.name: (q.deserved or {}).get(dominant, 0) for q in queues}
        return {q: float(spec.get(q, 0) or capacity[dominant]) for q in names}
    shares = plan_shares(queues, nodes, (), {}, usage=Usage({}, {q: dict(r) for q, r in requests.items()}, {}),
                         capacity=capacity)
    return {q: float(s.deserved.get(dominant, 0)) for q, s in shares.items()}


def hold_of(cfg: ElasticConfig, key: str, jobs: Sequence[QueueJob], queues: Sequence[QueueView],
            nodes: Sequence[NodeView]) -> Hold | None:
    """The hold of job ``key`` (one of ``jobs``) by its queue's ``elasticMinShare``, or None (let in)."""
    job = next((j for j in jobs if j.plan.key == key), None)
    if job is None or job.admitted or not job.plan.bounds.elastic or job.plan.whole:
        return None
    queue = job.plan.queue
    share = cfg.queue_policy(queue).elasticMinShare
    if share >= 1.0:
        return None
    requests: dict[str, Resources] = {}
    for j in jobs:
        requests[j.plan.queue] = add(requests.get(j.plan.queue, {}), j.request)
    room = rooms(cfg, queues, nodes, requests)
    if queue not in room:
        return None
    dominant = dominant_resource(nodes)
    gangs = []
    for j in jobs:
        if j.plan.queue != queue:
            continue
        need = float(j.plan.min_resources.get(dominant, 0))
        placed = float(j.placed.get(dominant, 0))
        gangs.append(Gang(j.plan.key, queue, (0, j.created, j.plan.key), need,
                          j.plan.bounds.elastic and not j.plan.whole, placed > 0, j.admitted,
                          min(placed, need)))
    return min_share_holds(queue, gangs, room[queue], share).get(key)
