"""Job traces: our own CSV/YAML format, readers for two public GPU cluster traces, and the dispatch
over every format (``load_trace``; Philly and Tiresias are read by ``public_traces``).

Every reader returns ``JobSpec`` values sorted by submit time, or raises ``TraceError`` naming
the file and the line of the first malformed record, so that nothing is simulated on bad input.
The format is documented in ``docs/simulate.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from ..policy.keys import WORKER_COUNTS
from ..policy.quantity import QuantityError, to_units
from ..policy.worldsizes import check_worker_sizes
from .public_traces import PHILLY_COLUMNS, TIRESIAS_COLUMNS, parse_philly, parse_tiresias
from .tracerows import DEFAULT_CPU_PER_GPU as DEFAULT_CPU_PER_GPU
from .tracerows import DEFAULT_MEMORY_PER_GPU as DEFAULT_MEMORY_PER_GPU
from .tracerows import GIB as GIB
from .tracerows import ImportOptions as ImportOptions
from .tracerows import JobSpec as JobSpec
from .tracerows import TraceError as TraceError
from .tracerows import (
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

# Column layouts of the public traces (header lines as the datasets ship them).
HELIOS_COLUMNS = ("job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "state",
                  "submit_time", "start_time", "end_time", "duration", "queue")
ALIBABA_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos",
                   "pod_phase", "creation_time", "deletion_time", "scheduled_time")
OWN_REQUIRED = ("name", "submit", "min", "max", "gpus", "work")
OWN_OPTIONAL = ("queue", "priority", "cpu", "memory", "workerCounts")
FORMATS = ("auto", "csv", "yaml", "helios", "alibaba", "philly", "tiresias")


# --- helpers -------------------------------------------------------------------------------------

def _quantity(row: Mapping[str, Any], key: str, unit: str) -> int:
    raw = row.get(key)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return 0
    try:
        value = to_units(unit, raw if isinstance(raw, int | float) and not isinstance(raw, bool) else str(raw))
    except QuantityError as exc:
        raise _FieldError(f"{key!r}: {exc}") from None
    if value < 0:
        raise _FieldError(f"{key!r} must not be negative, got {raw!r}")
    return value


def _own_job(row: Mapping[str, Any]) -> JobSpec:
    name = _text(row, "name")
    if not _dns_label(name):
        raise _FieldError(f"'name' must be a DNS label (lowercase letters, digits, '-'), got {name!r}")
    queue = str(row.get("queue") or "default").strip() or "default"
    lo = _int(row, "min", low=1)
    hi = _int(row, "max", low=1)
    if hi < lo:
        raise _FieldError(f"'max' ({hi}) must be >= 'min' ({lo})")
    counts = _worker_counts(row.get("workerCounts"), lo, hi)
    return JobSpec(
        name=name,
        submit=_float(row, "submit"),
        min_workers=lo,
        max_workers=hi,
        gpus=_int(row, "gpus", low=1),
        work=_float(row, "work", positive=True),
        queue=queue,
        priority=_int(row, "priority", default=0),
        cpu=_quantity(row, "cpu", "cpu"),
        memory=_quantity(row, "memory", "memory"),
        worker_counts=counts,
    )


def _worker_counts(raw: Any, lo: int, hi: int) -> tuple[int, ...]:
    """``workerCounts`` (``2|4|8``; in YAML also a list or one number) checked by the rules the
    validating webhook applies to ``volcano-elastic.io/worker-counts`` (``check_worker_sizes``):
    whole numbers, within [min, max], min among them. Warnings (max not reachable) pass, as the
    webhook admits such a job. () when empty: any count."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return ()
    if isinstance(raw, bool):
        raise _FieldError(f"'workerCounts' must be counts separated by '|' (e.g. 2|4|8), got {raw!r}")
    if isinstance(raw, list):
        tokens = [str(v).strip() for v in raw]
    elif isinstance(raw, int):
        tokens = [str(raw)]
    else:
        text = str(raw).strip()
        if "," in text:
            raise _FieldError(f"'workerCounts' separates counts with '|' (e.g. 2|4|8), got {text!r}")
        tokens = [t.strip() for t in text.split("|")]
    shown = "|".join(tokens)
    if any(not t for t in tokens):
        raise _FieldError(f"'workerCounts' {shown!r} has an empty count: write counts separated by '|', e.g. 2|4|8")
    annotation = ",".join(tokens)
    verdict = check_worker_sizes({WORKER_COUNTS: annotation}, lo, hi)
    if verdict.errors:
        raise _FieldError(f"'workerCounts' {shown!r} (min {lo}, max {hi}) is refused as the webhook refuses "
                          f"{WORKER_COUNTS}: {annotation!r}: {verdict.errors[0]}")
    return tuple(sorted({int(t) for t in tokens}))


def _dns_label(name: str) -> bool:
    return (0 < len(name) <= 50 and name[0].isalnum() and name[-1].isalnum()
            and all(c.islower() or c.isdigit() or c == "-" for c in name))


# --- our format ----------------------------------------------------------------------------------

def parse_own_csv(text: str, path: str) -> list[JobSpec]:
    header, rows = _csv_rows(text, path)
    _need_columns(header, OWN_REQUIRED, path, "trace")
    unknown = [c for c in header if c not in OWN_REQUIRED + OWN_OPTIONAL]
    if unknown:
        raise TraceError(path, 1, f"unknown column(s): {', '.join(unknown)}")
    jobs = []
    for line, row in rows:
        try:
            jobs.append((line, _own_job(row)))
        except _FieldError as exc:
            raise TraceError(path, line, str(exc)) from None
    return _finish(jobs, path)


class _LineLoader(yaml.SafeLoader):
    """SafeLoader that records the line of every mapping under the key ``__line__``."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    mapping = loader.construct_mapping(node, deep=True)
    mapping["__line__"] = node.start_mark.line + 1
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_yaml_with_lines(text: str, path: str) -> Any:
    try:
        return yaml.load(text, Loader=_LineLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 0
        raise TraceError(path, line, f"not valid YAML: {getattr(exc, 'problem', exc)}") from exc


def checked_item(item: Any, path: str, what: str, allowed: Collection[str]) -> tuple[dict[str, Any], int]:
    """A list item of a document read by ``load_yaml_with_lines``: a mapping with only ``allowed``
    keys (``what`` names it in the error), and its line (taken out of it)."""
    if not isinstance(item, dict):
        raise TraceError(path, 0, f"{what} must be a mapping, got {item!r}")
    line = int(item.pop("__line__"))
    unknown = [k for k in item if k not in allowed]
    if unknown:
        raise TraceError(path, line, f"unknown key(s): {', '.join(map(str, unknown))}")
    return item, line


def parse_own_yaml(text: str, path: str) -> list[JobSpec]:
    doc = load_yaml_with_lines(text, path)
    items = doc.get("jobs") if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise TraceError(path, 1, "expected a list of jobs (or a mapping with key 'jobs')")
    if isinstance(doc, dict):
        extra = [k for k in doc if k not in ("jobs", "__line__", "apiVersion", "kind")]
        if extra:
            raise TraceError(path, int(doc["__line__"]), f"unknown key(s): {', '.join(map(str, extra))}")
    jobs = []
    for raw in items:
        item, line = checked_item(raw, path, "a job", OWN_REQUIRED + OWN_OPTIONAL)
        try:
            jobs.append((line, _own_job(item)))
        except _FieldError as exc:
            raise TraceError(path, line, str(exc)) from None
    return _finish(jobs, path)


# --- public traces -------------------------------------------------------------------------------

def _helios_time(row: Mapping[str, str], key: str) -> float:
    raw = row.get(key, "").strip()
    if not raw:
        raise _FieldError(f"{key!r} is missing")
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(raw).timestamp()
    except ValueError:
        raise _FieldError(f"{key!r} must be 'YYYY-MM-DD HH:MM:SS' or seconds, got {raw!r}") from None


def parse_helios(text: str, path: str, opts: ImportOptions | None = None) -> list[JobSpec]:
    """SenseTime Helios ``cluster_log.csv``: one row per job; CPU-only and zero-length jobs skipped."""
    opts = opts or ImportOptions()
    header, rows = _csv_rows(text, path)
    _need_columns(header, ("job_id", "vc", "gpu_num", "cpu_num", "node_num", "submit_time", "duration"),
                  path, "Helios cluster_log.csv")
    jobs = []
    for line, row in rows:
        try:
            gpus = _int(row, "gpu_num", low=0)
            duration = _float(row, "duration")
            nodes = _int(row, "node_num", low=0)
            cpus = _float(row, "cpu_num")
            submit = _helios_time(row, "submit_time")
            job_id = _text(row, "job_id")
        except _FieldError as exc:
            raise TraceError(path, line, str(exc)) from None
        if gpus == 0 or duration <= 0:
            continue
        name = f"h-{_slug(job_id)}"[:50]
        lo, hi, per = _elastic(gpus, nodes, opts, name)
        queue = opts.queue or _slug(str(row.get("vc") or "default"))
        cpu_total = math.ceil(cpus * 1000)
        jobs.append((line, JobSpec(
            name=name, submit=submit, min_workers=lo, max_workers=hi, gpus=per,
            work=duration * gpus, queue=queue, cpu=max(1, cpu_total // hi) if cpu_total else 0,
        )))
        if opts.limit and len(jobs) >= opts.limit:
            break
    return _finish(jobs, path)


_QOS_PRIORITY = {"LS": 2, "Guaranteed": 1, "Burstable": 0, "BE": -1}


def parse_alibaba(text: str, path: str, opts: ImportOptions | None = None) -> list[JobSpec]:
    """Alibaba ``cluster-trace-gpu-v2023`` ``openb_pod_list_*.csv``: one row per pod (= one job).

    Pods without GPUs and pods never scheduled are skipped; a pod's GPU-time is
    ``num_gpu * (deletion_time - scheduled_time)`` (a shared fraction ``gpu_milli`` still holds a
    whole device, as ``nvidia.com/gpu`` is counted in devices).
    """
    opts = opts or ImportOptions()
    header, rows = _csv_rows(text, path)
    _need_columns(header, ("name", "cpu_milli", "memory_mib", "num_gpu", "creation_time",
                           "deletion_time", "scheduled_time"), path, "Alibaba openb_pod_list csv")
    jobs = []
    for line, row in rows:
        try:
            gpus = _int(row, "num_gpu", low=0)
            cpu = _int(row, "cpu_milli", low=0)
            mem = _int(row, "memory_mib", low=0)
            created = _float(row, "creation_time")
            deleted = _float(row, "deletion_time")
            scheduled_raw = row.get("scheduled_time", "").strip()
            scheduled = _float(row, "scheduled_time") if scheduled_raw else None
            name = _text(row, "name")
        except _FieldError as exc:
            raise TraceError(path, line, str(exc)) from None
        if gpus == 0 or scheduled is None or deleted <= scheduled:
            continue
        lo, hi, per = _elastic(gpus, 1, opts, _slug(name)[:50])
        jobs.append((line, JobSpec(
            name=_slug(name)[:50], submit=created, min_workers=lo, max_workers=hi, gpus=per,
            work=(deleted - scheduled) * gpus, queue=opts.queue or "default",
            priority=_QOS_PRIORITY.get(str(row.get("qos") or ""), 0),
            cpu=max(1, cpu // hi) if cpu else 0, memory=(mem * 2**20) // hi if mem else 0,
        )))
        if opts.limit and len(jobs) >= opts.limit:
            break
    return _finish(jobs, path)


# --- dispatch ------------------------------------------------------------------------------------

def detect_format(path: str, text: str) -> str:
    suffix = Path(path).suffix.lower()
    if suffix in (".yaml", ".yml"):
        return "yaml"
    first = next((ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")), "")
    columns = {c.strip() for c in first.split(",")}
    if {"job_id", "gpu_num", "node_num"} <= columns:
        return "helios"
    if {"num_gpu", "cpu_milli", "scheduled_time"} <= columns:
        return "alibaba"
    if set(PHILLY_COLUMNS) <= columns:
        return "philly"
    if {"job_id", "num_gpu", "submit_time", "duration"} <= columns and set(TIRESIAS_COLUMNS) & columns:
        return "tiresias"
    return "csv"


def load_trace(path: str | Path, fmt: str = "auto", opts: ImportOptions | None = None) -> list[JobSpec]:
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(name, 0, f"cannot read: {exc}") from exc
    if fmt == "auto":
        fmt = detect_format(name, text)
    readers: dict[str, Callable[[], list[JobSpec]]] = {
        "csv": lambda: parse_own_csv(text, name),
        "yaml": lambda: parse_own_yaml(text, name),
        "helios": lambda: parse_helios(text, name, opts),
        "alibaba": lambda: parse_alibaba(text, name, opts),
        "philly": lambda: parse_philly(text, name, opts),
        "tiresias": lambda: parse_tiresias(text, name, opts),
    }
    if fmt not in readers:
        raise TraceError(name, 0, f"unknown trace format {fmt!r} (known: {', '.join(FORMATS)})")
    return readers[fmt]()


def dump_csv(jobs: Iterable[JobSpec]) -> str:
    """Our CSV format (what ``load_trace`` reads back)."""
    rows = list(jobs)
    extra = any(j.cpu or j.memory for j in rows)
    counts = any(j.worker_counts for j in rows)
    lines = ["name,submit,queue,priority,min,max,gpus,work" + (",cpu,memory" if extra else "")
             + (",workerCounts" if counts else "")]
    for j in rows:
        line = (f"{j.name},{_num(j.submit)},{j.queue},{j.priority},{j.min_workers},{j.max_workers},"
                f"{j.gpus},{_num(j.work)}")
        if extra:
            line += f",{j.cpu}m,{j.memory}" if j.cpu else f",,{j.memory or ''}"
        if counts:
            line += "," + "|".join(map(str, j.worker_counts))
        lines.append(line)
    return "\n".join(lines) + "\n"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
