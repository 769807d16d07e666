"""Synthetic clusters for the planner benchmarks: policy views built directly (no JSON parsing).

``synth_cluster(nodes)``: ``nodes`` nodes of 8 GPUs, ~10 pods per node (elastic PyTorchJob workers
of 1-2 GPUs, a CPU-only master per job, two system pods per node), 20 queues, and 10% of the gangs
waiting (and starving) with their min set pending.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from elastic_controller.policy import keys
from elastic_controller.policy.keys import Role
from elastic_controller.policy.model import (
    ElasticBounds,
    NodeView,
    PodGroupView,
    PodView,
    QueueView,
    Snapshot,
)

NOW = datetime(2026, 1, 1, 13, 0, 0, tzinfo=UTC)
GPU = keys.GPU
GI = 2**30
GATE = keys.DEFAULT_GATE


def _pod(ns: str, job: str, idx: int, *, gpus: int, node: str, bounds: ElasticBounds | None, role: Role,
         rtype: str = "worker", scheduled: datetime | None = None, gated: bool = False,
         since: datetime | None = None, prio: int = 0) -> PodView:
    name = f"{job}-{rtype}-{idx}"
    requests = {"cpu": 4000 if gpus else 2000, "memory": 16 * GI}
    if gpus:
        requests[GPU] = gpus
    return PodView(
        namespace=ns, name=name, uid=f"uid-{ns}-{name}", phase="Running" if node else "Pending",
        node_name=node, requests=requests, scheduling_gates=(GATE,) if gated else (),
        created=NOW - timedelta(hours=3), scheduled_at=scheduled, unschedulable_since=since, group=job,
        job_name=job, replica_type=rtype, replica_index=idx, job_role_master=role is Role.MASTER,
        bounds=bounds, role=role, task_priority=prio,
    )


def synth_cluster(n_nodes: int, seed: int = 1, pods_per_node: int = 10, queues: int = 20,
                  starving_fraction: float = 0.10) -> Snapshot:
    rnd = random.Random(seed)
    nodes = [NodeView(f"node-{i:05d}", {"cpu": 128_000, "memory": 1024 * GI, GPU: 8, "pods": 110},
                      labels={"zone": f"z{i % 4}"}) for i in range(n_nodes)]
    qviews = [QueueView(f"q{i:02d}", weight=rnd.randint(1, 4), reclaimable=rnd.random() > 0.1)
              for i in range(queues)]
    prio_classes = {"batch": 10, "normal": 100, "urgent": 1000}
    pods: list[PodView] = []
    pgs: list[PodGroupView] = []
    # GPU slots node by node; a job's workers take consecutive slots (jobs span 1-4 nodes).
    slots = [(n.name, g) for n in nodes for g in range(8)]
    pos = 0
    j = 0
    gpu_pods_per_node = max(1, pods_per_node - 2)  # leave room for the job masters and a system pod
    while pos < len(slots):
        job = f"job-{j:06d}"
        ns = f"team-{j % 50:02d}"
        queue = qviews[rnd.randrange(queues)].name
        gpus = 1 if rnd.random() < 0.8 else 2
        max_r = rnd.choice([2, 4, 4, 8, 8, 8, 16, 24, 32]) * 8 // (gpu_pods_per_node * gpus) or 1
        min_r = max(1, max_r // 2)
        running = rnd.randint(min_r, max_r) if rnd.random() < 0.4 else max_r
        bounds = ElasticBounds(min_r, max_r)
        last_scale = {} if rnd.random() < 0.8 else {
            keys.LAST_SCALE_TIME: (NOW - timedelta(seconds=rnd.choice([60, 200, 900]))).strftime("%Y-%m-%dT%H:%M:%SZ")}
        pgs.append(PodGroupView(ns, job, min_r + 1, queue, rnd.choice(["", "batch", "normal", "normal"]),
                                annotations=last_scale, created=NOW - timedelta(hours=3), uid=f"uid-pg-{job}"))
        scheduled = NOW - timedelta(seconds=rnd.choice([60, 3600, 7200]))
        first_node = slots[pos][0] if pos < len(slots) else nodes[0].name
        pods.append(_pod(ns, job, 0, gpus=0, node=first_node, bounds=bounds, role=Role.MASTER, rtype="master",
                         scheduled=scheduled, prio=1000))
        for i in range(max_r):
            role = Role.ELASTIC if i >= min_r else Role.CORE
            prio = 500 if role is Role.CORE else max(1, 100 - (i - min_r))
            if i < running and pos + gpus <= len(slots):
                node = slots[pos][0]
                pos += gpus
                pods.append(_pod(ns, job, i, gpus=gpus, node=node, bounds=bounds, role=role, scheduled=scheduled,
                                 prio=prio))
            else:
                pods.append(_pod(ns, job, i, gpus=gpus, node="", bounds=bounds, role=role,
                                 gated=role is Role.ELASTIC, prio=prio, since=NOW - timedelta(seconds=600)))
        # Skip a few GPUs now and then so that some nodes have room for scale-up.
        if rnd.random() < 0.05:
            pos += 1
        j += 1
    running_jobs = j
    for n in nodes:  # system pods (daemon sets), no PodGroup
        for d in ("agent", "exporter"):
            pods.append(PodView("kube-system", f"{d}-{n.name}", f"uid-{d}-{n.name}", phase="Running",
                                node_name=n.name, requests={"cpu": 500, "memory": GI},
                                created=NOW - timedelta(days=1)))
    # Waiting gangs: 10% of all gangs, min set pending for 10 minutes (past starvationSeconds).
    n_waiting = round(running_jobs * starving_fraction / (1 - starving_fraction))
    for k in range(n_waiting):
        name = f"gang-{k:05d}"
        ns = f"team-{k % 50:02d}"
        members = rnd.choice([1, 1, 2, 2, 4])
        gpus = rnd.choice([1, 2, 4, 8])
        pgs.append(PodGroupView(ns, name, members, qviews[rnd.randrange(queues)].name,
                                rnd.choice(["", "normal", "urgent"]), created=NOW - timedelta(seconds=600 + k),
                                uid=f"uid-pg-{name}"))
        for i in range(members):
            pods.append(PodView(ns, f"{name}-{i}", f"uid-{ns}-{name}-{i}", requests={"cpu": 8000, "memory": 64 * GI,
                                                                                     GPU: gpus},
                                created=NOW - timedelta(seconds=600 + k),
                                unschedulable_since=NOW - timedelta(seconds=600 + k), group=name))
    return Snapshot(nodes=tuple(nodes), pods=tuple(pods), podgroups=tuple(pgs), queues=tuple(qviews),
                    priority_classes=prio_classes)


def describe(snap: Snapshot) -> str:
    placed = sum(1 for p in snap.pods if p.node_name)
    return (f"{len(snap.nodes)} nodes, {len(snap.pods)} pods ({placed} placed, "
            f"{placed / max(1, len(snap.nodes)):.1f}/node), {len(snap.podgroups)} PodGroups, {len(snap.queues)} queues")
