"""Processes of the box: start times (pid reuse), liveness, free ports, log tails."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path


class BoxError(RuntimeError):
    pass


@dataclass
class Proc:
    name: str
    pid: int
    start_time: str  # /proc/<pid>/stat field 22, guards against pid reuse
    log: str
    argv: list[str] = field(default_factory=list)


def _proc_start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the comm field may contain spaces; fields after the closing paren are plain
    rest = stat[stat.rindex(")") + 2:].split()
    if rest[0] in ("Z", "X"):
        return None
    return rest[19]


def proc_alive(p: Proc) -> bool:
    return _proc_start_time(p.pid) == p.start_time


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log_tail(path: str | Path, lines: int = 30) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            data = f.read().decode("utf-8", "replace").splitlines()
    except OSError as e:
        return f"    (no log: {e})"
    return "\n".join("    " + ln for ln in data[-lines:])
