"""The yardstick over seeds and workload mixes (issue 17): elastic against volcano-gang and
static-max on the bundled cluster, traces from the seeded generator.

    .venv/bin/python bench/simulate_seeds.py [--seeds 1,2,3] [--variants bundled,bundled-1.3,distributed]
                                             [--checkpoint-interval 1800]

Prints per (variant, seed) and peer: GPU allocation and busy GPU time gained in points, the
average and p99 JCT ratios, restarts per job and work lost to restarts (GPU-hours) of both, and
the class (kind, max workers) that pays most under elastic: its average JCT against static-max.
Then the mean over the seeds. Numbers, not pass/fail: no target is set on them. Seed 1 of
``bundled`` is the bundled example's trace.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))  # last: PYTHONPATH (another checkout) wins

from elastic_controller.policy.settings import ElasticConfig
from elastic_controller.simulate.cluster import load_cluster
from elastic_controller.simulate.engine import SimSettings, simulate
from elastic_controller.simulate.generate import GeneratorOptions, generate
from elastic_controller.simulate.report import summarize

# name -> generator options (500 jobs each; the seed is set per run).
VARIANTS: dict[str, GeneratorOptions] = {
    # The bundled example's mix (mostly whole-node workers, 1 to 16 of them, 20 % rigid).
    "bundled": GeneratorOptions(jobs=500, load=1.0),
    "bundled-1.3": GeneratorOptions(jobs=500, load=1.3),
    # Distributed elastic training only: no rigid jobs but single workers, min = max / 4, up to 32
    # workers (a 16 x 8-GPU gang is a weight-1 queue's whole share on the bundled cluster).
    "distributed": GeneratorOptions(jobs=500, load=1.0, rigid_fraction=0.0, min_divisors=(4,), big_jobs=True),
}


def _worst_class(s: dict[str, Any]) -> str:
    rated = [c for c in s["perClass"] if c["avgJctRatioVsStaticMax"] is not None and c["jobs"] >= 5]
    if not rated:
        return "-"
    c = max(rated, key=lambda c: c["avgJctRatioVsStaticMax"])
    return f"{c['kind']} {c['maxWorkers']}: {c['avgJctRatioVsStaticMax']:.2f}x"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"any of {', '.join(VARIANTS)}")
    ap.add_argument("--checkpoint-interval", type=float, default=1800.0)
    args = ap.parse_args()
    root = Path(__file__).resolve().parents[1]
    cluster = load_cluster(root / "elastic_controller" / "examples" / "sim" / "cluster.yaml")
    cfg = ElasticConfig()
    settings = SimSettings(checkpoint_interval=args.checkpoint_interval)
    head = (f"{'variant':<12} {'seed':>4} {'vs':<12} {'alloc':>6} {'busy':>6} {'avg JCT':>8} {'p99 JCT':>8} "
            f"{'restarts/job':>14} {'lost GPU-h':>13}  elastic's costliest class vs static-max")
    print(head)
    for name in args.variants.split(","):
        seeds = [int(s) for s in args.seeds.split(",")]
        sums: dict[str, list[tuple[float, float, float]]] = {"volcano-gang": [], "static-max": []}
        for seed in seeds:
            jobs = generate(cluster, dataclasses.replace(VARIANTS[name], seed=seed))
            t0 = time.perf_counter()
            results = {p: simulate(jobs, cluster, cfg, p, settings) for p in ("static-max", "volcano-gang", "elastic")}
            s = {p: summarize(r, results["static-max"]) for p, r in results.items()}
            e = s["elastic"]
            for peer in ("volcano-gang", "static-max"):
                m = s[peer]
                points = 100 * (e["gpuAllocation"] - m["gpuAllocation"])
                ratio = e["avgJctSeconds"] / m["avgJctSeconds"]
                sums[peer].append((points, ratio, e["p99JctSeconds"] / m["p99JctSeconds"]))
                print(f"{name:<12} {seed:>4} {peer:<12} {points:>+6.1f} {100 * (e['gpuBusy'] - m['gpuBusy']):>+6.1f} "
                      f"{ratio:>7.2f}x {e['p99JctSeconds'] / m['p99JctSeconds']:>7.2f}x "
                      f"{e['restartsPerJob']:>6.2f} vs {m['restartsPerJob']:<4.2f} "
                      f"{e['lostWorkGpuHours']:>5.0f} vs {m['lostWorkGpuHours']:<5.0f} "
                      f"{_worst_class(e) if peer == 'static-max' else ''}", flush=True)
            print(f"{'':<12} {'':>4} ({time.perf_counter() - t0:.0f} s)", flush=True)
        for peer, rows in sums.items():
            n = len(rows)
            print(f"{name:<12} mean {peer:<12} {sum(r[0] for r in rows) / n:>+6.1f} {'':>6} "
                  f"{sum(r[1] for r in rows) / n:>7.2f}x {sum(r[2] for r in rows) / n:>7.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
