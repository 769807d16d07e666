"""A seeded synthetic trace: Poisson arrivals sized to a target load on a given cluster.

Job shapes follow what large GPU clusters report (Helios, Philly): mostly whole-node workers,
a long tail of durations (log-uniform between ``min_hours`` and ``max_hours`` at max size) and
a minority of rigid jobs (min == max). The same seed always gives the same trace.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from .cluster import ClusterSpec
from .trace import JobSpec


@dataclass(frozen=True, slots=True)
class GeneratorOptions:
    jobs: int = 500
    seed: int = 1
    load: float = 1.2  # offered GPU-seconds per second at max size / cluster GPUs
    min_hours: float = 0.25
    max_hours: float = 8.0
    rigid_fraction: float = 0.2  # jobs with min == max
    high_priority_fraction: float = 0.1
    largest_fraction: float = 0.25  # no job's max size exceeds this fraction of the cluster's GPUs
    min_divisors: tuple[int, ...] = (2, 4)  # min = max // one of these
    big_jobs: bool = False  # draw max workers from the heavier table (up to 32 workers)


# (max workers, weight) and (GPUs per worker, weight), for nodes of 8 GPUs.
_WORKERS = ((1, 3), (2, 4), (4, 4), (8, 3), (16, 1))
_BIG_WORKERS = ((1, 2), (2, 3), (4, 3), (8, 3), (16, 2), (32, 1))
_GPUS = ((8, 6), (4, 2), (2, 1), (1, 1))


def _pick(rng: random.Random, table: tuple[tuple[int, int], ...]) -> int:
    values = [v for v, _ in table]
    weights = [w for _, w in table]
    return rng.choices(values, weights)[0]


def generate(cluster: ClusterSpec, opts: GeneratorOptions | None = None) -> list[JobSpec]:
    opts = opts or GeneratorOptions()
    rng = random.Random(opts.seed)
    largest = max(p.gpus for p in cluster.pools)
    total = cluster.total_gpus
    # Leaf queues only: a job in a queue with children stops Volcano's capacity plugin (hierarchy mode).
    parents = {q.parent for q in cluster.queues}
    leaves = [q for q in cluster.queues if q.name not in parents]
    queues = [q.name for q in leaves]
    qweights = [q.weight for q in leaves]
    shapes = []
    for _ in range(opts.jobs):
        gpus = min(_pick(rng, _GPUS), largest)
        hi = _pick(rng, _BIG_WORKERS if opts.big_jobs else _WORKERS)
        while hi > 1 and hi * gpus > total * opts.largest_fraction:
            hi //= 2
        if hi == 1 or rng.random() < opts.rigid_fraction:
            lo = hi
        else:
            lo = max(1, hi // rng.choice(opts.min_divisors))
        hours = opts.min_hours * (opts.max_hours / opts.min_hours) ** rng.random()
        work = round(hours * 3600 * hi * gpus)
        shapes.append((gpus, lo, hi, float(work)))
    mean_work = sum(s[3] for s in shapes) / len(shapes)
    mean_gap = mean_work / (total * opts.load)
    jobs = []
    t = 0.0
    for i, (gpus, lo, hi, work) in enumerate(shapes):
        jobs.append(JobSpec(
            name=f"job-{i:05d}", submit=round(t), min_workers=lo, max_workers=hi, gpus=gpus, work=work,
            queue=rng.choices(queues, qweights)[0],
            priority=1 if rng.random() < opts.high_priority_fraction else 0,
        ))
        t += rng.expovariate(1.0 / mean_gap)
    return jobs


def powers_of_two(lo: int, hi: int) -> tuple[int, ...]:
    """``lo`` and the powers of two above it up to ``hi`` (``lo`` first: the webhook wants min among
    the counts): (2, 4, 8) for [2, 8], (3, 4, 8) for [3, 10]."""
    counts = [lo]
    p = 1
    while p <= hi:
        if p > lo:
            counts.append(p)
        p *= 2
    return tuple(counts)


def with_worker_counts(jobs: list[JobSpec], fraction: float, seed: int) -> list[JobSpec]:
    """``--worker-counts-fraction``: each elastic job without counts of its own allows only
    ``powers_of_two(min, max)`` with probability ``fraction``, drawn from ``seed`` and the job's name
    (the same job gets the same draw whatever the row order). Jobs are otherwise unchanged."""
    if fraction <= 0:
        return jobs
    out = []
    for job in jobs:
        if (job.max_workers > job.min_workers and not job.worker_counts
                and random.Random(f"{seed}:worker-counts:{job.name}").random() < fraction):
            job = replace(job, worker_counts=powers_of_two(job.min_workers, job.max_workers))
        out.append(job)
    return out
