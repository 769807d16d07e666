"""Benchmark: ``plan_cycle`` on synthetic clusters of 200 to 5,000 nodes (8 GPUs each, ~10 pods
per node, 20 queues, 10% of gangs starving). Prints p50/p99 per size, peak RSS, and the growth of the
cost between sizes against n log n. Numbers, not pass/fail (targets: 5,000 nodes < 1 s p99, < 1 GiB).

    .venv/bin/python bench/plan_scale.py [--sizes 200,500,1000,2000,5000] [--runs 7] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import itertools
import math
import os
import pstats
import random
import resource
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parents[1]))  # last: PYTHONPATH (another checkout) wins

from _synth import NOW, describe, synth_cluster

from elastic_controller.policy.cycle import plan_cycle
from elastic_controller.policy.model import Snapshot
from elastic_controller.policy.settings import ElasticConfig

try:
    from elastic_controller.policy import podindex
except ImportError:  # a checkout from before the pod index (measured through PYTHONPATH)
    podindex = None  # type: ignore[assignment]
try:
    from elastic_controller.policy.cycle import PlanCache
except ImportError:  # a checkout that kept the pod index in module globals
    PlanCache = None  # type: ignore[assignment,misc]


def fresh() -> dict[str, Any]:
    """``plan_cycle``'s keywords for a planner that remembers nothing yet: a new ``PlanCache``, or (older
    checkouts) the module globals reset."""
    if PlanCache is not None:
        return {"cache": PlanCache()}
    if podindex is not None:
        podindex.reset()
    return {}


def rss_mib() -> float:
    # ru_maxrss is KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    if len(s) == 1:
        return s[0]
    k = (len(s) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def calibrate() -> float:
    """CPU seconds of a fixed pure-Python loop: compare runs on machines (or moments) of different load."""
    c0 = time.process_time()
    acc: dict[int, int] = {}
    for i in range(2_000_000):
        acc[i & 1023] = acc.get(i & 1023, 0) + i
    return time.process_time() - c0


def _warm_cycles(snap: Snapshot, cfg: ElasticConfig, runs: int, seed: int) -> tuple[float, float, float]:
    """(seconds of the cycle that builds the pod index, p50 and p99 of the cycles after it), each with
    1 % of the pods handed in as new views (what changes between two agent cycles, generously)."""
    rnd = random.Random(seed)
    pods = list(snap.pods)
    kept = fresh()
    plan_cycle(snap, cfg, NOW, **kept)  # a cold cycle
    times = []
    for _ in range(runs + 1):
        for i in rnd.sample(range(len(pods)), max(1, len(pods) // 100)):
            pods[i] = dataclasses.replace(pods[i])
        run = dataclasses.replace(snap, pods=tuple(pods))
        t0 = time.perf_counter()
        plan_cycle(run, cfg, NOW, **kept)
        times.append(time.perf_counter() - t0)
    return times[0], percentile(times[1:], 0.5), percentile(times[1:], 0.99)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="200,500,1000,2000,5000",
                    help="node counts (default: 200,500,1000,2000,5000; the growth is printed step by step)")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile", action="store_true", help="cProfile one run of the largest size")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    cfg = ElasticConfig()
    results: dict[int, tuple[float, float, int]] = {}
    print(f"machine load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cpus "
          f"(wall times suffer; cpu = process time); calibration loop {calibrate():.3f} cpu s")
    print(f"policy code: {Path(sys.modules[plan_cycle.__module__].__file__ or '?').parent}")
    print(f"{'nodes':>6} {'pods':>7} {'p50 s':>8} {'p99 s':>8} {'cpu p50':>8} {'cpu p99':>8} {'max RSS MiB':>12}  "
          "decisions")
    for n in sizes:
        snap = synth_cluster(n, seed=args.seed)
        times = []
        cpu = []
        plan = None
        for _ in range(args.runs):
            # Node views never seen before at every run: a cold cycle, as after the agent starts (it
            # reuses what it derived from the nodes while their views stay the same; see node_base).
            run = dataclasses.replace(snap, nodes=tuple(dataclasses.replace(node) for node in snap.nodes))
            kept = fresh()  # and nothing kept from the pods of the previous run
            t0, c0 = time.perf_counter(), time.process_time()
            plan = plan_cycle(run, cfg, NOW, **kept)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        assert plan is not None
        decisions = Counter(d.decision for d in plan.starving)
        warm = _warm_cycles(snap, cfg, args.runs, args.seed) if podindex is not None else None
        results[n] = (percentile(times, 0.5), percentile(times, 0.99), len(snap.pods))
        cpu_p50, cpu_p99 = percentile(cpu, 0.5), percentile(cpu, 0.99)
        print(f"{n:>6} {len(snap.pods):>7} {results[n][0]:>8.3f} {results[n][1]:>8.3f} {cpu_p50:>8.3f} "
              f"{cpu_p99:>8.3f} {rss_mib():>12.0f}  "
              f"{dict(decisions)} evictions={len(plan.evictions)} releases={len(plan.gate_releases)}")
        print(f"        {describe(snap)}")
        if warm is not None:
            print(f"        steady state (1 % of pod views new at every cycle, as between two agent cycles): "
                  f"p50 {warm[1]:.3f} s, p99 {warm[2]:.3f} s; the one cycle that builds the pod index {warm[0]:.3f} s")
    print("\ngrowth (p50 time ratio vs n log n ratio, n = pods):")
    for a, b in itertools.pairwise(sizes):
        ta, tb = results[a][0], results[b][0]
        na, nb = results[a][2], results[b][2]
        nlogn = (nb * math.log(nb)) / (na * math.log(na))
        print(f"  {a:>5} -> {b:>5} nodes: time x{tb / ta:6.1f}   n log n x{nlogn:6.1f}   "
              f"({'within' if tb / ta <= nlogn * 1.25 else 'ABOVE'} n log n)")
    big = sizes[-1]
    p99 = results[big][1]
    print(f"\ntarget {big} nodes: p99 {p99:.3f} s ({'ok' if p99 < 1 else 'OVER'} < 1 s), "
          f"max RSS {rss_mib():.0f} MiB ({'ok' if rss_mib() < 1024 else 'OVER'} < 1024)")
    if args.profile:
        snap = synth_cluster(big, seed=args.seed)
        prof = cProfile.Profile()
        prof.runcall(plan_cycle, snap, cfg, NOW)
        pstats.Stats(prof).sort_stats("cumulative").print_stats(20)
    return 0


if __name__ == "__main__":
    sys.exit(main())
