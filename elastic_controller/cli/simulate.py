"""``volcano-elastic simulate``: what-if analysis of a job trace on a simulated cluster."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..policy.settings import SHARE_PLUGINS, SharesConfig
from .common import add_config_flag, load_config_or_exit

if TYPE_CHECKING:
    from ..simulate.restarts import RestartCost

HELP = ("simulate a job trace on a cluster under elastic, volcano-gang, static-max, static-min and tiresias "
        "scheduling")

POLICY_CHOICES = ("elastic", "volcano-gang", "static-max", "static-min", "tiresias", "all")
# --example --seeds: the generator's settings of the bundled trace (examples/sim/README)
EXAMPLE_JOBS, EXAMPLE_LOAD = 500, 1.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_argument_group("input")
    src.add_argument("--trace", metavar="FILE", help="job trace: our CSV/YAML, Helios cluster_log.csv, "
                     "Alibaba openb_pod_list_*.csv, Philly (Pollux layout) or Tiresias CSV (see docs/simulate.md)")
    src.add_argument("--cluster", metavar="FILE", help="cluster YAML: node pools and queues")
    src.add_argument("--example", action="store_true",
                     help="use the bundled 64-node / 512-GPU cluster and 500-job trace")
    src.add_argument("--generate", type=int, metavar="N",
                     help="instead of --trace, generate N synthetic jobs for the cluster (seeded by --seed)")
    src.add_argument("--load", type=float, default=1.2,
                     help="offered load of generated jobs, at max size (default: 1.2)")
    src.add_argument("--trace-format", default="auto",
                     choices=("auto", "csv", "yaml", "helios", "alibaba", "philly", "tiresias"),
                     help="format of --trace (default: from the suffix and header)")
    src.add_argument("--min-fraction", type=float, default=0.5,
                     help="imported traces: min workers = ceil(max * F) (default: 0.5)")
    src.add_argument("--worker-gpus", type=int, default=0, metavar="N",
                     help="imported traces: split each job into workers of N GPUs (default: as traced)")
    src.add_argument("--limit", type=int, default=0, metavar="N",
                     help="imported traces: keep the first N GPU jobs")
    src.add_argument("--elastic-fraction", type=float, default=1.0, metavar="F",
                     help="imported traces: the share of multi-worker jobs made elastic, drawn with --seed "
                     "(the others stay rigid, min = max; default: 1.0)")
    src.add_argument("--worker-counts-fraction", type=float, default=0.0, metavar="F",
                     help="the share of elastic jobs (without workerCounts of their own) that run only at powers "
                     "of two workers between min and max (workerCounts 2|4|8), drawn with --seed and the job's "
                     "name (default: 0, none)")
    sim = parser.add_argument_group("simulation")
    sim.add_argument("--policy", default="all", choices=POLICY_CHOICES, help="default: all")
    add_config_flag(sim, "cooldowns etc.; default: defaults", metavar="FILE")
    sim.add_argument("--shares", choices=SHARE_PLUGINS, default=None,
                     help="the Volcano plugin that divides the cluster between queues, for the simulated "
                     "Volcano and the agent alike: proportion (weights) or capacity (the cluster file's "
                     "deserved, guarantee, capability; parent with --hierarchy); default: config "
                     "shares.plugin (proportion)")
    sim.add_argument("--hierarchy", action="store_true",
                     help="with --shares capacity: hierarchical queues (the plugin's enableHierarchy; the "
                     "cluster file's parent); the same as config shares.hierarchy: true")
    sim.add_argument("--seed", type=int, default=1,
                     help="seed of the synthetic generator and of --elastic-fraction's draw (default: 1)")
    sim.add_argument("--seeds", metavar="LIST",
                     help="generated traces: run every seed of LIST (1,2,3 or 1-5), print mean and spread, "
                     "write one summary per seed under --out/seed-N/")
    sim.add_argument("--restart-cost-model", choices=("torchrun", "kit", "fixed"), default=None,
                     help="what a scale event stalls a job (every worker restarts): torchrun (its c10d "
                     "rendezvous: detection 1.5s, + 12.5s keep-alive expiry after a removal, + the last call "
                     "(--last-call-timeout) while the new size is below max or 0.5s at max, + --restart-seconds), "
                     "kit (the job kit's launcher: its round completes when the announced size joined: "
                     "detection 1.5s, + 5s after a removal, + 0.5s, + --restart-seconds) or fixed "
                     "(--restart-seconds after every event); the work since the last checkpoint is lost on "
                     "top (default: torchrun, or fixed with --restart-penalty; docs/simulate.md)")
    sim.add_argument("--restart-seconds", type=float, default=None, metavar="SECONDS",
                     help="the fixed restart part of every scale event: process start, imports, model build, "
                     "checkpoint load (default: 25, a GPU job of about a billion parameters; measured 12-64s "
                     "on a GPU by model size, 2-7s for torch on CPU)")
    sim.add_argument("--last-call-timeout", type=float, default=30.0, metavar="SECONDS",
                     help="--restart-cost-model torchrun: the jobs' c10d last_call_timeout (rdzvConf; "
                     "default: 30, torchrun's)")
    sim.add_argument("--restart-penalty", type=float, default=None, metavar="SECONDS",
                     help="the same stall after every scale event, whatever it is: the fixed model with "
                     "--restart-seconds SECONDS (the simulator's model before the measured costs; was 60)")
    sim.add_argument("--checkpoint-interval", type=float, default=1800.0, metavar="SECONDS",
                     help="a job checkpoints after every SECONDS of progress; a restart loses the work since "
                     "its last checkpoint (default: 1800; 0: off, nothing lost)")
    sim.add_argument("--checkpoint-on-notice", type=float, default=None, metavar="SECONDS",
                     help="elastic, queues with noticeSeconds > 0 (--config): a job under an eviction notice "
                     "records a checkpoint SECONDS after it, and its victims are evicted at the next agent cycle "
                     "(0 or more; default: the job checkpoints as its notice ends; its victims hold their GPUs for "
                     "all of it)")
    sim.add_argument("--tiresias-thresholds", default="8,64", metavar="GPU-HOURS",
                     help="tiresias: the 2D-LAS queue thresholds on attained service, ascending GPU-hours "
                     "(default: 8,64: three queues; empty: one queue, FIFO without preemption)")
    sim.add_argument("--tiresias-promote-knob", type=float, default=8.0, metavar="K",
                     help="tiresias: a job that waited K times the time it has run goes back to the highest "
                     "queue (default: 8)")
    sim.add_argument("--no-whole-bundle", action="store_true",
                     help="volcano-gang: gangpreempt/gangreclaim take only SAFE bundles (allowWholeBundle: false)")
    sim.add_argument("--pod-cooldown", type=float, default=0.0, metavar="SECONDS",
                     help="volcano-gang: pods placed less than SECONDS ago are no victims (the cdp plugin's "
                     "cooldown; default: 0, off)")
    sim.add_argument("--capacity-first-tier", action="store_true",
                     help="volcano-gang with --shares capacity: the capacity plugin in the scheduler's first tier, "
                     "so its victim rules (guarantee, deserved) filter gangreclaim's victims (default: second "
                     "tier, where Volcano does not consult them; docs/simulate.md)")
    sim.add_argument("--no-enqueue", action="store_true",
                     help="do not model Volcano's enqueue admission (every PodGroup Inqueue at once)")
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


def _sha256(path: str | None) -> str | None:
    import hashlib
    from pathlib import Path

    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else None
    except OSError:
        return None


def run_inputs(args: argparse.Namespace, trace: str, seed: int, plugin: str, hierarchy: bool,
               policies: list[str]) -> dict[str, Any]:
    """summary.json's ``inputs``: enough to run it again (files by path and SHA-256, the seed, every
    flag) and the version that made it."""
    from .. import __version__

    flags = {k: v for k, v in sorted(vars(args).items()) if not k.startswith("_") and k != "command"}
    return {
        "version": __version__,
        "trace": trace, "traceSha256": _sha256(args.trace),
        "cluster": args.cluster or "<example>/cluster.yaml", "clusterSha256": _sha256(args.cluster),
        "config": args.config, "configSha256": _sha256(args.config),
        "seed": seed if (args.seeds or args.generate or args.example) else None,
        "policies": policies, "shares": {"plugin": plugin, "hierarchy": hierarchy},
        "flags": flags,
    }


def _restart_cost(args: argparse.Namespace) -> RestartCost | str:
    """The restart cost model of the flags, or what is wrong with them."""
    from ..simulate.restarts import DEFAULT_RESTART_SECONDS, RestartCost

    if args.restart_penalty is not None:
        if args.restart_cost_model not in (None, "fixed"):
            return (f"--restart-penalty is the fixed model: not with --restart-cost-model {args.restart_cost_model} "
                    "(give its fixed restart part as --restart-seconds)")
        if args.restart_seconds is not None and args.restart_seconds != args.restart_penalty:
            return "--restart-penalty and --restart-seconds give the fixed penalty twice: give one of them"
        return RestartCost(model="fixed", restart=args.restart_penalty)
    seconds = DEFAULT_RESTART_SECONDS if args.restart_seconds is None else args.restart_seconds
    return RestartCost(model=args.restart_cost_model or "torchrun", restart=seconds,
                       last_call=args.last_call_timeout)


def run(args: argparse.Namespace) -> int:
    from importlib.resources import files
    from pathlib import Path

    from ..simulate.cluster import ClusterSpec, load_cluster, parse_cluster
    from ..simulate.engine import POLICIES, SimSettings
    from ..simulate.generate import GeneratorOptions, generate, with_worker_counts
    from ..simulate.plots import MISSING, have_matplotlib, write_plots
    from ..simulate.quota import capacity_problems
    from ..simulate.restarts import describe as describe_restart_cost
    from ..simulate.runner import print_run, run_policies
    from ..simulate.scaling import CurveError, parse_curve
    from ..simulate.seeds import class_ratio_table, parse_seeds, seeds_table
    from ..simulate.tiresias import NAME as TIRESIAS
    from ..simulate.tiresias import tiresias_params
    from ..simulate.trace import ImportOptions, JobSpec, TraceError, dump_csv, load_trace, parse_own_csv
    from ..simulate.validate import check_jobs

    cfg = load_config_or_exit(args, "simulate")
    # One share model for the simulated Volcano and the agent it drives: the flags override config shares.
    plugin = args.shares or cfg.shares.plugin
    hierarchy = args.hierarchy or (cfg.shares.hierarchy and plugin == cfg.shares.plugin)
    if hierarchy and plugin != "capacity":
        return _fail("--hierarchy (shares.hierarchy) needs --shares capacity: Volcano's proportion plugin is flat")
    if args.capacity_first_tier and plugin != "capacity":
        return _fail("--capacity-first-tier needs --shares capacity")
    cfg = replace(cfg, shares=SharesConfig(plugin=plugin, hierarchy=hierarchy))
    try:
        curve = parse_curve(args.scaling_efficiency)
    except CurveError as exc:
        return _fail(str(exc))
    if any(v is not None and v < 0 for v in (args.restart_penalty, args.restart_seconds)) or (
            args.last_call_timeout < 0 or args.grace_period < 0 or args.cycle_seconds < 0
            or args.checkpoint_interval < 0 or args.pod_cooldown < 0):
        return _fail("--restart-penalty, --restart-seconds, --last-call-timeout, --grace-period, --cycle-seconds, "
                     "--checkpoint-interval and --pod-cooldown must not be negative")
    restart_cost = _restart_cost(args)
    if isinstance(restart_cost, str):
        return _fail(restart_cost)
    tiresias = tiresias_params(args.tiresias_thresholds, args.tiresias_promote_knob)
    if isinstance(tiresias, str):
        return _fail(tiresias)
    if args.checkpoint_on_notice is not None and not args.checkpoint_on_notice >= 0:
        return _fail(f"--checkpoint-on-notice {args.checkpoint_on_notice:g}: write the seconds after the notice "
                     "begins at which a job under notice checkpoints (0 or more); leave it out to have jobs "
                     "checkpoint as their notice ends")
    if not 0 < args.min_fraction <= 1:
        return _fail("--min-fraction must be in (0, 1]")
    if not 0 <= args.elastic_fraction <= 1:
        return _fail("--elastic-fraction must be in [0, 1]")
    if not 0 <= args.worker_counts_fraction <= 1:
        return _fail("--worker-counts-fraction must be in [0, 1]")
    if args.worker_gpus < 0:
        return _fail("--worker-gpus must not be negative")
    if args.example and (args.trace or args.cluster or args.generate):
        return _fail("--example replaces --trace, --cluster and --generate")
    if not args.example and not args.cluster:
        return _fail("give --cluster FILE (with --trace FILE or --generate N), or --example")
    if not args.example and bool(args.trace) == bool(args.generate):
        return _fail("give exactly one of --trace FILE and --generate N")
    seeds: list[int] = []
    if args.seeds:
        if args.trace:
            return _fail("--seeds needs generated traces (--generate N, or --example for the bundled mix)")
        try:
            seeds = parse_seeds(args.seeds)
        except ValueError as exc:
            return _fail(str(exc))

    traces: list[tuple[str, int, list[JobSpec]]] = []  # (name, seed, jobs)
    cluster: ClusterSpec
    try:
        if args.example:
            base = files("elastic_controller") / "examples" / "sim"
            cluster = parse_cluster(base.joinpath("cluster.yaml").read_text(encoding="utf-8"),
                                    "<example>/cluster.yaml")
            if seeds:
                for seed in seeds:
                    traces.append((f"<example mix, seed {seed}>", seed, generate(cluster, GeneratorOptions(
                        jobs=EXAMPLE_JOBS, seed=seed, load=EXAMPLE_LOAD))))
            else:
                traces.append(("<example>/trace.csv", 0, parse_own_csv(
                    base.joinpath("trace.csv").read_text(encoding="utf-8"), "<example>/trace.csv")))
        else:
            cluster = load_cluster(args.cluster)
            if args.generate:
                if args.generate < 1 or args.load <= 0:
                    return _fail("--generate needs N >= 1 and --load > 0")
                for seed in seeds or [args.seed]:
                    traces.append((f"<generated, seed {seed}>", seed, generate(cluster, GeneratorOptions(
                        jobs=args.generate, seed=seed, load=args.load))))
            else:
                traces.append((args.trace, 0, load_trace(args.trace, args.trace_format, ImportOptions(
                    min_fraction=args.min_fraction, worker_gpus=args.worker_gpus,
                    limit=max(0, args.limit), elastic_fraction=args.elastic_fraction, seed=args.seed))))
    except TraceError as exc:
        return _fail(str(exc))
    if args.worker_counts_fraction:
        traces = [(name, seed, with_worker_counts(jobs, args.worker_counts_fraction, seed or args.seed))
                  for name, seed, jobs in traces]

    policies = [*POLICIES, TIRESIAS] if args.policy == "all" else [args.policy]
    tree = sorted(q.name for q in cluster.queues if q.parent)
    if tree and not hierarchy:
        print(f"volcano-elastic simulate: warning: the cluster's queues form a tree ({', '.join(tree)} have a "
              f"parent) but it is simulated flat: 'parent' counts only with --shares capacity --hierarchy",
              file=sys.stderr)
    for name, _, jobs in traces:
        problems = check_jobs(jobs, cluster, policies, name)
        if problems:
            shown = problems[:20]
            more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
            return _fail("the trace cannot run on this cluster:\n  " + "\n  ".join(shown) + more)
        if plugin == "capacity":
            problems = capacity_problems(jobs, cluster, policies, hierarchy, name)
            if problems:
                more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
                return _fail("the trace cannot run under the capacity plugin:\n  " + "\n  ".join(problems[:20])
                             + more)

    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        for _, seed, _ in traces:
            if seeds:
                (out / f"seed-{seed}").mkdir(exist_ok=True)
        if args.write_trace:
            if seeds:
                return _fail("--write-trace writes one trace: not with --seeds")
            Path(args.write_trace).write_text(dump_csv(traces[0][2]), encoding="utf-8")
    except OSError as exc:
        return _fail(f"cannot write output: {exc}")

    settings = SimSettings(restart_cost=restart_cost, grace_period=args.grace_period, curve=curve,
                           cycle_seconds=args.cycle_seconds, checkpoint_interval=args.checkpoint_interval,
                           allow_whole_bundle=not args.no_whole_bundle, pod_cooldown=args.pod_cooldown,
                           enqueue=not args.no_enqueue, capacity_first_tier=args.capacity_first_tier,
                           notice_checkpoint=-1.0 if args.checkpoint_on_notice is None else args.checkpoint_on_notice)
    ckpt = f"every {args.checkpoint_interval:g}s" if args.checkpoint_interval else "off"
    print(f"{cluster.node_count} nodes, {cluster.total_gpus} GPUs; scaling efficiency {curve.describe()}, "
          f"{describe_restart_cost(restart_cost)}, checkpoints {ckpt}, grace period {args.grace_period:g}s; "
          f"queue shares: {plugin}{' (hierarchical)' if hierarchy else ''}")
    notices = sorted({(name, q.noticeSeconds) for name, q in [("defaults", cfg.defaults), *cfg.queues.items()]
                      if q.noticeSeconds > 0})
    if args.checkpoint_on_notice is not None and not notices:
        print("note: --checkpoint-on-notice does nothing: no queue of --config has noticeSeconds > 0",
              file=sys.stderr)
    if notices:
        when = (f"a job under notice checkpoints {args.checkpoint_on_notice:g}s into it"
                if args.checkpoint_on_notice is not None else "a job under notice checkpoints as it ends")
        print("eviction notices (elastic): " + ", ".join(f"{n} {s}s" for n, s in notices) + f"; {when}")
    per_seed = {}
    last = None
    for name, seed, jobs in traces:
        where = out / f"seed-{seed}" if seeds else out
        print(f"\n{name}: {len(jobs)} jobs, {sum(j.work for j in jobs) / 3600:,.0f} GPU-hours of work")
        try:
            last = run_policies(jobs, cluster, cfg, policies, settings, where, progress=not args.no_progress,
                                tiresias=tiresias,
                                label=f"seed {seed} " if seeds else "",
                                inputs=run_inputs(args, name, seed, plugin, hierarchy, policies))
        except OSError as exc:
            return _fail(f"cannot write output: {exc}")
        print_run(last)
        per_seed[seed] = last.summaries
        print(f"wrote {where / 'summary.json'}")
    if seeds and len(seeds) > 1:
        print(f"\nover seeds {', '.join(map(str, seeds))}: mean ±standard deviation (min..max)")
        print(seeds_table(policies, per_seed))
        print("\naverage JCT against static-max per class, mean (min..max) over the seeds:")
        print(class_ratio_table(policies, per_seed))
    if not args.no_plots and last is not None:
        if have_matplotlib():
            for path in write_plots(last.results, out, last.summaries):
                print(f"wrote {path}")
        else:
            print(MISSING, file=sys.stderr)
    return 0
