"""Benchmark: our eviction plans against the exhaustive optimum on random small instances.

Each instance has one starving gang and at most 12 candidate victims. The optimum is the cheapest
victim set under the planner's objective (issue 19: every worker of a disrupted job restarts, so
the fewest disrupted jobs first, then the fewest victims), among sets obeying the same
admissibility rules (priority, cooldown, minimum runtime, never below min, minWorkersToShrink,
queue shares, and issue 20's allowed counts: every job left at one of them; ``--with-counts`` of
the jobs carry some), that
makes every needed pod fit according to the same fit function (``fit.place_all``) and keeps the
gang's queue within its deserved share as Volcano counts it (its own queue's victims cover
``World.share_excess``). Prints how often we match it, our disrupted jobs and victims over the
optimum's on average, how often we ``wait`` where a plan exists, and (must be 0) how often we
evict where the optimum says no set fits.

    .venv/bin/python bench/plan_optimal.py [--instances 500] [--seed 7] [--with-counts 0.3]
                                           [--min-workers-to-shrink N]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from elastic_controller.policy.cooldowns import old_enough
from elastic_controller.policy.cycle import plan_cycle
from elastic_controller.policy.fit import place_all, pod_demand
from elastic_controller.policy.keys import WORKER_COUNTS, WORKER_STEP
from elastic_controller.policy.model import PodView, Snapshot
from elastic_controller.policy.parse import parse_objects
from elastic_controller.policy.settings import ElasticConfig, QueuePolicy
from elastic_controller.policy.world import World, build_world, is_candidate_role, job_id
from tests.harness.builders import NOW, ago, gang, job_pod, node, podgroup, priority_class, queue

GPU = "nvidia.com/gpu"
MAX_CANDIDATES = 12


def contract(rnd: random.Random, min_r: int, max_r: int) -> dict[str, str]:
    """Issue 20's annotations for a job with Worker bounds [min_r, max_r]: a step, or counts holding min."""
    if rnd.random() < 0.5:
        return {WORKER_STEP: str(rnd.randint(1, 3))}
    rest = [c for c in range(min_r + 1, max_r + 1) if rnd.random() < 0.5]
    return {WORKER_COUNTS: ",".join(map(str, [min_r, *rest]))}


def instance(rnd: random.Random, with_counts: float = 0.0) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [priority_class("low", 10), priority_class("high", 1000),
                                  queue("qa", weight=rnd.randint(1, 3)),
                                  queue("qb", weight=rnd.randint(1, 3), reclaimable=rnd.random() < 0.8)]
    free: dict[str, int] = {}
    for i in range(rnd.randint(2, 4)):
        gpus = rnd.choice([4, 8, 8])
        objs.append(node(f"n{i}", gpus=gpus, labels={"zone": rnd.choice("ab")}))
        free[f"n{i}"] = gpus
    candidates = 0
    for j in range(rnd.randint(2, 5)):
        name = f"j{j}"
        gpus = rnd.choice([1, 1, 2, 4])
        min_r = rnd.randint(1, 2)
        max_r = min_r + rnd.randint(1, 4)
        q = rnd.choice(["qa", "qa", "qb"])
        cooling = rnd.random() < 0.15
        job_objs = [podgroup("ns", name, min_r, q, rnd.choice(["", "", "low", "high"]),
                             last_scale=ago(60) if cooling else None, created=ago(7200))]
        if with_counts and rnd.random() < with_counts:  # (no draw at 0: the inputs before issue 20)
            job_objs[0]["metadata"]["annotations"].update(contract(rnd, min_r, max_r))
        nn = f"{min_r}:{max_r}"
        trial, added = dict(free), 0
        for i in range(max_r):
            fits = sorted(n for n, f in trial.items() if f >= gpus)
            elastic = i >= min_r
            if not elastic and not fits:
                break  # its min set would be a waiting gang of its own: leave the job out
            if not fits or (elastic and candidates + added >= MAX_CANDIDATES):
                gates = ["volcano-elastic.io/scale-up"] if elastic else []
                job_objs.append(job_pod("ns", name, "worker", i, nnodes=nn, gpus=gpus, gates=gates,
                                        created=ago(7200)))
                continue
            n = rnd.choice(fits)
            trial[n] -= gpus
            added += elastic
            job_objs.append(job_pod("ns", name, "worker", i, nnodes=nn, gpus=gpus, node_name=n, created=ago(7200),
                                    scheduled_at=ago(30 if rnd.random() < 0.1 else 3600)))
        else:
            free, candidates = trial, candidates + added
            objs.extend(job_objs)
    members = rnd.randint(1, 3)
    g = gang("ns", "g", members=members, gpus=rnd.choice([1, 2, 2, 4, 4, 8]), queue=rnd.choice(["qa", "qa", "qb"]),
             priority_class=rnd.choice(["", "low", "high", "high"]))
    if rnd.random() < 0.2:
        for p in g[1:]:
            p["spec"]["nodeSelector"] = {"zone": rnd.choice("ab")}
    return objs + g


def admissible(world: World, gang_key: str, victims: tuple[PodView, ...]) -> bool:
    """The admissibility rules of ARCHITECTURE.md, "The agent's cycle", step 3, applied to a whole victim set."""
    pg = world.podgroups[gang_key]
    gang_prio = world.snapshot.priority_classes.get(pg.priority_class_name, 0)
    per_job: Counter[str] = Counter()
    per_queue: Counter[str] = Counter()
    for v in victims:
        job = world.jobs[job_id(v)]
        policy = world.policy(job.queue)
        if job.bounds is None or job.priority > gang_prio:
            return False
        if job.cooling and not policy.preemptDuringCooldown:
            return False
        if not old_enough(v.scheduled_at, policy.minRuntimeSeconds, world.now):
            return False
        if job.running_workers < policy.minWorkersToShrink:
            return False
        per_job[job.key] += 1
        if job.running_workers - per_job[job.key] < job.bounds.min_replicas:
            return False
        per_queue[job.queue] += v.requests.get(world.dominant, 0)
    for jid, n in per_job.items():  # issue 20: only to an allowed count (worker-counts / worker-step)
        job = world.jobs[jid]
        assert job.pg is not None and job.bounds is not None
        if job.running_workers - n not in job.pg.worker_sizes.allowed(job.bounds.min_replicas, job.bounds.max_replicas):
            return False
    dom = world.dominant
    for q, amount in per_queue.items():
        if q == pg.queue:
            continue
        share, mine = world.shares.get(q), world.shares.get(pg.queue)
        if share is None or mine is None or not share.reclaimable:
            return False
        if mine.allocated.get(dom, 0) >= mine.deserved.get(dom, 0):
            return False
        if share.allocated.get(dom, 0) - amount < share.deserved.get(dom, 0):
            return False
    return True


def cost(victims: tuple[PodView, ...] | list[PodView]) -> tuple[int, int]:
    """(jobs disrupted, victims): the objective, smallest first."""
    return len({job_id(v) for v in victims}), len(victims)


def optimum(world: World, gang_key: str, needed: list[PodView]) -> tuple[tuple[int, int] | None, int]:
    """(cost of the cheapest admissible victim set that makes ``needed`` fit or None, candidates)."""
    cands = [p for ps in world.pods_by_group.values() for p in ps if is_candidate_role(p) and p.group_key != gang_key]
    base = world.future_capacity()
    gang = next(g for g in world.waiting if g.key == gang_key)
    excess = world.share_excess(gang)  # Volcano places it only within its queue's deserved share
    dom = world.dominant
    best: tuple[int, int] | None = None
    for k in range(len(cands) + 1):
        if best is not None and best[0] <= 1 and k > best[1]:
            break  # more victims, and no set disrupts fewer than one job
        for subset in combinations(cands, k):
            if not admissible(world, gang_key, subset):
                continue
            own = sum(v.requests.get(dom, 0) for v in subset if world.jobs[job_id(v)].queue == gang.queue)
            if own < excess:
                continue
            cap = base.copy()
            for v in subset:
                cap.give(v.node_name, pod_demand(v))
            if place_all(needed, cap) is not None:
                if k == 0:
                    return (0, 0), len(cands)
                c = cost(subset)
                if best is None or c < best:
                    best = c
    return best, len(cands)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instances", type=int, default=500)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--with-counts", type=float, default=0.3, metavar="FRACTION",
                    help="share of jobs with volcano-elastic.io/worker-counts or worker-step (issue 20); "
                         "0 gives the inputs measured before it (default 0.3)")
    ap.add_argument("--min-workers-to-shrink", type=int, default=QueuePolicy().minWorkersToShrink,
                    help="the queues' minWorkersToShrink (default: the config default; 0 lets every "
                         "instance's small jobs give, which makes more instances need victims)")
    args = ap.parse_args()
    rnd = random.Random(args.seed)
    cfg = ElasticConfig(defaults=QueuePolicy(maxEvictionsPerCycle=64, minWorkersToShrink=args.min_workers_to_shrink))
    stats: Counter[str] = Counter()
    ratios: list[float] = []  # disrupted jobs: ours / optimum's
    victim_ratios: list[float] = []
    worst: list[tuple[float, int]] = []
    t0 = time.perf_counter()
    for i in range(args.instances):
        objs = instance(rnd, args.with_counts)
        snap: Snapshot
        snap, warnings = parse_objects(objs, cfg)
        assert not [w for w in warnings if "not used" not in w], warnings
        world = build_world(snap, cfg, NOW)
        plan = plan_cycle(snap, cfg, NOW)
        (decision,) = [d for d in plan.starving if d.pod_group == "ns/g"] or [None]
        if decision is None:
            stats["not starving (pods not all created?)"] += 1
            continue
        pods = {p.key: p for p in snap.pods}
        needed = [pods[k] for k in decision.needed]
        best, _ = optimum(world, "ns/g", needed)
        stats["instances"] += 1
        ours = cost([pods[k] for k in decision.victims]) if decision.decision == "evict" else None
        if ours is not None and not admissible(world, "ns/g", tuple(pods[k] for k in decision.victims)):
            stats["BUG: our victims break an admissibility rule"] += 1
        if best is None:
            stats["optimum: no set fits"] += 1
            if ours is not None:
                stats["BUG: we evict where the optimum says no set fits"] += 1
        elif best == (0, 0):
            stats["fits without victims"] += 1
            if ours is not None:
                stats["BUG: we evict although it fits"] += 1
        else:
            stats["optimum: needs victims"] += 1
            if ours is None:
                stats["we wait although a plan exists"] += 1
                stats[f"  wait reason: {decision.reason.split(';')[0][:60]}"] += 1
            else:
                ratios.append(ours[0] / best[0])
                victim_ratios.append(ours[1] / best[1])
                stats["we match the optimum" if ours == best else "we cost more than the optimum"] += 1
                worst.append((ours[0] / best[0], i))
                if ours < best:
                    stats["BUG: fewer than the optimum (admissibility mismatch)"] += 1
    elapsed = time.perf_counter() - t0
    print(f"{args.instances} random instances (<= {MAX_CANDIDATES} candidate victims, {args.with_counts:.0%} of "
          f"jobs with allowed counts), seed {args.seed}, {elapsed:.1f} s")
    for k, v in sorted(stats.items(), key=lambda kv: (kv[0].startswith("  "), kv[0])):
        print(f"  {k:<60} {v}")
    if ratios:
        print(f"  our disrupted jobs / optimum's over {len(ratios)} plans: mean {sum(ratios) / len(ratios):.3f} "
              f"(target <= 1.1), max {max(ratios):.2f}")
        print(f"  our victims / optimum's: mean {sum(victim_ratios) / len(victim_ratios):.3f}, "
              f"max {max(victim_ratios):.2f}")
    needs = stats["optimum: needs victims"]
    if needs:
        print(f"  wait where a plan exists: {stats['we wait although a plan exists'] / needs:.1%} of instances needing "
              "victims")
    return 0


if __name__ == "__main__":
    sys.exit(main())
