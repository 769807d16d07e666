"""The real server: gunicorn over TLS on a free port, certificates from our ``certs`` tool.

No Kubernetes API server is needed: the client checks the chain the way the API server does
(the ``caBundle`` CA, the Service DNS name as SAN), keeps connections alive like it, and a
rotation while clients loop drops nothing.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509

from certs.generate import generate
from tests.harness.webhook_objects import apply, job, pod, review
from tests.harness.webhookserver import (
    NAMESPACE,
    ROOT,
    SERVICE,
    SERVICE_DNS,
    Server,
    ServiceConnection,
    client_context,
    post,
    serve_webhook,
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve_webhook(tmp_path_factory.mktemp("certs"), "--workers", "2", "--threads", "4")


def test_mutation_over_keepalive_https(server: Server) -> None:
    conn = server.connection()
    sockets = set()
    for index in range(5):
        p = pod(index=index)
        status, answer = post(conn, "/mutate-pods", json.dumps(review(p)))
        assert status == 200
        after = apply(p, answer)
        assert after["metadata"]["annotations"]["volcano-elastic.io/role"] == ("core" if index < 2 else "elastic")
        sockets.add(id(conn.sock))
    assert len(sockets) == 1  # one TLS connection for every review
    status, answer = post(conn, "/validate-pytorchjobs", json.dumps(review(job(workers=9), kind="PyTorchJob")))
    assert status == 200 and answer["response"]["allowed"] is False
    conn.close()


def test_chain_and_san_are_verified_like_the_api_server(server: Server, tmp_path: Path) -> None:
    for name in (SERVICE_DNS, f"{SERVICE_DNS}.cluster.local"):
        conn = server.connection(name)
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 200
        conn.close()
    with pytest.raises(ssl.SSLCertVerificationError):
        server.connection("other.ve-system.svc").request("GET", "/healthz")
    generate(tmp_path, "other", "ns")
    with pytest.raises(ssl.SSLCertVerificationError):
        ServiceConnection(server.port, client_context(tmp_path / "ca.crt")).request("GET", "/healthz")


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")
def test_tls_1_2_minimum_and_strong_ciphers(server: Server) -> None:
    old = client_context(server.certs / "ca.crt")
    old.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    old.maximum_version = ssl.TLSVersion.TLSv1_1
    with pytest.raises((ssl.SSLError, ConnectionError)):
        ServiceConnection(server.port, old).request("GET", "/healthz")
    weak = client_context(server.certs / "ca.crt")
    weak.maximum_version = ssl.TLSVersion.TLSv1_2
    weak.set_ciphers("ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA")  # CBC with SHA-1
    with pytest.raises((ssl.SSLError, ConnectionError)):
        ServiceConnection(server.port, weak).request("GET", "/healthz")
    tls12 = client_context(server.certs / "ca.crt")
    tls12.maximum_version = ssl.TLSVersion.TLSv1_2
    conn = ServiceConnection(server.port, tls12)
    conn.request("GET", "/healthz")
    assert conn.getresponse().status == 200
    assert isinstance(conn.sock, ssl.SSLSocket)
    cipher = conn.sock.cipher()
    assert cipher is not None and ("GCM" in cipher[0] or "CHACHA20" in cipher[0])
    conn.close()


def test_bad_requests_are_400_and_the_connection_survives(server: Server) -> None:
    conn = server.connection()
    assert post(conn, "/mutate-pods", "{")[0] == 400
    assert post(conn, "/mutate-pods", b"\xff\xfe", {"Content-Type": "application/json"})[0] == 400
    assert post(conn, "/mutate-pods", "{}", {"Content-Type": "text/plain"})[0] == 400
    status, answer = post(conn, "/mutate-pods", b"x" * (3 * 1024 * 1024 + 1))
    assert status == 400 and "limit" in answer["error"]
    conn.close()
    conn = server.connection()
    chunks = (b"x" * 65536 for _ in range(60))  # 3.75 MiB, chunked: no Content-Length
    conn.request("POST", "/mutate-pods", body=chunks, headers={"Content-Type": "application/json"},
                 encode_chunked=True)
    resp = conn.getresponse()
    assert resp.status == 400 and "limit" in json.loads(resp.read())["error"]
    conn.close()
    conn = server.connection()
    assert post(conn, "/mutate-pods", json.dumps(review(pod(index=3))))[0] == 200
    conn.close()


def test_metrics_sum_every_worker_and_logs_are_json(server: Server) -> None:
    def metric(text: str, line: str) -> float:
        return sum(float(x.rsplit(" ", 1)[1]) for x in text.splitlines() if x.startswith(line))

    def scrape() -> str:
        conn = server.connection()
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
        return text

    key = 'volcano_elastic_webhook_patches_total{role="elastic"}'
    before = metric(scrape(), key)
    conns = [server.connection() for _ in range(6)]  # spread over both workers
    for conn in conns:
        for _ in range(3):
            assert post(conn, "/mutate-pods", json.dumps(review(pod(index=3), uid="log-me")))[0] == 200
        conn.close()
    assert metric(scrape(), key) == before + 18
    conn = server.connection()
    status, answer = post(conn, "/mutate-pods", json.dumps(review(pod(index=3, nnodes=None), uid="unknown-bounds")))
    assert status == 200 and answer["response"]["warnings"]
    conn.close()
    time.sleep(0.3)
    lines = [json.loads(line) for line in server.log.read_text().splitlines() if line.startswith("{")]
    access = [x for x in lines if x.get("logger") == "gunicorn.access" and x.get("uid") == "log-me"]
    assert len(access) == 18
    assert {"method", "path", "status", "durationMs", "role", "job", "namespace", "name"} <= set(access[0])
    assert len({x["pid"] for x in access}) >= 1
    warned = [x for x in lines if x.get("logger") == "volcano_elastic.webhook" and x.get("uid") == "unknown-bounds"]
    assert len(warned) == 1 and warned[0]["level"] == "warning" and "unknown" in warned[0]["reason"]


def test_config_problems_are_all_listed_and_exit_2(tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text("kind: Nope\nagent: {intervalSeconds: -1}\nbogus: 1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "elastic_controller", "webhook", "--tls-cert-file", str(tmp_path / "missing.crt"),
         "--tls-private-key-file", str(tmp_path / "missing.key"), "--config", str(cfg), "--port", "0"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )
    assert proc.returncode == 2
    for needle in ("kind", "agent.intervalSeconds", "bogus", "--tls-cert-file", "--port"):
        assert needle in proc.stderr, proc.stderr


def serial_of_peer(conn: ServiceConnection) -> int:
    assert isinstance(conn.sock, ssl.SSLSocket)
    der = conn.sock.getpeercert(binary_form=True)
    assert der is not None
    return int(x509.load_der_x509_certificate(der).serial_number)


def test_rotation_while_clients_loop_drops_nothing(server: Server) -> None:
    stop = threading.Event()
    failures: list[str] = []
    counts = {"keepalive": 0, "fresh": 0}
    seen_serials: set[int] = set()
    lock = threading.Lock()
    body = json.dumps(review(pod(index=3)))

    def keepalive_client() -> None:
        conn = server.connection()
        while not stop.is_set():
            try:
                status, _ = post(conn, "/mutate-pods", body)
                assert status == 200, status
                with lock:
                    counts["keepalive"] += 1
            except Exception as exc:  # every failure is recorded
                failures.append(f"keepalive: {exc!r}")
                conn.close()
                conn = server.connection()
        conn.close()

    def fresh_client() -> None:  # a new connection (and handshake) per review
        while not stop.is_set():
            try:
                conn = server.connection()
                status, _ = post(conn, "/mutate-pods", body)
                assert status == 200, status
                with lock:
                    counts["fresh"] += 1
                    seen_serials.add(serial_of_peer(conn))
                conn.close()
            except Exception as exc:  # every failure is recorded
                failures.append(f"fresh: {exc!r}")

    threads = [threading.Thread(target=keepalive_client) for _ in range(2)]
    threads += [threading.Thread(target=fresh_client) for _ in range(2)]
    for t in threads:
        t.start()
    serials = [x509.load_pem_x509_certificate((server.certs / "tls.crt").read_bytes()).serial_number]
    try:
        for _ in range(3):
            time.sleep(0.7)
            generate(server.certs, SERVICE, NAMESPACE, ips=["127.0.0.1"])  # renews tls.crt/tls.key in place
            serials.append(x509.load_pem_x509_certificate((server.certs / "tls.crt").read_bytes()).serial_number)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # a new connection gets the new certificate
                conn = server.connection()
                conn.request("GET", "/healthz")
                conn.getresponse().read()
                served = serial_of_peer(conn)
                conn.close()
                if served == serials[-1]:
                    break
            assert served == serials[-1]
        time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=20)
    assert failures == []
    assert counts["keepalive"] > 20 and counts["fresh"] > 10, counts
    assert serials[-1] in seen_serials and len(seen_serials & set(serials)) >= 2


if os.environ.get("VOLCANO_ELASTIC_SKIP_SERVING"):  # escape hatch for machines without loopback TLS
    pytestmark = pytest.mark.skip("VOLCANO_ELASTIC_SKIP_SERVING is set")
