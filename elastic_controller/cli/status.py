"""``volcano-elastic status``: one table per queue of elastic jobs and waiting gangs."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from .common import add_config_flag, add_kubeconfig_flag, load_config_or_exit

HELP = ("show elastic jobs per queue: min/current/max, fulfillment, cooldown, torchrun restarts used of "
        "maxRestarts, gated and starving pods, why")

COLUMNS = ("JOB", "MIN", "CUR", "MAX", "FULFILLED", "COOLDOWN", "RESTARTS", "GATED", "STARVING", "LAST DECISION")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_kubeconfig_flag(parser)
    add_config_flag(parser, "the one the controller runs with")
    parser.add_argument("-n", "--namespace", help="only this namespace")
    parser.add_argument("--output", choices=("table", "json"), default="table")
    parser.add_argument("--volcano-scheduler-configmap", default="volcano-system/volcano-scheduler-configmap",
                        metavar="NAMESPACE/NAME",
                        help="the Volcano scheduler's ConfigMap, read when RBAC allows get on it ('' to "
                             "skip): compared with config `shares`, and a warning that two evictors run when "
                             "its actions evict (preempt, reclaim, gangpreempt, gangreclaim)")
    parser.add_argument("--now", help=argparse.SUPPRESS)


def build_rows(items: list[dict[str, Any]], cfg: Any, now: datetime,
               namespace: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Queue -> rows (pure: objects in, rows out)."""
    from ..policy import keys
    from ..policy.budget import budget_of
    from ..policy.cooldowns import cooldown_remaining, fulfillment
    from ..policy.cycle import plan_cycle
    from ..policy.notices import in_flight, review_notices, with_notices
    from ..policy.parse import parse_objects
    from ..policy.podgroups import JobSpecError, job_bounds

    snap, _ = parse_objects(items, cfg)
    notices = review_notices(snap, cfg, now)
    plan = with_notices(plan_cycle(in_flight(snap, notices), cfg, now), notices, due=True)
    starving = {d.pod_group: d for d in plan.starving}
    jobs = {j.key: j for j in snap.jobs}
    pods_by_group: dict[str, list[Any]] = {}
    for p in snap.pods:
        if p.group_key:
            pods_by_group.setdefault(p.group_key, []).append(p)
    gate = cfg.gating.gateName
    out: dict[str, list[dict[str, Any]]] = {}
    for pg in sorted(snap.podgroups, key=lambda g: g.key):
        if namespace and pg.namespace != namespace:
            continue
        ours = pg.labels.get(keys.MANAGED_BY_LABEL) == keys.MANAGED_BY
        if not ours and pg.key not in starving:
            continue
        pods = pods_by_group.get(pg.key, [])
        bounds = next((p.bounds for p in pods if p.bounds is not None), None)
        job = jobs.get(pg.key)
        if job is not None:
            try:
                bounds = job_bounds(job)
            except JobSpecError:
                pass
        workers = sum(1 for p in pods if p.replica_type == "worker" and p.running)
        running = sum(1 for p in pods if p.running)
        policy = cfg.queue_policy(pg.queue)
        decision = starving.get(pg.key)
        why = pg.annotations.get(keys.LAST_DECISION, "")
        budget = budget_of(pg, job) if bounds is not None and bounds.elastic else None
        if decision is not None:
            why = f"now: {decision.decision}: {decision.reason}"
        row = {
            "job": pg.key,
            "min": bounds.min_replicas if bounds else pg.min_member,
            "current": workers if bounds else running,
            "max": bounds.max_replicas if bounds else pg.min_member,
            "fulfillment": round(fulfillment(workers, bounds.min_replicas, bounds.max_replicas), 2)
            if bounds and workers >= bounds.min_replicas else None,
            "cooldownSeconds": int(cooldown_remaining(pg, policy, now, job)),
            # torchrun restarts our shrinks used (restarts-used) of maxRestarts; spent: no victim
            # (policy/budget.py). None when the job is not elastic or its PyTorchJob is not listed.
            "restarts": None if budget is None else {"used": budget.used, "max": budget.max_restarts,
                                                     "spent": budget.spent},
            "gated": sum(1 for p in pods if p.pending and p.gated(gate)),
            "starving": len(decision.needed) if decision else 0,
            "lastDecision": why,
            # pods that predate our webhook (no group annotation), counted by their labels
            "adoptedPods": sum(1 for p in pods if p.adopted),
        }
        out.setdefault(pg.queue, []).append(row)
    return out


def pending_notices(items: list[dict[str, Any]], cfg: Any, now: datetime,
                    namespace: str | None = None) -> list[dict[str, Any]]:
    """Victims under an eviction notice (pending or due), soonest first: pod, job, gang, queue,
    ``evictAfter``, ``secondsLeft`` (0: due, the agent evicts it this cycle)."""
    from ..policy.notices import review_notices
    from ..policy.parse import parse_objects
    from ..policy.times import format_time

    snap, _ = parse_objects(items, cfg)
    review = review_notices(snap, cfg, now)
    rows = [(n.facts, n.seconds_left) for n in review.pending] + [(d.facts, 0.0) for d in review.due]
    out = []
    for f, left in sorted(rows, key=lambda r: (r[1], r[0].pod)):
        if namespace and f.pod.partition("/")[0] != namespace:
            continue
        out.append({"pod": f.pod, "job": f.job, "for": f.gang, "queue": f.queue,
                    "evictAfter": format_time(f.evict_after) if f.evict_after else "",
                    "secondsLeft": max(0, round(left))})
    return out


def render_notices(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    lines = [f"EVICTION NOTICES ({len(rows)} pending: evicted at EVICT AFTER, or at once after the job records "
             "a checkpoint)"]
    table = [("POD", "JOB", "FOR GANG", "EVICT AFTER", "LEFT")]
    table += [(r["pod"], r["job"], r["for"], r["evictAfter"] or "?", f"{r['secondsLeft']}s" if r["secondsLeft"]
               else "due") for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(5)]
    for row in table:
        lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines) + "\n\n"


def skipped_objects(items: list[dict[str, Any]], cfg: Any) -> list[str]:
    """Objects the agent cannot use as they are (malformed, or partly implausible like a node
    claiming 1e18 GPUs), one line each: what the agent logs once at WARNING."""
    from ..policy.parse import parse_objects

    snap, warnings = parse_objects(items, cfg)
    out = list(warnings)
    for node in snap.nodes:
        out.extend(f"Node {node.name}: {problem}" for problem in node.problems)
    return out


def render_skipped(lines: list[str]) -> str:
    if not lines:
        return ""
    return f"SKIPPED OBJECTS ({len(lines)}: not used by the agent as they are)\n" + \
        "".join(f"  {line}\n" for line in lines)


def render(rows: dict[str, list[dict[str, Any]]], width: int = 60, shares: str | None = None) -> str:
    """The tables; ``shares``: the queue-share model line printed first."""
    lines: list[str] = [f"SHARES {shares}", ""] if shares else []
    adopted = False
    for queue in sorted(rows):
        lines.append(f"QUEUE {queue}")
        table = [COLUMNS]
        for r in rows[queue]:
            f = "-" if r["fulfillment"] is None else f"{r['fulfillment']:.2f}"
            cd = f"{r['cooldownSeconds']}s" if r["cooldownSeconds"] else "-"
            budget = r.get("restarts")
            restarts = "-" if budget is None else (
                f"{'?' if budget['used'] is None else budget['used']}/{budget['max']}"
                + (" spent" if budget["spent"] else ""))
            why = r["lastDecision"]
            why = why if len(why) <= width else why[: width - 1] + "…"
            job = r["job"]
            if r.get("adoptedPods"):
                job, adopted = f"{job} (adopted)", True
            table.append((job, str(r["min"]), str(r["current"]), str(r["max"]), f, cd, restarts, str(r["gated"]),
                          str(r["starving"]), why or "-"))
        widths = [max(len(row[i]) for row in table) for i in range(len(COLUMNS))]
        for row in table:
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        lines.append("")
    if adopted:
        lines.append("(adopted): pods created before the webhook was registered, counted by their labels; "
                     "restart them at a quiet moment (docs/compatibility.md#adopting-running-jobs)")
        lines.append("")
    if not rows:
        lines.append("no elastic jobs or waiting gangs\n")
    return "\n".join(lines)


def list_everything(client: Any, namespace: str | None) -> list[dict[str, Any]]:
    from ..kube.errors import NotFoundError
    from ..kube.resources import SNAPSHOT_RESOURCES

    items: list[dict[str, Any]] = []
    for res in SNAPSHOT_RESOURCES:
        try:
            got, _ = client.list(res, namespace if res.namespaced else None)
        except NotFoundError:  # a CRD that is not installed
            continue
        items.extend(got)
    return items


def run(args: argparse.Namespace) -> int:
    from ..kube.client import KubeClient
    from ..kube.errors import KubeError
    from ..policy.parse import parse_time

    cfg = load_config_or_exit(args, "status")
    now = parse_time(args.now) if args.now else datetime.now(UTC)
    if now is None:
        print(f"--now {args.now!r} is not RFC 3339", file=sys.stderr)
        return 2
    try:
        client = KubeClient.from_kubeconfig(args.kubeconfig)
        items = list_everything(client, args.namespace)
    except KubeError as exc:
        print(f"volcano-elastic status: {exc}", file=sys.stderr)
        return 1
    rows = build_rows(items, cfg, now, args.namespace)
    from ..volcanoconf import two_evictors

    warning = two_evictors(client, args.volcano_scheduler_configmap)  # None: not readable, or one evictor
    skipped = skipped_objects(items, cfg)
    notices = pending_notices(items, cfg, now, args.namespace)
    if args.output == "json":
        if warning:
            print(warning, file=sys.stderr)
        out: dict[str, Any] = dict(rows)
        if notices:
            out["evictionNotices"] = notices  # not a queue name (those are lowercase DNS names)
        if skipped:
            out["skippedObjects"] = skipped  # not a queue name: those are lowercase DNS names
        print(json.dumps(out, indent=2))
    else:
        from ..volcanoconf import check_scheduler

        # logs go to stderr; the verdict (model, and whether the scheduler runs the same) heads the table
        shares = check_scheduler(client, cfg.shares, args.volcano_scheduler_configmap)
        sys.stdout.write((warning + "\n\n" if warning else "") + render(rows, shares=shares))
        sys.stdout.write(render_notices(notices))
        sys.stdout.write(render_skipped(skipped))
    return 0


def main(argv: Sequence[str] | None = None) -> int:  # pragma: no cover - convenience
    parser = argparse.ArgumentParser(prog="volcano-elastic status", description=HELP)
    add_arguments(parser)
    return run(parser.parse_args(argv))
