"""The controller process's pieces: JSON logs, health, metrics, CLI wiring."""

from __future__ import annotations

import io
import json
import logging
import socket
import threading
import time
import urllib.request
from types import SimpleNamespace

import pytest

from elastic_controller.cli import build_parser
from elastic_controller.cli.controller import Health, PrometheusMetrics, serve_http
from elastic_controller.kube.resources import PODS
from elastic_controller.logs import JsonFormatter


def test_json_logs_carry_structured_fields() -> None:
    rec = logging.LogRecord("x", logging.INFO, __file__, 1, "evicted", (), None)
    rec.pod, rec.queue, rec.reason = "ns/p", "vision", "room for ns/g"
    out = json.loads(JsonFormatter().format(rec))
    assert out["msg"] == "evicted" and out["pod"] == "ns/p" and out["queue"] == "vision"
    assert out["reason"] == "room for ns/g" and out["level"] == "info" and out["ts"].endswith("Z")


def test_one_log_format_for_controller_and_webhook() -> None:
    from webhook import logs as webhook_logs
    from webhook.server import JsonFormatter as ServerFormatter

    assert webhook_logs.JsonFormatter is JsonFormatter is ServerFormatter
    stream = io.StringIO()
    log = logging.getLogger("test-one-format")
    log.handlers[:] = [webhook_logs.json_handler(stream)]
    log.propagate = False
    log.warning("review", extra={"fields": {"uid": "u1", "allowed": False}})  # the webhook's access log
    log.warning("eviction planned", extra={"pod": "ns/p"})  # the agent's
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert set(first) == {"ts", "level", "logger", "msg", "uid", "allowed"}
    assert set(second) == {"ts", "level", "logger", "msg", "pod"}
    assert first["level"] == second["level"] == "warning"


def test_health_and_readiness() -> None:
    caches = SimpleNamespace(unsynced=lambda: ["pods"], stale=lambda: [])
    h = Health(caches, stale_after=10)
    assert h.readyz()[0] == 503 and "pods" in h.readyz()[1]
    caches.unsynced = lambda: []
    assert h.readyz() == (200, "ok")
    agent = SimpleNamespace(heartbeat=time.monotonic() - 60)
    h.beats["agent"] = agent
    assert h.healthz()[0] == 200  # a follower is healthy whatever its (idle) loops say
    h.leading.set()
    assert h.healthz()[0] == 500
    agent.heartbeat = time.monotonic()
    assert h.healthz()[0] == 200


def test_metrics_render() -> None:
    m = PrometheusMetrics()
    m.eviction("vision", "starving-gang")
    m.gate_release("vision", "scale-up")
    m.starving({"vision": 2})
    m.starving({})
    m.cycle(0.05)
    m.watch_restart(PODS, "gone")
    text = m.render()[0].decode()
    assert 'volcano_elastic_evictions_total{queue="vision",reason="starving-gang"} 1.0' in text
    assert 'volcano_elastic_starving_gangs{queue="vision"} 0.0' in text
    assert 'volcano_elastic_watch_restarts_total{reason="gone",resource="pods"} 1.0' in text


def test_subcommands_are_wired() -> None:
    parser = build_parser()
    args = parser.parse_args(["controller", "--kubeconfig", "k", "--lease-namespace", "ns", "--no-leader-elect"])
    assert args.lease_namespace == "ns" and args.no_leader_elect and args.workers == 16
    assert parser.parse_args(["status", "-n", "x", "--output", "json"]).output == "json"
    assert parser.parse_args(["release-gates", "--all"]).all


def test_http_endpoint_survives_idle_slow_and_vanishing_clients(capfd: pytest.CaptureFixture[str]) -> None:
    """Issue 23, item 8: 1,000 idle connections must not be 1,000 threads; slow header senders are
    cut off after the read deadline; clients that go away leave no traceback behind."""
    caches = SimpleNamespace(unsynced=lambda: [], stale=lambda: [])
    server = serve_http("127.0.0.1", 0, Health(caches, stale_after=10), PrometheusMetrics())
    port = server.port
    threads_before = threading.active_count()
    idle = []
    try:
        for _ in range(300):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        for s in idle[:100]:
            s.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # headers never finished
        time.sleep(0.5)
        assert threading.active_count() - threads_before < 20
        started = time.monotonic()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=3) as resp:
            assert resp.status == 200 and resp.read() == b"ok"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=3) as resp:
            assert b"volcano_elastic_leader" in resp.read()
        assert time.monotonic() - started < 2
        for s in idle[200:]:  # vanish mid-request and after a request
            s.send(b"GET /readyz HTTP/1.1\r\n")
            s.close()
    finally:
        for s in idle:
            s.close()
        time.sleep(0.5)
        server.shutdown()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception" not in err
