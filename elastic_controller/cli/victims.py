"""The victim's side in ``status``: the job about to lose workers says so on its own row, not only
the gang it makes room for. ``victimOf`` in JSON; in the table, ``SHRINKING N for ns/gang`` (evicted
this cycle) or ``NOTICE until TIME`` (its workers are under an eviction notice) heads LAST DECISION."""

from __future__ import annotations

from typing import Any


def victims_of(plan: Any, review: Any) -> dict[str, dict[str, Any]]:
    """Job (``ns/podgroup``) -> ``{"for", "kind", "workers", "evicting", "underNotice", "noticeUntil", "pods"}``
    for every job that loses workers: ``evicting`` the plan's evictions of this cycle (with a review made
    ``due``, the due victims are among them), ``underNotice`` its other workers under a pending notice,
    ``noticeUntil`` the earliest end of those (RFC 3339), ``for`` the gang(s) they make room for."""
    from ..policy.times import format_time

    out: dict[str, dict[str, Any]] = {}

    def entry(job: str) -> dict[str, Any]:
        return out.setdefault(job, {"for": [], "workers": 0, "evicting": 0, "underNotice": 0, "noticeUntil": None,
                                    "pods": []})

    kinds: dict[str, set[str]] = {}
    for e in plan.evictions:
        v = entry(e.job)
        v["evicting"] += 1
        v["pods"].append(e.pod)
        kinds.setdefault(e.job, set()).add(e.kind)
        if e.for_gang not in v["for"]:
            v["for"].append(e.for_gang)
    for p in sorted(review.pending, key=lambda p: p.seconds_left):
        f = p.facts
        v = entry(f.job)
        if f.pod in v["pods"]:
            continue
        v["underNotice"] += 1
        v["pods"].append(f.pod)
        if f.gang and f.gang not in v["for"]:
            v["for"].append(f.gang)
        if f.evict_after is not None and v["noticeUntil"] is None:
            v["noticeUntil"] = format_time(f.evict_after)
    return {job: {**v, "for": ", ".join(v["for"]), "kind": _kind(kinds.get(job, set()), v["underNotice"]),
                  "workers": v["evicting"] + v["underNotice"]}
            for job, v in out.items()}


def _kind(evicting: set[str], under_notice: int) -> str:
    """``victimOf.kind``: "fairness" when every worker it loses goes to a fairness scale-down
    (``EvictionKind``), "gang" when they make room for gangs, "gang, fairness" for both. A worker
    under a notice given in an earlier cycle counts as a gang's: the notice does not record its kind
    (the fairness scale-down gives one only in a queue with ``noticeSeconds``)."""
    from ..policy.decisions import EvictionKind

    kinds = set(evicting) | ({EvictionKind.GANG} if under_notice else set())
    return ", ".join(k for k in EvictionKind.ALL if k in kinds) or EvictionKind.GANG


def victim_text(victim: dict[str, Any] | None) -> str:
    """``SHRINKING 4 for team-nlp/bert`` (this cycle), ``NOTICE until 2026-01-01T13:05:00Z: 4 for
    team-nlp/bert`` (under notice), or both."""
    if not victim:
        return ""
    gang = (victim["for"] or "?") + (" (fairness scale-down)" if victim.get("kind") == "fairness" else "")
    notice = "NOTICE until " + (victim["noticeUntil"] or "?")
    if victim["evicting"]:
        more = f"; {victim['underNotice']} more under {notice}" if victim["underNotice"] else ""
        return f"SHRINKING {victim['evicting']} for {gang}{more}"
    return f"{notice}: {victim['underNotice']} for {gang}"
