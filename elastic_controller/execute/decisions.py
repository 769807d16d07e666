"""Each starving gang's ``last-decision`` annotation on its PodGroup: what this cycle did for it
(evicted, gave notice, could not execute, waits), written only when the text changed."""

from __future__ import annotations

from datetime import datetime

from ..kube.errors import KubeError
from ..policy import keys
from ..policy.decisions import CyclePlan
from ..policy.parse import format_time
from .executor import CycleReport, Executor, log


def write_decisions(ex: Executor, plan: CyclePlan, report: CycleReport, now: datetime) -> None:
    if ex.dry_run:
        return
    stamp = format_time(now)
    for d in plan.starving:
        if d.pod_group in report.failed:
            text = f"{stamp} waiting: plan to evict {len(d.victims)} not executed ({report.failed[d.pod_group]})"
        elif d.pod_group in report.noticed:
            text = (f"{stamp} eviction notice given to {len(report.noticed[d.pod_group])} elastic worker(s) "
                    f"for it: {d.reason}")
        elif d.decision == "evict":
            text = f"{stamp} evicted {len(d.victims)} elastic worker(s) for it: {d.reason}"
        else:
            text = f"{stamp} waiting: {d.reason}"
        current = ex.pg_annotations(d.pod_group).get(keys.LAST_DECISION, "")
        if not ex.ours(d.pod_group) or current[len(stamp):] == text[len(stamp):]:
            continue
        try:
            ex.patch_pg(d.pod_group, {keys.LAST_DECISION: text[:500]})
        except KubeError as exc:
            log.debug("last-decision not written", extra={"podgroup": d.pod_group, "error": str(exc)})
