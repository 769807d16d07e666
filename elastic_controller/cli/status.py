"""``volcano-elastic status``: one table per queue of elastic jobs and waiting gangs, planned on the
whole cluster as the agent would (``-n`` filters rows only)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from .common import (
    add_config_flag,
    add_kubeconfig_flag,
    add_output_flag,
    clip,
    fail,
    natural_key,
    print_document,
    table,
    warn,
)
from .effective_config import add_config_from_flag, before_connecting, choose_config, summary
from .victims import victim_text, victims_of

HELP = ("show elastic jobs per queue: min/current/max, elastic workers, cooldown, torchrun restarts used of "
        "maxRestarts, gated pods and why, starving")

EPILOG = """\
Columns: MIN/CUR/MAX workers (pods, for a plain gang); ELASTIC: elastic workers running of those the job
may add above its min (CUR-MIN of MAX-MIN: 0/14 is a job running at its min, "<min" one below it;
"whole": its queue admits it whole, wholeGangUpTo, so its gang is its max and it is never shrunk);
COOLDOWN left; RESTARTS: torchrun restarts our shrinks used of maxRestarts ("spent": no victim);
GATED pods held by the scale-up gate and WHY GATED (a reason code, the same as plan's HOLD
rows, or Growing, WaitingGang, MinNotRunning, NoRoom); STARVING pods of a waiting gang; LAST DECISION,
headed on a job about to lose workers by "SHRINKING N for ns/gang" (evicted this cycle; "for ns/job
(fairness scale-down)" when they go to the least-served job of the queue) or "NOTICE until TIME: N for
ns/gang" (under an eviction notice; JSON victimOf, its kind "gang" or "fairness").
-o wide prints whole reasons; -o json|yaml prints {"apiVersion": "volcano-elastic.io/v1", "kind":
"Status", "configSource", "queues": {QUEUE: [rows]}, "evictionNotices", "heldJobs", "skippedObjects"}.
HELD JOBS: new elastic jobs without a PodGroup yet, held by their queue's elasticMinShare (why: the
controller's volcano-elastic.io/held annotation on the job; JSON heldJobs [{"job", "reason", "message"}]).
Decisions use the controller's configuration, read from its ConfigMap (--config-from), unless --config
names a file; the first line (CONFIG) and configSource say which was used.
The decisions are planned on the whole cluster (the agent's view): -n only filters the rows, and
status needs cluster-wide list on nodes, pods, PodGroups, queues, PriorityClasses and PyTorchJobs (the
chart's volcano-elastic-viewer ClusterRole grants exactly that)."""

# what a 403 on the snapshot means for the person who ran the command
FORBIDDEN_HINT = ("decisions are planned on the whole cluster, so this needs cluster-wide list on nodes, pods, "
                  "PodGroups, queues, PriorityClasses and PyTorchJobs: ask for the volcano-elastic-viewer ClusterRole")

COLUMNS = ("JOB", "MIN", "CUR", "MAX", "ELASTIC", "COOLDOWN", "RESTARTS", "GATED", "WHY GATED", "STARVING",
           "LAST DECISION")

# Why gated pods stay gated, besides the planner's HoldReason codes (its HOLD notes):
GROWING = "Growing"  # the agent releases some of them this cycle, or frees room for them (fairness scale-down)
WAITING_GANG = "WaitingGang"  # a waiting gang holds back every scale-up
MIN_NOT_RUNNING = "MinNotRunning"  # its min set is not running yet: gated pods wait for it
NO_ROOM = "NoRoom"  # its next gated pod does not fit (on the nodes or in its queue's share)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    add_kubeconfig_flag(parser, context=True)
    add_config_flag(parser, "default: the controller's, read from its ConfigMap (--config-from)")
    add_config_from_flag(parser)
    parser.add_argument("-n", "--namespace",
                        help="show only this namespace's jobs (decisions are planned on the whole cluster)")
    add_output_flag(parser, "whole reasons (the table cuts LAST DECISION at 60 characters, shows WHY GATED as a code)")
    parser.add_argument("--volcano-scheduler-configmap", default="volcano-system/volcano-scheduler-configmap",
                        metavar="NAMESPACE/NAME",
                        help="the Volcano scheduler's ConfigMap, read when RBAC allows get on it ('' to "
                             "skip): compared with config `shares`, and a warning that two evictors run when "
                             "its actions evict (preempt, reclaim, gangpreempt, gangreclaim)")
    parser.add_argument("--now", help=argparse.SUPPRESS)


def gated_reason(key: str, running: int, min_member: int, plan: Any) -> dict[str, Any]:
    """Why the gated pods of the job of PodGroup ``key`` stay gated (read-only: the planner's own
    decision and HOLD note): ``reason`` code, ``until`` (RFC 3339 or None), ``message``."""
    from .plan import note_json

    note = next((n for n in plan.notes if n.job == key), None)
    if note is not None:
        return note_json(note)
    grown = [g for g in plan.gate_releases if g.job == key]
    if grown:
        return {"reason": GROWING, "until": None,
                "message": f"{len(grown)} released this cycle: " + grown[0].reason.rpartition("; fits on ")[0]}
    freed = [e for e in plan.evictions if e.fairness and e.for_gang == key]
    if freed:  # (issue 38) its gated pods are released once they leave, in a later cycle
        givers = ", ".join(sorted({e.job for e in freed}))
        return {"reason": GROWING, "until": None,
                "message": f"{len(freed)} worker(s) are being freed for it by the fairness scale-down (from "
                           f"{givers}): its gated pods are released once they leave"}
    if plan.scale_up_blocked_by:
        return {"reason": WAITING_GANG, "until": None,
                "message": f"held back by waiting gang(s) {', '.join(plan.scale_up_blocked_by)}: no job grows "
                           "while a waiting gang could be placed by evicting elastic workers"}
    if running < min_member:
        return {"reason": MIN_NOT_RUNNING, "until": None,
                "message": f"{running} of its {min_member} min-set pods run: gated pods are released once "
                           "its min set runs"}
    return {"reason": NO_ROOM, "until": None,
            "message": "its next gated pod fits nowhere now (on the nodes and in its queue's share)"}


def build_rows(items: list[dict[str, Any]], cfg: Any, now: datetime,
               namespace: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Queue -> rows, jobs in natural order (pure: objects in, rows out). The plan is made on all of
    ``items``; ``namespace`` only filters the rows."""
    from ..policy import keys
    from ..policy.actions import SpendRestart
    from ..policy.attained import attained_service
    from ..policy.budget import budget_of
    from ..policy.contract import in_place, sentence_of
    from ..policy.cooldowns import cooldown_remaining, fulfillment
    from ..policy.cycle import decide
    from ..policy.parse import parse_objects
    from ..policy.podgroups import JobSpecError, job_bounds, whole_gang
    from ..policy.restart_count import with_counts
    from ..policy.world import ghosts_of

    snap, _ = parse_objects(items, cfg)
    decided = decide(snap, cfg, now)
    plan = decided.shown
    victims = victims_of(plan, decided.notices)  # the jobs about to lose workers (cli/victims.py)
    # a restart that happened and the agent counts this cycle shows in RESTARTS already (as the plan saw it)
    snap = with_counts(snap, decided.of(SpendRestart))
    starving = {d.pod_group: d for d in plan.starving}
    jobs = {j.key: j for j in snap.jobs}
    ghosts = ghosts_of(snap)  # Running on a lost node: not counted (docs/failure-model.md, "A lost node")
    pods_by_group: dict[str, list[Any]] = {}
    for p in snap.pods:
        if p.group_key:
            pods_by_group.setdefault(p.group_key, []).append(p)
    gate = cfg.gating.gateName
    out: dict[str, list[dict[str, Any]]] = {}
    for pg in sorted(snap.podgroups, key=lambda g: natural_key(g.key)):
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
        live = [p for p in pods if p.running and p.key not in ghosts]
        workers = sum(1 for p in live if p.replica_type == "worker")
        running = len(live)
        policy = cfg.queue_policy(pg.queue)
        decision = starving.get(pg.key)
        why = sentence_of(pg.annotations.get(keys.LAST_DECISION))
        budget = budget_of(pg, job) if bounds is not None and bounds.elastic else None
        if decision is not None:
            why = f"now: {decision.decision}: {decision.reason}"
        gated = sum(1 for p in pods if p.pending and p.gated(gate))
        at_least_min = bounds is not None and workers >= bounds.min_replicas
        gang = whole_gang(bounds, policy.wholeGangUpTo) if bounds is not None else 0
        row = {
            "job": pg.key,
            "min": bounds.min_replicas if bounds else pg.min_member,
            "current": workers if bounds else running,
            "max": bounds.max_replicas if bounds else pg.min_member,
            # (running workers - min) / (max - min): 0.0 is a job at its min, None one below it (or a gang)
            "fulfillment": round(fulfillment(workers, bounds.min_replicas, bounds.max_replicas), 2)
            if bounds and at_least_min else None,
            # elastic workers running above min, and how many it may have (None: below min, or a gang)
            "elasticWorkers": workers - bounds.min_replicas if bounds and at_least_min else None,
            "elasticMax": bounds.max_replicas - bounds.min_replicas if bounds else None,
            # an elastic job its queue admits whole (wholeGangUpTo: its gang is its max, the controller's
            # PodGroup says so, the agent never shrinks it): {"wholeGangUpTo", "gang", "message"}; None: not
            "admittedWhole": {"wholeGangUpTo": policy.wholeGangUpTo, "gang": gang,
                              "message": f"admitted whole (wholeGangUpTo {policy.wholeGangUpTo}): its gang is "
                                         f"its max, {gang} workers; it starts whole and is never shrunk"}
            if bounds is not None and gang > bounds.min_replicas else None,
            # (a job resized in place: QueuePolicy.cooldown_seconds, the shorter of its queue's two: issue 39)
            "cooldownSeconds": int(cooldown_remaining(pg, policy, now, job,
                                                      job is not None and in_place(job.annotations))),
            # torchrun restarts our shrinks used (restarts-used) of maxRestarts; spent: no victim
            # (policy/budget.py). None when the job is not elastic or its PyTorchJob is not listed.
            "restarts": None if budget is None else {"used": budget.used, "max": budget.max_restarts,
                                                     "spent": budget.spent},
            "gated": gated,
            "gatedReason": gated_reason(pg.key, running, pg.min_member, plan) if gated else None,
            "starving": len(decision.needed) if decision else 0,
            "lastDecision": why,
            # this job is about to lose workers: {"for", "kind", "workers", "evicting", "underNotice",
            # "noticeUntil", "pods"} (None: it is not; kind "fairness": a fairness scale-down gives them to "for")
            "victimOf": victims.get(pg.key),
            # pods that predate our webhook (no group annotation), counted by their labels
            "adoptedPods": sum(1 for p in pods if p.adopted),
            # pods still Running on a node that is not Ready (or gone): counted in no current
            "lostPods": sum(1 for p in pods if p.key in ghosts),
            # GPU-seconds the job has held (its stamp plus its placed pods since: policy/attained.py)
            "attainedGpuSeconds": round(attained_service(pg, pods, now), 1),
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
    for f, left in sorted(rows, key=lambda r: (r[1], natural_key(r[0].pod))):
        if namespace and f.pod.partition("/")[0] != namespace:
            continue
        out.append({"pod": f.pod, "job": f.job, "for": f.gang, "queue": f.queue,
                    "evictAfter": format_time(f.evict_after) if f.evict_after else "",
                    "secondsLeft": max(0, round(left))})
    return out


def held_jobs(items: list[dict[str, Any]], namespace: str | None = None) -> list[dict[str, Any]]:
    """PyTorchJobs whose PodGroup the controller withholds (their queue's ``elasticMinShare``: the
    ``volcano-elastic.io/held`` annotation it writes): ``job``, ``reason`` (the code), ``message``."""
    from ..policy import keys
    from ..policy.minshare import HELD_REASON

    out = []
    for obj in items:
        meta = obj.get("metadata") or {}
        message = (meta.get("annotations") or {}).get(keys.HELD) if obj.get("kind") == "PyTorchJob" else None
        if not message or (namespace and meta.get("namespace") != namespace):
            continue
        out.append({"job": f"{meta.get('namespace')}/{meta.get('name')}", "reason": HELD_REASON, "message": message})
    return sorted(out, key=lambda r: natural_key(r["job"]))


def render_held(rows: list[dict[str, Any]], wide: bool = False, width: int = 100) -> str:
    if not rows:
        return ""
    lines = [f"HELD JOBS ({len(rows)}: no PodGroup yet, held by their queue's elasticMinShare)"]
    cells = [("JOB", "WHY")] + [(r["job"], r["message"] if wide else clip(r["message"], width)) for r in rows]
    return "\n".join(lines + table(cells, "  ")) + "\n\n"


def render_notices(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    lines = [f"EVICTION NOTICES ({len(rows)} pending: evicted at EVICT AFTER, or at once after the job records "
             "a checkpoint)"]
    cells = [("POD", "JOB", "FOR GANG", "EVICT AFTER", "LEFT")]
    cells += [(r["pod"], r["job"], r["for"], r["evictAfter"] or "?", f"{r['secondsLeft']}s" if r["secondsLeft"]
               else "due") for r in rows]
    return "\n".join(lines + table(cells, "  ")) + "\n\n"


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


def _elastic(r: dict[str, Any]) -> str:
    if r.get("admittedWhole"):
        return "whole"
    if r.get("elasticMax") is None:
        return "-"
    return "<min" if r.get("elasticWorkers") is None else f"{r['elasticWorkers']}/{r['elasticMax']}"


def _why_gated(r: dict[str, Any], wide: bool) -> str:
    g = r.get("gatedReason")
    if not g:
        return "-"
    head = g["reason"] + (f" until {g['until']}" if g.get("until") else "")
    return f"{head}: {g['message']}" if wide else head


# The agent's alarms, said as Warning Events (issue 31): a second active writer, a clock off the API
# server's, gangs that fit while no scheduler places anything.
ALARM_REASONS = ("SecondWriter", "ClockSkew", "SchedulerIdle")
ALARM_WINDOW_SECONDS = 900.0


def alarms(events: list[dict[str, Any]], items: list[dict[str, Any]], now: datetime,
           own_skew: float = 0.0) -> list[str]:
    """One line per alarm (pure): the agent's alarm Events of the last 15 minutes, scale stamps in the
    API server's future (a writer with a clock ahead), and this machine's own clock skew."""
    from ..kube.clock import SKEW_WARN_SECONDS
    from ..policy import keys
    from ..policy.parse import parse_time

    out: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    for e in sorted(events, key=lambda e: str(e.get("lastTimestamp") or ""), reverse=True):
        reason = str(e.get("reason") or "")
        at = parse_time(e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp"))
        if reason not in ALARM_REASONS or at is None or (now - at).total_seconds() > ALARM_WINDOW_SECONDS:
            continue
        obj = e.get("involvedObject") or {}
        where = f"{obj.get('kind')} {obj.get('namespace', '')}/{obj.get('name')}".replace(" /", " ")
        key = (reason, where, str(e.get("message")))
        if key not in seen:
            seen.add(key)
            out.append(f"{reason} ({where}, {e.get('lastTimestamp')}): {e.get('message')}")
    for obj in items:
        if obj.get("kind") != "PodGroup":
            continue
        meta = obj.get("metadata") or {}
        stamp = parse_time((meta.get("annotations") or {}).get(keys.LAST_SCALE_TIME))
        if stamp is not None and (stamp - now).total_seconds() > 1:
            out.append(f"FutureStamp (PodGroup {meta.get('namespace')}/{meta.get('name')}): last-scale-time is "
                       f"{(stamp - now).total_seconds():.0f}s in the API server's future: a writer's clock is ahead")
    if abs(own_skew) > SKEW_WARN_SECONDS:
        out.append(f"ClockSkew (this machine): its clock is {own_skew:+.0f}s off the API server's; ages shown use "
                   "the server's")
    return out


def render_alarms(lines: list[str]) -> str:
    if not lines:
        return ""
    return f"ALARMS ({len(lines)})\n" + "".join(f"  {line}\n" for line in lines) + "\n"


def render(rows: dict[str, list[dict[str, Any]]], width: int = 60, shares: str | None = None,
           wide: bool = False) -> str:
    """The tables; ``shares``: the queue-share model line printed first; ``wide``: whole reasons (else
    LAST DECISION is cut at ``width`` characters and WHY GATED is its code)."""
    lines: list[str] = [f"SHARES {shares}", ""] if shares else []
    adopted = lost = False
    for queue in sorted(rows, key=natural_key):
        lines.append(f"QUEUE {queue}")
        cells = [COLUMNS]
        for r in rows[queue]:
            cd = f"{r['cooldownSeconds']}s" if r["cooldownSeconds"] else "-"
            budget = r.get("restarts")
            restarts = "-" if budget is None else (
                f"{'?' if budget['used'] is None else budget['used']}/{budget['max']}"
                + (" spent" if budget["spent"] else ""))
            why = "; ".join(t for t in (victim_text(r.get("victimOf")), r["lastDecision"]) if t)
            why = why if wide else clip(why, width)
            job = r["job"]
            if r.get("adoptedPods"):
                job, adopted = f"{job} (adopted)", True
            current = str(r["current"])
            if r.get("lostPods"):
                current, lost = f"{current} (+{r['lostPods']} lost)", True
            cells.append((job, str(r["min"]), current, str(r["max"]), _elastic(r), cd, restarts,
                          str(r["gated"]),
                          _why_gated(r, wide), str(r["starving"]), why or "-"))
        lines.extend(table(cells, "  "))
        lines.append("")
    if adopted:
        lines.append("(adopted): pods created before the webhook was registered, counted by their labels; "
                     "restart them at a quiet moment (docs/compatibility.md#adopting-running-jobs)")
        lines.append("")
    if lost:
        lines.append("(+N lost): pods still Running on a node that is not Ready (or gone), counted in no CUR "
                     "and never victims, until they are deleted (docs/failure-model.md#a-lost-node)")
        lines.append("")
    if not rows:
        lines.append("no elastic jobs or waiting gangs\n")
    return "\n".join(lines)


def list_everything(client: Any) -> list[dict[str, Any]]:
    """The whole cluster, as the agent sees it: ``-n`` only filters the rows printed (the decision
    about a gang in one namespace depends on the pods, PodGroups and jobs of every other)."""
    from ..kube.errors import NotFoundError
    from ..kube.resources import SNAPSHOT_RESOURCES

    items: list[dict[str, Any]] = []
    for res in SNAPSHOT_RESOURCES:
        try:
            got, _ = client.list(res)
        except NotFoundError:  # a CRD that is not installed
            continue
        items.extend(got)
    return items


def list_everything_or_exit(client: Any, command: str) -> list[dict[str, Any]]:
    """``list_everything``, or stop ``command`` with exit code 1 and what the API server said (on a
    403, with the RBAC it needs: ``FORBIDDEN_HINT``)."""
    from ..kube.errors import ForbiddenError, KubeError

    try:
        return list_everything(client)
    except ForbiddenError as exc:
        fail(command, f"{exc} ({FORBIDDEN_HINT})", 1)
    except KubeError as exc:
        fail(command, str(exc), 1)


def scheduler_verdict(client: Any, shares: Any, ref: str) -> str:
    """``check_scheduler``'s one-line verdict for the SHARES line. Its log records are for the agent's
    log; here the verdict says the same, so they are not printed (Python's last-resort handler printed
    them on stderr, unprefixed, on every run where the scheduler's ConfigMap was absent)."""
    from ..volcanoconf import check_scheduler, log

    was = log.disabled
    log.disabled = True
    try:
        return check_scheduler(client, shares, ref)
    finally:
        log.disabled = was


def run(args: argparse.Namespace) -> int:
    from ..kube.errors import KubeError
    from ..kube.resources import EVENTS
    from ..policy.parse import parse_time
    from ..policy.times import format_time
    from .connect import connect

    if args.now and parse_time(args.now) is None:
        fail("status", f"--now {args.now!r} is not RFC 3339")
    chosen = before_connecting(args, "status")
    client = connect(args, "status")
    items = list_everything_or_exit(client, "status")
    choice = choose_config(args, "status", client, chosen)
    cfg = choice.config
    try:
        events, _ = client.list(EVENTS, None, field_selector="type=Warning")
    except KubeError:  # not allowed to list Events cluster-wide: no alarms from them
        events = []
    # Ages against the API server's clock (its answers' Date headers), as the agent judges them.
    now = parse_time(args.now) if args.now else client.clock.now()
    assert now is not None
    alarm_lines = alarms(events, items, now, client.clock.skew())
    rows = build_rows(items, cfg, now, args.namespace)
    from ..volcanoconf import two_evictors

    warning = two_evictors(client, args.volcano_scheduler_configmap)  # None: not readable, or one evictor
    skipped = skipped_objects(items, cfg)
    notices = pending_notices(items, cfg, now, args.namespace)
    held = held_jobs(items, args.namespace)
    if args.output in ("json", "yaml"):
        if warning:
            warn("status", warning)
        print_document("Status", {"now": format_time(now), "namespace": args.namespace or None,
                                  "configSource": choice.source, "queues": rows, "evictionNotices": notices,
                                  "heldJobs": held, "skippedObjects": skipped, "alarms": alarm_lines}, args.output)
    else:
        # the verdict (model, and whether the scheduler runs the same) heads the table
        shares = scheduler_verdict(client, cfg.shares, args.volcano_scheduler_configmap)
        sys.stdout.write(summary(choice) + "\n\n")
        sys.stdout.write(render_alarms(alarm_lines))
        sys.stdout.write((warning + "\n\n" if warning else "") +
                         render(rows, shares=shares, wide=args.output == "wide"))
        sys.stdout.write(render_held(held, wide=args.output == "wide"))
        sys.stdout.write(render_notices(notices))
        sys.stdout.write(render_skipped(skipped))
    return 0


def main(argv: Sequence[str] | None = None) -> int:  # pragma: no cover - convenience
    parser = argparse.ArgumentParser(prog="volcano-elastic status", description=HELP)
    add_arguments(parser)
    return run(parser.parse_args(argv))
