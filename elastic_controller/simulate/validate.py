"""Checks that a trace can run on a cluster at all, before anything is simulated."""

from __future__ import annotations

from collections.abc import Sequence

from .cluster import ClusterSpec
from .nodes import NodeTable
from .trace import JobSpec


def _gang_fits(nodes: NodeTable, workers: int, job: JobSpec) -> bool:
    taken = []
    ok = True
    for _ in range(workers):
        node = nodes.best_fit(job.gpus, job.cpu_request, job.memory_request)
        if node < 0:
            ok = False
            break
        nodes.take(node, job.gpus, job.cpu_request, job.memory_request)
        taken.append(node)
    for node in taken:
        nodes.give(node, job.gpus, job.cpu_request, job.memory_request)
    return ok


def check_jobs(jobs: Sequence[JobSpec], cluster: ClusterSpec, policies: Sequence[str], source: str) -> list[str]:
    """Every problem as ``source:line: job NAME: what``; empty when the trace can run."""
    problems = []
    queues = {q.name for q in cluster.queues}
    nodes = NodeTable(cluster)
    for job in jobs:
        where = f"{source}:{job.line}: job {job.name}" if job.line else f"{source}: job {job.name}"
        if job.queue not in queues:
            problems.append(f"{where}: queue {job.queue!r} is not in the cluster file "
                            f"(queues: {', '.join(sorted(queues))})")
            continue
        gang = job.max_workers if "static-max" in policies else job.min_workers
        if not _gang_fits(nodes, gang, job):
            problems.append(f"{where}: {gang} worker(s) of {job.gpus} GPU(s) do not fit even on the empty "
                            "cluster")
    return problems
