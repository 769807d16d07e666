"""How robust is "elastic beats static-max"? The bundled cluster, traces from the seeded generator,
several workload mixes, several seeds: elastic against static-max for each.

    .venv/bin/python bench/simulate_seeds.py [--seeds 1,2,3] [--variants bundled,bundled-1.3,distributed]

Prints per (variant, seed): GPU allocation gained in points (and the same for busy GPU time and for
allocation while jobs arrive, see docs/simulate.md "Metrics"), the average and p99 JCT ratios, and
elastic's restarts per job; then whether issue 7's targets (allocation +10 points, average JCT at
most 0.8x) hold. Numbers, not pass/fail. Seed 1 of ``bundled`` is the bundled example's trace.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # last: PYTHONPATH (another checkout) wins

from elastic_controller.policy.settings import ElasticConfig
from elastic_controller.simulate.cluster import load_cluster
from elastic_controller.simulate.engine import simulate
from elastic_controller.simulate.generate import GeneratorOptions, generate
from elastic_controller.simulate.report import summarize

# name -> generator options (500 jobs each; the seed is set per run).
VARIANTS: dict[str, GeneratorOptions] = {
    # The bundled example's mix (mostly whole-node workers, 1 to 16 of them, 20 % rigid).
    "bundled": GeneratorOptions(jobs=500, load=1.0),
    "bundled-1.3": GeneratorOptions(jobs=500, load=1.3),
    # Distributed elastic training only: no rigid jobs but single workers, min = max / 4, up to 16
    # workers (a 16 x 8-GPU gang is a weight-1 queue's whole share on the bundled cluster).
    "distributed": GeneratorOptions(jobs=500, load=1.0, rigid_fraction=0.0, min_divisors=(4,), big_jobs=True),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"any of {', '.join(VARIANTS)}")
    args = ap.parse_args()
    root = Path(__file__).resolve().parents[1]
    cluster = load_cluster(root / "elastic_controller" / "examples" / "sim" / "cluster.yaml")
    cfg = ElasticConfig()
    print(f"{'variant':<12} {'seed':>4} {'alloc':>7} {'busy':>7} {'arriving':>8} {'avg JCT':>8} {'p99 JCT':>8} "
          f"{'restarts':>8}  targets (+10 points, <= 0.8x)")
    for name in args.variants.split(","):
        met = 0
        seeds = [int(s) for s in args.seeds.split(",")]
        for seed in seeds:
            jobs = generate(cluster, dataclasses.replace(VARIANTS[name], seed=seed))
            t0 = time.perf_counter()
            e, m = (summarize(simulate(jobs, cluster, cfg, policy)) for policy in ("elastic", "static-max"))
            points = 100 * (e["gpuAllocation"] - m["gpuAllocation"])
            ratio = e["avgJctSeconds"] / m["avgJctSeconds"]
            ok = points >= 10 and ratio <= 0.8
            met += ok
            print(f"{name:<12} {seed:>4} {points:>+7.1f} {100 * (e['gpuBusy'] - m['gpuBusy']):>+7.1f} "
                  f"{100 * (e['gpuAllocationWhileArriving'] - m['gpuAllocationWhileArriving']):>+8.1f} "
                  f"{ratio:>7.2f}x {e['p99JctSeconds'] / m['p99JctSeconds']:>7.2f}x "
                  f"{e['restarts'] / len(jobs):>8.2f}  {'met' if ok else 'missed'} ({time.perf_counter() - t0:.0f} s)",
                  flush=True)
        print(f"{name:<12} both targets met on {met} of {len(seeds)} seeds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
