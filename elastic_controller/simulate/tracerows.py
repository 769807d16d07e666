"""What every trace reader shares: the ``JobSpec`` it returns, the ``TraceError`` it raises, how a
public trace's jobs become elastic (``ImportOptions``), and the CSV and field helpers. Below both
``trace`` (our format, Helios, Alibaba, dispatch) and ``public_traces`` (Philly, Tiresias).
"""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..policy.keys import WORKER_COUNTS

GIB = 2**30
DEFAULT_CPU_PER_GPU = 8000  # millicores
DEFAULT_MEMORY_PER_GPU = 64 * GIB


class TraceError(ValueError):
    """A trace (or cluster) file that cannot be used; ``line`` is 1-based, 0 when unknown."""

    def __init__(self, path: str, line: int, message: str) -> None:
        self.path = path
        self.line = line
        self.message = message
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One training job of a trace. ``work`` is in GPU-seconds (at perfect scaling)."""

    name: str
    submit: float  # seconds from the start of the trace
    min_workers: int
    max_workers: int
    gpus: int  # per worker
    work: float  # GPU-seconds
    queue: str = "default"
    priority: int = 0
    cpu: int = 0  # millicores per worker (0: DEFAULT_CPU_PER_GPU per GPU)
    memory: int = 0  # bytes per worker (0: DEFAULT_MEMORY_PER_GPU per GPU)
    # the Worker counts the job's training can run with (the trace's ``workerCounts``, ascending;
    # () = any count in [min, max]); carried to the planner as the PodGroup's worker-counts annotation
    worker_counts: tuple[int, ...] = ()
    line: int = field(default=0, compare=False)  # where the trace defines it (0: generated)

    @property
    def counts_annotation(self) -> dict[str, str]:
        """The job contract as the controller copies it onto the job's PodGroup ({} when unconstrained)."""
        return {WORKER_COUNTS: ",".join(map(str, self.worker_counts))} if self.worker_counts else {}

    @property
    def cpu_request(self) -> int:
        return self.cpu or DEFAULT_CPU_PER_GPU * max(1, self.gpus)

    @property
    def memory_request(self) -> int:
        return self.memory or DEFAULT_MEMORY_PER_GPU * max(1, self.gpus)


@dataclass(frozen=True, slots=True)
class ImportOptions:
    """How jobs of a public trace (which are not elastic) become elastic jobs.

    ``max`` is the job's size in the trace; ``min = ceil(max * min_fraction)``. With
    ``worker_gpus`` set, a job of G GPUs becomes ceil(G / worker_gpus) workers of that size. With
    ``elastic_fraction`` below 1, each multi-worker job is elastic with that probability (drawn
    from ``seed`` and the job's name, so independent of row order) and rigid (min = max) otherwise.
    """

    min_fraction: float = 0.5
    worker_gpus: int = 0
    queue: str = ""  # force one queue (Helios: the VC otherwise; Alibaba: "default")
    limit: int = 0  # keep only the first N jobs (0: all)
    elastic_fraction: float = 1.0
    seed: int = 1


# --- helpers -------------------------------------------------------------------------------------

class _FieldError(ValueError):
    pass


def _int(row: Mapping[str, Any], key: str, low: int | None = None, default: int | None = None) -> int:
    raw = row.get(key)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        if default is not None:
            return default
        raise _FieldError(f"{key!r} is missing")
    if isinstance(raw, bool):
        raise _FieldError(f"{key!r} must be an integer, got {raw!r}")
    try:
        value = int(raw) if isinstance(raw, int) else int(str(raw).strip())
    except ValueError:
        try:
            as_float = float(str(raw).strip())
        except ValueError:
            raise _FieldError(f"{key!r} must be an integer, got {raw!r}") from None
        if not as_float.is_integer():
            raise _FieldError(f"{key!r} must be an integer, got {raw!r}") from None
        value = int(as_float)
    if low is not None and value < low:
        raise _FieldError(f"{key!r} must be >= {low}, got {value}")
    return value


def _text(row: Mapping[str, Any], key: str) -> str:
    """A field that must not be empty, stripped."""
    value = str(row.get(key) or "").strip()
    if not value:
        raise _FieldError(f"{key!r} is missing")
    return value


def _float(row: Mapping[str, Any], key: str, low: float = 0.0, positive: bool = False) -> float:
    raw = row.get(key)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        raise _FieldError(f"{key!r} is missing")
    if isinstance(raw, bool):
        raise _FieldError(f"{key!r} must be a number, got {raw!r}")
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise _FieldError(f"{key!r} must be a number, got {raw!r}") from None
    if not math.isfinite(value) or value < low or (positive and value <= 0):
        bound = "> 0" if positive else f">= {low:g}"
        raise _FieldError(f"{key!r} must be a finite number {bound}, got {raw!r}")
    return value


def _finish(jobs: list[tuple[int, JobSpec]], path: str) -> list[JobSpec]:
    seen: dict[str, int] = {}
    for line, job in jobs:
        if job.name in seen:
            raise TraceError(path, line, f"job name {job.name!r} already used on line {seen[job.name]}")
        seen[job.name] = line
    if not jobs:
        raise TraceError(path, 0, "no jobs in trace")
    ordered = sorted((replace(j, line=line) for line, j in jobs), key=lambda j: (j.submit, j.name))
    start = ordered[0].submit
    if start:
        ordered = [_shift(j, -start) for j in ordered]
    return ordered


def _shift(job: JobSpec, delta: float) -> JobSpec:
    return replace(job, submit=job.submit + delta)


def _csv_rows(text: str, path: str) -> tuple[list[str], Iterable[tuple[int, dict[str, str]]]]:
    lines = text.splitlines()
    reader = csv.reader(lines)
    header: list[str] | None = None
    rows: list[tuple[int, dict[str, str]]] = []
    try:
        for record in reader:
            line = reader.line_num
            if not record or all(not c.strip() for c in record) or record[0].lstrip().startswith("#"):
                continue
            if header is None:
                header = [c.strip() for c in record]
                continue
            if len(record) != len(header):
                raise TraceError(path, line, f"expected {len(header)} columns, got {len(record)}")
            rows.append((line, {k: v.strip() for k, v in zip(header, record, strict=True)}))
    except csv.Error as exc:
        raise TraceError(path, reader.line_num, f"not valid CSV: {exc}") from exc
    if header is None:
        raise TraceError(path, 0, "empty file")
    return header, rows


def _need_columns(header: list[str], needed: Iterable[str], path: str, layout: str) -> None:
    missing = [c for c in needed if c not in header]
    if missing:
        raise TraceError(path, 1, f"{layout} header lacks column(s): {', '.join(missing)}")


def _elastic(total_gpus: int, workers: int, opts: ImportOptions, name: str = "") -> tuple[int, int, int]:
    """(min, max, gpus per worker) of an imported job that used ``total_gpus`` on ``workers`` nodes."""
    if opts.worker_gpus:
        per = opts.worker_gpus
        hi = max(1, math.ceil(total_gpus / per))
    else:
        hi = max(1, workers)
        per = max(1, math.ceil(total_gpus / hi))
    lo = min(hi, max(1, math.ceil(hi * opts.min_fraction - 1e-9)))
    if opts.elastic_fraction < 1 and hi > 1 and random.Random(f"{opts.seed}:{name}").random() >= opts.elastic_fraction:
        lo = hi  # drawn to stay rigid
    return lo, hi, per


def _slug(text: str) -> str:
    out = "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")
    return out or "x"
