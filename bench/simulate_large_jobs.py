"""A second scenario for ``simulate``: only large elastic jobs, on the bundled 512-GPU cluster.

    .venv/bin/python bench/simulate_large_jobs.py

150 jobs of 12, 16 or 24 workers of 8 GPUs (min = max / 4), durations log-uniform between 30 min
and 8 h at max size, Poisson arrivals at offered load 1.0, the bundled three queues (2:1:1).
A gang at max is larger than a weight-1 queue's deserved share once queues compete, so under
``static-max`` Volcano's proportion plugin holds it back; elastic jobs start at min.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from elastic_controller.policy.settings import ElasticConfig
from elastic_controller.simulate.cluster import load_cluster
from elastic_controller.simulate.engine import simulate
from elastic_controller.simulate.report import comparison, summarize, table
from elastic_controller.simulate.trace import JobSpec


def large_jobs(seed: int = 1, count: int = 150, gpus: int = 512) -> list[JobSpec]:
    rng = random.Random(seed)
    jobs = []
    t = 0.0
    for i in range(count):
        hi = rng.choice((12, 16, 24))
        work = 0.5 * 16 ** rng.random() * 3600 * hi * 8
        jobs.append(JobSpec(f"big-{i:03d}", round(t), hi // 4, hi, 8, work,
                            queue=rng.choice(("research", "research", "vision", "nlp"))))
        t += rng.expovariate(gpus / work)
    return jobs


def main() -> int:
    root = Path(__file__).resolve().parents[1]
    cluster = load_cluster(root / "elastic_controller" / "examples" / "sim" / "cluster.yaml")
    jobs = large_jobs(gpus=cluster.total_gpus)
    results = [simulate(jobs, cluster, ElasticConfig(), p) for p in ("elastic", "static-max")]
    summaries = {r.policy: summarize(r) for r in results}
    print(table(results, summaries))
    print(comparison(summaries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
