"""The webhook served for real (gunicorn over TLS, a certificate from certs/) on a free port, and a
client that speaks to it as the API server does."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elastic_controller.cli import main
from hack.localbox.procs import stop_child

SERVICE, NAMESPACE = "ve-webhook", "ve-system"
SERVICE_DNS = f"{SERVICE}.{NAMESPACE}.svc"
ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def client_context(ca: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca))  # verifies the chain and the hostname


class ServiceConnection(http.client.HTTPSConnection):
    """Dial 127.0.0.1 but verify the certificate for ``server_name``, as the API server dials a Service."""

    def __init__(self, port: int, context: ssl.SSLContext, server_name: str = SERVICE_DNS) -> None:
        super().__init__("127.0.0.1", port, context=context, timeout=10)
        self.server_name = server_name
        self.ctx = context

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)
        self.sock = self.ctx.wrap_socket(self.sock, server_hostname=self.server_name)


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    certs: Path
    log: Path

    def connection(self, server_name: str = SERVICE_DNS) -> ServiceConnection:
        return ServiceConnection(self.port, client_context(self.certs / "ca.crt"), server_name)


def post(conn: http.client.HTTPConnection, path: str, body: bytes | str,
         headers: dict[str, str] | None = None) -> tuple[int, Any]:
    conn.request("POST", path, body=body, headers=headers or {"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    return resp.status, json.loads(data)


def wait_ready(port: int, ca: Path, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode}")
        try:
            conn = ServiceConnection(port, client_context(ca))
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                conn.close()
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("server not ready in time")


def serve_webhook(certs: Path, *args: str) -> Iterator[Server]:
    """Generate a CA + serving certificate into ``certs``, run ``volcano-elastic webhook`` on a free
    port with ``args`` added, yield it once ready, and stop it (SIGTERM, then kill)."""
    assert main(["certs", "generate", "--service", SERVICE, "--namespace", NAMESPACE, "--out", str(certs),
                 "--ip", "127.0.0.1"]) == 0
    port = free_port()
    log = certs / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "elastic_controller", "webhook", "--tls-cert-file", str(certs / "tls.crt"),
             "--tls-private-key-file", str(certs / "tls.key"), "--port", str(port), "--host", "127.0.0.1", *args],
            stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
        )
    try:
        wait_ready(port, certs / "ca.crt", proc)
        yield Server(proc, port, certs, log)
    finally:
        stop_child(proc, 20)
