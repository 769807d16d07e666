"""``volcano-elastic simulate``: what-if analysis of a job trace on a simulated cluster."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import add_config_flag, load_config_or_exit

HELP = "simulate a job trace on a cluster under elastic, static-max and static-min scheduling"

POLICY_CHOICES = ("elastic", "static-max", "static-min", "all")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_argument_group("input")
    src.add_argument("--trace", metavar="FILE", help="job trace: our CSV/YAML, Helios cluster_log.csv or "
                     "Alibaba openb_pod_list_*.csv (see docs/simulate.md)")
    src.add_argument("--cluster", metavar="FILE", help="cluster YAML: node pools and queues")
    src.add_argument("--example", action="store_true",
                     help="use the bundled 64-node / 512-GPU cluster and 500-job trace")
    src.add_argument("--generate", type=int, metavar="N",
                     help="instead of --trace, generate N synthetic jobs for the cluster (seeded by --seed)")
    src.add_argument("--load", type=float, default=1.2,
                     help="offered load of generated jobs, at max size (default: 1.2)")
    src.add_argument("--trace-format", default="auto", choices=("auto", "csv", "yaml", "helios", "alibaba"),
                     help="format of --trace (default: from the suffix and header)")
    src.add_argument("--min-fraction", type=float, default=0.5,
                     help="imported traces: min workers = ceil(max * F) (default: 0.5)")
    src.add_argument("--worker-gpus", type=int, default=0, metavar="N",
                     help="imported traces: split each job into workers of N GPUs (default: as traced)")
    src.add_argument("--limit", type=int, default=0, metavar="N",
                     help="imported traces: keep the first N GPU jobs")
    sim = parser.add_argument_group("simulation")
    sim.add_argument("--policy", default="all", choices=POLICY_CHOICES, help="default: all")
    add_config_flag(sim, "cooldowns etc.; default: defaults", metavar="FILE")
    sim.add_argument("--seed", type=int, default=1, help="seed of the synthetic generator (default: 1)")
    sim.add_argument("--restart-penalty", type=float, default=60.0, metavar="SECONDS",
                     help="time a job makes no progress after each scale event (default: 60)")
    sim.add_argument("--grace-period", type=float, default=30.0, metavar="SECONDS",
                     help="an evicted worker holds its GPUs this long (default: 30)")
    sim.add_argument("--scaling-efficiency", default="0.95", metavar="CURVE",
                     help="per-doubling factor (0.95) or points 1:1,2:0.97,4:0.92 (default: 0.95)")
    sim.add_argument("--cycle-seconds", type=float, default=0.0, metavar="SECONDS",
                     help="agent cycle grid of the simulation (default: the config's agent.intervalSeconds); "
                     "a coarser grid batches decisions and runs faster on big traces")
    out = parser.add_argument_group("output")
    out.add_argument("--out", default="simulate-out", metavar="DIR",
                     help="where summary.json, jobs-<policy>.csv and the plots go (default: simulate-out)")
    out.add_argument("--write-trace", metavar="FILE", help="also write the trace simulated, in our CSV format")
    out.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    out.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def _fail(message: str) -> int:
    print(f"volcano-elastic simulate: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    import json
    from importlib.resources import files
    from pathlib import Path

    from ..simulate.cluster import load_cluster, parse_cluster
    from ..simulate.engine import POLICIES, SimSettings, simulate
    from ..simulate.generate import GeneratorOptions, generate
    from ..simulate.plots import MISSING, have_matplotlib, write_plots
    from ..simulate.progress import ProgressBar
    from ..simulate.report import comparison, jobs_csv, summarize, table
    from ..simulate.scaling import CurveError, parse_curve
    from ..simulate.trace import ImportOptions, TraceError, dump_csv, load_trace, parse_own_csv
    from ..simulate.validate import check_jobs

    cfg = load_config_or_exit(args, "simulate")
    try:
        curve = parse_curve(args.scaling_efficiency)
    except CurveError as exc:
        return _fail(str(exc))
    if args.restart_penalty < 0 or args.grace_period < 0 or args.cycle_seconds < 0:
        return _fail("--restart-penalty, --grace-period and --cycle-seconds must not be negative")
    if not 0 < args.min_fraction <= 1:
        return _fail("--min-fraction must be in (0, 1]")
    if args.example and (args.trace or args.cluster or args.generate):
        return _fail("--example replaces --trace, --cluster and --generate")
    if not args.example and not args.cluster:
        return _fail("give --cluster FILE (with --trace FILE or --generate N), or --example")
    if not args.example and bool(args.trace) == bool(args.generate):
        return _fail("give exactly one of --trace FILE and --generate N")

    try:
        if args.example:
            base = files("elastic_controller") / "examples" / "sim"
            cluster = parse_cluster(base.joinpath("cluster.yaml").read_text(encoding="utf-8"),
                                    "<example>/cluster.yaml")
            jobs = parse_own_csv(base.joinpath("trace.csv").read_text(encoding="utf-8"), "<example>/trace.csv")
        else:
            cluster = load_cluster(args.cluster)
            if args.generate:
                if args.generate < 1 or args.load <= 0:
                    return _fail("--generate needs N >= 1 and --load > 0")
                jobs = generate(cluster, GeneratorOptions(jobs=args.generate, seed=args.seed, load=args.load))
            else:
                jobs = load_trace(args.trace, args.trace_format, ImportOptions(
                    min_fraction=args.min_fraction, worker_gpus=max(0, args.worker_gpus),
                    limit=max(0, args.limit)))
    except TraceError as exc:
        return _fail(str(exc))

    policies = list(POLICIES) if args.policy == "all" else [args.policy]
    trace_name = "<example>/trace.csv" if args.example else (args.trace or "<generated>")
    problems = check_jobs(jobs, cluster, policies, trace_name)
    if problems:
        shown = problems[:20]
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        return _fail("the trace cannot run on this cluster:\n  " + "\n  ".join(shown) + more)

    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        if args.write_trace:
            Path(args.write_trace).write_text(dump_csv(jobs), encoding="utf-8")
    except OSError as exc:
        return _fail(f"cannot write output: {exc}")

    settings = SimSettings(restart_penalty=args.restart_penalty, grace_period=args.grace_period, curve=curve,
                           cycle_seconds=args.cycle_seconds)
    print(f"{len(jobs)} jobs, {sum(j.work for j in jobs) / 3600:,.0f} GPU-hours of work; "
          f"{cluster.node_count} nodes, {cluster.total_gpus} GPUs; scaling efficiency {curve.describe()}, "
          f"restart penalty {args.restart_penalty:g}s, grace period {args.grace_period:g}s")
    results = []
    summaries: dict[str, dict[str, Any]] = {}
    for policy in policies:
        bar = ProgressBar(policy) if not args.no_progress else None
        result = simulate(jobs, cluster, cfg, policy, settings, progress=bar)
        if bar is not None:
            bar.close()
        if result.rejected_decisions:
            print(f"warning: {policy}: {len(result.rejected_decisions)} decision(s) of the planner could not "
                  f"be applied, first: {result.rejected_decisions[0]}", file=sys.stderr)
        results.append(result)
        summaries[policy] = summarize(result)
        (out / f"jobs-{policy}.csv").write_text(jobs_csv(result), encoding="utf-8")
    (out / "summary.json").write_text(json.dumps(summaries, indent=2) + "\n", encoding="utf-8")
    print(table(results, summaries))
    line = comparison(summaries)
    if line:
        print(line)
    for r in results:
        if r.policy == "elastic":
            print(f"elastic: {r.plan_calls} planning cycles ({r.plan_seconds:.1f}s in plan_cycle), "
                  f"{r.cycles_skipped} skipped as idle; simulated in {r.wall_seconds:.1f}s")
    if not args.no_plots:
        if have_matplotlib():
            for path in write_plots(results, out):
                print(f"wrote {path}")
        else:
            print(MISSING, file=sys.stderr)
    print(f"wrote {out / 'summary.json'}")
    return 0
