"""Restart-aware elasticity (issue 19) against its targets: seeds of the bundled mix, each on its own.

    .venv/bin/python bench/restart_costs.py [--seeds 1,2,3] [--checkpoint-interval 1800]
        [--restart-cost-model torchrun] [--restart-seconds 25] [--restart-penalty S]
        [--policies elastic,static-max,volcano-gang] [--config FILE]

Per seed and policy: restarts per job (all jobs, and elastic ones), average and p99 JCT against
static-max's, and the worst class (elastic/rigid x max workers, 5 jobs or more) by its average JCT
against static-max's. Classes are computed here from the per-job results, so the numbers do not
depend on the simulator's own report. Numbers, not pass/fail; seed 1 is the bundled example's trace.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))  # last: PYTHONPATH (another checkout) wins

from elastic_controller.config import load_config_file
from elastic_controller.simulate import engine
from elastic_controller.simulate.cluster import load_cluster
from elastic_controller.simulate.engine import SimResult, SimSettings, simulate
from elastic_controller.simulate.generate import GeneratorOptions, generate
from elastic_controller.simulate.report import percentile
from elastic_controller.simulate.trace import JobSpec


def classes(result: SimResult, specs: dict[str, JobSpec]) -> dict[tuple[str, int], list[Any]]:
    """Jobs by class as traced (a job elastic in the trace stays "elastic" under static-max)."""
    out: dict[tuple[str, int], list[Any]] = {}
    for j in result.jobs:
        spec = specs[j.name]
        kind = "rigid" if spec.min_workers == spec.max_workers else "elastic"
        out.setdefault((kind, spec.max_workers), []).append(j)
    return out


def measures(result: SimResult, base: SimResult | None, specs: dict[str, JobSpec]) -> dict[str, Any]:
    done = [j for j in result.jobs if j.finished]
    jcts = [j.jct for j in done]
    elastic = [j for j in result.jobs if specs[j.name].min_workers < specs[j.name].max_workers]
    out: dict[str, Any] = {
        "restartsPerJob": sum(j.restarts for j in result.jobs) / len(result.jobs),
        "elasticRestartsPerJob": sum(j.restarts for j in elastic) / max(1, len(elastic)),
        "avg": sum(jcts) / len(jcts), "p99": percentile(jcts, 99), "done": len(done),
    }
    if base is not None:
        b = measures(base, None, specs)
        out["avgRatio"] = out["avg"] / b["avg"]
        out["p99Ratio"] = out["p99"] / b["p99"]
        ref = {j.name: j for j in base.jobs}
        worst: tuple[float, str] = (0.0, "")
        rows = []
        for (kind, mx), jobs in sorted(classes(result, specs).items()):
            fin = [j for j in jobs if j.finished and ref[j.name].finished]
            if len(jobs) < 5 or not fin:
                continue
            ratio = sum(j.jct for j in fin) / sum(ref[j.name].jct for j in fin)
            rows.append((kind, mx, len(jobs), ratio, sum(j.restarts for j in jobs) / len(jobs)))
            worst = max(worst, (ratio, f"{kind} x{mx}"))
        out["worstClass"] = worst
        out["classes"] = rows
    return out


def add_cost_flags(ap: argparse.ArgumentParser) -> None:
    """The restart cost flags of ``volcano-elastic simulate`` (``--restart-cost-model`` takes a list)."""
    ap.add_argument("--restart-cost-model", default="torchrun", metavar="M,...",
                    help="torchrun, kit or fixed, or several side by side (default: torchrun)")
    ap.add_argument("--restart-seconds", type=float, default=None,
                    help="the fixed restart part of every event (default: the simulator's, 25)")
    ap.add_argument("--restart-penalty", type=float, default=None,
                    help="the fixed model's penalty (default 60, the simulator's model before issue 29); "
                    "given alone: the fixed model only")


def cost_settings(args: argparse.Namespace, model: str) -> dict[str, Any]:
    """SimSettings keyword arguments for one restart cost model of the flags (a simulator without
    the cost model, another checkout's, gets the fixed penalty)."""
    fields = {f.name for f in dataclasses.fields(SimSettings)}
    if "restart_cost" not in fields:
        penalty = args.restart_penalty if args.restart_penalty is not None else 60.0
        print(f"note: this simulator has no restart cost model: a fixed {penalty:g}s", file=sys.stderr)
        return {"restart_penalty": penalty}
    from elastic_controller.simulate.restarts import DEFAULT_RESTART_SECONDS, RestartCost

    if model == "fixed":
        return {"restart_cost": RestartCost(model="fixed", restart=60.0 if args.restart_penalty is None
                                            else args.restart_penalty)}
    seconds = DEFAULT_RESTART_SECONDS if args.restart_seconds is None else args.restart_seconds
    return {"restart_cost": RestartCost(model=model, restart=seconds)}


def cost_models(args: argparse.Namespace) -> list[str]:
    """The models to run: ``--restart-cost-model``'s (``--restart-penalty`` alone: fixed)."""
    if args.restart_penalty is not None and args.restart_cost_model == "torchrun":
        return ["fixed"]
    return args.restart_cost_model.split(",")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--checkpoint-interval", type=float, default=1800.0)
    add_cost_flags(ap)
    ap.add_argument("--policies", default="elastic,static-max,volcano-gang")
    ap.add_argument("--config", default=None)
    ap.add_argument("--classes", action="store_true", help="print every class of every policy")
    args = ap.parse_args()
    root = Path(__file__).resolve().parents[1]
    cluster = load_cluster(root / "elastic_controller" / "examples" / "sim" / "cluster.yaml")
    cfg = load_config_file(args.config)
    known = set(engine.POLICIES)
    policies = [p for p in args.policies.split(",") if p in known]
    if "static-max" not in policies:
        policies.append("static-max")
    fields = {f.name for f in dataclasses.fields(SimSettings)}
    extra: dict[str, Any] = {}
    if "checkpoint_interval" in fields:
        extra["checkpoint_interval"] = args.checkpoint_interval
    else:
        print("note: this simulator has no checkpoint interval: restarts cost the penalty only", file=sys.stderr)
    settings = SimSettings(**cost_settings(args, cost_models(args)[0]), **extra)
    print(f"{'seed':>4} {'policy':<13} {'restarts/job':>12} {'elastic r/j':>11} {'avg JCT':>8} {'p99 JCT':>8} "
          f"{'worst class':>20}")
    for seed in (int(s) for s in args.seeds.split(",")):
        jobs = generate(cluster, GeneratorOptions(jobs=500, load=1.0, seed=seed))
        results = {}
        for policy in ["static-max", *(p for p in policies if p != "static-max")]:
            t0 = time.perf_counter()
            results[policy] = simulate(jobs, cluster, cfg, policy, settings)
            print(f"  ({policy} {time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
        for policy in policies:
            m = measures(results[policy], results["static-max"], {j.name: j for j in jobs})
            ratio, name = m["worstClass"]
            print(f"{seed:>4} {policy:<13} {m['restartsPerJob']:>12.2f} {m['elasticRestartsPerJob']:>11.2f} "
                  f"{m['avgRatio']:>7.3f}x {m['p99Ratio']:>7.3f}x {name:>14} {ratio:.3f}x", flush=True)
            if args.classes:
                for kind, mx, n, r, rj in m["classes"]:
                    print(f"{'':>18} {kind:<8} max {mx:>2}: {n:>3} jobs, JCT {r:.3f}x, restarts/job {rj:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
