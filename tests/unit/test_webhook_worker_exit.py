"""Issue 36 F1: one gunicorn worker's exit must not take every later review down.

A worker exits on its own when SIGTERMed alone, or when the arbiter aborts it (SIGABRT, what
gunicorn sends after a ``WORKER TIMEOUT``, e.g. a worker stalled by SIGSTOP or CPU throttling).
Such an exit unwinds through ``serve.run`` (gunicorn forks inside it); that used to delete the
Prometheus multiprocess directory, and from then on every review in a fresh worker answered 500
while ``/healthz`` said 200. The real server here: gunicorn over TLS, our certificates.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.policy.settings import ElasticConfig
from tests.harness.webhook_objects import pod, review
from tests.harness.webhookserver import Server, post, serve_webhook
from webhook.app import create_app
from webhook.metrics import WebhookMetrics


def workers_of(arbiter: int) -> set[int]:
    """The live children of ``arbiter`` (gunicorn's workers), from /proc."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == arbiter and fields[0] != "Z":
            found.add(int(entry))
    return found


def wait_for_workers(arbiter: int, count: int, without: set[int], timeout: float = 30) -> set[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        live = workers_of(arbiter)
        if len(live) == count and not live & without:
            return live
        time.sleep(0.1)
    raise AssertionError(f"arbiter {arbiter} did not replace {without}: children {workers_of(arbiter)}")


def reviews_answered(server: Server, count: int = 10) -> int:
    """Reviews answered 200 with a patch, each over a fresh connection (spread over the workers)."""
    ok = 0
    for i in range(count):
        conn = server.connection()
        try:
            status, answer = post(conn, "/mutate-pods", json.dumps(review(pod(index=3), uid=f"after-{i}")))
            ok += status == 200 and answer["response"]["allowed"] and "patch" in answer["response"]
        finally:
            conn.close()
    return ok


def healthz(server: Server) -> tuple[int, Any]:
    conn = server.connection()
    try:
        conn.request("GET", "/healthz")
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def patched_count(server: Server) -> float:
    conn = server.connection()
    try:
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        text = resp.read().decode()
    finally:
        conn.close()
    if resp.status != 200:
        return -1
    key = 'volcano_elastic_webhook_requests_total{endpoint="mutate-pods",result="patched"}'
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(key))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    yield from serve_webhook(tmp_path, "--workers", "2", "--threads", "2", "--no-access-log")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGABRT], ids=["sigterm", "abort-after-timeout"])
def test_one_worker_exiting_leaves_reviews_answered(server: Server, sig: signal.Signals) -> None:
    arbiter = server.proc.pid
    first = wait_for_workers(arbiter, 2, set())
    assert reviews_answered(server) == 10
    gone: set[int] = set()
    for victim in sorted(first):  # each worker alone, one after the other: both are replaced
        os.kill(victim, sig)
        gone.add(victim)
        wait_for_workers(arbiter, 2, gone)
        assert server.proc.poll() is None
    assert reviews_answered(server) == 10
    assert healthz(server) == (200, {"status": "ok"})
    assert patched_count(server) == 20  # the exited workers' counts are kept: the directory was never deleted


def test_sigstopped_worker_past_its_timeout_leaves_reviews_answered(server: Server) -> None:
    """The measured fault: a worker stalled past gunicorn's 30 s timeout is aborted by the arbiter."""
    if os.environ.get("VE_SKIP_SLOW"):
        pytest.skip("VE_SKIP_SLOW set")
    arbiter = server.proc.pid
    first = wait_for_workers(arbiter, 2, set())
    victim = min(first)
    assert reviews_answered(server) == 10
    os.kill(victim, signal.SIGSTOP)
    deadline = time.monotonic() + 40
    try:  # gunicorn's timeout is 30 s: WORKER TIMEOUT, then SIGABRT (pending while stopped)
        while f"WORKER TIMEOUT (pid:{victim})" not in server.log.read_text():
            assert time.monotonic() < deadline, "no WORKER TIMEOUT"
            time.sleep(0.05)
    finally:
        try:  # the stall ends before the arbiter's SIGKILL a second later: the abort handler runs
            os.kill(victim, signal.SIGCONT)
        except ProcessLookupError:
            pass
    wait_for_workers(arbiter, 2, {victim})
    assert reviews_answered(server) == 10
    assert healthz(server)[0] == 200
    assert patched_count(server) == 20


class BrokenMetrics(WebhookMetrics):
    def _observe(self, endpoint: str, result: str, seconds: float, role: str) -> None:
        raise FileNotFoundError(2, "No such file or directory", "/gone/counter_1.db")


def test_a_metrics_failure_never_fails_a_review() -> None:
    stats = BrokenMetrics()
    client = create_app(ElasticConfig(), stats).test_client()
    for i in range(3):
        resp = client.post("/mutate-pods", json=review(pod(index=3), uid=f"u{i}"))
        assert resp.status_code == 200 and resp.get_json()["response"]["uid"] == f"u{i}"
    assert stats.failures == 3 and "FileNotFoundError" in stats.last_failure


def test_healthz_fails_while_the_metrics_directory_is_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    client = create_app(ElasticConfig(), WebhookMetrics()).test_client()
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "metrics"))
    resp = client.get("/healthz")
    assert resp.status_code == 500 and "missing" in resp.get_json()["problems"][0]
    (tmp_path / "metrics").mkdir()
    assert client.get("/healthz").status_code == 200


def test_healthz_fails_when_the_review_path_is_broken(monkeypatch: pytest.MonkeyPatch) -> None:
    import webhook.app as app_module

    client = create_app(ElasticConfig(), WebhookMetrics()).test_client()
    assert client.get("/healthz").status_code == 200

    def broken(doc: Any, cfg: ElasticConfig) -> Any:
        raise RuntimeError("review path broken")

    monkeypatch.setattr(app_module, "review_pod", broken)
    resp = client.get("/healthz")
    assert resp.status_code == 500 and "review path broken" in resp.get_json()["problems"][0]
