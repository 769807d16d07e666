"""Readers for two more public GPU traces: Microsoft Philly (as the Pollux artifact ships it) and
the Tiresias trace. Both record rigid jobs; ``trace._elastic`` makes them elastic (see
``ImportOptions`` and docs/simulate.md, "Public traces").

- Philly: ``timestamp,duration,num_gpus,gpu_time,cluster``; ``timestamp`` as
  ``YYYY-MM-DD HH:MM:SS``, ``duration`` in seconds at the traced GPU count, rows in any order;
  queue ``vc-`` + the ``cluster`` value lowercased; job names ``philly-<line>``.
- Tiresias: ``job_id,num_gpu,submit_time,iterations,model_name,duration,interval``;
  ``submit_time`` and ``duration`` in seconds; queue ``default``; names ``t-<job_id>``.

Without ``--worker-gpus`` a job of G GPUs becomes ceil(G / 8) workers (8-GPU nodes, as Philly's
were) of ceil(G / workers) GPUs. Jobs with no GPU or no duration are skipped (they use no GPU).
"""

from __future__ import annotations

import math
from datetime import datetime

from .tracerows import (
    ImportOptions,
    JobSpec,
    TraceError,
    _csv_rows,
    _elastic,
    _FieldError,
    _finish,
    _float,
    _int,
    _need_columns,
    _slug,
    _text,
)

PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
TIRESIAS_COLUMNS = ("job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration", "interval")
NODE_GPUS = 8


def _workers(gpus: int) -> int:
    return max(1, math.ceil(gpus / NODE_GPUS))


def _timestamp(raw: str, key: str) -> float:
    raw = raw.strip()
    if not raw:
        raise _FieldError(f"{key!r} is missing")
    try:
        return datetime.strptime(raw, "%Y-%m-%d %H:%M:%S").timestamp()
    except ValueError:
        raise _FieldError(f"{key!r} must be 'YYYY-MM-DD HH:MM:SS', got {raw!r}") from None


def parse_philly(text: str, path: str, opts: ImportOptions | None = None) -> list[JobSpec]:
    opts = opts or ImportOptions()
    header, rows = _csv_rows(text, path)
    _need_columns(header, PHILLY_COLUMNS, path, "Philly (Pollux) csv")
    jobs = []
    for line, row in rows:
        try:
            submit = _timestamp(row.get("timestamp", ""), "timestamp")
            duration = _float(row, "duration")
            gpus = _int(row, "num_gpus", low=0)
            _float(row, "gpu_time")
            cluster = _text(row, "cluster")
        except _FieldError as exc:
            raise TraceError(path, line, str(exc)) from None
        if gpus == 0 or duration <= 0:
            continue
        name = f"philly-{line}"
        lo, hi, per = _elastic(gpus, _workers(gpus), opts, name)
        jobs.append((line, JobSpec(name=name, submit=submit, min_workers=lo, max_workers=hi, gpus=per,
                                   work=duration * gpus, queue=opts.queue or f"vc-{_slug(cluster)}")))
    if opts.limit:
        jobs = sorted(jobs, key=lambda lj: (lj[1].submit, lj[0]))[:opts.limit]  # rows are unsorted
    return _finish(jobs, path)


def parse_tiresias(text: str, path: str, opts: ImportOptions | None = None) -> list[JobSpec]:
    opts = opts or ImportOptions()
    header, rows = _csv_rows(text, path)
    _need_columns(header, ("job_id", "num_gpu", "submit_time", "duration"), path, "Tiresias csv")
    jobs = []
    for line, row in rows:
        try:
            job_id = _text(row, "job_id")
            gpus = _int(row, "num_gpu", low=0)
            submit = _float(row, "submit_time")
            duration = _float(row, "duration")
        except _FieldError as exc:
            raise TraceError(path, line, str(exc)) from None
        if gpus == 0 or duration <= 0:
            continue
        name = f"t-{_slug(job_id)}"[:50]
        lo, hi, per = _elastic(gpus, _workers(gpus), opts, name)
        jobs.append((line, JobSpec(name=name, submit=submit, min_workers=lo, max_workers=hi, gpus=per,
                                   work=duration * gpus, queue=opts.queue or "default")))
    if opts.limit:
        jobs = sorted(jobs, key=lambda lj: (lj[1].submit, lj[0]))[:opts.limit]
    return _finish(jobs, path)
