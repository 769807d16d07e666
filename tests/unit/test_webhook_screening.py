"""The screening worker (webhook/server.py): when a request is whole, and what the event loop does
with requests that arrive in pieces, pipelined, or with a body it does not wait for."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest

from tests.harness.webhook_objects import pod, review
from tests.harness.webhookserver import SERVICE_DNS, Server, client_context, serve_webhook
from webhook.server import BODY, HEADERS, SCREENED_BODY_BYTES, THREAD, WHOLE, request_ready

HEAD = b"POST /mutate-pods HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


@pytest.mark.parametrize(("raw", "state"), [
    (b"", HEADERS),
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\n", HEADERS),
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", WHOLE),
    (HEAD + b"Content-Length: 5\r\n\r\nab", BODY),
    (HEAD + b"Content-Length: 5\r\n\r\nabcde", WHOLE),
    (HEAD + b"content-length:5\r\n\r\nabcdeGET / HTTP/1.1\r\n", WHOLE),  # the next request pipelined
    (HEAD + b"Transfer-Encoding: chunked\r\n\r\n", THREAD),
    (HEAD + b"Content-Length: 5\r\nExpect: 100-continue\r\n\r\n", THREAD),
    (HEAD + b"Content-Length: -1\r\n\r\n", THREAD),  # gunicorn's parser answers 400
    (HEAD + f"Content-Length: {SCREENED_BODY_BYTES + 1}\r\n\r\n".encode(), THREAD),
])
def test_request_ready(raw: bytes, state: str) -> None:
    assert request_ready(raw) == state


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve_webhook(tmp_path_factory.mktemp("certs-screening"), "--workers", "1")


def _tls(server: Server) -> socket.socket:
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return client_context(server.certs / "ca.crt").wrap_socket(raw, server_hostname=SERVICE_DNS)


def _request(body: bytes) -> bytes:
    return HEAD + f"Content-Length: {len(body)}\r\n\r\n".encode() + body


def _answers(sock: socket.socket, count: int) -> list[dict[str, object]]:
    """``count`` HTTP answers read off ``sock`` (Content-Length bodies), parsed as JSON."""
    buf, out = b"", []
    while len(out) < count:
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            assert chunk, "connection closed"
            buf += chunk
        head, _, buf = buf.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        while len(buf) < length:
            buf += sock.recv(65536)
        out.append(json.loads(buf[:length]))
        buf = buf[length:]
    return out


def test_a_request_in_pieces_is_answered_once_whole(server: Server) -> None:
    sock = _tls(server)
    data = _request(json.dumps(review(pod(index=3))).encode())
    for piece in (data[:20], data[20:len(HEAD) + 10], data[len(HEAD) + 10:-7], data[-7:]):
        sock.sendall(piece)
        time.sleep(0.3)
    (answer,) = _answers(sock, 1)
    assert answer["response"]["allowed"] is True and "patch" in answer["response"]  # type: ignore[index]
    sock.close()


def test_pipelined_requests_are_answered_in_order(server: Server) -> None:
    sock = _tls(server)
    uids = [f"uid-{i}" for i in range(12)]  # more than one turn of the event loop answers
    docs = [review(pod(index=i % 4)) for i in range(12)]
    for doc, uid in zip(docs, uids, strict=True):
        doc["request"]["uid"] = uid
    sock.sendall(b"".join(_request(json.dumps(d).encode()) for d in docs))
    answers = _answers(sock, 12)
    assert [a["response"]["uid"] for a in answers] == uids  # type: ignore[index]
    sock.close()


def test_a_chunked_request_then_a_whole_one_on_the_same_connection(server: Server) -> None:
    sock = _tls(server)
    body = json.dumps(review(pod(index=5))).encode()
    chunked = HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + f"{len(body):X}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    sock.sendall(chunked)
    (first,) = _answers(sock, 1)
    sock.sendall(_request(body))
    (second,) = _answers(sock, 1)
    assert first["response"] == second["response"]
    sock.close()


def test_connection_close_gets_the_whole_answer_then_eof(server: Server) -> None:
    """The last answer on a connection is followed by a FIN (kubelet probes send Connection: close)."""
    sock = _tls(server)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    (answer,) = _answers(sock, 1)
    assert answer == {"status": "ok"}
    sock.settimeout(5)
    assert sock.recv(1) == b""  # closed by the server, not reset and not left open
    sock.close()
