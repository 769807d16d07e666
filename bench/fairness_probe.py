"""Where waiting gangs' and small elastic jobs' time goes under elastic (issue 38's diagnosis).

Runs one elastic simulation with probes (the simulation itself is unchanged) and prints:

- per class (r4: rigid, max 4 workers; e4: elastic, max 4), job-hours waiting for the gang, waiting
  while the free GPUs alone would hold it, while the queue's own elastic workers above min plus the
  free GPUs would; running at max, below max, at min, and below max while a gang of its queue waits
  (which stops the fairness scale-down unless ``fairnessWhileGangsWait``);
- the waiting gangs' hours by the planner's last reason for them (numbers masked), per class;
- why the fairness scale-down did not act: counts over its tries (taker and giver checks).

    python bench/fairness_probe.py --example [simulate's other flags, e.g. --config FILE]
    python bench/fairness_probe.py --cluster elastic_controller/examples/sim/cluster.yaml --generate 500 \\
        --load 1.0 --seed 4

docs/measurements.md, "Where elasticity's extra time goes", quotes its output.
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections import Counter, defaultdict
from typing import Any

from elastic_controller.cli import main as cli_main
from elastic_controller.policy import fairness
from elastic_controller.simulate import engine

HOUR = 3600.0


class Probe:
    def __init__(self) -> None:
        self.hours: defaultdict[tuple[str, str], float] = defaultdict(float)
        self.reasons: defaultdict[tuple[str, str], float] = defaultdict(float)
        self.last_reason: dict[str, str] = {}
        self.tries: Counter[str] = Counter()

    def install(self) -> None:
        decide, advance = engine.decide, engine.Simulator._advance
        may_grow, victims = fairness._may_grow, fairness._victims
        probe = self

        def decide_probed(*a: Any, **k: Any) -> Any:
            d = decide(*a, **k)
            for g in d.plan.starving:
                probe.last_reason[g.pod_group] = re.sub(r"\d+(\.\d+)?", "N", g.reason)
            return d

        def advance_probed(sim: engine.Simulator, t: float) -> None:
            if sim.policy == "elastic" and t > sim.now:
                probe.sample(sim, t - sim.now)
            advance(sim, t)

        def may_grow_probed(world: Any, job: Any, group: str) -> bool:
            ok = may_grow(world, job, group)
            why = ("ok" if ok else "cooling" if job.cooling else "snoozed" if fairness.snoozed(world, job)
                   else "outside its checkpoint window" if not fairness._within_window(world, job, group)
                   else "other")
            probe.tries[f"taker: {why}"] += 1
            return ok

        def victims_probed(world: Any, giver: Any, *a: Any) -> Any:
            out = victims(world, giver, *a)
            group = giver.pg.key if giver.pg is not None else giver.key
            why = ("victims found" if out else "cooling" if giver.cooling
                   else str(fairness._never_gives(world, giver)) if fairness._never_gives(world, giver)
                   else "outside its checkpoint window" if not fairness._within_window(world, giver, group)
                   else "no count of its workers makes the room, or the room is there already")
            probe.tries[f"giver: {why}"] += 1
            return out

        engine.decide = decide_probed  # type: ignore[assignment]
        engine.Simulator._advance = advance_probed  # type: ignore[method-assign]
        fairness._may_grow = may_grow_probed
        fairness._victims = victims_probed

    def sample(self, sim: engine.Simulator, dt: float) -> None:
        free = sim.nodes.free_gpus
        above: Counter[str] = Counter()
        for job in sim.active.values():
            if job.running > 0:
                above[job.queue] += max(0, job.running - job.bounds_min) * job.spec.gpus
        waiting = {job.queue for job in sim.active.values() if job.running == 0 and not job.done}
        for job in sim.active.values():
            kind = ("r" if job.spec.min_workers == job.spec.max_workers else "e") + str(job.spec.max_workers)
            h = self.hours
            if job.running == 0 and not job.done:
                need = job.bounds_min * job.spec.gpus
                h[(kind, "waiting for its gang")] += dt
                h[(kind, "  ... with free GPUs >= its gang")] += dt * (free >= need)
                own = free + above[job.queue] >= need
                h[(kind, "  ... with free + own queue's above-min >= its gang")] += dt * own
                self.reasons[(kind, self.last_reason.get(job.key, "(not planned yet: not starving)"))] += dt
            elif 0 < job.running < job.bounds_max:
                h[(kind, "running below max")] += dt
                h[(kind, "  ... at min")] += dt * (job.running == job.bounds_min)
                h[(kind, "  ... while a gang of its queue waits")] += dt * (job.queue in waiting)
            elif job.running > 0:
                h[(kind, "running at max")] += dt

    def report(self) -> str:
        out = ["== job-hours by class"]
        out += [f"{k[0]:4s} {k[1]:55s} {v / HOUR:9.1f}" for k, v in sorted(self.hours.items())]
        out.append("== waiting gangs' hours by the planner's last reason (over 1 h)")
        out += [f"{k[0]:4s} {v / HOUR:7.1f}  {k[1]}" for k, v in sorted(self.reasons.items(), key=lambda kv: (
            kv[0][0], -kv[1])) if v > HOUR]
        out.append("== the fairness scale-down's tries")
        out += [f"{n:8d}  {why}" for why, n in self.tries.most_common()]
        return "\n".join(out)


def main(argv: list[str]) -> int:
    probe = Probe()
    probe.install()
    with tempfile.TemporaryDirectory() as out:
        cli_main(["simulate", "--policy", "elastic", "--no-plots", "--no-progress", "--out", out, *argv])
    print(probe.report())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
