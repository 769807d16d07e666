"""``--seeds 1,2,3``: the same generated mix under several seeds, with mean and spread."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

METRICS = (("gpuAllocation", "GPU alloc", 100.0, "%"), ("gpuBusy", "busy", 100.0, "%"),
           ("avgJctSeconds", "avg JCT", 1 / 3600, "h"), ("p99JctSeconds", "p99 JCT", 1 / 3600, "h"),
           ("avgQueueingSeconds", "avg queue", 1 / 3600, "h"), ("restartsPerJob", "restarts/job", 1.0, ""),
           ("lostWorkGpuHours", "lost GPU-h", 1.0, ""))


def parse_seeds(text: str) -> list[int]:
    """``1,2,3`` or ``1-5``; ValueError with a message on anything else."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        lo, dash, hi = part.partition("-")
        try:
            if dash and lo:
                a, b = int(lo), int(hi)
                if b < a:
                    raise ValueError
                seeds.extend(range(a, b + 1))
            else:
                seeds.append(int(part))
        except ValueError:
            raise ValueError(f"--seeds {text!r}: expected seeds like 1,2,3 or 1-5") from None
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds {text!r}: a seed is repeated")
    return seeds


def mean_spread(values: Sequence[float]) -> tuple[float, float, float, float]:
    """(mean, sample standard deviation, min, max)."""
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return mean, sd, min(values), max(values)


def _aligned(rows: Sequence[Sequence[str]]) -> str:
    """``rows`` (the head first) in columns: the first left-aligned, the others right-aligned, a rule
    under the head."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def seeds_table(policies: Sequence[str], per_seed: dict[int, dict[str, dict[str, Any]]]) -> str:
    """One row per policy: each metric as mean ± standard deviation (min..max) over the seeds."""
    head = ("policy", *(label for _, label, _, _ in METRICS))
    rows = [head]
    for policy in policies:
        cells = [policy]
        for key, _, scale, unit in METRICS:
            mean, sd, lo, hi = mean_spread([s[policy][key] * scale for s in per_seed.values()])
            digits = 1 if unit in ("%", "") and key != "restartsPerJob" else 2
            cells.append(f"{mean:.{digits}f}{unit} ±{sd:.{digits}f} ({lo:.{digits}f}..{hi:.{digits}f})")
        rows.append(tuple(cells))
    return _aligned(rows)


def class_ratio_table(policies: Sequence[str], per_seed: dict[int, dict[str, dict[str, Any]]]) -> str:
    """Per class: each policy's JCT ratio against static-max, mean (min..max) over the seeds."""
    classes: dict[tuple[str, int], dict[str, list[float]]] = {}
    jobs: dict[tuple[str, int], list[int]] = {}
    for summaries in per_seed.values():
        for policy in policies:
            for e in summaries[policy]["perClass"]:
                key = (e["kind"], e["maxWorkers"])
                if e["avgJctRatioVsStaticMax"] is not None:
                    classes.setdefault(key, {}).setdefault(policy, []).append(e["avgJctRatioVsStaticMax"])
                if policy == policies[0]:
                    jobs.setdefault(key, []).append(e["jobs"])
    head = ("class", "jobs/seed", *policies)
    rows = [head]
    for key in sorted(classes, key=lambda k: (k[0] != "elastic", k[1])):
        cells = [f"{key[0]} max {key[1]}", f"{sum(jobs.get(key, [0])) / max(1, len(jobs.get(key, [0]))):.0f}"]
        for policy in policies:
            vals = classes[key].get(policy, [])
            cells.append(f"{sum(vals) / len(vals):.2f}x ({min(vals):.2f}..{max(vals):.2f})" if vals else "-")
        rows.append(tuple(cells))
    return _aligned(rows)
