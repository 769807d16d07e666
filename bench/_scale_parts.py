"""bench/scale_box.py's pure parts: percentiles, Prometheus text and histograms, the seeded
workload, the plan-against-log comparison (unit-tested in tests/unit/test_bench_scale_box.py)."""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def pct(values: Iterable[float], q: float) -> float | None:
    """The q-quantile of ``values`` (nearest rank on the sorted list); None when empty."""
    s = sorted(values)
    if not s:
        return None
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_prom(text: str) -> list[tuple[str, dict[str, str], float]]:
    """The samples of a Prometheus text exposition: (name, labels, value)."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        labels = {k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in _LABEL.findall(m.group(2) or "")}
        try:
            out.append((m.group(1), labels, float(m.group(3))))
        except ValueError:
            continue
    return out


def select(samples: list[tuple[str, dict[str, str], float]], metric: str, /,
           **want: str) -> list[tuple[dict[str, str], float]]:
    return [(lab, v) for n, lab, v in samples if n == metric and all(lab.get(k) == w for k, w in want.items())]


def histogram(samples: list[tuple[str, dict[str, str], float]], metric: str, /, **want: str) -> dict[str, Any]:
    """The histogram ``metric`` summed over every series matching ``want``: {"buckets": [(le, cumulative)],
    "count", "sum"}."""
    les: dict[float, float] = {}
    for lab, v in select(samples, metric + "_bucket", **want):
        le = float(lab["le"].replace("+Inf", "inf"))
        les[le] = les.get(le, 0.0) + v
    return {"buckets": sorted(les.items()), "count": sum(v for _, v in select(samples, metric + "_count", **want)),
            "sum": sum(v for _, v in select(samples, metric + "_sum", **want))}


def hist_delta(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    b = dict(before["buckets"])
    return {"buckets": [(le, c - b.get(le, 0.0)) for le, c in after["buckets"]],
            "count": after["count"] - before["count"], "sum": after["sum"] - before["sum"]}


def hist_quantile(buckets: list[tuple[float, float]], q: float) -> float | None:
    """Prometheus' histogram_quantile: linear interpolation inside the bucket holding rank q*count;
    the highest finite bound when the rank falls in +Inf; None without observations."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le, c in buckets:
        if c >= rank:
            if math.isinf(le):
                return prev_le
            if c == prev_c:
                return le
            return prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c)
        prev_le, prev_c = le, c
    return prev_le


def minus_pauses(start: float, end: float, pauses: list[tuple[float, float]]) -> float:
    """``end - start`` less the parts of it inside ``pauses`` (the plan check's stopped scheduler)."""
    return end - start - sum(max(0.0, min(end, p1) - max(start, p0)) for p0, p1 in pauses)


def summary(values: list[float], digits: int = 3) -> dict[str, Any]:
    def r(x: float | None) -> float | None:
        return None if x is None else round(x, digits)
    return {"n": len(values), "p50": r(pct(values, 0.5)), "p99": r(pct(values, 0.99)),
            "max": r(max(values) if values else None)}


def hist_summary(h: dict[str, Any], digits: int = 4) -> dict[str, Any]:
    def r(x: float | None) -> float | None:
        return None if x is None else round(x, digits)
    return {"n": int(h["count"]), "p50": r(hist_quantile(h["buckets"], 0.5)),
            "p99": r(hist_quantile(h["buckets"], 0.99)), "mean": r(h["sum"] / h["count"] if h["count"] else None)}


@dataclass(frozen=True)
class JobSpec:
    name: str
    namespace: str
    queue: str
    workers: int
    gpus: int  # per worker
    elastic: tuple[int, int] | None
    arrive: float  # seconds after the start
    lifetime: float

    @property
    def min_workers(self) -> int:
        return self.elastic[0] if self.elastic else self.workers


def workload(jobs: int, queues: int, duration: float, seed: int) -> list[JobSpec]:
    """The seeded mix: half elastic 2..8 x 2 GPUs, half rigid (1 x 8 or 2 x 4 GPUs), arriving uniformly
    over the first 60 % of ``duration``, each living 25-50 % of it; sorted by arrival."""
    rng = random.Random(seed)
    out = []
    for i in range(jobs):
        q = i % queues
        if rng.random() < 0.5:
            workers, gpus, elastic = 8, 2, (2, 8)
        else:
            workers, gpus = rng.choice(((1, 8), (2, 4)))
            elastic = None
        out.append(JobSpec(f"j{i:05d}", f"team-{q}", f"dept-{q}", workers, gpus, elastic,
                           round(rng.uniform(0, 0.6 * duration), 3),
                           round(rng.uniform(0.25, 0.5) * duration, 3)))
    return sorted(out, key=lambda j: (j.arrive, j.name))


def manifest(job: JobSpec, with_group: bool) -> dict[str, Any]:
    from tests.harness.kubeflow import pytorchjob_manifest

    template: dict[str, Any] = {"spec": {"containers": [{
        "name": "pytorch", "image": "docker.io/pytorch/pytorch:latest", "command": ["torchrun", "train.py"],
        "resources": {"limits": {"nvidia.com/gpu": str(job.gpus), "cpu": "1", "memory": "1Gi"}}}]}}
    if with_group:  # without us: what the training operator's gang integration puts on its pods
        template["metadata"] = {"annotations": {"scheduling.k8s.io/group-name": job.name}}
        template["spec"]["schedulerName"] = "volcano"
    return pytorchjob_manifest(job.name, job.queue, job.workers, job.elastic, template)


def plan_decisions(plan: dict[str, Any]) -> dict[str, set[str]]:
    """The comparable decisions of a ``plan -o json`` document."""
    return {"starving": {f"{s['podGroup']}={s['decision']}" for s in plan.get("starving") or []},
            "evictions": {str(e["pod"]) for e in plan.get("evictions") or []},
            "gateReleases": {str(g["pod"]) for g in plan.get("gateReleases") or []}}


def log_decisions(lines: Iterable[str]) -> dict[str, set[str]]:
    """The same decisions from the agent's JSON log lines of one cycle (``podgroup`` there is
    ns/name or name: reduced to what the plan prints)."""
    out: dict[str, set[str]] = {"starving": set(), "evictions": set(), "gateReleases": set()}
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        msg = rec.get("msg")
        if msg == "gang decision":
            out["starving"].add(f"{rec.get('podgroup')}={rec.get('decision')}")
        elif msg == "eviction planned":
            out["evictions"].add(str(rec.get("pod")))
        elif msg == "gate release planned":
            out["gateReleases"].add(str(rec.get("pod")))
    return out


CYCLE_LINE = "agent cycle"  # the agent's last log line of each cycle (its ``now`` and its counts)


def _cycle_now(line: str) -> str | None:
    """The ``now`` of an ``agent cycle`` log line (None for any other line)."""
    if f'"{CYCLE_LINE}"' not in line:
        return None
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    return str(rec["now"]) if rec.get("msg") == CYCLE_LINE and rec.get("now") else None


def last_cycle_end(log: bytes) -> int:
    """The offset just after the last whole cycle's ``agent cycle`` line in ``log`` (0 when none)."""
    end = 0
    pos = 0
    for raw in log.splitlines(keepends=True):
        pos += len(raw)
        if _cycle_now(raw.decode(errors="replace")) is not None:
            end = pos
    return end


def split_cycles(text: str) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """The whole cycles in a log read from a cycle's end: [(its now, its lines)], and the lines of
    a cycle not ended yet."""
    cycles: list[tuple[str, list[str]]] = []
    lines: list[str] = []
    for line in text.splitlines():
        now = _cycle_now(line)
        if now is None:
            lines.append(line)
        else:
            cycles.append((now, lines))
            lines = []
    if text and not text.endswith("\n") and lines:
        lines[-1:] = []  # a line being written
    return cycles, lines


def cycle_log(text: str, window: list[str]) -> dict[str, Any]:
    """The agent's ``agent cycle`` lines of a whole log: its cycles' seconds (exact p50/p99/max),
    and the five longest with what they did; cycles that decided inside ``window`` ([start, end],
    RFC 3339: the plan check, the controller stopped under them) are left out."""
    cycles = []
    for line in text.splitlines():
        if _cycle_now(line) is None:
            continue
        rec = json.loads(line)
        if len(window) == 2 and window[0] <= str(rec["now"]) <= window[1]:
            continue
        cycles.append(rec)
    longest = sorted(cycles, key=lambda r: -float(r.get("seconds") or 0))[:5]
    keep = ("now", "seconds", "snapshot_seconds", "before_decide_seconds", "repair_seconds", "notices_seconds",
            "records_seconds", "decide_seconds", "write_seconds",
            "starving", "evictions", "gate_releases", "released", "evicted", "not_leader")
    return {"cycleSecondsFromLog": summary([float(r.get("seconds") or 0) for r in cycles]),
            "longestCycles": [{k: r.get(k) for k in keep} for r in longest]}


def compare(a: dict[str, set[str]], b: dict[str, set[str]]) -> dict[str, Any]:
    diff = {k: {"onlyPlan": sorted(a[k] - b[k])[:10], "onlyLive": sorted(b[k] - a[k])[:10]} for k in a}
    return {"same": all(a[k] == b[k] for k in a), "counts": {k: len(a[k]) for k in a},
            "diff": {k: v for k, v in diff.items() if v["onlyPlan"] or v["onlyLive"]}}


def vm_hwm_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def run_histogram(snaps: tuple[Any, Any, Any, Any], metric: str) -> dict[str, Any]:
    """``metric`` over the run (snapshots at start, before and after the plan check, at the end; the
    middle two empty when there was none) less what the plan check's pause added."""
    first, before, after, last = (histogram(s, metric) for s in snaps)
    run = hist_delta(last, first)
    return hist_delta(run, hist_delta(after, before)) if after["count"] else run
