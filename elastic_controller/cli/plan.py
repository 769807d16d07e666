"""``volcano-elastic plan``: run the planner on a cluster dump, touching no cluster."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .common import add_config_flag, load_config_or_exit

HELP = "print what the agent would do (evictions, gate releases) for a kubectl JSON dump"

EPILOG = """\
Make a dump with:
  kubectl get nodes,pods,podgroups,queues,priorityclasses,pytorchjobs -A -o json > snapshot.json

Prints {"starving": [...], "evictions": [...], "gateReleases": [...], "scaleUpBlockedBy": [...],
"notes": [...]} (or a table): scaleUpBlockedBy names the waiting gangs that hold back every scale-up;
notes say why a job whose gated pods fit now does not grow, or grows less (cooldown, snooze after a shrink,
maxScaleUpPerCycle, a checkpoint older than scaleUpAfterCheckpointSeconds, minScaleUpGain, allowed
counts, a waiting gang's room): one per job, HOLD lines in the table.
Exit 0 whatever was decided, 2 on bad input."""


class InputError(ValueError):
    pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("--from", dest="sources", action="append", required=True, metavar="SNAPSHOT.json",
                        help="a kubectl JSON dump (a List, or one object); repeat to combine files")
    add_config_flag(parser, metavar="F")
    parser.add_argument("--now", metavar="RFC3339", help="the time to plan at (default: now)")
    parser.add_argument("--output", "-o", choices=("table", "json"), default="table",
                        help="table for people (default), json for tools")


def read_items(path: str) -> list[Any]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    if isinstance(doc, dict) and isinstance(doc.get("items"), list):
        return list(doc["items"])
    if isinstance(doc, dict) and "kind" in doc:
        return [doc]
    if isinstance(doc, list):
        return doc
    raise InputError(f"{path}: expected a kubectl List (an object with 'items') or a Kubernetes object")


def parse_now(text: str | None) -> datetime:
    if text is None:
        return datetime.now(UTC)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InputError(f"--now: {text!r} is not an RFC 3339 time (e.g. 2026-01-02T03:04:05Z)") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def render_table(plan: dict[str, Any]) -> str:
    lines = []
    if not plan["starving"]:
        waiting = plan.get("waiting") or []
        lines.append(f"STARVING  none: {len(waiting)} waiting gang(s) ({', '.join(waiting)}) younger than their "
                     "queue's starvationSeconds" if waiting else "STARVING  none: no gang is waiting")
    for s in plan["starving"]:
        lines.append(f"STARVING  {s['podGroup']:<32} queue={s['queue']:<12} {s['decision'].upper():<5} "
                     f"{s['reason']}")
    for e in plan["evictions"]:
        lines.append(f"EVICT     {e['pod']:<32} node={e['node']:<12} for={e['for']}  {e['reason']}")
    for n in plan.get("notices") or []:
        lines.append(f"NOTICE    {n['pod']:<32} for={n['for']}  evicted in {n['secondsLeft']}s, or at once after "
                     "its job records a checkpoint")
    for w in plan.get("withdrawn") or []:
        lines.append(f"WITHDRAW  {w['pod']:<32} the eviction notice is withdrawn: {w['reason']}")
    for g in plan["gateReleases"]:
        lines.append(f"RELEASE   {g['pod']:<32} node={g['node']:<12} {g['reason']}")
    for note in plan.get("notes") or []:
        lines.append(f"HOLD      {note}")
    if not plan["gateReleases"]:
        blocked = plan.get("scaleUpBlockedBy") or []
        if blocked:
            why = f"held back by waiting gang(s) {', '.join(blocked)}"
        elif plan.get("notes"):  # every job a HOLD line names would grow but for what it says
            why = ("HOLD says why for the job(s) it names; no other gated pod fits now (on the nodes and in its "
                   "queue's share)")
        else:
            why = "nothing gated fits now (on the nodes and in its queue's share)"
        lines.append(f"RELEASE   none: {why}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from ..policy.cycle import plan_cycle
    from ..policy.notices import in_flight, review_notices, with_notices
    from ..policy.parse import parse_objects

    cfg = load_config_or_exit(args, "plan")
    try:
        now = parse_now(args.now)
        items: list[Any] = []
        for src in args.sources:
            items.extend(read_items(src))
    except InputError as exc:
        print(f"volcano-elastic plan: {exc}", file=sys.stderr)
        return 2
    snapshot, warnings = parse_objects(items, cfg)
    for w in warnings:
        if "is not used by the planner" not in w:
            print(f"warning: {w}", file=sys.stderr)
    # Eviction notices as the agent sees them: a due victim is in `evictions`, a pending one makes its
    # gang wait (with the notice as the reason) and is never picked again.
    notices = review_notices(snapshot, cfg, now)
    plan = with_notices(plan_cycle(in_flight(snapshot, notices), cfg, now), notices, due=True)
    out = plan.to_json()
    if args.output == "json":
        print(json.dumps(out, indent=2))
    else:
        out["waiting"] = list(plan.waiting)
        out["notices"] = [{"pod": p.facts.pod, "for": p.facts.gang, "secondsLeft": round(p.seconds_left)}
                          for p in notices.pending]
        out["withdrawn"] = [{"pod": w.facts.pod, "reason": w.reason} for w in notices.withdrawn]
        print(render_table(out))
    return 0
