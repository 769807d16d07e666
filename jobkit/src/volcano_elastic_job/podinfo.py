"""What volcano-elastic tells this pod, read from the downward-API annotations file.

The pod mounts ``metadata.annotations`` as a file (docs/checkpointing.md); the kubelet rewrites it
when the annotations change, one ``key="value"`` line each, the value quoted as Go quotes strings.
"""

from __future__ import annotations

import ast
import logging
import os
from datetime import datetime, timezone

log = logging.getLogger("volcano_elastic_job")

PREFIX = "volcano-elastic.io"
EVICT_AFTER = f"{PREFIX}/evict-after"  # RFC 3339: this pod is evicted then (the eviction notice)
LAST_CHECKPOINT_TIME = f"{PREFIX}/last-checkpoint-time"  # RFC 3339: written by record_checkpoint()
TARGET_WORKERS = f"{PREFIX}/target-workers"  # "N": the job's worker count after the agent's last decision
# In-place resizing (volcano_elastic_job.inplace; docs/checkpointing.md, section "Resizing in place"):
RESIZE = f"{PREFIX}/resize"  # on the PyTorchJob, "in-place": the job's processes survive planned scale events
RESIZE_GENERATION = f"{PREFIX}/resize-generation"  # "G" on every pod: the agent's G-th planned in-place event
LEAVING = f"{PREFIX}/leaving"  # "G" on a pod that leaves the group at event G (same patch as resize-generation)
LEFT = f"{PREFIX}/left"  # "G", written by the kit on a leaving pod once it has left the group: evict it now
RESIZE_IN_PLACE = "in-place"

ANNOTATIONS_FILE = "/etc/podinfo/annotations"
ANNOTATIONS_ENV = "VOLCANO_ELASTIC_PODINFO"  # another path for the file (tests, other mount points)


def annotations_path(path: str | None = None) -> str:
    return path or os.environ.get(ANNOTATIONS_ENV) or ANNOTATIONS_FILE


def _unquote(quoted: str) -> str | None:
    try:
        value = ast.literal_eval(quoted)  # a Go-quoted string is a Python string literal (\a, \x, \u ...)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, str) else None


_said: set[str] = set()  # the files whose absence (or unreadability) this process already logged


def _say_once(file: str, why: str) -> None:
    """One warning per process and file: without the pod info the kit cannot see an eviction notice
    (``NoticeWatch`` never says checkpoint) and its rendezvous cannot complete at the announced size."""
    if file in _said:
        return
    _said.add(file)
    log.warning("volcano-elastic: %s: this process sees no eviction notice and no announced worker count "
                "(NoticeWatch never asks for a checkpoint, the rendezvous waits as plain c10d does). "
                "volcano-elastic's webhook mounts the pod's annotations at %s on every pod of an elastic "
                "PyTorchJob; elsewhere mount a downward-API volume of metadata.annotations and set %s to the "
                "file (docs/checkpointing.md, section 3). Said once.", why, ANNOTATIONS_FILE, ANNOTATIONS_ENV)


def read_annotations(path: str | None = None) -> dict[str, str]:
    """This pod's annotations from the downward-API file; {} when there is no such file (logged
    once per process: the kit then sees no notice and no announced size).

    A line that cannot be read is skipped (the kubelet writes the file atomically, so a reader
    never sees half of it)."""
    file = annotations_path(path)
    try:
        with open(file, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        _say_once(file, f"no pod info at {file}")
        return {}
    except OSError as exc:
        _say_once(file, f"cannot read the pod info at {file}: {exc}")
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, quoted = line.partition("=")
        if not sep:
            continue
        value = _unquote(quoted.strip())
        if value is not None:
            out[key.strip()] = value
    return out


def parse_time(value: str) -> datetime | None:
    """An RFC 3339 time (``Z`` or an offset) as an aware UTC datetime; None when unreadable."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc)


def eviction_notice(path: str | None = None) -> datetime | None:
    """When volcano-elastic evicts this pod (the pending ``evict-after``), or None: no notice.

    Only a victim's pod carries a notice; use :class:`NoticeWatch` so that every rank learns of it."""
    value = read_annotations(path).get(EVICT_AFTER)
    if value is None:
        return None
    when = parse_time(value)
    if when is None:
        log.warning("volcano-elastic: unreadable %s %r ignored", EVICT_AFTER, value)
    return when


def checkpoint_notice(path: str | None = None) -> datetime | None:
    """The notice :class:`NoticeWatch` answers with a checkpoint: :func:`eviction_notice`, except on
    a pod that leaves the group in place (``leaving`` at the announced ``resize-generation``). Such
    a pod's ranks leave at a step boundary while the others go on with the state in memory; a
    checkpoint and a hold for it would stall the whole group, and the notice's deadline only bounds
    how long the agent waits for the pod to have left."""
    request = resize_request(path)
    if request is not None and request[2]:
        return None
    return eviction_notice(path)


def target_workers(path: str | None = None) -> int | None:
    """The job's worker count after volcano-elastic's last decision (``target-workers``), or None."""
    value = read_annotations(path).get(TARGET_WORKERS)
    if value is None:
        return None
    try:
        n = int(value)
    except ValueError:
        return None
    return n if n >= 1 else None


def resize_request(path: str | None = None) -> tuple[int, int | None, bool] | None:
    """The agent's last planned in-place event as this pod sees it: ``(generation, target workers,
    this pod leaves)``; None when no event was announced (or the generation is unreadable).

    The agent writes ``resize-generation`` and ``target-workers`` on every pod of the job and
    ``leaving`` (the same generation) on the pods that leave, each pod in one patch."""
    notes = read_annotations(path)
    value = notes.get(RESIZE_GENERATION)
    if value is None:
        return None
    try:
        generation = int(value)
    except ValueError:
        log.warning("volcano-elastic: unreadable %s %r ignored", RESIZE_GENERATION, value)
        return None
    target: int | None = None
    try:
        target = int(notes.get(TARGET_WORKERS, ""))
    except ValueError:
        target = None
    if target is not None and target < 1:
        target = None
    return generation, target, notes.get(LEAVING) == str(generation)
