"""Where the idle GPU-hours of a simulation go, per policy (the bundled example by default).

    .venv/bin/python bench/simulate_idle.py                  # elastic and static-max
    .venv/bin/python bench/simulate_idle.py --policy elastic --generate 500 --load 1.5 --seed 1

Every idle GPU-second is charged to the state of the cluster at that moment:

- ``no demand``: nothing waits and no gated pod exists (every present job runs at max): no
  policy that keeps jobs within their bounds could have used these GPUs at that moment;
- ``gated, out of cooldown``: some job could grow but did not (a waiting gang held growth back,
  its queue was at its deserved share, or no node had room for a whole worker);
- ``gated, all cooling``: every job that could grow was in its cooldown;
- ``waiting gang, nothing gated``: a gang waited that did not fit (static policies: gangs at max).

It hooks the simulator's clock (``Simulator._advance``), so it measures the engine as shipped.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from importlib.resources import files
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from elastic_controller.config import load_config_file
from elastic_controller.simulate.cluster import load_cluster, parse_cluster
from elastic_controller.simulate.engine import SimSettings, Simulator, default_planner
from elastic_controller.simulate.generate import GeneratorOptions, generate
from elastic_controller.simulate.trace import parse_own_csv


def breakdown(sim: Simulator) -> tuple[float, Counter[str]]:
    """Run ``sim``; (GPU allocation, idle GPU-seconds per cause)."""
    idle: Counter[str] = Counter()  # GPU-seconds
    last_t, last_cause, last_free = 0.0, "", 0
    advance = sim._advance

    def hooked(t: float) -> None:
        nonlocal last_t, last_cause, last_free
        if t > last_t and last_free:
            idle[last_cause] += round((t - last_t) * last_free)
        advance(t)
        gated = list(sim.gated.values())
        if gated:
            cooling = all(sim._in_cooldown(j, t) for j in gated)
            cause = "gated, all cooling" if cooling else "gated, out of cooldown"
        elif any(True for _ in sim.alloc.waiting_gangs()):
            cause = "waiting gang, nothing gated"
        else:
            cause = "no demand"
        last_t, last_cause, last_free = t, cause, sim.nodes.free_gpus

    sim._advance = hooked  # type: ignore[method-assign]
    result = sim.run()
    return result.gpu_allocation, idle


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", choices=("elastic", "static-max", "static-min", "both"), default="both")
    parser.add_argument("--cluster", help="cluster YAML (default: the bundled example's)")
    parser.add_argument("--generate", type=int, default=0, help="generate N jobs instead of the bundled trace")
    parser.add_argument("--load", type=float, default=1.2)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    base = files("elastic_controller") / "examples" / "sim"
    cluster = (load_cluster(args.cluster) if args.cluster else
               parse_cluster(base.joinpath("cluster.yaml").read_text(encoding="utf-8"), "cluster.yaml"))
    if args.generate:
        jobs = generate(cluster, GeneratorOptions(jobs=args.generate, seed=args.seed, load=args.load))
    else:
        jobs = parse_own_csv(base.joinpath("trace.csv").read_text(encoding="utf-8"), "trace.csv")
    cfg = load_config_file(None)
    policies = ("elastic", "static-max") if args.policy == "both" else (args.policy,)
    for policy in policies:
        planner = default_planner() if policy == "elastic" else None
        alloc, idle = breakdown(Simulator(jobs, cluster, cfg, policy, SimSettings(), planner=planner))
        total = sum(idle.values())
        print(f"{policy}: GPU allocation {alloc:.1%}; idle {total / 3600:,.0f} GPU-hours")
        for cause, seconds in idle.most_common():
            print(f"  {cause:30s} {seconds / 3600:8,.0f} GPU-h  {seconds / total:6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
