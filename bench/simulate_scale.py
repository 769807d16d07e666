"""Benchmark: ``volcano-elastic simulate`` at cluster scale, as ratios measured in one run.

    .venv/bin/python bench/simulate_scale.py                      # every policy, 10,000 jobs / 1,000 nodes
    .venv/bin/python bench/simulate_scale.py --policy elastic --profile --time-limit 120
    .venv/bin/python bench/simulate_scale.py --cycle-seconds 0    # the agent's own 5 s cycle
    .venv/bin/python bench/simulate_scale.py --philly-week        # ~12,000 jobs on 512 GPUs, --policy all

The first form ends with elastic's time over static-max's (and volcano-gang's), side by side.
``--philly-week`` writes a seeded synthetic week in the Philly (Pollux artifact) layout, about
12,000 jobs shaped like Philly's (mostly 1-GPU, a tail up to 32 GPUs, 2 minutes to 12 hours), and runs
the ``simulate`` command on it under ``--policy all`` (its progress bar on stderr), reporting the
wall time and the peak memory of that process.

Splits the wall time of each policy into the simulator's own work and the time spent in the
policy core's ``plan_cycle`` (the agent's planner, called unchanged). With ``--time-limit`` an
elastic run that would take too long is stopped and its total extrapolated from the jobs it
finished; ``--profile`` prints where ``plan_cycle`` spends its time.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))  # last: PYTHONPATH (another checkout) wins

from elastic_controller.policy.cycle import plan_cycle

try:
    from elastic_controller.policy.cycle import PlanCache
except ImportError:  # a checkout that kept the pod index in module globals
    PlanCache = None  # type: ignore[assignment,misc]
from elastic_controller.policy.decisions import CyclePlan
from elastic_controller.policy.model import Snapshot
from elastic_controller.policy.settings import ElasticConfig
from elastic_controller.simulate.cluster import ClusterSpec, NodePool, QueueSpec
from elastic_controller.simulate.engine import POLICIES, SimSettings, Simulator
from elastic_controller.simulate.generate import GeneratorOptions, generate
from elastic_controller.simulate.report import summarize


class TimeLimit(Exception):
    pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--load", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--policy", default="all", choices=(*POLICIES, "all"))
    ap.add_argument("--cycle-seconds", type=float, default=60.0,
                    help="agent cycle grid in the simulation (default: 60; 0: the config's 5 s)")
    ap.add_argument("--time-limit", type=float, default=900.0,
                    help="stop a policy after this many seconds and extrapolate (default: 900; 0: none)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a policy misses the budget")
    ap.add_argument("--profile", action="store_true", help="profile plan_cycle (elastic)")
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--philly-week", action="store_true", help="the Philly-sized week instead (see above)")
    ap.add_argument("--week-jobs", type=int, default=12_000)
    args = ap.parse_args()
    if args.philly_week:
        return philly_week(args.week_jobs, args.seed, args.cycle_seconds)

    cluster = ClusterSpec((NodePool("gpu", args.nodes, 8, 96_000, 2**40),),
                          (QueueSpec("research", 2), QueueSpec("vision", 1), QueueSpec("nlp", 1)))
    jobs = generate(cluster, GeneratorOptions(jobs=args.jobs, seed=args.seed, load=args.load))
    print(f"{args.jobs} jobs on {args.nodes} nodes ({cluster.total_gpus} GPUs), load {args.load}, "
          f"seed {args.seed}")
    cfg = ElasticConfig()
    profiler = cProfile.Profile() if args.profile else None
    policies = POLICIES if args.policy == "all" else (args.policy,)
    failed = False
    walls: dict[str, float] = {}
    for policy in policies:
        started = time.perf_counter()
        limit = started + args.time_limit if args.time_limit else 0.0
        kept: dict[str, Any] = {"cache": PlanCache()} if PlanCache is not None else {}

        def planner(snap: Snapshot, c: ElasticConfig, now: datetime, limit: float = limit,
                    kept: dict[str, Any] = kept) -> CyclePlan:
            if limit and time.perf_counter() > limit:
                raise TimeLimit
            if profiler is not None:
                profiler.enable()
            try:
                return plan_cycle(snap, c, now, **kept)
            finally:
                if profiler is not None:
                    profiler.disable()

        sim = Simulator(jobs, cluster, cfg, policy, SimSettings(cycle_seconds=args.cycle_seconds), planner)
        try:
            result = sim.run()
        except TimeLimit:
            wall = time.perf_counter() - started
            done = sim.finished
            print(f"{policy:<11} stopped after {wall:.0f}s: {done}/{args.jobs} jobs finished, "
                  f"{sim.plan_calls} plan_cycle calls ({sim.plan_seconds:.0f}s, "
                  f"{1000 * sim.plan_seconds / max(1, sim.plan_calls):.0f} ms each); "
                  f"simulated {sim.now / 3600:.1f}h; projected total > {wall * args.jobs / max(1, done):.0f}s")
            failed = True
            continue
        wall = time.perf_counter() - started
        walls[policy] = wall
        s = summarize(result)
        per_call = 1000 * result.plan_seconds / max(1, result.plan_calls)
        ok = wall < args.budget
        failed |= not ok
        print(f"{policy:<11} {wall:6.1f}s {'OK ' if ok else 'SLOW'} simulator {wall - result.plan_seconds:5.1f}s, "
              f"plan_cycle {result.plan_seconds:6.1f}s in {result.plan_calls} calls ({per_call:.1f} ms each, "
              f"{result.cycles_skipped} idle cycles skipped); allocation {100 * s['gpuAllocation']:.1f}%, "
              f"avg JCT {s['avgJctSeconds']:.0f}s, restarts/job {s['restarts'] / args.jobs:.2f}")
    if "static-max" in walls:
        for policy in ("elastic", "volcano-gang"):
            if policy in walls:
                print(f"{policy} / static-max wall time: {walls[policy] / walls['static-max']:.1f}x (same run)")
    if profiler is not None:
        print("\nplan_cycle profile (cumulative, top 20):")
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("cumulative").print_stats(20)
        print("\nplan_cycle profile (own time, top 25):")
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(25)
    return 1 if failed and args.strict else 0



def philly_week(jobs: int, seed: int, cycle_seconds: float) -> int:
    """A Philly-sized week through the CLI: wall time and peak memory of the simulate process."""
    import random
    import resource
    import subprocess
    import tempfile
    from datetime import datetime, timedelta

    rng = random.Random(seed)
    vcs = ("a", "b", "c", "d", "e")  # queues vc-a .. vc-e
    week = 7 * 86400
    start = datetime(2017, 10, 2)
    rows = []
    for _ in range(jobs):
        gpus = rng.choices((1, 2, 4, 8, 16, 32), (70, 8, 8, 9, 4, 1))[0]
        duration = round(120 * 360 ** rng.random())  # 2 minutes to 12 hours, log-uniform
        t = start + timedelta(seconds=rng.uniform(0, week))
        rows.append(f"{t:%Y-%m-%d %H:%M:%S},{duration},{gpus},{duration * gpus},{rng.choice(vcs).upper()}")
    work = sum(int(r.split(",")[3]) for r in rows)
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "philly-week.csv"
        trace.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n" + "\n".join(rows) + "\n")
        cluster = Path(tmp) / "cluster.yaml"
        cluster.write_text("nodes:\n  - {name: gpu, count: 64, gpus: 8}\nqueues:\n"
                           + "".join(f"  - {{name: vc-{v}}}\n" for v in vcs))
        print(f"{jobs} jobs over a week, {work / 3600:,.0f} GPU-hours on 512 GPUs "
              f"(offered load {work / (512 * week):.2f}); simulate --policy all --cycle-seconds {cycle_seconds:g}",
              flush=True)
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", "import sys; from elastic_controller.cli import main; sys.exit(main(sys.argv[1:]))",
             "simulate", "--trace", str(trace), "--cluster",
             str(cluster), "--policy", "all", "--cycle-seconds", str(cycle_seconds), "--no-plots",
             "--out", str(Path(tmp) / "out")], check=False)
        wall = time.perf_counter() - started
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20  # KiB -> GiB
        print(f"exit {proc.returncode}; {wall:.0f} s; peak memory {peak:.2f} GiB (budget 4 GiB)")
        return proc.returncode or (1 if peak >= 4 else 0)


if __name__ == "__main__":
    sys.exit(main())
