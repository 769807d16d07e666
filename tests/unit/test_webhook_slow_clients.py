"""Slow clients must not stop the webhook (issue 23, item 8).

32 TLS connections that complete the handshake and then send their request headers one byte
every half second (slowloris), plus 8 that stall half-way through the TLS handshake, against the
webhook at its default settings: /healthz and admission reviews keep being answered promptly.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.test_webhook_serving import (
    SERVICE_DNS,
    Server,
    client_context,
    post,
    serve_webhook,
)
from tests.unit.webhook_objects import pod, review

SLOW_CLIENTS = 32


@pytest.fixture(scope="module")
def default_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # default --workers and --threads: what a Deployment runs
    yield from serve_webhook(tmp_path_factory.mktemp("certs-slow"))


def _slow_header_client(port: int, ca: Path, stop: threading.Event, sent: list[int]) -> None:
    """Handshake, then trickle a request's headers (never finishing them); reconnect when cut off."""
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: " + b"a" * 4000
    while not stop.is_set():
        try:
            raw = socket.create_connection(("127.0.0.1", port), timeout=30)
            tls = client_context(ca).wrap_socket(raw, server_hostname=SERVICE_DNS)
            for i in range(len(request)):
                if stop.wait(0.5):
                    break
                tls.send(request[i:i + 1])
                sent[0] += 1
            tls.close()
        except OSError:
            stop.wait(0.2)


def _stalled_handshake_client(port: int, stop: threading.Event) -> None:
    """Send the first bytes of a TLS ClientHello and stall."""
    while not stop.is_set():
        try:
            raw = socket.create_connection(("127.0.0.1", port), timeout=30)
            raw.send(b"\x16\x03\x01\x02\x00\x01")  # record header and the start of a ClientHello
            while not stop.wait(0.5):
                raw.send(b"\x00")
            raw.close()
        except OSError:
            stop.wait(0.2)


def test_webhook_keeps_answering_with_32_slow_clients(default_server: Server) -> None:
    ca = default_server.certs / "ca.crt"
    stop = threading.Event()
    sent = [0]
    threads = [threading.Thread(target=_slow_header_client, args=(default_server.port, ca, stop, sent), daemon=True)
               for _ in range(SLOW_CLIENTS)]
    threads += [threading.Thread(target=_stalled_handshake_client, args=(default_server.port, stop), daemon=True)
                for _ in range(8)]
    for t in threads:
        t.start()
    try:
        time.sleep(3)  # every slow client connected and trickling
        took: list[float] = []
        deadline = time.monotonic() + 15  # longer than any per-request read deadline
        answered = 0
        while time.monotonic() < deadline:
            started = time.monotonic()
            conn = default_server.connection()
            conn.timeout = 5
            conn.request("GET", "/healthz")
            resp = conn.getresponse()
            assert resp.status == 200
            resp.read()
            status, answer = post(conn, "/mutate-pods", json.dumps(review(pod(index=3))))
            assert status == 200 and answer["response"]["allowed"] is True
            conn.close()
            answered += 1
            took.append(time.monotonic() - started)
            time.sleep(0.3)
        assert sent[0] > SLOW_CLIENTS * 10  # the slow clients really were there, trickling
        # The API server gives our webhook timeoutSeconds: 5 (manifests/base/admission.yaml): every
        # /healthz + review pair (two requests, a fresh TLS handshake) must come well inside it, and the
        # typical one promptly. The test's own 40 hostile client threads share this process's GIL, so
        # the bound is the API server's deadline rather than a latency target.
        took.sort()
        assert took[-1] < 5.0, f"slowest /healthz + review took {took[-1]:.1f}s (the API server waits 5 s)"
        assert took[len(took) // 2] < 1.0, f"median /healthz + review took {took[len(took) // 2]:.2f}s"
        assert answered >= 10
    finally:
        stop.set()
        for t in threads:
            t.join(5)
    log = default_server.log.read_text(errors="replace")
    assert "Traceback" not in log
