"""Many slow clients against one webhook replica (issue 31 item 5): admission latency while N clients
trickle their requests and reconnect as soon as they are cut off.

One webhook at its defaults (what a Deployment replica runs: 2 workers x 32 threads) on 127.0.0.1.
A separate process runs ``--clients`` slow clients (asyncio): seven in eight complete the TLS
handshake and send a request one byte every ``--byte-seconds``, one in eight stalls half-way through
the TLS handshake; every one reconnects at once when the server cuts it off. They come from
``--addresses`` loopback addresses (127.0.0.2, 127.0.0.3, ...; pods have their own addresses in a
cluster), while the API server's stand-in probes from 127.0.0.1: a mutating review of an elastic
worker pod every ``--probe-interval`` seconds, alternately on a fresh TLS connection (handshake
included in its time) and on a kept-alive one, with the API server's ``timeoutSeconds: 5``.
Printed: the probes' p50/p99/max latency and failures, and how often the slow clients were cut.

    .venv/bin/python bench/webhook_slow_clients.py [--clients 256] [--seconds 20] [--against REF]

``--against REF`` runs the same scenario against the webhook of that commit afterwards (extracted
with ``git archive``, same virtualenv). Everything stops by itself after ``--seconds``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from webhook_load import (
    HEADERS,
    NAMESPACE,
    ROOT,
    SERVER_NAME,
    SERVICE,
    Conn,
    extract,
    free_port,
    pct,
    pod_review,
    wait_ready,
)

from hack.localbox.procs import stop_child  # webhook_load put the repository on sys.path

API_SERVER_TIMEOUT = 5.0  # the webhook configurations' timeoutSeconds
SLOW_REQUEST = (b"POST /mutate-pods HTTP/1.1\r\nHost: ve-webhook\r\nContent-Type: application/json\r\n"
                b"X-Slow: " + b"a" * 4000)
CLIENT_HELLO_START = b"\x16\x03\x01\x02\x00\x01"  # a TLS record header and the start of a ClientHello


# ----------------------------------------------------------------------------- the slow clients
async def _trickler(port: int, ctx: ssl.SSLContext, local: str, until: float, byte_seconds: float,
                    stats: dict[str, int]) -> None:
    while time.monotonic() < until:
        writer = None
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(
                "127.0.0.1", port, ssl=ctx, server_hostname=SERVER_NAME, local_addr=(local, 0)), 10)
            stats["connected"] += 1
            for i in range(len(SLOW_REQUEST)):
                if time.monotonic() >= until or reader.at_eof() or writer.is_closing():
                    break
                writer.write(SLOW_REQUEST[i:i + 1])
                await writer.drain()
                stats["bytes"] += 1
                await asyncio.sleep(byte_seconds)
            if reader.at_eof():
                stats["cut"] += 1
        except (TimeoutError, OSError, ssl.SSLError, EOFError):
            stats["cut"] += 1
        finally:
            if writer is not None:
                writer.close()
        await asyncio.sleep(0)  # and again, at once


async def _staller(port: int, local: str, until: float, byte_seconds: float, stats: dict[str, int]) -> None:
    while time.monotonic() < until:
        writer = None
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(
                "127.0.0.1", port, local_addr=(local, 0)), 10)
            stats["connected"] += 1
            writer.write(CLIENT_HELLO_START)
            while time.monotonic() < until and not reader.at_eof() and not writer.is_closing():
                await asyncio.sleep(byte_seconds)
                writer.write(b"\x00")
                await writer.drain()
                stats["bytes"] += 1
            if reader.at_eof():
                stats["cut"] += 1
        except (TimeoutError, OSError):
            stats["cut"] += 1
        finally:
            if writer is not None:
                writer.close()
        await asyncio.sleep(0)


def slow_clients(port: int, ca: str, clients: int, addresses: int, seconds: float, byte_seconds: float,
                 out: Any) -> None:
    """Run ``clients`` slow clients for ``seconds`` (in a process of its own); put their counts on ``out``."""
    ctx = ssl.create_default_context(cafile=ca)
    stats = {"connected": 0, "cut": 0, "bytes": 0}
    until = time.monotonic() + seconds

    async def main() -> None:
        tasks = []
        for i in range(clients):
            local = f"127.0.0.{2 + i % addresses}"
            if i % 8 == 7:
                tasks.append(_staller(port, local, until, byte_seconds, stats))
            else:
                tasks.append(_trickler(port, ctx, local, until, byte_seconds, stats))
        await asyncio.gather(*tasks)

    asyncio.run(main())
    out.put(stats)


# ----------------------------------------------------------------------------- the API server's stand-in
@dataclass
class Probes:
    fresh: list[float] = field(default_factory=list)
    kept: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def all(self) -> list[float]:
        return self.fresh + self.kept


def probe(port: int, ca: str, seconds: float, interval: float) -> Probes:
    """Reviews of an elastic worker pod, alternately on a fresh and on a kept-alive connection."""
    ctx = ssl.create_default_context(cafile=ca)
    body = json.dumps(pod_review(5, 1)).encode()
    out = Probes()
    kept: Conn | None = None
    end = time.monotonic() + seconds
    fresh_turn = True
    while time.monotonic() < end:
        started = time.monotonic()
        conn = Conn(port, ctx) if fresh_turn or kept is None else kept
        conn.timeout = API_SERVER_TIMEOUT
        try:
            conn.request("POST", "/mutate-pods", body=body, headers=HEADERS)
            resp = conn.getresponse()
            answer = json.loads(resp.read())
            if resp.status != 200 or answer["response"]["allowed"] is not True or "patch" not in answer["response"]:
                raise RuntimeError(f"status {resp.status}: {answer}")
            took = time.monotonic() - started
            (out.fresh if fresh_turn else out.kept).append(took)
            if fresh_turn:
                if kept is not None:
                    kept.close()
                kept = conn  # the next kept-alive probe reuses it
        except Exception as exc:  # timeouts, resets: a failed admission
            out.failures.append(f"{'fresh' if fresh_turn else 'kept'}: {type(exc).__name__}: {exc}"[:200])
            conn.close()
            if conn is kept:
                kept = None
        fresh_turn = not fresh_turn
        time.sleep(max(0.0, interval - (time.monotonic() - started)))
    if kept is not None:
        kept.close()
    return out


# ----------------------------------------------------------------------------- one scenario
@dataclass
class Scenario:
    clients: int = 256
    addresses: int = 8
    seconds: float = 20.0
    warmup: float = 3.0
    byte_seconds: float = 0.5
    probe_interval: float = 0.1


def run_scenario(port: int, ca: str, sc: Scenario) -> tuple[Probes, dict[str, int]]:
    ctx = mp.get_context("fork")
    queue: Any = ctx.Queue()
    proc = ctx.Process(target=slow_clients, args=(port, ca, sc.clients, sc.addresses, sc.warmup + sc.seconds,
                                                  sc.byte_seconds, queue), daemon=True)
    proc.start()
    try:
        time.sleep(sc.warmup)  # every slow client connected and trickling
        probes = probe(port, ca, sc.seconds, sc.probe_interval)
        stats: dict[str, int] = queue.get(timeout=sc.seconds + 60)
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
    return probes, stats


def start_webhook(cwd: Path, port: int, cert: str, key: str, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    with log.open("wb") as fh:
        return subprocess.Popen(
            [sys.executable, "-m", "elastic_controller", "webhook", "--tls-cert-file", cert,
             "--tls-private-key-file", key, "--host", "127.0.0.1", "--port", str(port), "--no-access-log", *extra],
            cwd=cwd, env={**os.environ, "PYTHONPATH": str(cwd)}, stdout=fh, stderr=subprocess.STDOUT)


def stop(proc: subprocess.Popen[bytes]) -> None:
    stop_child(proc, 30)


def summary(name: str, probes: Probes, stats: dict[str, int]) -> dict[str, Any]:
    row = {"target": name, "probes": len(probes.all), "failures": len(probes.failures),
           "p50_ms": pct(probes.all, 0.5), "p99_ms": pct(probes.all, 0.99),
           "max_ms": max(probes.all) * 1000 if probes.all else float("nan"),
           "fresh_max_ms": max(probes.fresh) * 1000 if probes.fresh else float("nan"),
           "kept_max_ms": max(probes.kept) * 1000 if probes.kept else float("nan"), **stats}
    print(f"{name:>10}: {row['probes']} reviews, {row['failures']} failed; p50 {row['p50_ms']:.0f} ms, p99 "
          f"{row['p99_ms']:.0f} ms, max {row['max_ms']:.0f} ms (fresh connection {row['fresh_max_ms']:.0f}, "
          f"kept-alive {row['kept_max_ms']:.0f}); slow clients: {stats['connected']} connections, "
          f"{stats['cut']} cut off, {stats['bytes']} bytes trickled")
    for failure in probes.failures[:3]:
        print(f"{'':>12}{failure}")
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=256, help="slow clients (default: 256)")
    parser.add_argument("--addresses", type=int, default=8, help="loopback addresses they come from (default: 8)")
    parser.add_argument("--seconds", type=float, default=20.0, help="probing time (default: 20)")
    parser.add_argument("--byte-seconds", type=float, default=0.5, help="a slow client's pause per byte")
    parser.add_argument("--probe-interval", type=float, default=0.1)
    parser.add_argument("--against", metavar="REF", help="also run the scenario against this commit's webhook")
    parser.add_argument("--json", metavar="F", help="also write the results as JSON")
    args = parser.parse_args()

    from certs.generate import generate

    tmp = Path(tempfile.mkdtemp(prefix="webhook-slow-"))
    generate(tmp, SERVICE, NAMESPACE, ips=["127.0.0.1"])
    ca, cert, key = str(tmp / "ca.crt"), str(tmp / "tls.crt"), str(tmp / "tls.key")
    sc = Scenario(clients=args.clients, addresses=args.addresses, seconds=args.seconds,
                  byte_seconds=args.byte_seconds, probe_interval=args.probe_interval)
    targets: list[tuple[str, Path]] = [("ours", ROOT)]
    if args.against:
        targets.append((extract(args.against, tmp / "against"), tmp / "against"))
    print(f"{os.cpu_count()} cores; one webhook at its defaults; {sc.clients} slow clients from {sc.addresses} "
          f"addresses, one byte per {sc.byte_seconds} s, reconnecting when cut; a review every "
          f"{sc.probe_interval} s for {sc.seconds:.0f} s (API server timeout {API_SERVER_TIMEOUT:.0f} s)")
    rows = []
    try:
        for name, cwd in targets:
            port = free_port()
            proc = start_webhook(cwd, port, cert, key, tmp / f"{name}.log")
            try:
                wait_ready(port, ca, proc)
                probes, stats = run_scenario(port, ca, sc)
            finally:
                stop(proc)
            rows.append(summary(name, probes, stats))
        if args.json:
            Path(args.json).write_text(json.dumps({"scenario": vars(sc), "results": rows}, indent=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
