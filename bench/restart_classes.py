"""Where each class of job (elastic/rigid x max workers) loses or gains against static-max, and a
sweep of one queue setting over seeds (issue 19: "elasticity must pay for itself for every class").

    .venv/bin/python bench/restart_classes.py [--seeds 1,2,3] [--set minWorkersToShrink=0,3,4,5]
        [--min-fraction 0,0.5,0.75,1] [--config FILE] [--checkpoint-interval 1800]
        [--restart-cost-model torchrun,kit,fixed] [--restart-seconds 25] [--restart-penalty S] [--classes]

For every seed of the bundled mix, restart cost model (``--restart-cost-model``, several side by
side) and value of the swept setting (applied to the config's defaults and every queue), one
simulation at a time: the issue's target row (restarts per job, average and p99 JCT against
static-max, the gangs' average and p99 wait for their first placement in seconds, the worst class
with 5 jobs or more, and volcano-gang's average JCT and restarts per job on the same trace).
With ``--classes``, each class's JCT against static-max split into what adds up to it, per job and
summed over the class's finished jobs, divided by static-max's summed JCT:

    JCT ratio = 1 + queueing + below max + lost work + restart penalty

- queueing: its wait for its gang (start - submit) against static-max's;
- restart penalty: the seconds without progress after its scale events (the restart cost model's);
- lost work: the work redone after restarts (``lost_work``) at the job's average rate;
- below max: the rest of its run time beyond static-max's, i.e. running on fewer workers than its
  max (rigid jobs: 0).

A class whose ratio is mostly "queueing" waits for room that no elastic worker above its min could
give (the planner's reasons say so: the queue's own workers above min cannot bring it under its
share); "below max" is room the job never got; "lost work" and "penalty" are what restarts cost.

``--min-fraction F,...``: the same sweep over the jobs' own min instead of a queue setting: every job
of the trace runs elastic with its min raised to ``ceil(F x max)`` (what researchers get by asking
for a larger ``elasticPolicy.minReplicas``: their gang is admitted larger and they run below max less,
but they wait longer for it). Static-max and volcano-gang run the trace unchanged, so ``F = 1`` is
static-max itself (every ratio 1) and ``F = 0`` the trace as it is: the curve between them is the
trade-off between the per-class target and what elasticity gains.
Numbers, not pass/fail; seed 1 is the bundled example's trace.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))  # last: PYTHONPATH (another checkout) wins
sys.path.append(str(Path(__file__).resolve().parent))

from restart_costs import add_cost_flags, cost_models, cost_settings, measures  # bench/: through sys.path

from elastic_controller.config import load_config_file
from elastic_controller.policy.settings import ElasticConfig, QueuePolicy
from elastic_controller.simulate.cluster import load_cluster
from elastic_controller.simulate.engine import SimResult, SimSettings, simulate
from elastic_controller.simulate.generate import GeneratorOptions, generate
from elastic_controller.simulate.report import percentile
from elastic_controller.simulate.trace import JobSpec


def with_setting(cfg: ElasticConfig, key: str, value: Any) -> ElasticConfig:
    """``cfg`` with ``key`` set to ``value`` in its defaults and every queue."""
    def one(q: QueuePolicy) -> QueuePolicy:
        return dataclasses.replace(q, **{key: value})
    return dataclasses.replace(cfg, defaults=one(cfg.defaults), queues={k: one(v) for k, v in cfg.queues.items()})


def with_min_fraction(jobs: list[JobSpec], fraction: float) -> list[JobSpec]:
    """``jobs`` with every min raised to ``ceil(fraction x max)`` (never above max; the webhook's rules
    for ``worker_counts`` are kept: a count below the new min is dropped, and the new min joins them)."""
    out = []
    for job in jobs:
        lo = min(job.max_workers, max(job.min_workers, math.ceil(fraction * job.max_workers - 1e-9)))
        if lo == job.min_workers:
            out.append(job)
            continue
        counts = job.worker_counts
        if counts and lo == job.max_workers:
            counts = ()  # rigid now
        elif counts:
            counts = tuple(sorted({lo, *(c for c in counts if c > lo)}))
        out.append(dataclasses.replace(job, min_workers=lo, worker_counts=counts))
    return out


def parse_fractions(text: str) -> list[float]:
    """``--min-fraction`` values: numbers in [0, 1]; ValueError names the bad one."""
    out = []
    for part in text.split(","):
        try:
            f = float(part)
        except ValueError:
            raise ValueError(f"{part!r} is not a number") from None
        if not 0.0 <= f <= 1.0:
            raise ValueError(f"{part!r} is outside [0, 1]")
        out.append(f)
    return out


def parse_value(key: str, text: str) -> Any:
    default = getattr(QueuePolicy(), key)
    if text == "null":
        return None
    if isinstance(default, bool):
        return text == "true"
    if isinstance(default, float):
        return float(text)
    return int(text)


def decompose(result: SimResult, base: SimResult, specs: dict[str, JobSpec]) -> list[tuple[Any, ...]]:
    """Per class: (kind, max workers, jobs, JCT ratio, queueing, below max, lost work, penalty)."""
    ref = {j.name: j for j in base.jobs}
    sums: dict[tuple[str, int], list[float]] = {}
    for j in result.jobs:
        spec, b = specs[j.name], ref[j.name]
        kind = "rigid" if spec.min_workers == spec.max_workers else "elastic"
        s = sums.setdefault((kind, spec.max_workers), [0.0] * 7)
        s[6] += 1
        if not (j.finished and b.finished):
            continue
        run, run_base = j.finish - j.start, b.finish - b.start
        pen = j.restart_seconds
        rate = (spec.work + j.lost_work) / max(1.0, run - pen)
        lost = j.lost_work / rate if rate > 0 else 0.0
        s[0] += b.jct
        s[1] += j.jct
        s[2] += j.queueing - b.queueing
        s[3] += run - run_base - pen - lost
        s[4] += lost
        s[5] += pen
    out = []
    for (kind, mx), s in sorted(sums.items()):
        if s[6] < 5 or s[0] <= 0:
            continue
        out.append((kind, mx, int(s[6]), s[1] / s[0], s[2] / s[0], s[3] / s[0], s[4] / s[0], s[5] / s[0]))
    return out


def waits(result: SimResult) -> tuple[float, float]:
    """The average and p99 wait of the jobs' gangs for their first placement (start - submit)."""
    w = [j.queueing for j in result.jobs if j.start >= 0]
    return (sum(w) / len(w), percentile(w, 99)) if w else (0.0, 0.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--set", action="append", default=[],
                    help="KEY=V1,V2,...: a queue setting to sweep (default: none); repeat it for several sweeps "
                    "on the same traces (then the config's row comes first)")
    ap.add_argument("--config", default=None)
    ap.add_argument("--checkpoint-interval", type=float, default=1800.0)
    add_cost_flags(ap)
    ap.add_argument("--min-fraction", default="", metavar="F,...",
                    help="sweep the jobs' own min instead: every job's min raised to ceil(F x max) under elastic "
                         "(0: the trace as it is, 1: static-max); not with --set")
    ap.add_argument("--classes", action="store_true", help="print each class's JCT ratio split into its parts")
    ap.add_argument("--no-gang", action="store_true", help="skip volcano-gang (its columns print as 0)")
    args = ap.parse_args()
    root = Path(__file__).resolve().parents[1]
    cluster = load_cluster(root / "elastic_controller" / "examples" / "sim" / "cluster.yaml")
    base_cfg = load_config_file(args.config)
    models = cost_models(args)
    sweeps: list[tuple[str, str]] = [] if len(args.set) == 1 else [("", "")]  # (key, value); "": the config
    for one in args.set:
        key, _, text = one.partition("=")
        if key not in {f.name for f in dataclasses.fields(QueuePolicy)} or not text:
            ap.error(f"--set {one!r}: expected KEY=V1,V2 with KEY a queue setting")
        sweeps += [(key, v) for v in text.split(",")]
    fractions: list[float | None] = [None]
    if args.min_fraction:
        if args.set:
            ap.error("--min-fraction and --set sweep different things: give one of them")
        try:
            fractions = list(parse_fractions(args.min_fraction))
        except ValueError as e:
            ap.error(f"--min-fraction {args.min_fraction!r}: {e}")
    print(f"{'setting':<26} {'model':<8} {'seed':>4} {'restarts/job':>12} {'avg JCT':>8} {'p99 JCT':>8} "
          f"{'avg wait':>8} {'p99 wait':>8} {'worst class':>20} {'gang avg JCT':>12} {'gang r/job':>10}")
    # static-max and volcano-gang do not run the agent: the queue settings swept do not reach them, so
    # they run once per seed and cost model
    peers: dict[tuple[int, str], tuple[SimResult, dict[str, Any]]] = {}
    for seed in (int(s) for s in args.seeds.split(",")):
        jobs = generate(cluster, GeneratorOptions(jobs=500, load=1.0, seed=seed))
        specs = {j.name: j for j in jobs}
        for model in models:
            settings = SimSettings(checkpoint_interval=args.checkpoint_interval, **cost_settings(args, model))
            for (key, text), fraction in ((kv, f) for kv in sweeps for f in fractions):
                t0 = time.perf_counter()
                cfg = with_setting(base_cfg, key, parse_value(key, text)) if key else base_cfg
                label = f"{key}={text}" if key else f"minFraction={fraction:g}" if fraction is not None else "(config)"
                if (seed, model) not in peers:
                    static = simulate(jobs, cluster, cfg, "static-max", settings)
                    gang = ({"avgRatio": 0.0, "restartsPerJob": 0.0} if args.no_gang else
                            measures(simulate(jobs, cluster, cfg, "volcano-gang", settings), static, specs))
                    peers[seed, model] = static, gang
                static, gang = peers[seed, model]
                trace = jobs if fraction is None else with_min_fraction(jobs, fraction)
                result = simulate(trace, cluster, cfg, "elastic", settings)
                m = measures(result, static, specs)
                ratio, name = m["worstClass"]
                avg_wait, p99_wait = waits(result)
                print(f"{label:<26} {model:<8} {seed:>4} {m['restartsPerJob']:>12.2f} {m['avgRatio']:>7.3f}x "
                      f"{m['p99Ratio']:>7.3f}x {avg_wait:>7.0f}s {p99_wait:>7.0f}s {name:>13} {ratio:.2f}x "
                      f"{gang['avgRatio']:>11.3f}x {gang['restartsPerJob']:>10.2f}", flush=True)
                if args.classes:
                    for kind, mx, n, r, q, below, lost, pen in decompose(result, static, specs):
                        print(f"{'':>40} {kind:<7} max {mx:>2} ({n:>3} jobs): {r:.2f}x = 1 {q:+.2f} queueing "
                              f"{below:+.2f} below max {lost:+.2f} lost work {pen:+.2f} penalty")
                print(f"  ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
