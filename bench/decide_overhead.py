"""Benchmark: ``decide`` (the cycle's whole decision as actions) against ``plan_cycle`` alone, in the
same run, on the synthetic clusters of ``plan_scale.py``. Each is timed warm, as the agent calls it
(one ``PlanCache`` per planner, the same snapshot again: the pod index reused), alternating so that
both see the same machine load. Prints the median and p90 per size and the overhead of ``decide``.

    .venv/bin/python bench/decide_overhead.py [--sizes 500,2000] [--runs 9]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parents[1]))  # last: PYTHONPATH (another checkout) wins

from _synth import NOW, synth_cluster

from elastic_controller.policy.cycle import PlanCache, decide, plan_cycle
from elastic_controller.policy.settings import ElasticConfig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="500,2000")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    cfg = ElasticConfig()
    print(f"{'nodes':>6} {'plan_cycle p50':>15} {'decide p50':>11} {'plan_cycle p90':>15} {'decide p90':>11} "
          f"{'overhead p50':>13}")
    for n in (int(s) for s in args.sizes.split(",")):
        snap = synth_cluster(n, seed=args.seed)
        pc, dc = PlanCache(), PlanCache()
        plan = plan_cycle(snap, cfg, NOW, cache=pc)  # warm both caches once
        decision = decide(snap, cfg, NOW, cache=dc)
        assert decision.plan == plan, "decide must plan exactly what plan_cycle plans"
        t_plan: list[float] = []
        t_decide: list[float] = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            plan_cycle(snap, cfg, NOW, cache=pc)
            t_plan.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            decide(snap, cfg, NOW, cache=dc)
            t_decide.append(time.perf_counter() - t0)
        p50p, p50d = statistics.median(t_plan), statistics.median(t_decide)
        p90p = sorted(t_plan)[int(0.9 * (len(t_plan) - 1))]
        p90d = sorted(t_decide)[int(0.9 * (len(t_decide) - 1))]
        print(f"{n:>6} {p50p * 1000:>13.1f}ms {p50d * 1000:>9.1f}ms {p90p * 1000:>13.1f}ms {p90d * 1000:>9.1f}ms "
              f"{(p50d / p50p - 1) * 100:>+12.1f}%  ({len(decision.actions)} actions)")


if __name__ == "__main__":
    main()
