"""``volcano-elastic queues``: every Volcano queue with its share and usage as the agent counts them
(the configured share model) and the policy our agent applies to it (``queues.<name>`` of the
config, or ``defaults``), as ``vcctl queue get`` or ``kueuectl list clusterqueue`` show theirs."""

from __future__ import annotations

import argparse
import dataclasses
from datetime import UTC, datetime
from typing import Any

from .common import (
    add_config_flag,
    add_kubeconfig_flag,
    add_output_flag,
    fail,
    natural_key,
    print_document,
    table,
    warn,
)
from .effective_config import (
    DEFAULTS,
    ConfigChoice,
    add_config_from_flag,
    before_connecting,
    choose_config,
    from_file,
    summary,
)

HELP = "list queues: share, usage and the elastic policy (cooldown, notice, gain, starvation, ...) each one gets"

EPILOG = """\
Reads the cluster (--kubeconfig/--context), or a kubectl JSON dump (--from, as plan does). The policy is
the controller's configuration, read from its ConfigMap (--config-from), unless --config names a file;
the last line (CONFIG) and the JSON field configSource say which was used.
Columns: PARENT and WEIGHT (the Queue's spec); DESERVED, ALLOCATED and CAPABILITY in the dominant
resource (GPUs when any node has them) as the share model of --config (shares.plugin) computes them;
JOBS (elastic jobs / all PodGroups in the queue); then the policy the agent applies: COOLDOWN,
STARVATION, NOTICE (seconds), MIN GAIN (minScaleUpGain), SHRINK AT (minWorkersToShrink), EVICT/UP (per
cycle), and FROM (queues.NAME of the config, or defaults). -o wide adds every other setting; -o json|yaml
prints {"apiVersion": "volcano-elastic.io/v1", "kind": "QueueList", "configSource", "sharesPlugin",
"resource", "queues": [{"name", ..., "policySource", "policy": {every QueuePolicy field}}]}."""

COLUMNS = ("QUEUE", "PARENT", "WEIGHT", "DESERVED", "ALLOCATED", "CAPABILITY", "JOBS", "COOLDOWN", "STARVATION",
           "NOTICE", "MIN GAIN", "SHRINK AT", "EVICT/UP", "FROM")
WIDE = ("MIN RUNTIME", "SNOOZE", "FIRST RDZV", "CKPT WINDOW", "PREEMPT IN COOLDOWN", "RECLAIMABLE")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    add_kubeconfig_flag(parser, context=True)
    parser.add_argument("--from", dest="sources", action="append", metavar="SNAPSHOT.json",
                        help="a kubectl JSON dump instead of the cluster (repeatable)")
    add_config_flag(parser, "default: the controller's, read from its ConfigMap (--config-from); with --from: "
                            "the built-in defaults")
    add_config_from_flag(parser)
    add_output_flag(parser, "every policy setting, and whether other queues may reclaim from it")
    parser.add_argument("--now", help=argparse.SUPPRESS)


def _amount(value: int, resource: str) -> str:
    if resource == "cpu":
        return f"{value / 1000:g}"
    return str(value)


def build(items: list[Any], cfg: Any, now: datetime) -> dict[str, Any]:
    """The document's body (pure: objects in, queues out)."""
    from ..policy import keys
    from ..policy.parse import parse_objects
    from ..policy.world import build_world

    snap, _ = parse_objects(items, cfg)
    world = build_world(snap, cfg, now)
    resource = world.dominant
    groups: dict[str, list[Any]] = {}
    for pg in snap.podgroups:
        groups.setdefault(pg.queue, []).append(pg)
    out = []
    for q in sorted(snap.queues, key=lambda q: natural_key(q.name)):
        policy = cfg.queue_policy(q.name)
        pgs = groups.get(q.name, [])
        share = world.shares.get(q.name)
        out.append({
            "name": q.name,
            "parent": q.parent or None,
            "weight": q.weight,
            # as the share model counts them (a parent queue's allocation is its children's; a capacity
            # queue without `deserved` has None)
            "deserved": share.deserved.get(resource) if share is not None else None,
            "allocated": share.allocated.get(resource, 0) if share is not None else 0,
            "capability": (q.capability or {}).get(resource),
            "reclaimable": world.model.reclaimable(q.name),
            "elasticJobs": sum(1 for pg in pgs if pg.labels.get(keys.MANAGED_BY_LABEL) == keys.MANAGED_BY),
            "podGroups": len(pgs),
            "policySource": f"queues.{q.name}" if q.name in cfg.queues else "defaults",
            "policy": dataclasses.asdict(policy),
        })
    return {"sharesPlugin": cfg.shares.plugin + (" (hierarchical)" if cfg.shares.hierarchy else ""),
            "resource": resource, "queues": out}


def render(body: dict[str, Any], wide: bool = False) -> str:
    resource = body["resource"]
    head = COLUMNS + WIDE if wide else COLUMNS
    cells: list[tuple[str, ...]] = [head]
    for q in body["queues"]:
        p = q["policy"]
        row: tuple[str, ...] = (q["name"], q["parent"] or "-", str(q["weight"]),
               "-" if q["deserved"] is None else _amount(q["deserved"], resource),
               _amount(q["allocated"], resource),
               "-" if q["capability"] is None else _amount(q["capability"], resource),
               f"{q['elasticJobs']}/{q['podGroups']}", f"{p['cooldownSeconds']}s", f"{p['starvationSeconds']}s",
               f"{p['noticeSeconds']}s" if p["noticeSeconds"] else "-", f"{p['minScaleUpGain']:g}",
               str(p["minWorkersToShrink"]), f"{p['maxEvictionsPerCycle']}/{p['maxScaleUpPerCycle']}",
               q["policySource"])
        if wide:
            snooze = p["scaleUpSnoozeSeconds"]
            window = p["scaleUpAfterCheckpointSeconds"]
            row += (f"{p['minRuntimeSeconds']}s", f"{p['cooldownSeconds'] if snooze is None else snooze}s",
                    f"{p['firstRendezvousSeconds']}s", "-" if window is None else f"{window}s",
                    "yes" if p["preemptDuringCooldown"] else "no", "yes" if q["reclaimable"] else "no")
        cells.append(row)
    unit = "GPUs" if resource == "nvidia.com/gpu" else ("cores" if resource == "cpu" else resource)
    lines = [f"SHARES {body['sharesPlugin']}, in {unit}", *table(cells)]
    if not body["queues"]:
        lines.append("no queues")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from ..policy.parse import parse_time
    from ..policy.settings import ElasticConfig
    from ..policy.times import format_time
    from .connect import connect
    from .plan import InputError, read_items, unknown_queues

    now = parse_time(args.now) if args.now else datetime.now(UTC)
    if now is None:
        fail("queues", f"--now {args.now!r} is not RFC 3339")
    items: list[Any] = []
    if args.sources:
        choice = from_file(args, "queues") or ConfigChoice(ElasticConfig(), f"{DEFAULTS}: --from reads no cluster")
        try:
            for src in args.sources:
                items.extend(read_items(src))
        except InputError as exc:
            fail("queues", str(exc))
    else:
        from .status import list_everything_or_exit

        chosen = before_connecting(args, "queues")
        client = connect(args, "queues")
        items = list_everything_or_exit(client, "queues")
        choice = choose_config(args, "queues", client, chosen)
    cfg = choice.config
    from ..policy.parse import parse_objects

    snapshot, _ = parse_objects(items, cfg)
    for w in unknown_queues(snapshot, cfg, "the dump" if args.sources else "the cluster"):
        warn("queues", w)
    body = build(items, cfg, now)
    if args.output in ("json", "yaml"):
        print_document("QueueList", {"now": format_time(now), "configSource": choice.source, **body}, args.output)
    else:
        print(render(body, wide=args.output == "wide") + summary(choice))
    return 0
