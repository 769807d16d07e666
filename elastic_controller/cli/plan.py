"""``volcano-elastic plan``: run the planner on a cluster dump, touching no cluster."""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .common import (
    add_config_flag,
    add_output_flag,
    fail,
    load_config_or_exit,
    natural_sorted,
    print_document,
    table,
    warn,
)

HELP = "print what the agent would do (evictions, gate releases) for a kubectl JSON dump"

EPILOG = """\
Make a dump with:
  kubectl get nodes,pods,podgroups,queues,priorityclasses,pytorchjobs -A -o json > snapshot.json

The table has one row per decision, with a header: STARVING (a waiting gang past its queue's
starvationSeconds, and whether it evicts or waits), EVICT (a victim), NOTICE/WITHDRAW (eviction notices),
GROW (one row per job grown: from, to and max workers; -o wide adds a row per pod released and where it
fits), HOLD (why a job whose gated pods fit now does not grow, or grows less: cooldown, snooze after a
shrink, maxScaleUpPerCycle, a checkpoint older than scaleUpAfterCheckpointSeconds, minScaleUpGain,
allowed counts, a waiting gang's room; one per job, with its reason code).
-o json|yaml prints {"apiVersion": "volcano-elastic.io/v1", "kind": "Plan", "now", "starving",
"evictions", "gateReleases" (one per pod), "scaleUpBlockedBy", "notes": [{"job", "reason", "until",
"message"}]}.
Warnings (stderr) say when the dump looks wrong for the question: --now far from every time in it,
no Nodes, a job without its PodGroup, a --config queue that no Queue has.
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
    add_output_flag(parser, "also one row per pod released, under its job's GROW row")


def yaml_hint(text: str) -> str:
    """A hint when ``text``, which is not JSON, looks like a YAML dump (``-o yaml``)."""
    first = next((line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")), "")
    if re.match(r"^(---|apiVersion:|kind:|items:|metadata:)", first):
        return (" (it looks like YAML: dump as JSON, `kubectl get nodes,pods,podgroups,queues,priorityclasses,"
                "pytorchjobs -A -o json`)")
    return ""


def our_document(doc: Any) -> str:
    """Why ``doc`` is not a cluster dump when it is one of our own outputs (a ``Plan``, ``Status``, ...
    of apiVersion volcano-elastic.io/v1), else ""."""
    from .common import API_VERSION

    if isinstance(doc, dict) and doc.get("apiVersion") == API_VERSION:
        return (f"a volcano-elastic {doc.get('kind')} document (an output of this tool), not a cluster dump: "
                "`kubectl get nodes,pods,podgroups,queues,priorityclasses,pytorchjobs -A -o json`")
    return ""


def read_items(path: str) -> list[Any]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
                         + yaml_hint(text)) from exc
    not_a_dump = our_document(doc)
    if not_a_dump:
        raise InputError(f"{path}: {not_a_dump}")
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


# --now further than this from every time in the dump is worth a warning (the examples' stories are
# told in minutes; a dump planned a day later reads every cooldown as over and every gang as starving)
FAR_SECONDS = 24 * 3600
_RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
_SHOWN = 5  # names listed in one warning


def _times(obj: Any, out: list[datetime]) -> None:
    """Every RFC 3339 time in ``obj`` (creation times, conditions, our annotations, ...)."""
    if isinstance(obj, dict):
        for value in obj.values():
            _times(value, out)
    elif isinstance(obj, list):
        for value in obj:
            _times(value, out)
    elif isinstance(obj, str) and _RFC3339.match(obj):
        try:
            out.append(parse_now(obj))
        except InputError:
            pass


def _listed(names: list[str]) -> str:
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    return ", ".join(names[:_SHOWN]) + more


def dump_warnings(items: list[Any], snapshot: Any, cfg: Any, now: datetime, now_given: bool) -> list[str]:
    """What makes a dump tell the wrong story, one sentence each: ``now`` far from every time in it,
    no Nodes, a job or pods whose PodGroup is missing, a config queue that no Queue has."""
    from ..policy.times import format_time

    out: list[str] = []
    times: list[datetime] = []
    _times(items, times)
    if times and min(abs((now - t).total_seconds()) for t in times) > FAR_SECONDS:
        newest, oldest = max(times), min(times)
        where = (f"{(now - newest).total_seconds() / 86400:.0f} day(s) after the newest" if now > newest else
                 f"{(oldest - now).total_seconds() / 86400:.0f} day(s) before the oldest")
        flag = f"--now {format_time(now)}" if now_given else f"now ({format_time(now)}, no --now)"
        out.append(f"{flag} is {where} time in the dump ({format_time(newest if now > newest else oldest)}): "
                   "cooldowns, starvation and minimum runtimes are judged from it; pass --now the time the "
                   "dump was taken")
    if not snapshot.nodes:
        out.append("the dump has no Nodes: nothing fits anywhere (dump with kubectl get "
                   "nodes,pods,podgroups,queues,priorityclasses,pytorchjobs -A -o json)")
    groups = {pg.key for pg in snapshot.podgroups}
    missing = sorted({j.key for j in snapshot.jobs if not j.finished and j.key not in groups} |
                     {p.group_key for p in snapshot.pods if p.group_key and p.group_key not in groups})
    if missing:
        out.append(f"{len(missing)} job(s) have no PodGroup in the dump ({_listed(missing)}): they are planned as "
                   "if they did not exist (include podgroups in the dump; the controller creates one per job)")
    return out + unknown_queues(snapshot, cfg, "the dump")


def unknown_queues(snapshot: Any, cfg: Any, where: str) -> list[str]:
    """A warning when the config's ``queues`` name a queue that no Queue of ``snapshot`` has (a typo
    validates, and its policy applies to nothing)."""
    queues = {q.name for q in snapshot.queues}
    unknown = sorted(set(cfg.queues) - queues)
    if unknown and queues:
        return [f"the config's queues {_listed(unknown)} match no Queue in {where} (queues: "
                f"{_listed(sorted(queues))}): their policy applies to nothing; a typo?"]
    if unknown:
        return [f"the config names queues ({_listed(unknown)}) but {where} has no Queues to check them against"]
    return []


def note_json(note: Any) -> dict[str, Any]:
    """A ``HoldNote`` as the JSON documents print it: ``job``, ``reason`` (a code), ``until``, ``message``."""
    from ..policy.times import format_time

    until = getattr(note, "until", None)
    return {"job": getattr(note, "job", ""), "reason": getattr(note, "reason", ""),
            "until": format_time(until) if until is not None else None, "message": str(note)}


def attained_json(snapshot: Any, now: datetime) -> list[dict[str, Any]]:
    """Every PodGroup's attained service as of ``now`` (policy/attained.py), by job key."""
    from ..policy.attained import attained_by_group

    return [{"job": key, "gpuSeconds": round(value, 1)}
            for key, value in sorted(attained_by_group(snapshot, now).items())]


def growth(releases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The gate releases grouped by job, in decision order: ``job``, ``reason`` (the job's, without the
    pod's node) and ``pods`` (naturally sorted, each with its ``node``)."""
    by_job: dict[str, dict[str, Any]] = {}
    for g in releases:
        entry = by_job.setdefault(g["job"], {"job": g["job"], "reason": g["reason"].rpartition("; fits on ")[0]
                                             or g["reason"], "pods": {}})
        entry["pods"][g["pod"]] = g["node"]
    return [{**e, "pods": [{"pod": p, "node": e["pods"][p]} for p in natural_sorted(e["pods"])]}
            for e in by_job.values()]


def render_table(plan: dict[str, Any], wide: bool = False) -> str:
    rows: list[tuple[str, ...]] = [("ACTION", "OBJECT", "WHERE", "WHY")]
    if not plan["starving"]:
        waiting = plan.get("waiting") or []
        rows.append(("STARVING", "none", "", f"{len(waiting)} waiting gang(s) ({', '.join(waiting)}) younger than "
                     "their queue's starvationSeconds" if waiting else "no gang is waiting"))
    for s in plan["starving"]:
        rows.append(("STARVING", s["podGroup"], f"queue={s['queue']}", f"{s['decision'].upper()}: {s['reason']}"))
    for e in plan["evictions"]:
        rows.append(("EVICT", e["pod"], f"node={e['node']}", f"for {e['for']}: {e['reason']}"))
    for n in plan.get("notices") or []:
        rows.append(("NOTICE", n["pod"], f"for={n['for']}", f"evicted in {n['secondsLeft']}s, or at once after its "
                     "job records a checkpoint"))
    for w in plan.get("withdrawn") or []:
        rows.append(("WITHDRAW", w["pod"], "", f"the eviction notice is withdrawn: {w['reason']}"))
    for g in growth(plan["gateReleases"]):
        rows.append(("GROW", g["job"], f"+{len(g['pods'])} pod(s)", g["reason"]))
        if wide:
            rows.extend(("", f"  {p['pod']}", f"node={p['node']}", "") for p in g["pods"])
    for note in plan.get("notes") or []:
        until = f" until {note['until']}" if note.get("until") else ""
        rows.append(("HOLD", note["job"], note["reason"] + until, note["message"]))
    if not plan["gateReleases"]:
        blocked = plan.get("scaleUpBlockedBy") or []
        if blocked:
            why = f"held back by waiting gang(s) {', '.join(blocked)}"
        elif plan.get("notes"):  # every job a HOLD row names would grow but for what it says
            why = ("HOLD says why for the job(s) it names; no other gated pod fits now (on the nodes and in its "
                   "queue's share)")
        else:
            why = "nothing gated fits now (on the nodes and in its queue's share)"
        rows.append(("GROW", "none", "", why))
    return "\n".join(table(rows))


def run(args: argparse.Namespace) -> int:
    from ..policy.cycle import decide
    from ..policy.parse import parse_objects
    from ..policy.times import format_time

    cfg = load_config_or_exit(args, "plan")
    try:
        now = parse_now(args.now)
        items: list[Any] = []
        for src in args.sources:
            items.extend(read_items(src))
    except InputError as exc:
        fail("plan", str(exc))
    snapshot, warnings = parse_objects(items, cfg)
    for w in warnings:
        if "is not used by the planner" not in w:
            warn("plan", w)
    for w in dump_warnings(items, snapshot, cfg, now, args.now is not None):
        warn("plan", w)
    # Eviction notices as the agent sees them: a due victim is in `evictions`, a pending one makes its
    # gang wait (with the notice as the reason) and is never picked again.
    decision = decide(snapshot, cfg, now)
    plan, notices = decision.shown, decision.notices
    out = plan.to_json()
    out["notes"] = [note_json(n) for n in plan.notes]
    out["attainedService"] = attained_json(snapshot, now)
    if args.output in ("json", "yaml"):
        print_document("Plan", {"now": format_time(now), **out}, args.output)
    else:
        out["waiting"] = list(plan.waiting)
        out["notices"] = [{"pod": p.facts.pod, "for": p.facts.gang, "secondsLeft": round(p.seconds_left)}
                          for p in notices.pending]
        out["withdrawn"] = [{"pod": w.facts.pod, "reason": w.reason} for w in notices.withdrawn]
        print(render_table(out, wide=args.output == "wide"))
    return 0
