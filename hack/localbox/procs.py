"""Processes of the box: start (own process group, log file), start times (pid reuse), liveness,
health waits, stop (the whole group), free ports, log tails. Box (box.py) keeps the bookkeeping."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
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
        port: int = s.getsockname()[1]
        return port


def log_tail(path: str | Path, lines: int = 30) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            data = f.read().decode("utf-8", "replace").splitlines()
    except OSError as e:
        return f"    (no log: {e})"
    return "\n".join("    " + ln for ln in data[-lines:])


def spawn(name: str, argv: list[str], log: Path, cwd: Path,
          env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], Proc]:
    """Start argv in its own session (process group), output appended to log, environment without
    KUBECONFIG and with 127.0.0.1 in NO_PROXY, then `env` on top."""
    full_env = dict(os.environ)
    full_env.pop("KUBECONFIG", None)
    # everything talks to 127.0.0.1: never through a proxy from the environment
    for k in ("NO_PROXY", "no_proxy"):
        full_env[k] = ",".join(x for x in (full_env.get(k), "127.0.0.1", "localhost") if x)
    full_env.update(env or {})
    with open(log, "ab") as lf:
        lf.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(argv)}\n".encode())
        lf.flush()
        p = subprocess.Popen(argv, stdout=lf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             cwd=cwd, env=full_env, start_new_session=True)
    st = None
    for _ in range(50):
        st = _proc_start_time(p.pid)
        if st:
            break
        time.sleep(0.01)
    return p, Proc(name=name, pid=p.pid, start_time=st or "?", log=str(log), argv=argv)


def wait_healthy(name: str, proc: Proc | None, check: Callable[[], bool], timeout: float) -> None:
    """Poll check() until it is true; BoxError (with the log's tail) when proc exits or on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and not proc_alive(proc):
            raise BoxError(f"{name} exited during start-up (log {proc.log}); last lines:\n{log_tail(proc.log)}")
        try:
            if check():
                return
        except Exception:
            pass
        time.sleep(0.2)
    where = f" (log {proc.log}); last lines:\n{log_tail(proc.log)}" if proc else ""
    raise BoxError(f"{name} did not become healthy within {timeout:.0f}s{where}")


def log_has(path: Path, offset: int, needle: bytes) -> bool:
    """Whether the log file holds `needle` after `offset` (what this start of the process wrote)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return needle in f.read()
    except OSError:
        return False


def stop_child(proc: subprocess.Popen[bytes], grace: float = 30.0) -> int | None:
    """SIGTERM a child process, SIGKILL it after ``grace`` seconds, and reap it: its exit status."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def kill_group(proc: Proc, reap: Callable[[], None], grace: float = 10.0) -> None:
    """SIGTERM the process group, SIGKILL after `grace` seconds, then SIGKILL whatever is left of
    the group; reap() collects the exit status (a child of ours) while waiting."""
    if not proc_alive(proc):
        reap()
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        except PermissionError:
            os.kill(proc.pid, sig)
        deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 5)
        while time.monotonic() < deadline:
            reap()
            if not proc_alive(proc):
                break
            time.sleep(0.05)
        if not proc_alive(proc):
            break
    # the group may still hold children
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    reap()
