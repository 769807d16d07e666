"""Numbers from a simulation: the summary.json document, the table, per-job CSV."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .classes import per_class
from .engine import SimResult

SUMMARY_KEYS = ("gpuAllocation", "avgJctSeconds", "p50JctSeconds", "p99JctSeconds", "avgQueueingSeconds",
                "evictions", "restarts", "cooldownViolations", "gpuBusy", "gpuAllocationWhileArriving",
                "restartsPerJob", "lostWorkGpuHours", "notices", "noticesEndedByCheckpoint", "noticesWithdrawn",
                "noticeGpuHours", "workerCountViolations", "perClass")


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(result: SimResult, reference: SimResult | None = None) -> dict[str, Any]:
    """summary.json's entry of one policy (``reference``: static-max's run, for ``perClass``)."""
    done = [j for j in result.jobs if j.finished]
    jcts = [j.jct for j in done]
    queueing = [j.queueing for j in result.jobs if j.start >= 0]
    return {
        "gpuAllocation": round(result.gpu_allocation, 4),
        "avgJctSeconds": round(sum(jcts) / len(jcts), 1) if jcts else 0.0,
        "p50JctSeconds": round(percentile(jcts, 50), 1),
        "p99JctSeconds": round(percentile(jcts, 99), 1),
        "avgQueueingSeconds": round(sum(queueing) / len(queueing), 1) if queueing else 0.0,
        "evictions": result.evictions,
        "restarts": result.restarts,
        "cooldownViolations": result.cooldown_violations,
        # Allocation counts GPUs held while a job restarts after a scale event and while an evicted
        # worker terminates; these two do not, or do not depend on each policy's drain after the
        # last submission (see docs/simulate.md, "Metrics").
        "gpuBusy": round(result.gpu_busy, 4),
        "gpuAllocationWhileArriving": round(result.gpu_allocation_while_arriving, 4),
        "restartsPerJob": round(result.restarts / len(result.jobs), 3) if result.jobs else 0.0,
        # work done again after restarts, from each job's last checkpoint (--checkpoint-interval)
        "lostWorkGpuHours": round(sum(j.lost_work for j in result.jobs) / 3600, 1),
        # eviction notices (elastic, queues with noticeSeconds > 0): given, ended before their time by
        # the job's checkpoint, withdrawn, and the GPU-hours the victims kept from notice to eviction
        "notices": result.notices,
        "noticesEndedByCheckpoint": result.notices_ended_by_checkpoint,
        "noticesWithdrawn": result.notices_withdrawn,
        "noticeGpuHours": round(result.notice_gpu_seconds / 3600, 1),
        # a job with workerCounts came to run at a count not among them (the peers ignore the counts)
        "workerCountViolations": result.count_violations,
        "perClass": per_class(result, reference),
    }


TIME_COLUMNS = (("avgJctSeconds", "avg JCT"), ("p50JctSeconds", "p50 JCT"), ("p99JctSeconds", "p99 JCT"),
                ("avgQueueingSeconds", "avg queue"))


def table(results: Sequence[SimResult], summaries: Mapping[str, Mapping[str, Any]]) -> str:
    """One row per policy; each time column in one unit (named in its header)."""
    from .units import time_unit

    units = {key: time_unit(summaries[r.policy][key] for r in results) for key, _ in TIME_COLUMNS}
    head = ("policy", "jobs", "GPU alloc", "busy", "alloc arriving",
            *(f"{label} ({units[key].name})" for key, label in TIME_COLUMNS),
            "evictions", "restarts/job", "lost GPU-h", "cooldown viol.")
    rows = [head]
    for r in results:
        s = summaries[r.policy]
        done = sum(1 for j in r.jobs if j.finished)
        jobs = f"{done}" if done == len(r.jobs) else f"{done}/{len(r.jobs)}"
        rows.append((
            r.policy, jobs, f"{100 * s['gpuAllocation']:.1f}%", f"{100 * s['gpuBusy']:.1f}%",
            f"{100 * s['gpuAllocationWhileArriving']:.1f}%", *(units[key](s[key]) for key, _ in TIME_COLUMNS),
            str(s["evictions"]), f"{s['restartsPerJob']:.2f}", f"{s['lostWorkGpuHours']:,.0f}",
            str(s["cooldownViolations"]),
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in
                       enumerate(zip(row, widths, strict=True))) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def comparison(summaries: Mapping[str, Mapping[str, Any]], peer: str = "static-max") -> str | None:
    """elastic against static-max (or volcano-gang), the comparisons admins ask for."""
    if "elastic" not in summaries or peer not in summaries:
        return None
    e, m = summaries["elastic"], summaries[peer]
    points = 100 * (e["gpuAllocation"] - m["gpuAllocation"])
    ratio = e["avgJctSeconds"] / m["avgJctSeconds"] if m["avgJctSeconds"] else float("nan")
    busy = 100 * (e["gpuBusy"] - m["gpuBusy"])
    arriving = 100 * (e["gpuAllocationWhileArriving"] - m["gpuAllocationWhileArriving"])
    return (f"elastic vs {peer}: GPU allocation {points:+.1f} points ({busy:+.1f} busy, "
            f"{arriving:+.1f} while jobs arrive), average JCT x{ratio:.2f}")


def jobs_csv(result: SimResult) -> str:
    lines = ["name,queue,submit,start,finish,jct,queueing,min,max,minSeen,maxSeen,restarts,evictions,"
             "work,heldGpuSeconds,lostWork"]
    for j in result.jobs:
        lines.append(
            f"{j.name},{j.queue},{j.submit:g},{j.start:g},{j.finish:g},"
            f"{j.jct if j.finished else -1:g},{j.queueing if j.start >= 0 else -1:g},{j.min_workers},"
            f"{j.max_workers},{j.min_seen},{j.max_seen},{j.restarts},{j.evictions},{j.work:g},"
            f"{j.held_gpu_seconds:.1f},{j.lost_work:.1f}")
    return "\n".join(lines) + "\n"
