"""Who pays: jobs grouped by class (``elastic`` or ``rigid`` in the trace, and max workers).

For each class and policy: how many jobs, their average JCT and queueing, restarts per job, and
against the same jobs under ``static-max``: the ratio of the average JCTs (over the jobs of the
class that finished under both) and how many jobs took more than 1.2 times their own
``static-max`` JCT.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .engine import JobResult, SimResult
from .units import time_unit

OVER = 1.2


def job_class(job: JobResult) -> tuple[str, int]:
    return ("rigid" if job.trace_min == job.trace_max else "elastic"), job.trace_max


def per_class(result: SimResult, reference: SimResult | None) -> list[dict[str, Any]]:
    """``summary.json``'s ``perClass`` list (``reference``: the static-max run of the same trace)."""
    ref = {j.name: j for j in reference.jobs if j.finished} if reference is not None else {}
    groups: dict[tuple[str, int], list[JobResult]] = {}
    for j in result.jobs:
        groups.setdefault(job_class(j), []).append(j)
    out = []
    for (kind, hi), jobs in sorted(groups.items(), key=lambda kv: (kv[0][0] != "elastic", kv[0][1])):
        done = [j for j in jobs if j.finished]
        started = [j for j in jobs if j.start >= 0]
        paired = [(j, ref[j.name]) for j in done if j.name in ref]
        ratio: float | None = None
        over: int | None = None
        if reference is not None:
            ref_sum = sum(r.jct for _, r in paired)
            ratio = round(sum(j.jct for j, _ in paired) / ref_sum, 3) if ref_sum > 0 else None
            over = sum(1 for j, r in paired if j.jct > OVER * r.jct + 1e-9)
        out.append({
            "kind": kind,
            "maxWorkers": hi,
            "jobs": len(jobs),
            "avgJctSeconds": round(sum(j.jct for j in done) / len(done), 1) if done else 0.0,
            "avgQueueingSeconds": round(sum(j.queueing for j in started) / len(started), 1) if started else 0.0,
            "restartsPerJob": round(sum(j.restarts for j in jobs) / len(jobs), 3),
            "avgJctRatioVsStaticMax": ratio,
            "jobsOver1_2xStaticMax": over,
        })
    return out


def class_table(results: Sequence[SimResult], summaries: dict[str, dict[str, Any]]) -> str:
    """The per-class view: one row per class and policy."""
    classes: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
    for r in results:
        for entry in summaries[r.policy].get("perClass", []):
            classes.setdefault((entry["kind"], entry["maxWorkers"]), {})[r.policy] = entry
    entries = [e for by_policy in classes.values() for e in by_policy.values()]
    jct, queue = time_unit(e["avgJctSeconds"] for e in entries), time_unit(e["avgQueueingSeconds"] for e in entries)
    head = ("class", "policy", "jobs", f"avg JCT ({jct.name})", f"avg queue ({queue.name})", "restarts/job",
            "JCT vs static-max", ">1.2x static-max")
    rows = [head]
    for (kind, hi), by_policy in sorted(classes.items(), key=lambda kv: (kv[0][0] != "elastic", kv[0][1])):
        first = True
        for r in results:
            e = by_policy.get(r.policy)
            if e is None:
                continue
            ratio = e["avgJctRatioVsStaticMax"]
            over = e["jobsOver1_2xStaticMax"]
            rows.append((f"{kind} max {hi}" if first else "", r.policy, str(e["jobs"]),
                         jct(e["avgJctSeconds"]), queue(e["avgQueueingSeconds"]),
                         f"{e['restartsPerJob']:.2f}", f"{ratio:.2f}x" if ratio is not None else "-",
                         f"{over}" if over is not None else "-"))
            first = False
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in
                       enumerate(zip(row, widths, strict=True))) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
