"""Agent cycle time at N pods, API latency excluded (in-memory API, caches as plain lists).

    .venv/bin/python bench/agent_cycle.py [--pods 5000] [--cycles 30] [--churn 50]
    .venv/bin/python bench/agent_cycle.py --from DUMP [--config FILE] [--now T] [--latency-ms 100]
        [--writers 1,8] [--latency-spread fixed|exp] [--repeat N]

A cycle = snapshot from the caches (views re-parsed only for changed objects) + plan_cycle +
executing its decisions against the in-memory API. Prints JSON: cold and warm cycle times.

``--from``: one cycle on a ``kubectl get nodes,pods,podgroups,queues,priorityclasses,pytorchjobs -A
-o json`` dump (bench/scale_box.py keeps its dump), each API request answered after ``--latency-ms``
(a loaded API server), once per ``--writers`` value (the executor's write concurrency), each on a
fresh copy of the dump: the cycle's seconds split into decide and the rest (writes), its API requests
by verb and kind, and whether every run decided the same plan. ``--save DUMP`` writes the synthetic
world (``--pods``, ``--gangs``: starving gangs that evict) as such a dump.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from elastic_controller.agent import Agent
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube
from elastic_controller.kube.resources import NODES, PODGROUPS, PODS, QUEUES, Resource
from elastic_controller.policy.settings import ElasticConfig
from tests.harness import builders as b

KINDS = {"Node": NODES, "Pod": PODS, "PodGroup": PODGROUPS, "Queue": QUEUES}


class ListStore:
    """What ``Caches`` gives the agent: references to cached dicts, no copies."""

    def __init__(self, kube: FakeKube) -> None:
        self.kube = kube
        self.by_plural: dict[str, dict[tuple[str, str, str], dict[str, Any]]] = {}
        self.refresh()

    def refresh(self) -> None:
        """What the informers do in their own threads as events arrive (not part of a cycle)."""
        self.by_plural = {}
        for key, o in self.kube.objects.items():
            self.by_plural.setdefault(key[0], {})[key] = o

    def items(self, res: Resource) -> list[dict[str, Any]]:
        return list(self.by_plural.get(res.plural, {}).values())

    def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        return self.kube.objects.get((res.plural, (namespace or "") if res.namespaced else "", name))

    def put(self, res: Resource, obj: dict[str, Any]) -> None:
        return None

    def has(self, res: Resource) -> bool:
        return True

    def stale(self) -> list[str]:
        return []


def cluster(pods: int, gangs: int, gpus_per_node: int = 8, members: int = 4,
            pytorchjobs: bool = False) -> list[dict[str, Any]]:
    """Elastic jobs of 10 workers (min 4) fill the nodes (with their PyTorchJobs when ``pytorchjobs``);
    ``gangs`` gangs of ``members`` pods x 2 GPUs starve."""
    jobs = (pods - members * gangs) // 10
    nodes = [f"n{i:04d}" for i in range((jobs * 10 + gpus_per_node - 1) // gpus_per_node)]
    objs: list[Any] = [b.queue("default")] + [b.node(n, gpus=gpus_per_node) for n in nodes]
    for j in range(jobs):
        pinned = [nodes[(j * 10 + k) // gpus_per_node] for k in range(10)]
        for o in b.elastic_job(f"ns{j % 50}", f"job{j}", min_r=4, max_r=10, nodes=pinned):
            objs.append(o)
        if pytorchjobs:
            objs.append(b.pytorchjob(f"ns{j % 50}", f"job{j}", workers=10, min_r=4, max_r=10))
        # round-robin across the job's own pinned nodes keeps every node at 8 GPUs
    for g in range(gangs):
        objs.extend(b.gang(f"gang{g % 10}", f"g{g}", members=members, gpus=2))
    return b.items(*objs)


class SlowKube(FakeKube):
    """The in-memory API with a fixed latency per request (sleeping: other threads run meanwhile),
    every request counted by verb and kind."""

    def __init__(self, latency: float, spread: str = "fixed", seed: int = 1) -> None:
        super().__init__(terminate_on_evict=True)
        self.latency = latency
        self.spread = spread  # "fixed": every request ``latency``; "exp": exponential, ``latency`` on average
        self.rng = random.Random(seed)
        self.requests: dict[str, int] = {}

    def _call(self, verb: str, res: Resource, ns: str | None, name: str, dry_run: bool) -> None:
        key = f"{verb} {res.plural}"
        with self._lock:
            self.requests[key] = self.requests.get(key, 0) + 1
            delay = self.latency if self.spread == "fixed" or self.latency <= 0 else \
                self.rng.expovariate(1 / self.latency)
        time.sleep(delay)
        super()._call(verb, res, ns, name, dry_run)


def from_dump(a: argparse.Namespace) -> int:
    from elastic_controller.config import load_config_file
    from elastic_controller.kube.resources import NAMESPACES, PRIORITY_CLASSES, PYTORCHJOBS

    kinds = {**KINDS, "PyTorchJob": PYTORCHJOBS, "PriorityClass": PRIORITY_CLASSES}
    cfg = load_config_file(a.config) if a.config else ElasticConfig()
    items = json.loads(Path(a.dump).read_text())["items"]
    now = datetime.fromisoformat(a.now.replace("Z", "+00:00")) if a.now else \
        datetime.fromtimestamp(Path(a.dump).stat().st_mtime, UTC)
    runs = []
    plans = set()
    for run_no, writers in [(r + 1, int(w)) for r in range(a.repeat) for w in a.writers.split(",")]:
        kube = SlowKube(a.latency_ms / 1000, a.latency_spread, seed=run_no)
        for obj in items:
            res = kinds.get(obj.get("kind", ""))
            if res is not None:
                kube.add(res, obj)
        for ns in sorted({(o.get("metadata") or {}).get("namespace") for o in items} - {None, ""}):
            kube.add(NAMESPACES, {"metadata": {"name": ns}})
        store = ListStore(kube)
        agent = Agent(kube, store, cfg, EventRecorder(kube, background=a.background_events), clock=lambda: now,
                      writers=writers)
        t = time.perf_counter()
        rep = agent.run_cycle()
        seconds = time.perf_counter() - t
        plan = rep.plan
        plans.add((tuple(sorted(d.pod_group + "=" + d.decision for d in plan.starving)),
                   tuple(sorted(e.pod for e in plan.evictions)), tuple(sorted(g.pod for g in plan.gate_releases))))
        runs.append({"writers": writers, "run": run_no, "cycleSeconds": round(seconds, 3),
                     "decideSeconds": round(rep.plan_seconds, 3),
                     "requests": sum(kube.requests.values()), "byVerb": dict(sorted(kube.requests.items())),
                     "evicted": len(rep.evicted), "released": len(rep.released), "noticed": sum(
                         len(v) for v in rep.noticed.values()),
                     "starving": len(plan.starving), "gateReleases": len(plan.gate_releases),
                     "holds": len(plan.notes)})
    print(json.dumps({"dump": a.dump, "now": now.isoformat(), "latencyMs": a.latency_ms,
                      "latencySpread": a.latency_spread, "repeat": a.repeat,
                      "pods": sum(1 for o in items if o.get("kind") == "Pod"),
                      "nodes": sum(1 for o in items if o.get("kind") == "Node"),
                      "samePlan": len(plans) == 1, "runs": runs}, indent=2))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="dump", help="one cycle on this dump (see the module doc)")
    ap.add_argument("--config", help="--from: the agent's config file (bench/scale_box.py writes its own)")
    ap.add_argument("--now", help="the cycle's time (RFC 3339; default: the dump file's mtime)")
    ap.add_argument("--latency-ms", type=float, default=100.0, help="--from: each API request's latency")
    ap.add_argument("--latency-spread", choices=("fixed", "exp"), default="fixed",
                    help="--from: every request --latency-ms (fixed), or drawn from an exponential with that mean "
                         "(exp: a loaded API server's long tail; seeded, the same draws for each --writers value)")
    ap.add_argument("--repeat", type=int, default=1, help="--from: runs per --writers value")
    ap.add_argument("--writers", default="1,8", help="--from: the executor's write concurrency, comma-separated")
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--cycles", type=int, default=30)
    ap.add_argument("--churn", type=int, default=50, help="pods changed between cycles")
    ap.add_argument("--gangs", type=int, default=5, help="starving gangs (4 pods x 2 GPUs each)")
    ap.add_argument("--background-events", action="store_true",
                    help="--from: Events sent by a thread of their own, as the controller sends them (default: "
                         "in the cycle, each waiting its latency)")
    ap.add_argument("--gang-pods", type=int, default=4, help="pods per starving gang (2 GPUs each)")
    ap.add_argument("--save", metavar="DUMP",
                    help="write the synthetic world (--pods, --gangs) as a dump for --from (run it with "
                         f"--now {b.ts(b.NOW)}), and exit")
    a = ap.parse_args()
    if a.save:
        if a.dump:
            ap.error("--save writes a synthetic world: not with --from")
        Path(a.save).write_text(json.dumps({"items": cluster(a.pods, a.gangs, members=a.gang_pods, pytorchjobs=True)}))
        print(json.dumps({"dump": a.save, "now": b.ts(b.NOW), "pods": a.pods, "gangs": a.gangs,
                          "gangPods": a.gang_pods}))
        return 0
    if a.dump:
        return from_dump(a)
    kube = FakeKube(terminate_on_evict=True)
    for obj in cluster(a.pods, a.gangs, members=a.gang_pods):
        kube.add(KINDS[obj["kind"]], obj)
    n_pods = sum(1 for k in kube.objects if k[0] == "pods")
    now = [b.NOW]
    store = ListStore(kube)
    agent = Agent(kube, store, ElasticConfig(), EventRecorder(None), clock=lambda: now[0])
    t = time.perf_counter()
    cold = agent.run_cycle()
    cold_s = time.perf_counter() - t
    warm: list[float] = []
    plans: list[float] = []
    evicted = len(cold.evicted)
    pod_keys = [k for k in kube.objects if k[0] == "pods"]
    for i in range(a.cycles):
        for k in pod_keys[i * a.churn % len(pod_keys):][: a.churn]:  # status churn: new resourceVersions
            obj = kube.objects.get(k)
            if obj is not None:
                obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1_000_000)
        kube.finish_terminations()
        store.refresh()
        now[0] += timedelta(seconds=5)
        t = time.perf_counter()
        rep = agent.run_cycle()
        warm.append(time.perf_counter() - t)
        plans.append(rep.plan_seconds)
        evicted += len(rep.evicted)
    warm_raw = list(warm)
    warm.sort()
    out = {
        "pods": n_pods, "nodes": sum(1 for k in kube.objects if k[0] == "nodes"),
        "podgroups": sum(1 for k in kube.objects if k[0] == "podgroups"),
        "coldCycleMs": round(cold_s * 1000, 1),
        "warmCycleMsP50": round(statistics.median(warm) * 1000, 1),
        "warmCycleMsP99": round(warm[min(len(warm) - 1, int(len(warm) * 0.99))] * 1000, 1),
        "planMsP50": round(statistics.median(plans) * 1000, 1),
        "agentOwnMsP50": round(statistics.median(w - p for w, p in zip(warm_raw, plans, strict=True)) * 1000, 1),
        "evictions": evicted, "starvingFirstCycle": len(cold.plan.starving),
        "target": "< 200 ms",
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
