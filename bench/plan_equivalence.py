"""Record ``plan_cycle`` inputs, then replay them with any checkout of the code and compare the plans.

A performance change to the policy core must not change a single decision. This records inputs once
(synthetic clusters from ``_synth.py`` and snapshots captured from simulator runs), then writes one
line per input with the whole plan (every field, in order) so that two checkouts can be diffed:

    .venv/bin/python bench/plan_equivalence.py record --out /tmp/eq/inputs.pkl
    PYTHONPATH=/tmp/orig .venv/bin/python bench/plan_equivalence.py replay /tmp/eq/inputs.pkl --out /tmp/eq/orig.txt
    .venv/bin/python bench/plan_equivalence.py replay /tmp/eq/inputs.pkl --out /tmp/eq/new.txt
    .venv/bin/python bench/plan_equivalence.py compare /tmp/eq/orig.txt /tmp/eq/new.txt

``record --examples`` adds the bundled ``examples/plan`` dumps (with their ``.config.yaml``, at the
examples' time); ``replay --decide`` writes ``cycle.decide``'s whole decision instead (the plan as
shown and every action, each dataclass without the fields at their defaults, so a field added since
with its default compares equal): the agent's, ``plan``'s and ``status``'s output, not just the plan.

``trajectory`` runs a whole simulation and writes every plan it made, in order (the sequence is the
same only if every plan is, since each plan changes what the simulator does next).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pickle
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parents[1]))  # last: PYTHONPATH (another checkout) wins

from _synth import NOW, synth_cluster

from elastic_controller.policy import cycle
from elastic_controller.policy.decisions import CyclePlan
from elastic_controller.policy.model import Snapshot
from elastic_controller.policy.settings import ElasticConfig

Record = tuple[str, Snapshot, ElasticConfig, datetime]


def _kept() -> dict[str, Any]:
    """``plan_cycle``'s ``cache=`` for one simulation, when the code under test takes one (older
    checkouts kept it in module globals)."""
    return {"cache": cycle.PlanCache()} if hasattr(cycle, "PlanCache") else {}


def plan_line(label: str, plan: CyclePlan) -> str:
    return json.dumps({"input": label, "plan": dataclasses.asdict(plan)}, default=str)


def _simulator(nodes: int, jobs: int, seed: int, load: float, planner: Any) -> Any:
    from elastic_controller.simulate.cluster import ClusterSpec, NodePool, QueueSpec
    from elastic_controller.simulate.engine import SimSettings, Simulator
    from elastic_controller.simulate.generate import GeneratorOptions, generate

    cluster = ClusterSpec((NodePool("gpu", nodes, 8, 96_000, 2**40),),
                          (QueueSpec("research", 2), QueueSpec("vision", 1), QueueSpec("nlp", 1)))
    specs = generate(cluster, GeneratorOptions(jobs=jobs, seed=seed, load=load))
    return Simulator(specs, cluster, ElasticConfig(), "elastic", SimSettings(cycle_seconds=60.0), planner)


def record(args: argparse.Namespace) -> int:
    records: list[Record] = []
    cfg = ElasticConfig()
    for size in (int(s) for s in args.sizes.split(",")):
        for seed in range(1, args.seeds + 1):
            for frac in (0.1, 0.3):
                records.append((f"synth n={size} seed={seed} starving={frac}",
                                synth_cluster(size, seed=seed, starving_fraction=frac), cfg, NOW))
    if args.examples:
        records.extend(_examples())
    for spec in args.sim:
        nodes, jobs, seed = (int(x) for x in spec.split(":"))
        calls = 0
        kept = _kept()

        def planner(snap: Snapshot, c: ElasticConfig, now: datetime, spec: str = spec,
                    kept: dict[str, Any] = kept) -> CyclePlan:
            nonlocal calls
            plan = cycle.plan_cycle(snap, c, now, **kept)
            calls += 1
            # Every cycle that decided something, and a sample of the rest.
            if plan.starving or plan.gate_releases or plan.scale_up_blocked_by or calls % 10 == 0:
                records.append((f"sim {spec} call {calls}", snap, c, now))
            return plan

        _simulator(nodes, jobs, seed, args.load, planner).run()
        print(f"sim {spec}: {calls} calls", file=sys.stderr)
    with open(args.out, "wb") as f:
        pickle.dump(records, f, protocol=pickle.HIGHEST_PROTOCOL)
    print(f"{len(records)} inputs -> {args.out}", file=sys.stderr)
    return 0


def _examples() -> list[Record]:
    from elastic_controller.config import load_config_file
    from elastic_controller.policy.parse import parse_objects

    root = Path(__file__).resolve().parents[1] / "examples" / "plan"
    out: list[Record] = []
    for path in sorted(root.glob("*.json")):
        if path.name.endswith(".expected.json"):
            continue
        conf = path.with_name(path.name[:-len(".json")] + ".config.yaml")
        cfg = load_config_file(str(conf)) if conf.exists() else ElasticConfig()
        snap = parse_objects(json.loads(path.read_text())["items"], cfg)[0]
        out.append((f"example {path.name}", snap, cfg, NOW))
    return out


def _lean(value: Any) -> Any:
    """A value as data, each dataclass without its fields at their defaults (comparable across versions
    that add a defaulted field)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {"@": type(value).__name__}
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if f.default is not dataclasses.MISSING and v == f.default:
                continue
            if f.default_factory is not dataclasses.MISSING and v == f.default_factory():
                continue
            out[f.name] = _lean(v)
        return out
    if isinstance(value, (tuple, list)):
        return [_lean(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _lean(v) for k, v in value.items()}
    return value


def decision_line(label: str, snap: Snapshot, cfg: ElasticConfig, now: datetime) -> str:
    d = cycle.decide(snap, cfg, now)
    return json.dumps({"input": label, "plan": _lean(d.plan), "shown": _lean(d.shown),
                       "actions": _lean(d.actions)}, default=str)


def _refresh(obj: Any) -> Any:
    """Rebuild a pickled view with the current class from its constructor fields: unpickling restores
    the old ``__dict__`` and skips ``__post_init__``, so derived fields added since recording would be
    missing (or stale)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return type(obj)(**{f.name: _refresh(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.init})
    if isinstance(obj, tuple):
        return tuple(_refresh(x) for x in obj)
    return obj


def replay(args: argparse.Namespace) -> int:
    with open(args.inputs, "rb") as f:
        records: list[Record] = [(label, _refresh(snap), cfg, now) for label, snap, cfg, now in pickle.load(f)]
    started = time.process_time()
    with open(args.out, "w") as out:
        for label, snap, cfg, now in records:
            if args.decide:
                out.write(decision_line(label, snap, cfg, now) + "\n")
            else:
                out.write(plan_line(label, cycle.plan_cycle(snap, cfg, now)) + "\n")
    print(f"{len(records)} plans ({cycle.__file__}) in {time.process_time() - started:.1f} cpu s -> {args.out}",
          file=sys.stderr)
    return 0


def trajectory(args: argparse.Namespace) -> int:
    nodes, jobs, seed = (int(x) for x in args.sim.split(":"))
    kept = _kept()
    with open(args.out, "w") as out:

        def planner(snap: Snapshot, c: ElasticConfig, now: datetime) -> CyclePlan:
            plan = cycle.plan_cycle(snap, c, now, **kept)
            out.write(plan_line(now.isoformat(), plan) + "\n")
            return plan

        sim = _simulator(nodes, jobs, seed, args.load, planner)
        sim.run()
    print(f"{sim.plan_calls} plans ({cycle.__file__}), {sim.plan_seconds:.1f} s in plan_cycle "
          f"({1000 * sim.plan_seconds / max(1, sim.plan_calls):.1f} ms each) -> {args.out}", file=sys.stderr)
    return 0


def _without_reasons(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_reasons(v) for k, v in value.items() if k != "reason"}
    if isinstance(value, list):
        return [_without_reasons(v) for v in value]
    return value


def compare(args: argparse.Namespace) -> int:
    a = Path(args.a).read_text().splitlines()
    b = Path(args.b).read_text().splitlines()
    diffs = [i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y]
    if args.ignore_reasons:  # a change that rewords reasons: the decisions themselves must still agree
        worded = len(diffs)
        diffs = [i for i in diffs if _without_reasons(json.loads(a[i])) != _without_reasons(json.loads(b[i]))]
        print(f"{worded - len(diffs)} plans differ only in their reasons' wording")
    if len(a) != len(b):
        print(f"different lengths: {len(a)} vs {len(b)}")
    for i in diffs[:5]:
        print(f"plan {i} differs: {json.loads(a[i])['input']}")
    print(f"{len(a) - len(diffs)} of {len(a)} plans identical")
    return 1 if diffs or len(a) != len(b) else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--out", required=True)
    r.add_argument("--sizes", default="200,2000,5000")
    r.add_argument("--seeds", type=int, default=3)
    r.add_argument("--sim", action="append", default=[], metavar="NODES:JOBS:SEED")
    r.add_argument("--load", type=float, default=1.2)
    r.add_argument("--examples", action="store_true", help="add the bundled examples/plan dumps")
    p = sub.add_parser("replay")
    p.add_argument("inputs")
    p.add_argument("--decide", action="store_true", help="write cycle.decide's whole decision, not plan_cycle's plan")
    p.add_argument("--out", required=True)
    t = sub.add_parser("trajectory")
    t.add_argument("--sim", required=True, metavar="NODES:JOBS:SEED")
    t.add_argument("--load", type=float, default=1.2)
    t.add_argument("--out", required=True)
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--ignore-reasons", action="store_true", help="compare decisions, not how reasons are worded")
    args = ap.parse_args()
    return {"record": record, "replay": replay, "trajectory": trajectory, "compare": compare}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
